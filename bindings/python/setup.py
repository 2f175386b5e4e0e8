"""Build steps of the cloudprofiler package (its metadata: pyproject.toml).

The package is pure Python (ctypes) but ships the repository's native
library: every build copies build/libcloudprofiler.so (from `make build`)
into the package, and refuses, saying what to do, when it is missing or older
than the library's sources. The wheel is therefore tagged for this platform,
py3-none-linux_<machine> (e.g. linux_x86_64), not py3-none-any.

Intermediate files go to the repository's build/python/, not next to this
file.
"""

import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 has its own
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools: the `wheel` package's
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
LIB_NAME = "libcloudprofiler.so"
LIB = os.path.join(REPO, "build", LIB_NAME)
# The library's sources, as the Makefile's GOSRC lists them.
SRC_DIRS = ("libcp", "internal", "handlers", "tsc", "cmd", "minrtt", "confserver", "datagen")
SRC_SUFFIXES = (".go", ".c", ".h", ".s")
SRC_FILES = ("capi/cloudprofiler.h", "go.mod", "go.sum")


class LibraryError(SystemExit):
    """Ends the build with a message (no traceback) and what to do."""

    def __init__(self, why):
        super().__init__("cloudprofiler: %s. Build the library first: `make build` in %s "
                         "(then `pip install ./bindings/python`)." % (why, REPO))


def _sources():
    for d in SRC_DIRS:
        for root, _, files in os.walk(os.path.join(REPO, d)):
            for f in files:
                if f.endswith(SRC_SUFFIXES):
                    yield os.path.join(root, f)
    for f in SRC_FILES:
        yield os.path.join(REPO, f)


def fresh_library():
    """build/libcloudprofiler.so, checked to be newer than every source."""
    if not os.path.isfile(os.path.join(REPO, "go.mod")):
        raise SystemExit("cloudprofiler: the package is built from a checkout of the repository, "
                         "after `make build`: %s has no go.mod" % REPO)
    if not os.path.isfile(LIB):
        raise LibraryError("%s is missing" % LIB)
    newest = max((p for p in _sources() if os.path.exists(p)), key=os.path.getmtime)
    if os.path.getmtime(newest) > os.path.getmtime(LIB):
        raise LibraryError("%s is older than its source %s" % (LIB, os.path.relpath(newest, REPO)))
    return LIB


class BuildPy(build_py):
    """Copies the freshly built library into the package being built."""

    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "cloudprofiler", LIB_NAME)
        self.mkpath(os.path.dirname(dst))
        shutil.copyfile(fresh_library(), dst)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [
            os.path.join(self.build_lib, "cloudprofiler", LIB_NAME)]


class PlatformDistribution(Distribution):
    """Not pure: the wheel carries a native library (installed to platlib)."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    """For any Python 3 (ctypes loads the library: no CPython ABI involved),
    on this platform."""

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]  # linux_x86_64, or --plat-name's


# setuptools' build/ and egg-info: under the repository's build/ when there is one
options = {}
if os.path.isdir(os.path.join(REPO, "build")):
    build_dir = os.path.join(REPO, "build", "python")
    os.makedirs(build_dir, exist_ok=True)
    options = {"build": {"build_base": build_dir}, "egg_info": {"egg_base": build_dir}}
setup(distclass=PlatformDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel},
      options=options)

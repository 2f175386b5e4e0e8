"""Build steps of the cloudprofiler package (its metadata: pyproject.toml).

The package is pure Python (ctypes) but ships the repository's native
library and its command-line tool: every build copies
build/libcloudprofiler.so and build/cloudprofiler (from `make build`) into
the package, and refuses, saying what to do, when one is missing or older
than the sources. The wheel is therefore tagged for this platform,
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
# The command-line tool, carried as bin/cloudprofiler (the `cloudprofiler`
# console script runs it; cloudprofiler.analyze() too).
TOOL = os.path.join(REPO, "build", "cloudprofiler")
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


def fresh(built):
    """build/libcloudprofiler.so or build/cloudprofiler, checked to be newer
    than every source."""
    if not os.path.isfile(os.path.join(REPO, "go.mod")):
        raise SystemExit("cloudprofiler: the package is built from a checkout of the repository, "
                         "after `make build`: %s has no go.mod" % REPO)
    if not os.path.isfile(built):
        raise LibraryError("%s is missing" % built)
    newest = max((p for p in _sources() if os.path.exists(p)), key=os.path.getmtime)
    if os.path.getmtime(newest) > os.path.getmtime(built):
        raise LibraryError("%s is older than its source %s" % (built, os.path.relpath(newest, REPO)))
    return built


class BuildPy(build_py):
    """Copies the freshly built library and tool into the package being built."""

    def _copies(self):
        pkg = os.path.join(self.build_lib, "cloudprofiler")
        return [(LIB, os.path.join(pkg, LIB_NAME), 0o644), (TOOL, os.path.join(pkg, "bin", "cloudprofiler"), 0o755)]

    def run(self):
        super().run()
        for src, dst, mode in self._copies():
            self.mkpath(os.path.dirname(dst))
            shutil.copyfile(fresh(src), dst)
            os.chmod(dst, mode)

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [dst for _, dst, _ in self._copies()]


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

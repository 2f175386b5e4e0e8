"""The wheel: tagged for this platform (py3-none-linux_<machine>), carrying
the library in build/ byte for byte; the installed package carries it too."""

import os
import platform
import subprocess
import sys
import zipfile

import pytest

import cloudprofiler as cp
from conftest import REPO

LIB = os.path.join(REPO, "build", "libcloudprofiler.so")


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.skipif(sys.platform != "linux", reason="the library is built for Linux")
def test_wheel_is_tagged_for_the_platform_and_carries_the_built_library(tmp_path):
    assert os.path.isfile(LIB), "run make build first"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                        "--no-build-isolation", "-w", str(tmp_path), os.path.join(REPO, "bindings", "python")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = [p.name for p in tmp_path.glob("*.whl")]
    plat = "linux_" + platform.machine()
    assert wheels == ["cloudprofiler-0.1.0-py3-none-%s.whl" % plat], wheels
    with zipfile.ZipFile(tmp_path / wheels[0]) as z:
        meta = z.read("cloudprofiler-0.1.0.dist-info/WHEEL").decode()
        assert "Root-Is-Purelib: false" in meta and "Tag: py3-none-%s" % plat in meta, meta
        assert z.read("cloudprofiler/libcloudprofiler.so") == _read(LIB), "the wheel's library is not build/'s"


def test_installed_package_carries_the_built_library():
    # `make test-python` installs build/wheel's wheel, made from the library in build/.
    pkg_lib = os.path.join(os.path.dirname(os.path.abspath(cp.__file__)), "libcloudprofiler.so")
    assert os.path.isfile(pkg_lib), "the installed package has no library: %s" % pkg_lib
    assert _read(pkg_lib) == _read(LIB), "the installed package's library is not build/'s"

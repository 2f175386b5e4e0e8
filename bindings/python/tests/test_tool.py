"""The tool in the wheel: bin/cloudprofiler (build/'s, executable), the
`cloudprofiler` console script, and cp.analyze() on this process's latest
run, from a fresh venv in a directory outside the repository, twice, and
twice in one process (a notebook cell run again)."""

import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from conftest import REPO

TOOL = os.path.join(REPO, "build", "cloudprofiler")

# docs/python.md's recipe, as a user runs it: marks of a map, analyzed by
# the package alone (no build/, no CP_TOOL), printed for the test to read.
RECIPE = r'''
import numpy as np, cloudprofiler as cp
for cell in range(CELLS):
    with cp.open_channel("map in", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as a, \
         cp.open_channel("map out", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as b:
        for i in range(1000 * (cell + 1)):
            a.log(i); b.log(i)
    cp.close_all()
    res = cp.analyze()
    print("analysis", res.dir, int(res.summary["count"].iloc[0]), len(cp.run_logs()))
'''


def _wheel():
    d = os.path.join(REPO, "build", "wheel")
    ws = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".whl")] if os.path.isdir(d) else []
    assert len(ws) == 1, "make wheel first: %s" % ws
    return ws[0]


def test_wheel_carries_the_tool_and_its_script():
    with zipfile.ZipFile(_wheel()) as z:
        info = z.getinfo("cloudprofiler/bin/cloudprofiler")
        assert (info.external_attr >> 16) & 0o111, "bin/cloudprofiler is not executable in the wheel"
        with open(TOOL, "rb") as f:
            assert z.read(info) == f.read(), "the wheel's tool is not build/'s"
        eps = z.read("cloudprofiler-0.1.0.dist-info/entry_points.txt").decode()
        assert "cloudprofiler = cloudprofiler._tool:main" in eps, eps


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory):
    """A new venv with only the wheel installed; numpy, pandas and pyarrow
    seen through a .pth of this one's site-packages (the test's PyPI-free
    stand-in for `pip install 'cloudprofiler[parquet]'`)."""
    d = tmp_path_factory.mktemp("venv").resolve()  # absolute: the tests run it from elsewhere
    subprocess.run([sys.executable, "-m", "venv", str(d / "env")], check=True, timeout=300)
    py = str(d / "env" / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-index",
                    _wheel()], check=True, timeout=300)
    # After the install (pip would find this venv's copy through it and
    # install nothing); after the venv's own site-packages on sys.path, so
    # the wheel's package is the one imported.
    with open(os.path.join(site, "deps.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    assert os.path.isfile(d / "env" / "bin" / "cloudprofiler"), "pip made no console script"
    return d / "env"


def _user_env(venv):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CP_", "CLOUDPROFILER_"))}
    env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    return env


def test_the_venv_imports_the_wheels_package(fresh_venv, tmp_path):
    r = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", "import cloudprofiler as cp; print(cp.__file__)"],
                       cwd=tmp_path, env=_user_env(fresh_venv), capture_output=True, text=True, timeout=60)
    assert r.stdout.startswith(str(fresh_venv)), r.stdout + r.stderr


def test_console_script_runs_the_tool(fresh_venv, tmp_path):
    r = subprocess.run(["cloudprofiler", "--version"], cwd=tmp_path, env=_user_env(fresh_venv),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("cloudprofiler 0.1.0 (commit "), r.stdout + r.stderr
    assert os.path.realpath(subprocess.run(["which", "cloudprofiler"], env=_user_env(fresh_venv),
                                           capture_output=True, text=True).stdout.strip()) \
        == os.path.realpath(str(fresh_venv / "bin" / "cloudprofiler"))


def _recipe(venv, cwd, cells):
    r = subprocess.run([str(venv / "bin" / "python"), "-c", RECIPE.replace("CELLS", str(cells))], cwd=cwd,
                       env=_user_env(venv), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return [ln.split()[1:] for ln in r.stdout.splitlines() if ln.startswith("analysis ")]


def test_recipe_twice_outside_the_repository(fresh_venv, tmp_path):
    # Two processes in one directory: each analyzes its own run, into a new
    # directory, though both logged into ./cloudprofiler-logs.
    first = _recipe(fresh_venv, tmp_path, 1)
    second = _recipe(fresh_venv, tmp_path, 1)
    assert len(first) == len(second) == 1
    assert first[0][0] != second[0][0], "the second analysis went over the first"
    for out, count, files in first + second:
        assert int(count) == 1000 and int(files) == 2, (out, count, files)
        assert os.path.isfile(os.path.join(tmp_path, out, "report.html"))
    assert len(os.listdir(tmp_path / "cloudprofiler-logs")) == 4


def test_a_cell_run_again_analyzes_its_own_run(fresh_venv, tmp_path):
    # One process, the cell twice: the second run logged 2000 tuples, and
    # its analysis has them alone (not the first run's 1000 beside them).
    got = _recipe(fresh_venv, tmp_path, 2)
    assert [int(c) for _, c, _ in got] == [1000, 2000], got
    assert got[0][0] != got[1][0]


def test_no_tool_or_no_run_says_why(fresh_venv, tmp_path):
    env = dict(_user_env(fresh_venv), CLOUDPROFILER_TOOL="/nonexistent")
    r = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", "import cloudprofiler as cp; cp.tool_path()"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "$CLOUDPROFILER_TOOL=/nonexistent is not an executable file" in r.stderr, r.stderr
    r = subprocess.run(["cloudprofiler", "--version"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and "CLOUDPROFILER_TOOL" in r.stderr, r.stderr
    r = subprocess.run([str(fresh_venv / "bin" / "python"), "-c",
                        "import cloudprofiler as cp\ntry:\n    cp.analyze()\nexcept FileNotFoundError as e:\n    print(e)"],
                       cwd=tmp_path, env=_user_env(fresh_venv), capture_output=True, text=True, timeout=60)
    assert "this process has logged nothing" in r.stdout, r.stdout + r.stderr


def test_analyze_refuses_a_nul_in_a_path(tmp_path):
    """A NUL in logs, out or a flag is refused before anything runs or is
    made, as open_channel refuses one in a channel name."""
    import cloudprofiler as cp
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    for args, what in [((str(logs) + "\0/other", out), "logs"), (([logs, str(logs) + "\0x"], out), "logs"),
                       ((logs, str(out) + "\0/other"), "out"), ((logs, out, "--rounds", str(logs) + "\0x"), "flag")]:
        with pytest.raises(ValueError, match=r"^analyze: %s .* contains a NUL byte \(the C API and the system "
                                             r"take NUL-terminated paths\)$" % what):
            cp.analyze(*args)
        assert not out.exists()

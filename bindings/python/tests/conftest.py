"""Shared fixtures. The library reads CP_* at the first OpenChannel of a
process, so this session sets CP_LOG_DIR (and clears variables that would
change behaviour) before any test opens a channel; tests that need another
environment run a child Python (run_child)."""

import glob
import os
import re
import subprocess
import sys
import textwrap
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

# Variables of the library that must not leak in from the caller's shell.
_CLEAR = ("CP_CONF_SERVER", "CP_FAKE_TSC", "CP_NODE", "CP_NO_SIGNAL_HANDLER", "CP_RET_START",
          "CP_RET_START_NAME", "CP_RET_LISTEN", "CP_BLOCK_RECORDS", "CP_RING_BLOCKS", "CP_QUIET")


def tool_path():
    p = os.environ.get("CP_TOOL") or os.path.join(REPO, "build", "cloudprofiler")
    return p if os.path.exists(p) else None


@pytest.fixture(scope="session", autouse=True)
def session_env(tmp_path_factory):
    for k in _CLEAR:
        os.environ.pop(k, None)
    d = tmp_path_factory.mktemp("cplogs")
    os.environ["CP_LOG_DIR"] = str(d)
    return d


@pytest.fixture
def logdir(session_env):
    return session_env


@pytest.fixture
def uname(request):
    """A channel name unique to this test."""
    base = re.sub(r"[^A-Za-z0-9]+", "_", request.node.name)[-60:]
    return "%s_%s" % (base, uuid.uuid4().hex[:8])


def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def find_log(logdir, name, pid=None):
    """The log file of channel `name` opened by process pid (default: this one)."""
    pid = os.getpid() if pid is None else pid
    hits = [p for p in glob.glob(os.path.join(str(logdir), "*-%d-*-%s.cplog*" % (pid, sanitize(name))))
            if ".ret.cplog" not in p]
    assert len(hits) == 1, "log file of channel %r (pid %d) in %s: %s" % (name, pid, logdir, hits)
    return hits[0]


def child_env(logdir, **extra):
    env = {k: v for k, v in os.environ.items() if k not in _CLEAR}
    env["CP_LOG_DIR"] = str(logdir)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def child_cmd(code):
    return [sys.executable, "-c", textwrap.dedent(code)]


def run_child(code, logdir, timeout=60, **extra):
    """Runs code in a fresh Python with CP_LOG_DIR=logdir; returns the
    CompletedProcess (stdout/stderr text)."""
    return subprocess.run(child_cmd(code), env=child_env(logdir, **extra), capture_output=True,
                          text=True, timeout=timeout)

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
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

# Variables of the library that must not leak in from the caller's shell.
_CLEAR = ("CP_CONF_SERVER", "CP_FAKE_TSC", "CP_NODE", "CP_RUN", "CP_NO_SIGNAL_HANDLER", "CP_RET_START",
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


class RealRun:
    """Logs of two nodes and the TSC rounds that relate them (real_run):
    node a logs "source out", node b "map in" then "map out", for tuples
    0..n_tuples-1, each node with its own fake TSC; beside them FIRSTLAST
    channels (runs) on both and a counter (throughput) on b. analyze(out, *args) runs
    `cloudprofiler analyze` on them (or on other logs: logs=)."""

    n_tuples = 2000
    fake = {"a": "1:0", "b": "1.0003:5000000000"}
    # node -> (channel, handler) of its process, each logging every tuple id
    channels = {"a": [("source out", "BUFFER_IDENTITY"), ("source span", "FIRSTLAST")],
                "b": [("map in", "BUFFER_IDENTITY"), ("map out", "BUFFER_IDENTITY"),
                      ("map count", "PERIODICCOUNTER"), ("map span", "FIRSTLAST")]}

    def __init__(self, tool, rounds, logs, env):
        self.tool, self.rounds, self.logs, self.env = tool, rounds, logs, env

    def log_node(self, node, logdir, **extra):
        """A child Python plays node (CP_NODE, its fake TSC unless extra
        says otherwise) and logs its channels into logdir."""
        env = dict(CP_NODE=node, CP_FAKE_TSC=self.fake[node], CP_BLOCK_RECORDS=256)
        env.update(extra)
        r = run_child("""
            import cloudprofiler as cp
            chans = [cp.open_channel(c, cp.LogFormat.ZSTD_TSC, h) for c, h in %r]
            for ch in chans:
                if ch.handler == cp.Handler.PERIODICCOUNTER:
                    ch.parameterize(cp.Arg.ARG0, 1_000_000)  # 1 ms periods
            for i in range(%d):
                for ch in chans:
                    ch.log(i)
            cp.close_all()
        """ % (self.channels[node], self.n_tuples), logdir, **env)
        assert r.returncode == 0, r.stderr

    def analyze(self, out, *args, logs=None, check=True):
        r = subprocess.run([self.tool, "analyze", "--rounds", str(self.rounds), "--logs", str(logs or self.logs),
                            "--out", str(out), "--ref", "a"] + list(args),
                           capture_output=True, text=True, timeout=120, env=self.env)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r


def _text(path):
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


def _waitfor(path, pattern, timeout=15):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = re.search(pattern, _text(path))
        if m:
            return m
        time.sleep(0.05)
    raise AssertionError("no %r in %s within %d s: %s" % (pattern, path, timeout, _text(path)))


@pytest.fixture(scope="session")
def real_run(tmp_path_factory):
    """Two Python processes play nodes a and b (different fake TSCs), a TSC
    server and two clients measure them before and after (tsc-round): the
    logs and rounds of a real two-node run, for analyze (RealRun)."""
    tool = tool_path()
    if tool is None:
        pytest.skip("no build/cloudprofiler (set CP_TOOL)")
    base = tmp_path_factory.mktemp("realrun")
    rounds, logs = base / "rounds", base / "logs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CP_")}
    run = RealRun(tool, rounds, logs, env)
    procs, errs = [], []
    try:
        srv_err = base / "server.err"
        errs.append(open(srv_err, "w"))
        procs.append(subprocess.Popen([tool, "tsc-server", "--listen", "127.0.0.1:0", "--out", str(rounds)],
                                      stderr=errs[-1], env=env))
        addr = _waitfor(srv_err, r"listening on ([^,\s]+)").group(1)
        for n in run.fake:
            errs.append(open(base / ("client-%s.err" % n), "w"))
            procs.append(subprocess.Popen([tool, "tsc-client", "--server", addr, "--node", n],
                                          stderr=errs[-1], env=dict(env, CP_FAKE_TSC=run.fake[n])))
        subprocess.run([tool, "tsc-round", "--server", addr, "--label", "before", "--wait-nodes", "2"],
                       check=True, capture_output=True, timeout=60, env=env)
        # Small blocks: every log has several frames (a damaged one loses a part).
        for node in run.channels:
            run.log_node(node, logs / node)
        subprocess.run([tool, "tsc-round", "--server", addr, "--label", "after"],
                       check=True, capture_output=True, timeout=60, env=env)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
        for f in errs:
            f.close()
    return run


@pytest.fixture(scope="session")
def real_analysis(real_run, tmp_path_factory):
    """The directory `analyze --out` wrote for real_run (default outputs:
    durations.parquet, no durations.csv)."""
    out = tmp_path_factory.mktemp("analysis") / "out"
    real_run.analyze(out)
    return out


@pytest.fixture(scope="session")
def real_analysis_csv(real_run, tmp_path_factory):
    """real_run analysed with --durations-csv: durations.csv beside
    durations.parquet."""
    out = tmp_path_factory.mktemp("analysis-csv") / "out"
    real_run.analyze(out, "--durations-csv")
    return out

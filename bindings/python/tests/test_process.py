"""Child Pythons: SIGTERM mid-run loses nothing, atexit closes, fork is
refused, the library is found (or the failure says where it looked)."""

import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import child_cmd, child_env, find_log, run_child

PKG = os.path.dirname(os.path.abspath(cp.__file__))


# The child logs ids 0, 1, 2, ... in order and prints, after each accepted
# call, how many it has logged; it never stops by itself.
SIGTERM_CHILD = {
    "log": """
        import sys, cloudprofiler as cp
        ch = cp.open_channel("sigterm", cp.LogFormat.%s, cp.Handler.BUFFER_IDENTITY)
        i = 0
        while True:
            ch.log(i)
            i += 1
            if i %% 1000 == 0:
                print(i, flush=True)
    """,
    "log_many": """
        import sys, numpy as np, cloudprofiler as cp
        ch = cp.open_channel("sigterm", cp.LogFormat.%s, cp.Handler.BUFFER_IDENTITY)
        i, k = 0, 5000
        while True:
            assert ch.log_many(np.arange(i, i + k, dtype=np.int64)) == k
            i += k
            print(i, flush=True)
    """,
}


@pytest.mark.parametrize("fmt", ["ZSTD_TSC", "BINARY"])
@pytest.mark.parametrize("how", ["log", "log_many"])
def test_sigterm_mid_run_loses_nothing(how, fmt, tmp_path):
    want = 20_000 if how == "log" else 400_000
    p = subprocess.Popen(child_cmd(SIGTERM_CHILD[how] % fmt), env=child_env(tmp_path),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = 0
    try:
        for line in p.stdout:
            last = int(line)
            if last >= want:
                break
        assert last >= want, "child stopped early: %s" % p.stderr.read()
        p.send_signal(signal.SIGTERM)
        rest = p.stdout.read()  # progress printed before the signal landed
        for line in rest.split():
            last = max(last, int(line))
        rc = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == -signal.SIGTERM, "child should die of SIGTERM (rc %s): %s" % (rc, p.stderr.read())
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the SIGTERM flush leaves whole frames
        records, header = cp.read_log(find_log(tmp_path, "sigterm", p.pid))
    ids = records["tuple_id"]
    assert len(ids) >= last, "file holds %d records, the child reported %d logged" % (len(ids), last)
    np.testing.assert_array_equal(ids, np.arange(len(ids), dtype=np.int64))


def test_atexit_closes_channels(tmp_path):
    r = run_child("""
        import numpy as np, cloudprofiler as cp, atexit
        a = cp.open_channel("atexit a", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY)
        b = cp.open_channel("atexit b", cp.LogFormat.BINARY, cp.Handler.IDENTITY)
        c = cp.open_channel("atexit c", "BINARY_TSC", "FIRSTLAST")
        def late():  # registered after import: runs before the binding's hook
            a.log(-1)
            print("late hook logged", flush=True)
        atexit.register(late)
        a.log_many(np.arange(100_000, dtype=np.int64))
        b.log_many([1, 2, 3])
        c.log_many([10, 11, 12])
        print(a.closed, b.closed, flush=True)
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["False False", "late hook logged"], r.stdout
    pid = None
    for name, want in (("atexit a", list(range(100_000)) + [-1]), ("atexit b", [1, 2, 3]), ("atexit c", [10, 12])):
        path = [f for f in os.listdir(tmp_path) if f.endswith(name.replace(" ", "_") + ".cplog")]
        assert len(path) == 1, os.listdir(tmp_path)
        records, header = cp.read_log(os.path.join(tmp_path, path[0]))
        assert records["tuple_id"].tolist() == want, name
        assert header.summary["trailer"], "closed at exit: the trailer is written (%s)" % name


def test_exit_with_faulthandler_survives_signals(tmp_path):
    # faulthandler (pytest turns it on) gives the main thread an alternate
    # signal stack; Go, called from that thread, takes it as its own. At
    # interpreter shutdown faulthandler frees it, and then exit() runs the
    # library's C hook, which enters Go to close what is still open: a
    # signal arriving while Go runs there killed the process ("non-Go code
    # disabled sigaltstack", exit 134, 6 of 6 runs before the fix). A
    # process-directed SIGURG (Go's preemption signal: a no-op for Go
    # elsewhere) lands on the main thread, so a stream of them finds that
    # moment. The channels left open for the hook are all written.
    r = run_child("""
        import atexit, faulthandler, os, subprocess
        faulthandler.enable()
        import numpy as np
        ids = np.arange(200_000, dtype=np.int64)
        def late():  # registered before import: runs after the binding's close_all
            for i in range(20):
                cp.open_channel("late %d" % i, cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY).log_many(ids)
            print("left 20 open", flush=True)
        atexit.register(late)
        import cloudprofiler as cp
        with cp.open_channel("early", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as ch:
            ch.log(1)  # Go takes faulthandler's stack for this thread
        def urgent():  # runs first; the loop ends once the process is reaped
            subprocess.Popen(["sh", "-c", "while kill -URG %d 2>/dev/null; do :; done" % os.getpid()],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        atexit.register(urgent)
    """, tmp_path)
    assert r.returncode == 0, r.stderr[:600]
    assert r.stdout == "left 20 open\n", r.stdout
    for i in range(20):
        path = [f for f in os.listdir(tmp_path) if f.endswith("late_%d.cplog" % i)]
        assert len(path) == 1, os.listdir(tmp_path)
        records, header = cp.read_log(os.path.join(tmp_path, path[0]))
        assert len(records) == 200_000 and header.summary["trailer"], path[0]

def test_fork_without_exec_is_refused(tmp_path):
    r = run_child("""
        import os, cloudprofiler as cp
        ch = cp.open_channel("fork", cp.LogFormat.BINARY_TSC, cp.Handler.BUFFER_IDENTITY)
        ch.log(1)
        pid = os.fork()
        if pid == 0:
            try:
                ch.log(2)
                os._exit(3)
            except cp.LibraryError as e:
                os._exit(0 if "fork" in str(e) and "spawn" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), flush=True)
        ch.log(3)
        ch.close()
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout + r.stderr
    records, _ = cp.read_log(find_log(tmp_path, "fork", _only_pid(tmp_path)))
    assert records["tuple_id"].tolist() == [1, 3]


def test_fork_child_that_exits_ends(tmp_path):
    """A child made by os.fork() that never logs and ends with sys.exit(0)
    ends: the library's exit hook, inherited, no longer enters the Go
    runtime in the child (it parked there forever)."""
    r = run_child("""
        import os, sys, time, cloudprofiler as cp
        ch = cp.open_channel("fork exit", cp.LogFormat.BINARY_TSC, cp.Handler.BUFFER_IDENTITY)
        ch.log(1)
        pid = os.fork()
        if pid == 0:
            sys.exit(0)
        for _ in range(1000):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                print("child", os.waitstatus_to_exitcode(status), flush=True)
                break
            time.sleep(0.01)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("child hung", flush=True)
        ch.log(2)
        ch.close()
    """, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout, r.stdout + r.stderr
    records, _ = cp.read_log(find_log(tmp_path, "fork exit", _only_pid(tmp_path)))
    assert records["tuple_id"].tolist() == [1, 2]


def _only_pid(d):
    pids = {int(f.split("-")[-3]) for f in os.listdir(d) if ".cplog" in f}
    assert len(pids) == 1, os.listdir(d)
    return pids.pop()


def _copy_package(dst, with_lib):
    pkg = dst / "cloudprofiler"
    shutil.copytree(PKG, pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    if with_lib:
        shutil.copy(cp.library_path(), pkg / "libcloudprofiler.so")
    return pkg


def test_library_not_found_says_where_it_looked(tmp_path):
    pkg = _copy_package(tmp_path, with_lib=False)
    code = """
        import sys; sys.path.insert(0, %r)
        import cloudprofiler as cp
        try:
            cp.open_channel("x", cp.LogFormat.BINARY, cp.Handler.IDENTITY)
        except cp.LibraryError as e:
            print(e)
    """ % str(tmp_path)
    env = child_env(tmp_path)
    env["CLOUDPROFILER_LIB"] = str(tmp_path / "nowhere" / "libcloudprofiler.so")
    r = subprocess.run(child_cmd(code), env=env, capture_output=True, text=True, timeout=60)
    assert "$CLOUDPROFILER_LIB: %s (no such file)" % env["CLOUDPROFILER_LIB"] in r.stdout, r.stdout + r.stderr
    assert "the package directory: %s (no such file)" % (pkg / "libcloudprofiler.so") in r.stdout
    assert "make build" in r.stdout
    del env["CLOUDPROFILER_LIB"]
    r = subprocess.run(child_cmd(code), env=env, capture_output=True, text=True, timeout=60)
    assert "$CLOUDPROFILER_LIB: not set" in r.stdout, r.stdout + r.stderr


def test_library_found_in_package_directory(tmp_path):
    pkg = _copy_package(tmp_path, with_lib=True)
    env = child_env(tmp_path)
    env.pop("CLOUDPROFILER_LIB", None)
    r = subprocess.run(child_cmd("""
        import sys; sys.path.insert(0, %r)
        import cloudprofiler as cp
        with cp.open_channel("pkgdir", cp.LogFormat.BINARY, cp.Handler.IDENTITY) as ch:
            ch.log(7)
        print(cp.library_path())
    """ % str(tmp_path)), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(pkg / "libcloudprofiler.so")


def test_environment_read_at_first_open(tmp_path):
    # CP_LOG_DIR set in os.environ before the first open reaches the library.
    sub = tmp_path / "set-in-python"
    r = run_child("""
        import os, cloudprofiler as cp
        os.environ["CP_LOG_DIR"] = %r
        os.environ["CP_NODE"] = "pynode"
        with cp.open_channel("envtest", "BINARY_TSC", "BUFFER_IDENTITY") as ch:
            ch.log(1)
    """ % str(sub), tmp_path)
    assert r.returncode == 0, r.stderr
    files = os.listdir(sub)
    assert len(files) == 1 and files[0].endswith("envtest.cplog")
    _, header = cp.read_log(sub / files[0])
    assert header["node"] == "pynode"


def test_drop_mode_returns_what_was_accepted(tmp_path):
    # A ring of 2 blocks of 256 records and bursts far larger: the channel
    # set to drop refuses what does not fit, counts it, and the batch goes on.
    r = run_child("""
        import numpy as np, cloudprofiler as cp
        ch = cp.open_channel("drops", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY)
        ch.parameterize(cp.Arg.DROP_WHEN_FULL, 1)
        ids = np.arange(1_000_000, dtype=np.int64)
        got = ch.log_many(ids)
        one = [ch.log(-1) for _ in range(20000)]
        ch.close()
        print(got, one.count(True), one.count(False))
    """, tmp_path, CP_RING_BLOCKS=2, CP_BLOCK_RECORDS=256)
    assert r.returncode == 0, r.stderr
    got, kept, dropped = map(int, r.stdout.split())
    assert 0 < got < 1_000_000, "a 512-record ring must drop some of a 1M burst"
    assert kept + dropped == 20000
    records, header = cp.read_log(find_log(tmp_path, "drops", _only_pid(tmp_path)))
    ids = records["tuple_id"]
    assert len(ids) == got + kept
    assert np.all(np.diff(ids[:got]) > 0), "the accepted ids, in order"
    assert (ids[got:] == -1).all()


def test_sigterm_handler_installed_only_over_the_default(tmp_path):
    # Default action: the binding's handler goes beneath the library's.
    r = run_child("""
        import signal, cloudprofiler as cp
        from cloudprofiler import _channel
        cp.open_channel("x", cp.LogFormat.BINARY_TSC, cp.Handler.BUFFER_IDENTITY).close()
        assert signal.getsignal(signal.SIGTERM) is _channel._on_sigterm
        print("ok")
    """, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    # The program's own handler, set before the first open, is left alone,
    # and still runs after the library's flush.
    r = run_child("""
        import os, signal, sys, cloudprofiler as cp
        def mine(signum, frame):
            print("mine", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, mine)
        ch = cp.open_channel("x", cp.LogFormat.BINARY_TSC, cp.Handler.BUFFER_IDENTITY)
        assert signal.getsignal(signal.SIGTERM) is mine
        ch.log(7)
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()
    """, tmp_path)
    assert r.returncode == 3 and r.stdout.strip() == "mine", (r.returncode, r.stderr)

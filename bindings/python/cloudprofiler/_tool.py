"""The command-line tool from Python: the copy of build/cloudprofiler the
wheel carries (bin/cloudprofiler in the package), on PATH as the
`cloudprofiler` console script, and analyze(), which runs it on this
process's latest run."""

import glob
import os
import subprocess
import sys
import time

from . import _channel, _lib, _read

ENV_TOOL = "CLOUDPROFILER_TOOL"
_HERE = os.path.dirname(os.path.abspath(__file__))


def tool_path():
    """The cloudprofiler tool: $CLOUDPROFILER_TOOL (a path) when set, else
    the copy the package was built with. FileNotFoundError saying which is
    missing."""
    env = os.environ.get(ENV_TOOL)
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise FileNotFoundError("cloudprofiler: $%s=%s is not an executable file" % (ENV_TOOL, env))
    own = os.path.join(_HERE, "bin", "cloudprofiler")
    if os.path.isfile(own) and os.access(own, os.X_OK):
        return own
    raise FileNotFoundError("cloudprofiler: no cloudprofiler tool at %s (a package installed from a wheel "
                            "carries it; one used from the source tree has none: set $%s to build/cloudprofiler)"
                            % (own, ENV_TOOL))


def main():
    """The `cloudprofiler` console script: runs the tool with this
    process's arguments (it replaces this process)."""
    try:
        tool = tool_path()
    except FileNotFoundError as e:
        sys.stderr.write("%s\n" % e)
        sys.exit(127)
    os.execv(tool, [tool] + sys.argv[1:])


def run_logs():
    """The log files of this process's latest run (current_run()): those
    in its log directory that this process opened since the run began
    (their headers' pid and open time). [] before any open_channel."""
    d, start = _channel.current_run()
    if d is None:
        return []
    pid, files = os.getpid(), []
    for path in sorted(glob.glob(os.path.join(d, "*.cplog*"))):
        try:
            h = _read.read_header(path)
        except Exception:  # not a log file, or one analyze will name itself
            continue
        sync = h.get("open_sync") or {}
        if h.get("pid") == pid and int(sync.get("realtime_ns") or 0) >= start - 1_000_000:
            files.append(path)
    return files


class AnalyzeError(subprocess.CalledProcessError):
    """`cloudprofiler analyze` refused (exit status .returncode, 4: the
    logs contradict each other); its message says why."""

    def __str__(self):
        why = (self.stderr or "").strip() or (self.stdout or "").strip()
        return "cloudprofiler analyze exited %d: %s" % (self.returncode, why)


def _new_dir(parent, stem):
    for k in range(1, 10000):
        out = os.path.join(parent, stem if k == 1 else "%s-%d" % (stem, k))
        try:
            os.makedirs(out)
            return out
        except FileExistsError:
            continue
    raise FileExistsError("analyze: no free name like %s in %s" % (stem, parent))


def analyze(logs=None, out=None, *flags, quiet=True, read=True):
    """Runs `cloudprofiler analyze` and returns its results (read_analysis;
    read=False: the output directory's path).

    logs: a directory or log file, or a list of them; by default the files
    of this process's latest run (run_logs(): a notebook cell run again
    analyzes its own run, not the one before). out: where the analysis
    goes; by default a new directory cloudprofiler-results/RUN (the run's
    start time and pid; -2, -3... when taken), never one written before.
    flags: more of analyze's flags ("--window", "250ms", "--rounds", DIR).
    Closes nothing: close the run's channels first (close_all()), or their
    last records are not in the files yet. Raises AnalyzeError (a
    CalledProcessError) with the tool's words when it refuses the logs;
    ValueError for a path or flag holding a NUL, before anything runs."""
    if logs is None:
        logs = run_logs()
        if not logs:
            raise FileNotFoundError("analyze: this process has logged nothing (open_channel starts a run); "
                                    "give logs=, a directory or files")
    elif isinstance(logs, (str, bytes, os.PathLike)):
        logs = [logs]
    logs = [_lib.fspath(p, "analyze: logs") for p in logs]
    if out is not None:
        out = _lib.fspath(out, "analyze: out")
    flags = [_lib.fspath(f, "analyze: flag") for f in flags]
    if out is None:
        _, start = _channel.current_run()
        t = time.localtime((start or time.time_ns()) / 1e9)
        out = _new_dir("cloudprofiler-results", "%s-%d" % (time.strftime("%Y%m%d-%H%M%S", t), os.getpid()))
    args = [tool_path(), "analyze", "--out", os.fspath(out)]
    if quiet:
        args.append("--quiet")
    args += flags + ["--logs"] + logs
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise AnalyzeError(p.returncode, args, p.stdout, p.stderr)
    if not read:
        return os.fspath(out)
    return _read.read_analysis(out)

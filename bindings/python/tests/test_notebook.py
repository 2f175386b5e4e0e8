"""examples/notebook/pipeline.ipynb, executed headless.

The notebook runs a pipeline of three Python threads through six channels,
reads the logs back, summarises per-hop latency and saves a figure. This test
executes it with nbclient in a kernel of *this* interpreter (a kernelspec
written to a temporary JUPYTER_PATH, so no other Python or installed
kernelspec can stand in), then checks: no cell errored; the summary table
shows every tuple through every hop; the hops add up to the end-to-end
latency; the log files and the PNG are in the notebook's fresh temp dir; the
PNG is a real, non-blank figure. A second test checks that the committed
notebook is valid nbformat 4 with its outputs cleared.

Needs (pip): nbclient, nbformat, ipykernel, matplotlib (with numpy, pandas).
Skips, saying which is missing, only when one of them is not importable.
"""

import json
import os
import pathlib
import struct
import sys
import importlib.util

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
NOTEBOOK = REPO / "examples" / "notebook" / "pipeline.ipynb"
KERNEL = "cloudprofiler-notebook-test"
CELL_TIMEOUT_S = 300
PROBE = "CP_NOTEBOOK_PROBE "

HOPS = ["source (make)", "queue 1", "worker (hash)", "queue 2", "sink (store)", "end to end"]
CHANNELS = ["source in", "source out", "worker in", "worker out", "sink in", "sink out"]

# Appended to the notebook (in memory only) and run in the same kernel after
# its last cell: reports what the notebook computed, for the checks below.
PROBE_CELL = """
import json as _json
_parts = latency_us[[h for h in HOPS if h != "end to end"]].astype(float).sum(axis=1)
print(%r + _json.dumps({
    "n_tuples": int(N_TUPLES),
    "hops": list(summary.index),
    "count": {h: int(c) for h, c in summary["count"].items()},
    "median_us": {h: float(v) for h, v in summary["median_us"].items()},
    "p99_us": {h: float(v) for h, v in summary["p99_us"].items()},
    "sum_of_hops_minus_end_to_end_us": float((_parts - latency_us["end to end"].astype(float)).abs().max()),
    "channels": sorted(frames),
    "records": {n: int(len(df)) for n, df in frames.items()},
    "work_dir": str(WORK_DIR),
    "log_dir": os.environ["CP_LOG_DIR"],
    "png": str(PNG),
    "capacity": {r.operator: {"tuples_in": int(r.tuples_in), "service_rate": float(r.service_rate),
                              "busy_share": float(r.busy_share), "capacity": float(r.capacity),
                              "max_source_rate": float(r.max_source_rate), "bottleneck": bool(r.bottleneck)}
                 for r in operators.itertuples()},
    "worker_rate": {"rate": float(worker_rate.rate), "periods": int(worker_rate.periods),
                    "converged": bool(worker_rate.converged)},
}))
""" % PROBE


def _require(module, pip_name):
    return pytest.importorskip(
        module, reason=f"{module} is not importable: pip install {pip_name} to run the notebook test")


def _library_path():
    lib = os.environ.get("CLOUDPROFILER_LIB")
    if lib:
        return lib
    built = REPO / "build" / "libcloudprofiler.so"
    return str(built) if built.exists() else None


def _write_kernelspec(jupyter_dir, extra_env):
    """A kernelspec that starts ipykernel with this very interpreter."""
    spec_dir = jupyter_dir / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": f"Python ({sys.executable})",
        "language": "python",
        "env": extra_env,
    }))


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


def test_notebook_runs_headless(tmp_path, monkeypatch):
    _require("nbformat", "nbformat")
    nbclient = _require("nbclient", "nbclient")
    _require("ipykernel", "ipykernel")
    _require("matplotlib", "matplotlib")
    import nbformat
    import matplotlib.image

    # The kernel inherits this environment plus the kernelspec's env. Without
    # CLOUDPROFILER_LIB or build/, the binding looks next to itself.
    lib = _library_path()
    kernel_env = {"CLOUDPROFILER_LIB": lib} if lib else {}
    tool = os.environ.get("CP_TOOL") or str(REPO / "build" / "cloudprofiler")
    if not pathlib.Path(tool).exists():
        pytest.skip(f"the notebook's capacity section runs the tool: {tool} missing (make build)")
    kernel_env["CLOUDPROFILER_TOOL"] = tool
    spec = importlib.util.find_spec("cloudprofiler")
    if spec is not None and spec.origin:
        # The same package this test process would import, installed or not.
        pkg_parent = str(pathlib.Path(spec.origin).resolve().parent.parent)
        kernel_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (pkg_parent, os.environ.get("PYTHONPATH")) if p)
    jupyter_dir = tmp_path / "jupyter"
    _write_kernelspec(jupyter_dir, kernel_env)
    tmp_dir = tmp_path / "tmp"  # the notebook's tempfile.mkdtemp() lands here
    tmp_dir.mkdir()
    monkeypatch.setenv("JUPYTER_PATH", str(jupyter_dir))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))  # connection files
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # no user profile
    monkeypatch.setenv("TMPDIR", str(tmp_dir))
    if lib:
        monkeypatch.setenv("CLOUDPROFILER_LIB", lib)
    monkeypatch.delenv("CP_LOG_DIR", raising=False)

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE_CELL))
    client = nbclient.NotebookClient(
        nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT_S, startup_timeout=120,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()  # raises CellExecutionError, with the cell's traceback, if one fails

    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code_cells):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"code cell {i} errored: {errors[0].ename}: {errors[0].evalue}"
        assert cell.execution_count is not None, f"code cell {i} did not run"

    # What the notebook computed.
    probe_text = "".join(o.get("text", "") for o in code_cells[-1].outputs
                         if o.output_type == "stream" and o.name == "stdout")
    lines = [l for l in probe_text.splitlines() if l.startswith(PROBE)]
    assert lines, f"probe cell printed nothing usable: {probe_text!r}"
    got = json.loads(lines[-1][len(PROBE):])
    n = got["n_tuples"]
    assert n >= 10_000

    # Every tuple through every hop, in the computed summary...
    assert got["hops"] == HOPS
    assert got["count"] == {h: n for h in HOPS}
    assert got["channels"] == sorted(CHANNELS)
    assert got["records"] == {c: n for c in CHANNELS}
    for h in HOPS:
        assert 0 < got["median_us"][h] <= got["p99_us"][h] < 60e6, (h, got)
    # ...each tuple's hops add up to its end-to-end latency (the join lines up)
    assert got["sum_of_hops_minus_end_to_end_us"] < 1e-3, got
    for h in HOPS[:-1]:
        assert got["median_us"][h] <= got["median_us"]["end to end"], (h, got)

    # ...and in the table the notebook shows.
    summary_cells = [c for c in code_cells if "summary" in c.metadata.get("tags", [])]
    assert len(summary_cells) == 1, "the summary cell is tagged 'summary'"
    shown = [o for o in summary_cells[0].outputs if o.output_type == "execute_result"]
    assert shown, "the summary cell displays a table"
    table = shown[0]["data"]["text/plain"]
    assert "count" in table and "median_us" in table and "p99_us" in table, table
    for h in HOPS:
        row = [l for l in table.splitlines() if l.startswith(h)]
        assert row and f" {n} " in row[0] + " ", f"summary row for {h!r} should show count {n}:\n{table}"

    # Logs and figure in a fresh temp dir (under the TMPDIR given above).
    work_dir = pathlib.Path(got["work_dir"])
    assert work_dir.parent == tmp_dir and work_dir.is_dir(), got["work_dir"]
    log_dir = pathlib.Path(got["log_dir"])
    assert log_dir.parent == work_dir
    # the six marks and the worker's SERVICERATE counter
    assert len(list(log_dir.glob("*.cplog"))) == len(CHANNELS) + 1, sorted(os.listdir(log_dir))

    # Capacity: each thread is an operator with a service rate over every
    # tuple and a capacity (own work and taking the next tuple while
    # backlogged: never above what its own work allows by more than the
    # interval's noise), one of them the bottleneck, the one whose capacity
    # allows the lowest source rate; the worker's counter was sampled.
    cap = got["capacity"]
    assert sorted(cap) == ["sink", "source", "worker"], cap
    for op, r in cap.items():
        assert r["tuples_in"] == n and r["service_rate"] > 0 and 0 < r["busy_share"] <= 1, (op, r)
    assert sum(r["bottleneck"] for r in cap.values()) == 1, cap
    rated = {op: r for op, r in cap.items() if r["max_source_rate"] == r["max_source_rate"]}  # not NaN
    assert rated, cap
    slowest = min(rated, key=lambda op: rated[op]["max_source_rate"])
    assert cap[slowest]["bottleneck"] and cap[slowest]["capacity"] > 0, cap
    assert got["worker_rate"]["periods"] > 0, got["worker_rate"]
    cap_cells = [c for c in code_cells if "capacity" in c.metadata.get("tags", [])]
    assert len(cap_cells) == 1, "the capacity cell is tagged 'capacity'"
    assert any(o.output_type == "execute_result" and "service_rate" in o["data"]["text/plain"]
               for o in cap_cells[0].outputs), "the capacity cell shows the operators' table"

    png = pathlib.Path(got["png"])
    assert png.parent == work_dir and png.suffix == ".png"
    assert png.stat().st_size > 20_000, f"{png} is only {png.stat().st_size} bytes"
    width, height = _png_size(png)
    assert width >= 800 and height >= 300, (width, height)
    pixels = matplotlib.image.imread(png)[..., :3]
    assert pixels.std() > 0.05, "the figure is (nearly) blank"
    colours = {tuple(p) for p in (pixels[::4, ::4].reshape(-1, 3) * 255).astype(int).tolist()}
    assert len(colours) > 50, f"only {len(colours)} colours: not much of a plot"

    # The figure is shown inline too.
    plot_cells = [c for c in code_cells if "plot" in c.metadata.get("tags", [])]
    assert len(plot_cells) == 1, "the plot cell is tagged 'plot'"
    assert any("image/png" in o.get("data", {}) for o in plot_cells[0].outputs), \
        "the plot cell shows no inline image"


def test_committed_notebook_is_clean():
    nbformat = _require("nbformat", "nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=nbformat.NO_CONVERT)
    assert nb.nbformat == 4
    nbformat.validate(nb)
    assert any(c.cell_type == "markdown" for c in nb.cells)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"cell {i} has outputs committed: clear them"
            assert cell.execution_count is None, f"cell {i} has an execution count committed"
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    # The notebook uses the binding, with the log directory set before the first channel.
    assert source.index('os.environ["CP_LOG_DIR"]') < source.index("cp.open_channel(")
    for call in ("cp.read_log(", "cp.read_log_df(", ".log(", "ZSTD_TSC", "BUFFER_IDENTITY", "savefig(",
                 "SERVICERATE", "mark_blocked(", "service_rate()", "read_analysis("):
        assert call in source, call

"""Sweeps: the grid's cells, serial and Dask runs give the same table, interrupted sweeps resume
without recomputing finished cells."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import sweep

GRID = """
[base]
synthetic_tasks = 6
protocols = ["strong-only", "specagent", "agentcollab"]
tool_latency = "lognormal:0.5,0.4"
strong = "qwen3-30b-a3b"
weak = "qwen3-8b"
strong_device = "h100"
weak_device = "h100"
options = { reflection = "inline" }

[grid]
p = [0.6, 0.9]
K = [4, 6]
seed = [0, 1]
"""


@pytest.fixture
def grid(tmp_path):
    p = tmp_path / "grid.toml"
    p.write_text(GRID)
    return p


def test_cells_are_the_cartesian_product_over_the_base(grid):
    cells = sweep.load_grid(grid)
    assert len(cells) == 8
    assert [(c["p"], c["K"], c["seed"]) for c in cells[:3]] == [(0.6, 4, 0), (0.6, 4, 1), (0.6, 6, 0)]
    assert all(c["synthetic_tasks"] == 6 and c["options"] == {"reflection": "inline"} for c in cells)
    assert len({sweep.cell_id(c) for c in cells}) == 8


@pytest.mark.parametrize("bad, msg", [
    ("[base]\nsynthetic_tasks = 2\n[grid]\nq = [1]\n", "unknown setting 'q'"),
    ("[base]\nsynthetic_tasks = 2\n[grid]\np = 0.5\n", "grid.p must be a non-empty list"),
    ("[base]\np = 0.5\n", "give the tasks"),
    ("[base]\nsynthetic_tasks = 2\n[grid]\np = [1.5]\n", "--p-accept must be in [0, 1]"),
    ("[base]\nsynthetic_tasks = 2\nprotocols = ['nope']\n", "unknown protocol 'nope'"),
    ("base = 5\n", "base must be a table ([base])"),
    ("[base]\nsynthetic_tasks = 2\n[grid]\np = ['x']\n", "--p-accept must be a number, got 'x'"),
    ("[base]\nsynthetic_tasks = -3\n", "synthetic_tasks must be a whole number in [1, 1,000,000], got -3"),
    ("[base]\nsynthetic_tasks = 1e12\n", "synthetic_tasks must be a whole number in [1, 1,000,000]"),
    ("[base]\nsynthetic_tasks = 2\ntask_seed = -1\n", "task_seed must be a whole number"),
    ("[base]\ntrace = [1, 2]\n", "trace must be a name or a list of names"),
    ("[base]\ntrace = 'nosuch'\n", "trace 'nosuch': no such file, and not a shipped trace"),
])
def test_bad_grids_are_one_line_errors(tmp_path, bad, msg):
    p = tmp_path / "g.toml"
    p.write_text(bad)
    with pytest.raises(ValueError, match=re.escape(msg)):
        sweep.load_grid(p)


def test_a_malformed_trace_is_refused_when_the_grid_is_read_not_on_a_worker(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.jsonl").write_text("not json\n")
    (tmp_path / "g.toml").write_text("[base]\ntrace = 'bad.jsonl'\n[grid]\np = [0.6, 0.8]\n")
    with pytest.raises(ValueError, match=re.escape("bad.jsonl:1: invalid JSON")):
        sweep.load_grid(tmp_path / "g.toml")


def test_dask_run_matches_serial_run(grid, tmp_path):
    pytest.importorskip("dask.distributed")
    cells = sweep.load_grid(grid)
    serial = sweep.run(cells, tmp_path / "serial.parquet", serial=True)
    dask = sweep.run(cells, tmp_path / "dask.parquet", workers=2, processes=False)
    assert serial["computed"] == dask["computed"] == 8
    a, b = pd.read_parquet(tmp_path / "serial.parquet"), pd.read_parquet(tmp_path / "dask.parquet")
    assert len(a) == 8 * 3
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert {"cell", "p", "K", "seed", "protocol", "hbm_ratio", "hbm_ratio_lo", "wall_ratio",
            "strong_calls_per_task", "escalations_per_task"} <= set(a.columns)
    assert not (tmp_path / "dask.parquet.parts").exists()


def test_interrupted_sweep_resumes_without_recomputing(grid, tmp_path, monkeypatch):
    cells = sweep.load_grid(grid)
    full = tmp_path / "full.parquet"
    sweep.run(cells, full, serial=True)
    out = tmp_path / "out.parquet"
    real, calls = sweep.run_cell, []

    def interrupted(cell):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(sweep.cell_id(cell))
        return real(cell)

    monkeypatch.setattr(sweep, "run_cell", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(cells, out, serial=True)
    assert not out.exists() and len(list((tmp_path / "out.parquet.parts").glob("*.parquet"))) == 3

    resumed = []
    monkeypatch.setattr(sweep, "run_cell", lambda c: resumed.append(sweep.cell_id(c)) or real(c))
    seen = []
    res = sweep.run(cells, out, serial=True, progress=seen.append)
    assert (res["computed"], res["skipped"]) == (5, 3)
    assert not set(resumed) & set(calls) and len(resumed) == 5
    assert sum(seen) == 8
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(full), check_exact=True)
    # A finished sweep run again computes nothing.
    again = sweep.run(cells, out, serial=True)
    assert again["computed"] == 0 and len(resumed) == 5


def test_a_second_grid_adds_to_the_table_and_a_table_not_a_sweep_s_is_refused(grid, tmp_path):
    out = tmp_path / "out.parquet"
    first = sweep.load_grid(grid)
    sweep.run(first, out, serial=True)
    before = pd.read_parquet(out)
    other = tmp_path / "other.toml"
    other.write_text(GRID.replace("p = [0.6, 0.9]", "p = [0.75]").replace("seed = [0, 1]", "seed = [0]"))
    res = sweep.run(sweep.load_grid(other), out, serial=True)
    after = pd.read_parquet(out)
    assert (res["computed"], res["rows"]) == (2, len(before) + 2 * 3)
    pd.testing.assert_frame_equal(after.iloc[: len(before)], before, check_exact=True)  # kept, first
    assert set(after.iloc[len(before):]["p"]) == {0.75}
    plain = tmp_path / "plain.parquet"
    pd.DataFrame({"x": [1, 2]}).to_parquet(plain)
    with pytest.raises(ValueError, match="not a sweep table"):
        sweep.run(first, plain, serial=True)
    assert pd.read_parquet(plain)["x"].tolist() == [1, 2]


def costsim_exe():
    # The console script of the installed package (the source tree has no costsim.cli).
    exe = Path(sys.executable).with_name("costsim")
    return str(exe) if exe.exists() else shutil.which("costsim")


def test_sweep_command(grid, tmp_path):
    out = tmp_path / "cli.parquet"
    cmd = [costsim_exe(), "sweep", str(grid), "--out", str(out), "--serial", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '"computed": 8' in r.stdout and len(pd.read_parquet(out)) == 24
    bad = subprocess.run([costsim_exe(), "sweep", str(tmp_path / "none.toml"), "--serial"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("costsim: error:") and bad.stderr.count("\n") == 1


def test_a_dead_scheduler_and_a_fractional_K_are_one_line_errors(tmp_path, monkeypatch, capsys):
    import time as _time

    from costsim import distributed
    from costsim.cli.main import main

    grid = tmp_path / "g.toml"
    grid.write_text('[base]\nsynthetic_tasks = 3\nprotocols = ["strong-only"]\n[grid]\np = [0.8]\nK = [4.5]\n')
    assert main(["sweep", str(grid), "-o", str(tmp_path / "a.parquet"), "--serial", "-q"]) == 2
    assert "--K must be an integer in [1, 1024], got 4.5" in capsys.readouterr().err
    grid.write_text(grid.read_text().replace("4.5", "6"))
    monkeypatch.setattr(distributed, "SCHEDULER_TIMEOUT_S", 1.0)
    t = _time.perf_counter()
    code = main(["sweep", str(grid), "-o", str(tmp_path / "b.parquet"), "--scheduler", "tcp://127.0.0.1:1", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no scheduler answered within 1 s" in err
    assert _time.perf_counter() - t < 10



def test_a_cell_is_keyed_by_the_files_it_names_and_by_costsims_code(tmp_path, monkeypatch):
    trace = tmp_path / "t.jsonl"
    trace.write_text("first")
    cell = {"trace": str(trace), "p": 0.8}
    before = sweep.cell_id(cell)
    assert sweep.cell_id(dict(cell)) == before  # stable
    trace.write_text("second")  # the same path, other tasks: not the same cell
    assert sweep.cell_id(cell) != before
    after = sweep.cell_id(cell)
    monkeypatch.setattr(sweep, "code_digest", lambda: "another costsim")
    assert sweep.cell_id(cell) != after  # an upgrade does not reuse the cells of another version


def test_a_cell_is_keyed_by_the_profiles_it_names(tmp_path):
    dev = tmp_path / "dev.toml"
    dev.write_text("bandwidth = 4000")
    cell = {"strong_device": str(dev), "weak_device": str(dev), "p": 0.8}
    before = sweep.cell_id(cell)
    dev.write_text("bandwidth = 400")
    assert sweep.cell_id(cell) != before


# --- bounded, typed, locked (issue 31) ---------------------------------------------------------


def test_a_grid_past_the_cell_bound_is_refused_before_its_product_is_built(tmp_path):
    """Before 2026-12-02 a 10^8-cell grid was materialised (memory) before anything said no."""
    p = tmp_path / "g.toml"
    p.write_text("[base]\nsynthetic_tasks = 2\n[grid]\n" + "".join(f"{k} = {list(range(1, 101))}\n"
                                                                    for k in ("seed", "K", "sessions", "verdict_tokens")))
    with pytest.raises(ValueError, match=r"the grid has 100,000,000 cells; at most 10,000"):
        sweep.load_grid(p)


def test_workers_are_bounded_by_the_cpus_and_a_schedulers_credentials_are_never_printed(tmp_path, monkeypatch, capsys):
    import os

    from costsim import distributed
    from costsim.cli.main import main

    grid = tmp_path / "g.toml"
    grid.write_text('[base]\nsynthetic_tasks = 2\nprotocols = ["strong-only"]\n')
    n = os.cpu_count() or 1
    assert main(["sweep", str(grid), "-o", str(tmp_path / "a.parquet"), "--workers", str(n + 1), "-q"]) == 2
    assert f"--workers must be in [1, {n}]" in capsys.readouterr().err
    monkeypatch.setattr(distributed, "SCHEDULER_TIMEOUT_S", 1.0)
    for address in ("tcp://alice:s3cret#pw@127.0.0.1:1", "tcp://alice:s3cret@[::1", "alice:s3cret@nohost:1"):
        assert main(["sweep", str(grid), "-o", str(tmp_path / "b.parquet"), "--scheduler", address, "-q"]) == 2
        err = capsys.readouterr().err
        assert "s3cret" not in err and "alice" not in err and err.count("\n") == 1, err


def test_a_second_sweep_into_a_table_being_written_is_refused_and_a_dead_ones_lock_taken_over(grid, tmp_path):
    import os

    from costsim.files import exclusive

    out = tmp_path / "t.parquet"
    cells = sweep.load_grid(grid)[:1]
    with exclusive(out, "sweep"):  # as a sweep running in this process would hold it
        with pytest.raises(ValueError, match=rf"another sweep \(process {os.getpid()}\) is writing it"):
            sweep.run(cells, out, serial=True)
    assert not (tmp_path / "t.parquet.lock").exists()
    (tmp_path / "t.parquet.lock").write_text("999999999")  # a sweep killed with -9
    assert sweep.run(cells, out, serial=True)["computed"] == 1 and not (tmp_path / "t.parquet.lock").exists()


_VALUES = st.one_of(st.integers(-10, 10**20), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
                    st.booleans(), st.dates(), st.lists(st.integers(0, 3), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=150, deadline=None)
@given(key=st.sampled_from(sorted(__import__("costsim.scenario", fromlist=["x"]).setting_keys())), value=_VALUES,
       where=st.sampled_from(["base", "grid"]))
def test_a_grid_value_of_any_kind_is_a_cell_or_a_one_line_error(key, value, where):
    """Before 2026-12-02 grid values were never checked for kind: a table, a list or a date
    reached string methods and raised AttributeError/TypeError tracebacks."""
    data = {"base": {"synthetic_tasks": 2}, "grid": {}}
    if where == "base":
        data["base"][key] = value
    else:
        data["grid"][key] = [value]
    try:
        sweep.cells(data)
    except ValueError as e:
        assert "\n" not in str(e)


def test_ctrl_c_on_a_dask_sweep_is_one_line_not_the_workers_warnings(tmp_path):
    """Before 2026-12-02 the worker processes' own loggers printed their cancelled tasks
    ("distributed.worker.state_machine - WARNING ...") before costsim's one line."""
    import signal
    import time

    grid = tmp_path / "g.toml"
    grid.write_text('[base]\nsynthetic_tasks = 400000\nprotocols = ["strong-only", "specagent"]\n[grid]\np = [0.5, 0.6]\n')

    def sigint_delivered():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    p = subprocess.Popen([costsim_exe(), "sweep", str(grid), "-o", str(tmp_path / "t.parquet"), "--workers", "2", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_delivered)
    time.sleep(8)  # the local cluster is up and the cells are running
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and err == "costsim: interrupted\n", err

"""Sweeps: a grid of scenarios, run serially or on Dask, into one tidy table.

A grid file (TOML) has a ``[base]`` table every cell shares and a ``[grid]`` table of lists; the
cells are their cartesian product, each merged over the base (the format, the keys and the
table's columns: docs/protocols.md, "Sweeps"). Each cell is a pure function of its settings
(:func:`run_cell`; every random stream is seeded from the cell's ``seed``), so it gives the same
numbers serially, in another process or on another machine with the same costsim. Each finished
cell is written to ``<out>.parts/<cell>.parquet`` at once (named by :func:`cell_id`); a later run
of the same grid skips the cells found there or in an existing ``<out>`` table.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import tomllib
from functools import lru_cache
from pathlib import Path

from .scenario import setting_keys
from .distributed import run_dask
from .files import code_digest, exclusive, read_text, write_atomic

TASK_KEYS = ("trace", "synthetic_tasks", "task_seed")


def load_grid(path) -> list[dict]:
    """The cells of a grid file, in order; ValueError with a one-line message if it is wrong."""
    try:
        data = tomllib.loads(read_text(path))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{path}: {e}") from None
    return cells(data, origin=str(path))


def cells(data: dict, origin: str = "grid") -> list[dict]:
    """The cells of a parsed grid (``{"base": {...}, "grid": {...}}``)."""
    unknown = set(data) - {"base", "grid"}
    if unknown:
        raise ValueError(f"{origin}: unknown table(s) {', '.join(sorted(unknown))}; expected [base] and [grid]")
    for table in ("base", "grid"):
        if not isinstance(data.get(table, {}), dict):
            raise ValueError(f"{origin}: {table} must be a table ([{table}])")
    base, grid = dict(data.get("base", {})), dict(data.get("grid", {}))
    allowed = setting_keys() | set(TASK_KEYS)
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise ValueError(f"{origin}: grid.{k} must be a non-empty list")
    for k in (*base, *grid):
        if k not in allowed:
            raise ValueError(f"{origin}: unknown setting {k!r}")
    if "trace" not in base and "trace" not in grid and "synthetic_tasks" not in base and "synthetic_tasks" not in grid:
        raise ValueError(f"{origin}: give the tasks: trace = NAME or synthetic_tasks = N in [base]")
    n = math.prod(len(v) for v in grid.values())
    if n > MAX_CELLS:  # counted before the product is built (10^8 cells were materialised)
        raise ValueError(f"{origin}: the grid has {n:,} cells; at most {MAX_CELLS:,} (each is a simulation): "
                         "split it into several grid files")
    keys = list(grid)
    out, read = [], set()
    for combo in itertools.product(*(grid[k] for k in keys)):
        cell = {**base, **dict(zip(keys, combo))}
        _scenario(cell)  # validate now, not on a worker
        _check_tasks(cell, origin, read)
        out.append(cell)
    return out


#: The most synthetic tasks a cell may have (simulate's --tasks bound).
MAX_SYNTHETIC_TASKS = 1_000_000
#: The most cells one grid may have: each is a simulation of a second or more, so 10^4 is hours
#: on a node; past it a grid is a mistake or wants splitting.
MAX_CELLS = 10_000


def _check_tasks(cell: dict, origin: str, read: set) -> None:
    """ValueError (one line) unless the cell's tasks are a trace (names, each a file or a
    shipped trace) or a count of synthetic tasks in [1, MAX_SYNTHETIC_TASKS] with a seed >= 0."""
    from .traces import load, shipped

    if "trace" in cell:
        names = cell["trace"] if isinstance(cell["trace"], list) else [cell["trace"]]
        for n in names:
            if not isinstance(n, str) or not n:
                raise ValueError(f"{origin}: trace must be a name or a list of names, got {cell['trace']!r}")
            if not Path(n).exists() and n.removesuffix(".jsonl") not in shipped():
                raise ValueError(f"{origin}: trace {n!r}: no such file, and not a shipped trace "
                                 f"(shipped: {', '.join(shipped())})")
            if n not in read:  # read it here, not first on a worker (whose error would be Dask's)
                if not load(n).tasks:  # a TraceError names the file and line
                    raise ValueError(f"{origin}: trace {n!r}: no valid task")
                read.add(n)
        return
    for key, lo, hi in (("synthetic_tasks", 1, MAX_SYNTHETIC_TASKS), ("task_seed", 0, 2**63 - 1)):
        v = cell.get(key, lo)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{origin}: {key} must be a whole number in [{lo}, {hi:,}], got {v!r}")


def cell_id(cell: dict) -> str:
    """A stable hash of a cell's settings, of the contents of every file they name (a trace, a
    profile, a config.json, a calibration: changed, they invalidate the cells that used them) and
    of costsim's code and data (:func:`costsim.files.code_digest`: an upgrade does not reuse
    the cells of another)."""
    files = {}
    for key, v in cell.items():
        for name in ([v] if isinstance(v, str) else v if isinstance(v, list) else []):
            try:
                if isinstance(name, str) and Path(name).is_file():
                    st = Path(name).stat()
                    files.setdefault(key, []).append(_sha256(str(Path(name).resolve()), st.st_mtime_ns, st.st_size))
            except (OSError, ValueError):
                pass  # a name (shipped: in the code digest), or the cell's own run reports the file
    blob = json.dumps({"cell": cell, "costsim": code_digest(), "files_sha256": files}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@lru_cache(maxsize=256)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    """A file's SHA-256, read once per version of it (a grid names the same trace in every cell)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _scenario(cell: dict):
    from .scenario import build_scenario

    return build_scenario({k: v for k, v in cell.items() if k not in TASK_KEYS})


def _tasks(cell: dict):
    if "trace" in cell:
        from .traces import load

        names = [cell["trace"]] if isinstance(cell["trace"], str) else list(cell["trace"])
        return [t for n in names for t in load(n).tasks]
    from .traces.synthetic import generate

    return generate(int(cell["synthetic_tasks"]), seed=int(cell.get("task_seed", 0)))


def _flat(v):
    return v if isinstance(v, (int, float, str, bool)) or v is None else json.dumps(v, sort_keys=True)


def run_cell(cell: dict) -> list[dict]:
    """The rows of one cell: its settings, ``cell``, and each protocol's summary metrics."""
    from .metrics import summarize
    from .sim.run import simulate

    sc = _scenario(cell)
    summary = summarize(simulate(_tasks(cell), sc))
    cid = cell_id(cell)
    rows = []
    for proto, metrics in summary.items():
        row = {"cell": cid, **{k: _flat(v) for k, v in cell.items() if k != "protocols"}, "protocol": proto}
        for name, m in metrics.items():
            row[name] = m["mean"]
            lo, hi = m["ci95"]
            row[f"{name}_lo"] = float("nan") if lo is None else lo
            row[f"{name}_hi"] = float("nan") if hi is None else hi
        rows.append(row)
    return rows


# --- running ----------------------------------------------------------------------------------


def _parts_dir(out) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".parts")


def _write_parquet(df, path: Path):
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    write_atomic(path, buf.getvalue())


def _finished(out) -> dict:
    """cell id -> DataFrame of cells already done: in ``out`` and in its parts folder."""
    import pandas as pd

    done = {}
    out = Path(out)
    if out.exists():
        try:
            df = pd.read_parquet(out)
        except Exception as e:
            raise ValueError(f"{out}: exists and is not a parquet table ({e}); give another output") from None
        if "cell" not in df:
            raise ValueError(f"{out}: exists and is not a sweep table (no 'cell' column); give another output")
        for cid, part in df.groupby("cell", sort=False):
            done[cid] = part.reset_index(drop=True)
    parts = _parts_dir(out)
    if parts.is_dir():
        for p in sorted(parts.glob("*.parquet")):
            try:
                done[p.stem] = pd.read_parquet(p)
            except Exception:  # a part cut short by the interruption: compute the cell again
                p.unlink()
    return done


def clear(out) -> None:
    """Drop a sweep table and its finished cells, so that every cell is computed again; a file
    that is not a sweep table is refused (ValueError), not deleted."""
    _finished(out)
    for p in (Path(out), *_parts_dir(out).glob("*.parquet")):
        p.unlink(missing_ok=True)


def run(cells_: list[dict], out, scheduler: str | None = None, workers: int | None = None,
        serial: bool = False, processes: bool = True, progress=None) -> dict:
    """Run ``cells_`` (skipping those finished before) and write the table to ``out`` (.parquet).

    ``serial``: in this process, no Dask. Otherwise on Dask: the cluster at ``scheduler``
    (``tcp://host:port``), or a local cluster of ``workers`` workers (default: one per CPU, at
    most one per cell), each in its own process unless ``processes=False``. ``progress`` is
    called with the number of cells finished (including skipped ones) as they finish.
    Returns ``{"cells": n, "computed": k, "skipped": n - k, "rows": r, "out": path}``. A second
    sweep into the same table while this one runs is refused (:func:`costsim.files.exclusive`).
    """
    out = Path(out)
    if out.suffix != ".parquet":
        raise ValueError(f"{out}: the sweep table must be a .parquet file")
    ids = [cell_id(c) for c in cells_]
    if len(set(ids)) != len(ids):
        raise ValueError("the grid has duplicate cells")
    with exclusive(out, "sweep"):
        return _run(cells_, ids, out, scheduler, workers, serial, processes, progress)


def _run(cells_, ids, out: Path, scheduler, workers, serial, processes, progress) -> dict:
    import pandas as pd

    done = _finished(out)
    # Cells of other grids already in the table stay in it, ahead of this grid's.
    kept = [cid for cid in done if cid not in set(ids)]
    todo = [(cid, c) for cid, c in zip(ids, cells_) if cid not in done]
    if progress and len(ids) - len(todo):
        progress(len(ids) - len(todo))
    parts = _parts_dir(out)
    parts.mkdir(parents=True, exist_ok=True)

    def finish(cid, rows):
        df = pd.DataFrame(rows)
        _write_parquet(df, parts / f"{cid}.parquet")
        done[cid] = df
        if progress:
            progress(1)

    if todo:
        if serial:
            for cid, c in todo:
                finish(cid, run_cell(c))
        else:
            run_dask(run_cell, todo, finish, scheduler, workers, processes)
    order = kept + ids
    table = pd.concat([done[cid] for cid in order], ignore_index=True) if order else pd.DataFrame()
    _write_parquet(table, out)
    for p in parts.glob("*.parquet"):
        p.unlink()
    try:
        parts.rmdir()
    except OSError:
        pass
    return {"cells": len(ids), "computed": len(todo), "skipped": len(ids) - len(todo),
            "rows": len(table), "out": str(out)}

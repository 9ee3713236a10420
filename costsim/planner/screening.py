"""Plan's search: every configuration screened at a task rate (in this process or on Dask),
and a :class:`State` folder that keeps finished pieces so that a search run again resumes."""

from __future__ import annotations

import hashlib
import math
import pickle
from pathlib import Path

from ..files import code_digest, write_atomic
from ..fleet_cost import usd_per_gpu_hour
from ..profiles import load_api
from .screen import Rows, Screen, Screened


def search(tasks, base, task_rate: float, target_s: float, configs, price_table: dict, progress=None,
           scheduler: str | None = None, workers: int | None = None, state=None) -> list[Screened]:
    """The screen of every configuration at ``task_rate`` under ``target_s`` (cheapest first),
    in chunks of one (protocol, K) each, which share the work of their schedule's branches: in
    this process, or, with a ``scheduler`` address or ``workers``, on Dask (a cluster, or a
    local one of that many workers). ``state``: a :class:`State`; chunks it holds are not
    screened again, and each one screened is kept in it."""
    usd = usd_per_gpu_hour(price_table)
    chunks: dict = {}
    for c in configs:
        chunks.setdefault((c.protocol, c.K, c.api), []).append(c)
    got: dict = {}
    todo = []
    for i, chunk in enumerate(chunks.values()):
        args = (tasks, base, task_rate, target_s, chunk, usd)
        kept = state.get("screen", (args, _apis(base, chunk)), valid=lambda v, n=len(chunk): (
            isinstance(v, list) and len(v) == n and all(isinstance(x, Screened) for x in v))) if state else None
        if kept is not None:
            got[i] = kept
            if progress:
                progress(len(kept))
        else:
            todo.append((i, args))

    inputs = dict(todo)

    def finish(i, screened):
        got[i] = screened
        if state:
            state.put("screen", (inputs[i], _apis(base, inputs[i][4])), screened)

    if scheduler or workers:
        from ..distributed import run_dask

        def counted(i, screened):
            finish(i, screened)
            if progress:
                progress(len(screened))
        run_dask(_screen_chunk, todo, counted, scheduler, workers)
    else:
        rows = Rows(tasks, base)  # one for every chunk: the pools' costs are shared
        for i, args in todo:
            finish(i, _screen_chunk(args, progress, rows))
    out = [s for i in range(len(chunks)) for s in got[i]]
    return sorted(out, key=lambda s: (not s.feasible, s.cost_per_1k if s.cost_per_1k is not None else math.inf,
                                      s.p95_s))


def _screen_chunk(args, progress=None, rows=None) -> list[Screened]:
    tasks, base, task_rate, target_s, configs, usd = args
    rows, out = rows or Rows(tasks, base), []
    for c in configs:
        out.append(Screen(rows, c).cheapest_fleet(task_rate, target_s, usd))
        if progress:
            progress(1)
    return out


def _apis(base, configs) -> tuple:
    """The API profiles a search reads, loaded: a profile given as a file counts by what is in it."""
    return tuple(load_api(n) for n in sorted({c.api for c in configs if c.api} | ({base.api} if base.api else set())))


class State:
    """A folder that keeps a search's finished pieces (each chunk's screen, each confirmation),
    so that a search run again with the same inputs skips them: a cache, each piece a pickle
    named by the SHA-256 of its inputs' repr (tasks, scenario, configurations, the API profiles
    they read, rate, target, prices) and of costsim's code and shipped profiles, written
    atomically. A piece that does not load (cut short by an interruption) is computed again."""

    KINDS = ("screen", "confirm")  # the pieces, each a file KIND-DIGEST.pkl

    def __init__(self, folder):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"--state {folder}: not a folder")
        self.hits = 0

    def _path(self, kind: str, inputs):
        # repr, not pickle: the same inputs pickle differently when they share objects differently
        text = repr((code_digest(), kind, inputs))
        if " at 0x" in text:  # an object without a value repr (a function): nothing to resume by
            text += f"{id(self)}"
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        return self.folder / f"{kind}-{digest}.pkl"

    def get(self, kind: str, inputs, valid=lambda value: True):
        """The piece kept for ``inputs``, or None; one that does not load or is not ``valid`` (cut
        short, or not of the shape this code writes) is dropped and computed again."""
        path = self._path(kind, inputs)
        try:
            value = pickle.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except Exception:  # a piece cut short: compute it again
            value = None
        if value is None or not valid(value):
            path.unlink(missing_ok=True)
            return None
        self.hits += 1
        return value

    def clear(self):
        """Drop every piece kept (its own files only: anything else in the folder stays)."""
        for kind in self.KINDS:
            for p in self.folder.glob(f"{kind}-*.pkl"):
                p.unlink()

    def put(self, kind: str, inputs, value):
        write_atomic(self._path(kind, inputs), pickle.dumps(value, protocol=4))

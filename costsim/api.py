"""costsim's Python API: every command of the CLI as a function.

Each function takes the command's options as keyword arguments, named as the flags are
(``--p-accept`` is ``p_accept``, ``--K`` is ``K``), with the same defaults and the same
one-line errors (``ValueError``); each returns a result whose values read by name
(``result["L"]``), whose :meth:`Result.to_dict` is what ``--json`` prints, and whose
:meth:`Result.to_frame` is the command's table as a pandas DataFrame where it has one::

    from costsim import predict, simulate
    predict(p_accept=0.8, K=6)["L"]
    simulate(tasks=200, p_accept=0.8, sessions=8).to_frame()

The CLI parses, calls these, and renders; a notebook gets the same numbers. ``docs/api.md``
lists every function and result. Heavy libraries (numpy, SimPy, pandas, matplotlib) load
when a function first needs them, not when this module is imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .traces.importers import IMPORTERS, Importer


def to_jsonable(obj):
    """``obj`` as JSON takes it: numpy scalars and arrays as Python values, tuples as lists,
    non-finite floats as None (JSON has no inf or nan)."""
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


class Result(Mapping):
    """A command's answer: its values by name, :meth:`to_dict` (what ``--json`` prints) and,
    where the command has a table, :meth:`to_frame`. ``warnings``: what the command would say
    on stderr (skipped input, assumptions it had to make), in order."""

    def __init__(self, data: dict, warnings=()):
        self.data, self.warnings = data, list(warnings)

    def __getitem__(self, key):
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"<{type(self).__name__}: {', '.join(list(self.data)[:8])}{', ...' if len(self.data) > 8 else ''}>"

    def to_dict(self) -> dict:
        """What the command's ``--json`` prints, as Python values."""
        return to_jsonable(self.data)

    def to_frame(self):
        """The command's table as a pandas DataFrame."""
        raise TypeError(f"{type(self).__name__} has no table")


# --- traces ---------------------------------------------------------------------------------------


def _steps_frame(tasks):
    """One row per step of ``tasks``: the task's id, the step's index, then the step's fields."""
    from dataclasses import asdict

    import pandas as pd

    return pd.DataFrame([{"task_id": t.task_id, "step": i, **asdict(s)} for t in tasks for i, s in enumerate(t.steps)])


class TraceResult(Result):
    """Tasks read from a trace: ``tasks`` (:class:`costsim.traces.Task`) and the file's ``header``."""

    def __init__(self, read):
        self.tasks, self.header = read.tasks, read.header
        super().__init__({"header": read.header, "tasks": read.tasks}, read.warnings)

    def to_dict(self) -> dict:
        from .traces.jsonl import task_to_dict

        return to_jsonable({"header": self.header, "tasks": [task_to_dict(t) for t in self.tasks]})

    def to_frame(self):
        return _steps_frame(self.tasks)


def load_trace(trace: str, strict: bool = False) -> TraceResult:
    """A trace file (JSONL) or a shipped trace by name (``tau2-airline``); ``strict``: any
    malformed line is an error, not a warning."""
    from .traces import load

    return TraceResult(load(trace, strict=strict))


class ImportedTrace(Result):
    """What an importer made of a log: ``result`` (its tasks, warnings and notes), ``importer``
    (its record) and :meth:`jsonl`, the trace as costsim's JSONL with its header."""

    def __init__(self, fmt: str, files, tools, result):
        self.fmt, self.files, self.tools, self.result = fmt, list(files), list(tools or ()), result
        self.importer: Importer = IMPORTERS[fmt]
        super().__init__({"importer": fmt, "tasks": len(result.tasks), "records": result.records,
                          "steps_by_kind": result.steps_by_kind(),
                          "tools_defaulted_to_write": dict(sorted(result.defaulted_tools.items())),
                          "estimated_share": result.estimated_share(), "notes": dict(result.notes)},
                         result.warnings)

    def jsonl(self) -> str:
        """The imported trace as costsim's JSONL (what ``traces import -o`` writes)."""
        from .traces.importers import to_jsonl

        return to_jsonl(self.result, self.fmt, self.files[0], self.tools)

    def to_frame(self):
        return _steps_frame(self.result.tasks)


def import_trace(fmt: str, files, *, tools=(), strict: bool = False) -> ImportedTrace:
    """Import agent logs (``fmt``: tau2, otel or openai; ``files``: a path, or several where
    the format joins them) into costsim's trajectories; ``tools``: tool-kind files (TOML or
    MCP ``tools/list`` JSON)."""
    from .traces.importers import importer, run

    importer(fmt)
    files = [files] if isinstance(files, (str, bytes)) or hasattr(files, "__fspath__") else list(files)
    if not files:
        raise ValueError("no file to import")
    return ImportedTrace(fmt, files, tools, run(fmt, files, tools, strict))

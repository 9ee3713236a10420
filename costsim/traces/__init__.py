"""Trajectories: schema, JSONL read/write, importers, statistics and verdict fitting.

Shipped traces live in the package data ``costsim.data.traces`` (the repository's top-level
``traces/`` folder) and are found by name through :func:`shipped` and :func:`load` (via
:func:`costsim.files.data_dir`), from a checkout or an installed wheel alike. The synthetic generator belongs to the simulator.
"""

from __future__ import annotations

from pathlib import Path

from .jsonl import ReadResult, TraceError, dumps_jsonl, parse_jsonl, read_jsonl
from .schema import ESTIMABLE_FIELDS, SCHEMA_VERSION, STEP_KINDS, Step, Task

__all__ = [
    "ESTIMABLE_FIELDS", "SCHEMA_VERSION", "STEP_KINDS", "Step", "Task", "TraceError",
    "ReadResult", "dumps_jsonl", "parse_jsonl", "read_jsonl", "shipped", "load",
]


def _data_dir():
    from costsim.files import data_dir  # the project's one loader of shipped data

    return data_dir("traces")


def shipped() -> list[str]:
    """Names of the shipped traces (file names without ``.jsonl``), sorted."""
    try:
        entries = list(_data_dir().iterdir())
    except (ModuleNotFoundError, FileNotFoundError):
        return []
    return sorted(e.name[: -len(".jsonl")] for e in entries if e.name.endswith(".jsonl"))


def load(name_or_path, strict: bool = False) -> ReadResult:
    """Read a trace file by path, or a shipped trace by name (``tau2-airline``, with or without
    ``.jsonl``). A path that exists wins over a shipped name."""
    p = Path(name_or_path)
    if p.exists():
        return read_jsonl(p, strict=strict)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    if str(name_or_path) in (stem, stem + ".jsonl") and stem in shipped():
        text = _data_dir().joinpath(stem + ".jsonl").read_text(encoding="utf-8")
        return parse_jsonl(text, stem, strict=strict)
    names = ", ".join(shipped()) or "none"
    raise TraceError(f"{name_or_path}: no such file, and not a shipped trace (shipped: {names})")

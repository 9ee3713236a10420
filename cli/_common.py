"""Helpers shared by the commands: user errors, JSON output, atomic writes."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path


import typer

# Deployment options every command that costs a deployment takes.
ENGINE = typer.Option(None, "--engine", help="Serving engine profile (vllm, sglang, trtllm, llamacpp, ideal; or a TOML) [vllm].")
WEAK_ENGINE = typer.Option(None, "--weak-engine", help="The weak model's engine, if not --engine's.")
EXPERT_PARALLEL = typer.Option(False, "--expert-parallel", help="Strong MoE experts placed whole on the GPUs (all-to-all) instead of tensor-sharded.")


class UserError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


def to_jsonable(obj):
    """numpy scalars/arrays to Python; non-finite floats to None (JSON has no inf/nan)."""
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def dumps(obj) -> str:
    return json.dumps(to_jsonable(obj), indent=2)


def check_output(path, inputs: tuple = (), directory: bool = False) -> Path:
    """Refuse, before any work is done, an output that cannot be written: an empty name, a
    directory where a file is wanted (or the reverse), an input file, or a place where no file
    can be created (the check creates and removes a temporary file there)."""
    if path is None or not str(path).strip():
        raise UserError("the output path is empty")
    p = Path(path)
    shown = str(p) if str(p).isprintable() else repr(str(p))
    try:
        return _check_output(p, shown, inputs, directory)
    except OSError as e:  # a name too long, a component that is a file, ...
        raise UserError(f"{shown}: cannot write there ({e.strerror or e})") from None


def _check_output(p: Path, shown: str, inputs: tuple, directory: bool) -> Path:
    if directory and p.exists() and not p.is_dir():
        raise UserError(f"{shown}: exists and is not a directory")
    if not directory and p.is_dir():
        raise UserError(f"{shown}: is a directory; give a file name")
    for src in inputs:
        if p.exists() and Path(src).exists() and p.resolve() == Path(src).resolve():
            raise UserError(f"{shown}: refusing to overwrite an input file")
    where = p if directory else p.parent
    try:
        where.mkdir(parents=True, exist_ok=True)
        # the name atomic_write's temporary file will have: too long a name fails here, not after the run
        fd, probe = tempfile.mkstemp(dir=where, prefix=".costsim-probe-" if directory else f".{p.name}.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UserError(f"{shown}: cannot write there ({e.strerror or e})") from None
    except ValueError as e:  # a NUL in the name
        raise UserError(f"{shown}: not a valid path ({e})") from None
    return p


def atomic_write(path: str | os.PathLike, data: str | bytes, inputs: tuple = ()) -> None:
    """Write ``data`` to ``path`` atomically (:func:`costsim.resources.write_atomic`); refuse to
    overwrite an input."""
    from costsim.resources import write_atomic

    write_atomic(check_output(path, inputs), data)


class Progress:
    """A progress bar on stderr when it is a terminal, nothing otherwise (no text in pipes and
    logs). ``with Progress("label", total) as bar``: ``bar.advance(k)`` or ``bar.update(done,
    total)``."""

    def __init__(self, label: str, total: int | None = None, quiet: bool = False):
        self.label, self.total, self.done, self.bar = label, total, 0, None
        self.show = not quiet and sys.stderr.isatty()

    def __enter__(self):
        return self

    def update(self, done: int, total: int | None = None):
        self.advance(done - self.done, total)

    def advance(self, k: int, total: int | None = None):
        self.total = total or self.total
        if self.show and self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total)
        self.done += k
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, total=self.total)

    def close(self):
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __exit__(self, *exc):
        self.close()

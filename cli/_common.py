"""Helpers shared by the commands: user errors, JSON output, atomic writes."""

from __future__ import annotations

import json
import math
import os
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


def atomic_write(path: str | os.PathLike, data: str | bytes, inputs: tuple = ()) -> None:
    """Write ``data`` to ``path`` via a temporary file and rename; refuse to overwrite an input."""
    path = Path(path)
    for src in inputs:
        if Path(src).exists() and path.exists() and path.resolve() == Path(src).resolve():
            raise UserError(f"{path}: refusing to overwrite an input file")
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a normal file respects the umask
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise

"""`costsim report`: a result of predict, replay/simulate, capacity or plan as one HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import UserError, atomic_write, check_output, shown


def _default_out(result: str) -> str:
    """The HTML file beside RESULT, named after it (its suffix .html); a one-line error where
    RESULT has no file name to name it after ('', '.', a folder)."""
    if not result.strip():
        raise UserError("the result path is empty: give the JSON file a command printed with --json")
    p = Path(result)
    if p.is_dir():
        raise UserError(f"{shown(result)}: is a directory, not a result file")
    if not p.name or p.name in (".", ".."):
        raise UserError(f"{shown(result)}: not a file name; give the JSON file a command printed with --json")
    return str(p.with_suffix(".html"))


def report(
    result: str = typer.Argument(..., help="The JSON that `costsim predict|replay|simulate|capacity|plan ... --json` printed."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="The HTML file to write [RESULT's name with .html]."),
):
    """One self-contained HTML file of a result: its verdict, figure, tables, inputs with their sources,
    and the model's errors against measurement. It opens offline (inline CSS and SVG, no script).

    RESULT is what `costsim predict|replay|simulate|capacity|plan ... --json` printed, saved to a file.
    """
    from costsim import api

    target = out if out is not None else _default_out(result)
    check_output(target, inputs=(result,))  # before any work: never over the result itself
    try:
        text = api.report(result)
    except (ValueError, OSError) as e:  # bad input, in one line
        raise UserError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    except (ArithmeticError, RecursionError, MemoryError) as e:  # what no check foresaw: still one line, no traceback
        raise UserError(f"{shown(result)}: cannot make a report of it ({type(e).__name__}"
                        + (f": {str(e).splitlines()[0]}" if str(e) else "") + ")") from None
    atomic_write(target, text, inputs=(result,))
    typer.echo(f"wrote {target}")

"""`costsim report`: a result of predict, replay/simulate, capacity or plan as one HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ._common import atomic_write, check_output, user_errors


def report(
    result: str = typer.Argument(..., help="The JSON that `costsim predict|replay|simulate|capacity|plan ... --json` printed."),
    out: Optional[str] = typer.Option(None, "--out", "-o", help="The HTML file to write [RESULT's name with .html]."),
):
    """One self-contained HTML file of a result: its verdict, figure, tables, inputs with their sources,
    and the model's errors against measurement. It opens offline (inline CSS and SVG, no script).

    RESULT is what `costsim predict|replay|simulate|capacity|plan ... --json` printed, saved to a file.
    """
    from costsim import api

    with user_errors(ValueError):  # a RESULT with no name ('', '.') has no default output
        target = out if out is not None else str(Path(result).with_suffix(".html"))
    check_output(target, inputs=(result,))  # before any work: never over the result itself
    with user_errors(ValueError):
        text = api.report(result)
    atomic_write(target, text, inputs=(result,))
    typer.echo(f"wrote {target}")

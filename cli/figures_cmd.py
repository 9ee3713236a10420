"""`costsim figures`: regenerate the committed figures and their index, deterministically."""

from __future__ import annotations

import time
from typing import List, Optional

import typer

from ._common import check_output, user_errors


def figures(
    out: str = typer.Option("figures", "--out-dir", help="Folder to write the PNGs, CSVs and README.md index into."),
    only: Optional[List[str]] = typer.Option(None, "--only", help="Only this figure (repeatable): cost-model, "
                                             "paper-fit, balance-point, capacity, pass-counting, tau2-replay."),
):
    """Regenerate the figures (fixed seeds; same bytes with the same library versions)."""
    from costsim import api

    check_output(out, directory=True)
    t = time.perf_counter()
    with user_errors(ValueError):
        api.figures(out, only=only, log=lambda line: typer.echo(f"wrote {out.rstrip('/')}/{line}"))
    if not only:
        typer.echo(f"wrote {out.rstrip('/')}/README.md")
    typer.echo(f"{time.perf_counter() - t:.1f} s")

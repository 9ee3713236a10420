"""`costsim sweep GRID.toml`: a grid of scenarios on Dask (or serially) into one Parquet table."""

from __future__ import annotations

from typing import Optional

import typer

from ._common import Progress, check_output, dumps, user_errors


def sweep(
    grid: str = typer.Argument(..., help="Grid file (TOML): [base] settings and [grid] lists; see docs/protocols.md."),
    out: str = typer.Option("sweep.parquet", "--out", "-o", help="The table (.parquet) [sweep.parquet]."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler tcp://HOST:PORT [a local cluster]."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Workers of the local cluster [one per CPU, at most one per cell]."),
    serial: bool = typer.Option(False, "--serial", help="Run in this process, without Dask."),
    fresh: bool = typer.Option(False, "--fresh", help="Recompute every cell (default: resume, skipping finished cells)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
):
    """Run every cell of a grid (protocols x p_u x K x hardware x batch x seeds) into one tidy table.

    A cell's numbers depend only on its settings and seed: Dask and --serial give the same table.
    Interrupted sweeps resume: finished cells are kept in OUT.parts/ and skipped next time.
    """
    from costsim import api

    check_output(out, inputs=(grid,))
    with user_errors(ValueError, OSError), Progress("sweep", quiet=quiet) as bar:
        result = api.sweep(grid, out=out, scheduler=scheduler, workers=workers, serial=serial, fresh=fresh,
                           progress=bar.advance).data
    if json_out:
        typer.echo(dumps(result))
    else:
        typer.echo(f"{result['cells']} cells ({result['computed']} computed, {result['skipped']} already done), "
                   f"{result['rows']} rows -> {result['out']}")

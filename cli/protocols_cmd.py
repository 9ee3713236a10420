"""`costsim protocols`: each protocol, what it fixes, and the options it takes."""

from __future__ import annotations

from typing import List, Optional

import typer

from costsim.config import OPTION_SETTINGS

from ._common import SCENARIO_OPTIONS, dumps, user_errors


def protocols(names: Optional[List[str]] = typer.Argument(None, help="Protocols to show [all]."),
              json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")):
    """Each protocol: what it is, how it runs (pure schedule or timed), the models it calls, its
    baseline and counters, the options it takes (default, allowed values, help) and the flag of each."""
    from costsim import api

    with user_errors(ValueError):
        shown = api.protocols(names).data
    flags = {OPTION_SETTINGS.get(k, k): opt.param_decls[0] for k, (_, opt) in SCENARIO_OPTIONS.items()}
    for d in shown.values():
        for k, o in (*d["options"].items(), *d.get("deployment", {}).items()):
            o["flag"] = flags.get(k, f"--option {k}=")
    if json_out:
        typer.echo(dumps(shown))
        return
    for n, d in shown.items():
        typer.echo(f"{n}: {d['description']}" + "".join(f"; {k}={v} fixed" for k, v in d["fixed"].items()))
        typer.echo("  " + "; ".join([
            "timed (a SimPy process: only the simulator runs it)" if d["timed"] else
            "a pure schedule (no SimPy, no randomness" + ("; the exact twin costs it" if d["exact_twin"] else "") + ")",
            "calls " + " and ".join(d["models"]) + (" (strong behind a priced API)" if d["backend"] == "api" else ""),
            f"ratios against {d['baseline']}"]
            + ([f"counters {', '.join(d['counters'])}"] if d["counters"] else [])))
        shown_opts = {**d["options"], **d.get("deployment", {})}
        width = max((len(o["flag"]) for o in shown_opts.values()), default=0)
        for k, o in shown_opts.items():
            default = o["default"]  # as --option reads it (TOML, and none)
            default = "none" if default is None else str(default).lower() if isinstance(default, bool) else default
            words = f" ({' | '.join(o['choices'])})" if o.get("choices") else ""
            typer.echo(f"  {o['flag']:<{width}}  [{default}]{words} {o['help']}")

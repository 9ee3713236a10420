"""`costsim plan`: the cheapest fleet for a task rate under a p95 latency target, searched."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from costsim.api import PLAN_OPTIONS
from costsim.config import COMMANDS, EDGE_CLOUD, PLAN_SEARCH

from ._common import (SCENARIO_OPTIONS, Progress, UserError, check_output, dumps, inputs_of, target_missed, warn, with_options,
                      user_errors)

@with_options({k: SCENARIO_OPTIONS[k] for k in (*PLAN_OPTIONS, "json_out")})
def plan(
    task_rate: str = typer.Option(..., "--task-rate", help="Tasks arriving per unit time: 2/s, 120/min, 7200/h."),
    latency_p95: str = typer.Option(f"{COMMANDS.latency_p95_s:g}s", "--latency-p95", help="Target p95 task latency: 60s, 2min."),
    devices: str = typer.Option(",".join(PLAN_SEARCH.devices), "--devices", help="Devices to search for the strong replicas (and the weak ones, unless --weak-devices)."),
    weak_devices: Optional[str] = typer.Option(None, "--weak-devices", help="Devices to search for the weak replicas [--devices]."),
    max_gpus: Optional[int] = typer.Option(None, "--max-gpus", help="Most GPUs a replica may span [8: one node]."),
    protocols: Optional[str] = typer.Option(None, "--protocols", help=f"Protocols to search [{','.join(PLAN_SEARCH.protocols)}; with --api also those on the API backend, which `costsim protocols` marks]."),
    edge_devices: str = typer.Option(EDGE_CLOUD.edge_device, "--edge-devices", help="With --api: local devices of the edge-cloud weak model."),
    ks: str = typer.Option(",".join(map(str, PLAN_SEARCH.Ks)), "--K", "-K", help="Chunk sizes to search: a range 2..12 or a list."),
    price: Optional[List[str]] = typer.Option(None, "--price", help="DEVICE=USD per GPU-hour, overriding the profile's list price; repeatable."),
    traces: Optional[List[str]] = typer.Option(None, "--trace", help="Plan for recorded tasks (JSONL or shipped name) instead of synthetic ones; repeatable."),
    tasks: int = typer.Option(COMMANDS.plan_tasks, "--tasks", min=20, max=100_000, help="Synthetic tasks (tau² Airline shape) the screen is computed on."),
    confirm: int = typer.Option(COMMANDS.plan_confirm, "--confirm", min=1, max=50, help="Cheapest screened configurations the simulator confirms (more, up to 3x, while one screened below the cheapest confirmed cost is left)."),
    figure: Optional[str] = typer.Option(None, "--figure-out", help="Write the front as a PNG here."),
    deploy_out: Optional[str] = typer.Option(None, "--deploy-out", help="Write the plan into this folder to deploy from: front.csv, launch.sh (a server command per pool under --engine), router.json and README.md (docs/plan.md)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Screen on a local Dask cluster of this many workers [in this process]."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Screen on the Dask cluster at tcp://HOST:PORT."),
    state: Optional[str] = typer.Option(None, "--state", help="Keep the search's finished pieces (each (protocol, K) screen, each confirmation) in this folder; the same plan run again with it resumes (a piece is reused only with the same inputs and the same costsim code)."),
    fresh: bool = typer.Option(False, "--fresh", help="With --state: drop the pieces kept there first."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    **o,
):
    """Search devices, GPUs per replica, K and protocol for the cheapest fleet that meets the target.

    An analytic screen ranks every configuration; the simulator confirms the cheapest ones.
    """
    from costsim import api

    json_out = o.pop("json_out")
    inputs = inputs_of(o, *(traces or ()))
    if figure:
        check_output(figure, inputs=inputs)
        if not figure.endswith(".png"):
            raise UserError(f"--figure-out {figure}: expected a .png file name")
    if deploy_out:  # refused before the search runs, the folder and each file it will hold
        check_output(deploy_out, inputs=inputs, directory=True)
        for name in api.PlanResult.DEPLOYMENT_FILES:
            check_output(Path(deploy_out) / name, inputs=inputs)
    with user_errors(ValueError, OSError), Progress("planning", quiet=quiet) as bar:
        res = api.plan(task_rate, latency_p95=latency_p95, devices=devices, weak_devices=weak_devices, max_gpus=max_gpus,
                       protocols=protocols, edge_devices=edge_devices, K=ks, price=price,
                       trace=traces, tasks=tasks, confirm=confirm, workers=workers, scheduler=scheduler, state=state,
                       fresh=fresh, progress=bar.advance, on_warning=warn, **o)
    if figure:
        res.figure(figure)
    if deploy_out:  # written before a missed target exits: the front and the README say why
        with user_errors(ValueError, OSError):
            res.save_deployment(deploy_out, inputs=inputs, p_accept=o.get("p_accept"))
    typer.echo(dumps(res.to_dict()) if json_out else render(res.data))
    if res["recommended"] is None:
        target_missed(res["why_none"])


def render(res: dict) -> str:
    lines = [f"costsim plan: {res['task_rate_per_s']:g} tasks/s, p95 <= {res['latency_p95_target_s']:g} s; "
             f"{res['configurations']} configurations screened ({res['feasible']} feasible), "
             f"{len(res['confirmed'])} confirmed by simulation, in {res['seconds']:.1f} s ({res['tasks']} tasks)"
             + (f"; {res['resumed']['pieces']} finished pieces reused from {res['resumed']['folder']}"
                if res.get("resumed") and res["resumed"]["pieces"] else ""), ""]
    if res["front"]:
        lines.append("Pareto front of the screen (cost per 1,000 tasks against p95 latency):")
        lines.append(f"  {'USD/1k tasks':>12} {'p95 s':>7} {'GPUs':>5}  {'protocol':<22} replicas")
        for s in res["front"]:
            proto = s.config.protocol + (f" K={s.config.K}" if s.config.K else "")
            lines.append(f"  {s.cost_per_1k:>12.3f} {s.p95_s:>7.1f} {s.gpus:>5}  {proto:<22} "
                         f"{s.config.fleet(s.strong_replicas, s.weak_replicas)}")
        lines.append("")
    if res["confirmed"]:
        lines.append("Confirmed by simulation (the screen's cheapest):")
        for s, r in res["confirmed"]:
            proto = s.config.protocol + (f" K={s.config.K}" if s.config.K else "")
            grown = f", grown {r['grown']}x" if r["grown"] else ""
            lines.append(f"  {proto:<22} {r['fleet']}, {r['fleet_gpus']} GPUs, "
                         f"USD {r['cost_per_1k_tasks_usd']:.3f} per 1k tasks, p95 {r['latency_p95_s']:.1f} s simulated "
                         f"(screen {s.p95_s:.1f} s{grown}) — {'meets' if r['meets_target'] else 'misses'} the target"
                         + (f" {r['note']}" if r["note"] else ""))
        lines.append("")
    rec = res["recommended"]
    if rec is None:
        lines.append(f"No recommendation: {res['why_none']}.")
    else:
        s, r = rec
        proto = s.config.protocol + (f" K={s.config.K}" if s.config.K else "")
        lines += [f"Recommended: {proto}, {r['fleet']}: {r['fleet_gpus']} GPUs, "
                  f"USD {r['cost_per_1k_tasks_usd']:.3f} per 1,000 "
                  f"tasks, p95 {r['latency_p95_s']:.1f} s (simulated, {r['tasks_simulated']:,} tasks over "
                  f"{r['simulated']['text']}" + (f"; {r['note']}" if r["note"] else "") + ")",
                  f"  why: {res['why']}"]
    if res.get("specagent_pays"):
        lines.append(f"  {res['specagent_pays']['text']}")
    lines += ["", "Prices (USD per GPU-hour, on-demand list prices):"]
    for dev, p in res["prices"].items():
        usd = "none" if p["usd_per_gpu_hour"] is None else f"{p['usd_per_gpu_hour']:.2f}"
        age = f"read {p['date']} ({p['age_days']} days old)" if p["date"] else "no date"
        lines += [f"  {dev:<10} {usd:>6}  {age if p['usd_per_gpu_hour'] is not None and p['source'] != '--price' else ''}",
                  f"             {p['source']}"]
    api = res.get("api")
    if api:
        lines += ["", f"API of the strong model (USD per million tokens, read {api['date']}):",
                  f"  {api['name']}: input {api['input_per_mtok_usd']:g}, cached input {api['cached_input_per_mtok_usd']:g}, "
                  f"output {api['output_per_mtok_usd']:g}; TTFT {api['ttft_s']:g} s ({api['ttft_from']}), "
                  f"output {api['output_tokens_per_s']:g} tokens/s ({api['output_tokens_per_s_from']})",
                  f"             {api['source']}"]
    lines += ["", "assumptions:", f"  - engine: {res['engine']}", *(f"  - {a}" for a in res["assumptions"])]
    return "\n".join(lines)

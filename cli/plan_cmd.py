"""`costsim plan`: the cheapest fleet for a task rate under a p95 latency target, searched."""

from __future__ import annotations

import time
from typing import List, Optional

import typer

from costsim.config import DEPLOYMENTS, EDGE_CLOUD, ON_API, PLAN_SEARCH

from ._common import (SCENARIO_OPTIONS, SETTING, Progress, UserError, check_output, dumps, load_tasks, parse_rate,
                      parse_seconds, split_names, with_options, user_errors)

#: (no --p-dist: the screen's expected calls are at one per-step acceptance rate)
_SHARED = ("p_accept", "strong", "weak", "engine", "verdict_tokens", "tool_latency", "seed", "api", "api_ttft", "api_tps",
           "json_out")


def parse_ks(text: str) -> tuple[int, ...]:
    """'2..12' (every K from 2 to 12), '2,4,6' or '6' -> the chunk sizes to search."""
    from costsim.formulas import MAX_K

    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            ks = tuple(range(lo, hi + 1))
        else:
            ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UserError(f"--K {text!r}: expected a range 2..12 or a list 2,4,6") from None
    if not ks:
        raise UserError(f"--K {text!r}: the range is empty")
    if any(not 1 <= k <= MAX_K for k in ks):
        raise UserError(f"--K {text!r}: every K must be in [1, {MAX_K}]")
    return ks


@with_options({k: SCENARIO_OPTIONS[k] for k in _SHARED})
def plan(
    task_rate: str = typer.Option(..., "--task-rate", help="Tasks arriving per unit time: 2/s, 120/min, 7200/h."),
    latency_p95: str = typer.Option("60s", "--latency-p95", help="Target p95 task latency: 60s, 2min."),
    devices: str = typer.Option(",".join(PLAN_SEARCH.devices), "--devices", help="Devices to search for the strong replicas (and the weak ones, unless --weak-devices)."),
    weak_devices: Optional[str] = typer.Option(None, "--weak-devices", help="Devices to search for the weak replicas [--devices]."),
    max_gpus: Optional[int] = typer.Option(None, "--max-gpus", help="Most GPUs a replica may span [8: one node]."),
    protocols: Optional[str] = typer.Option(None, "--protocols", help=f"Protocols to search [{','.join(PLAN_SEARCH.protocols)}; with --api also {','.join(ON_API)}]."),
    edge_devices: str = typer.Option(EDGE_CLOUD.edge_device, "--edge-devices", help="With --api: local devices of the edge-cloud weak model."),
    ks: str = typer.Option(",".join(map(str, PLAN_SEARCH.Ks)), "--K", "-K", help="Chunk sizes to search: a range 2..12 or a list."),
    strong_dtype: str = typer.Option(DEPLOYMENTS.strong_dtype, "--strong-dtype", help=f"Strong weight precision [{DEPLOYMENTS.strong_dtype}]."),
    price: Optional[List[str]] = typer.Option(None, "--price", help="DEVICE=USD per GPU-hour, overriding the profile's list price; repeatable."),
    traces: Optional[List[str]] = typer.Option(None, "--trace", help="Plan for recorded tasks (JSONL or shipped name) instead of synthetic ones; repeatable."),
    tasks: int = typer.Option(200, "--tasks", min=20, max=100_000, help="Synthetic tasks (tau² Airline shape) the screen is computed on."),
    confirm: int = typer.Option(3, "--confirm", min=1, max=50, help="Cheapest screened configurations the simulator confirms (more, up to 3x, while one screened below the cheapest confirmed cost is left)."),
    figure: Optional[str] = typer.Option(None, "--figure", help="Write the front as a PNG here."),
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
    from costsim import plan as P
    from costsim.config import build_scenario
    from costsim.profiles import check_dtype

    rate, target = parse_rate(task_rate), parse_seconds(latency_p95)
    if workers is not None and workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if fresh and not state:
        raise UserError("--fresh needs --state FOLDER")
    if max_gpus is not None and max_gpus < 1:
        raise UserError(f"--max-gpus must be >= 1, got {max_gpus}")
    from costsim.protocols import PROTOCOLS
    from costsim.sim.twin import has_twin

    default = ",".join(PLAN_SEARCH.protocols + (ON_API if o["api"] else ()))
    names = split_names(protocols if protocols is not None else default, "--protocols")
    known = [n for n in PROTOCOLS if has_twin(n) or n in ON_API]  # the screen needs a schedule's expected calls
    bad = [n for n in names if n not in known]
    if bad:
        raise UserError(f"--protocols: plan cannot search {', '.join(bad)}; it searches {', '.join(known)}")
    if any(n in ON_API for n in names) and not o["api"]:
        raise UserError("--protocols edge-cloud / cloud-strong-only need --api PROFILE (the strong model's API)")
    if figure:
        check_output(figure, inputs=tuple(traces or ()))
        if not figure.endswith(".png"):
            raise UserError(f"--figure {figure}: expected a .png file name")
    t0 = time.perf_counter()
    with user_errors(ValueError, OSError):
        work = load_tasks(traces, tasks, o["seed"])
        settings = {SETTING.get(k, k): v for k, v in o.items() if k != "json_out"}
        base = build_scenario(settings, work if traces else None)
        dev = split_names(devices, "--devices")
        wdev = split_names(weak_devices, "--weak-devices") if weak_devices is not None else dev
        configs = P.configurations(base.strong.model, base.weak.model, dev, names, parse_ks(ks), o["engine"],
                                   check_dtype(strong_dtype), base.weak.weight_dtype, max_gpus, wdev, base.api,
                                   split_names(edge_devices, "--edge-devices"))
        if not configs:
            raise UserError(f"no configuration to search: none of --devices runs {strong_dtype} weights and holds the "
                            "strong model" + (f" on at most {max_gpus} GPUs" if max_gpus else " on one node (8 GPUs)"))
        searched = sorted({c.strong.device.name for c in configs if c.strong} | {c.weak.device.name for c in configs if c.weak})
        overrides = P.parse_prices(price)
        stray = sorted(set(overrides) - set(searched))
        if stray:
            raise UserError(f"--price {', '.join(stray)}: not a searched device (searched: {', '.join(searched)})")
        table = P.prices(searched, overrides)
        kept = P.State(state) if state else None
        if kept and fresh:
            kept.clear()
        with Progress("planning", len(configs), quiet=quiet) as bar:
            res = P.plan(work, base, rate, target, configs, table, confirm, bar.advance, scheduler, workers, kept)
    res["seconds"] = time.perf_counter() - t0
    res["tasks"] = len(work)
    res["engine"] = f"{base.strong.engine.display_name} serves both models (--engine)"
    if base.api:
        from costsim.sim.api import endpoint, speeds

        a = endpoint(base)
        (ttft, ttft_from), (tps, tps_from) = speeds(base, a)
        res["api"] = {"name": a.name, "input_per_mtok_usd": a.price_input_per_mtok_usd,
                      "cached_input_per_mtok_usd": a.price_cached_input_per_mtok_usd,
                      "output_per_mtok_usd": a.price_output_per_mtok_usd, "ttft_s": ttft, "ttft_from": ttft_from,
                      "output_tokens_per_s": tps, "output_tokens_per_s_from": tps_from, "date": a.date,
                      "source": a.source}
    if figure:
        from costsim.figures.draw import plan_front, save

        save(plan_front(res), figure)
    typer.echo(dumps(as_json(res)) if o["json_out"] else render(res))


def _point(s) -> dict:
    c = s.config
    return {"protocol": c.protocol, "K": c.K or None,
            "strong": None if c.strong is None else {"device": c.strong.device.name, "gpus_per_replica": c.strong.n_devices,
                                                     "expert_parallel": c.strong.expert_parallel},
            "weak": None if c.weak is None else {"device": c.weak.device.name, "gpus_per_replica": c.weak.n_devices},
            "api": c.api,
            "feasible": s.feasible, "strong_replicas": s.strong_replicas, "weak_replicas": s.weak_replicas,
            "gpus": s.gpus, "cost_per_1k_tasks_usd": s.cost_per_1k, "latency_p95_s": s.p95_s,
            "uncontended_latency_p95_s": s.uncontended_p95_s, "strong_batch": s.strong_batch,
            "weak_batch": s.weak_batch, "why_not": s.why or None}


def as_json(res: dict) -> dict:
    rec = res["recommended"]
    return {"task_rate_per_s": res["task_rate_per_s"], "latency_p95_target_s": res["latency_p95_target_s"],
            "configurations": res["configurations"], "feasible": res["feasible"], "seconds": res["seconds"],
            "tasks": res["tasks"], "front": [_point(s) for s in res["front"]],
            "confirmed": [{"screen": _point(s), "simulated": r} for s, r in res["confirmed"]],
            "recommended": None if rec is None else {"screen": _point(rec[0]), "simulated": rec[1]},
            "why": res.get("why") or res.get("why_none"), "specagent": res.get("specagent"),
            "prices": res["prices"], "api": res.get("api"), "resumed": res.get("resumed"), "engine": res["engine"],
            "assumptions": ASSUMPTIONS}


ASSUMPTIONS = [
    "screen: expected per-task costs from the exact twin (uncontended calls, verdicts at p_u); each pool a "
    "batching server whose decode slows by f(B) (roofline decode time at batch B over batch 1, at the tasks' "
    "median context) and by the share of time other calls' prefills take; task p95 scaled from its "
    "uncontended p95 (docs/plan.md states its error against the simulator)",
    "confirmed: the screened fleet simulated at the task rate (Poisson arrivals, round-robin over replicas), "
    "p95 over tasks 20%..90% by arrival; a fleet that misses grows each pool by a tenth until it meets",
    "cost: every replica paid by the hour at the on-demand list prices below, busy or idle",
]


def _where(c, strong: int, weak: int) -> str:
    """The fleet in words: replicas of each pool, and the API behind the strong model."""
    out = []
    if c.strong is not None:
        out.append(f"{strong}x strong ({c.strong.n_devices}x {c.strong.device.name}"
                   + (", EP" if c.strong.expert_parallel else "") + ")")
    if c.api:
        out.append(f"strong via the {c.api} API")
    if c.weak is not None and weak:
        out.append(f"{weak}x weak ({c.weak.n_devices}x {c.weak.device.name})")
    return " + ".join(out)


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
                         f"{_where(s.config, s.strong_replicas, s.weak_replicas)}")
        lines.append("")
    if res["confirmed"]:
        lines.append("Confirmed by simulation (the screen's cheapest):")
        for s, r in res["confirmed"]:
            proto = s.config.protocol + (f" K={s.config.K}" if s.config.K else "")
            grown = (f", grown {r['grown']}x" if r["grown"] else "") + (
                "" if r["steady"] else f"; {r['tasks_simulated']:,} tasks arrive in less than three targets")
            lines.append(f"  {proto:<22} {_where(s.config, r['strong_replicas'], r['weak_replicas'])}, {r['gpus']} GPUs, "
                         f"USD {r['cost_per_1k_tasks']:.3f} per 1k tasks, p95 {r['latency_p95_s']:.1f} s simulated "
                         f"(screen {s.p95_s:.1f} s{grown}) — {'meets' if r['meets_target'] else 'misses'} the target"
                         + ("" if r["steady"] else " on a run too short to be steady: its p95 may be low"))
        lines.append("")
    rec = res["recommended"]
    if rec is None:
        lines.append(f"No recommendation: {res['why_none']}.")
    else:
        s, r = rec
        proto = s.config.protocol + (f" K={s.config.K}" if s.config.K else "")
        lines += [f"Recommended: {proto}, {_where(s.config, r['strong_replicas'], r['weak_replicas'])}: {r['gpus']} GPUs, "
                  f"USD {r['cost_per_1k_tasks']:.3f} per 1,000 "
                  f"tasks, p95 {r['latency_p95_s']:.1f} s (simulated, {r['tasks_simulated']} tasks"
                  + ("" if r["steady"] else ", fewer than arrive in three targets at this rate: a p95 that may be low") + ")",
                  f"  why: {res['why']}"]
    if res.get("specagent"):
        lines.append(f"  {res['specagent']}")
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
    lines += ["", "assumptions:", f"  - engine: {res['engine']}", *(f"  - {a}" for a in ASSUMPTIONS)]
    return "\n".join(lines)

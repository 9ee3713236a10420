"""`costsim capacity`: replicas, sessions, latency and cost for a task rate, by simulation."""

from __future__ import annotations

from typing import List, Optional

import typer

from costsim.api import CAPACITY_OPTIONS
from costsim.config import COMMANDS

from ._common import SCENARIO_OPTIONS, Progress, dumps, target_missed, warn, with_options, user_errors


@with_options({k: SCENARIO_OPTIONS[k] for k in (*CAPACITY_OPTIONS, "json_out")})
def capacity(
    task_rate: str = typer.Option(..., "--task-rate", help="Tasks arriving per unit time: 2/s, 120/min, 7200/h."),
    latency_p95: str = typer.Option(f"{COMMANDS.latency_p95_s:g}s", "--latency-p95", help="Target p95 task latency: 60s, 2min."),
    protocols: str = typer.Option(",".join(COMMANDS.capacity_protocols), "--protocols", help="Comma-separated protocols to plan."),
    strong_price: Optional[float] = typer.Option(None, "--strong-price", help="USD per GPU-hour of the strong device [its profile's]."),
    weak_price: Optional[float] = typer.Option(None, "--weak-price", help="USD per GPU-hour of the weak device [its profile's]."),
    traces: Optional[List[str]] = typer.Option(None, "--trace", help="Plan for recorded tasks (JSONL or shipped name) instead of synthetic ones; repeatable."),
    tasks: int = typer.Option(COMMANDS.capacity_tasks, "--tasks", min=20, max=100_000, help="Synthetic tasks per probe (tau² Airline shape); more tasks allow higher rates per cell."),
    tolerance: float = typer.Option(COMMANDS.capacity_tolerance, "--tolerance", help="Relative precision of the rate search."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Processes for a cell's independent searches [the CPUs]; the answer is the same with 1."),
    **o,
):
    """Replicas, sessions, batch vs balance point, latency and cost per 1,000 tasks, per protocol.

    Searches, by bisection over load with the simulator, the highest task rate one cell of
    replicas (one strong, w weak) sustains under the latency target, then scales out.
    """
    from costsim import api

    json_out = o.pop("json_out")
    with user_errors(ValueError), Progress("sizing protocols", quiet=quiet) as bar:
        res = api.capacity(task_rate, latency_p95=latency_p95, protocols=protocols, strong_price=strong_price,
                           weak_price=weak_price, trace=traces, tasks=tasks, tolerance=tolerance, on_warning=warn,
                           progress=bar.advance, workers=workers, **o)
    typer.echo(dumps(res.to_dict()) if json_out else render(res.data))
    if not any(r["meets_target"] for r in res["protocols"].values()):
        target_missed(f"no protocol keeps the task-latency p95 within {res['latency_p95_target_s']:g} s at "
                      f"{res['task_rate_per_s']:g} tasks/s")


def _f(x, fmt="{:.3g}", none="-"):
    if x is None:
        return none
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float) and x == float("inf"):
        return "inf"
    return fmt.format(x)


def render(res: dict) -> str:
    P = res["protocols"]
    names = list(P)
    w = max(16, *(len(n) + 2 for n in names))
    rows = [
        ("strong replicas", "strong_replicas", "{}"), ("weak replicas", "weak_replicas", "{}"),
        ("GPUs (strong + weak)", None, None),
        ("sessions / strong replica", "sessions_per_strong_replica", "{:.1f}"),
        ("sessions / weak replica", "sessions_per_weak_replica", "{:.1f}"),
        ("strong running batch", "strong_batch", "{:.1f}"),
        ("past balance point", "past_balance_point", None),
        ("bound by", "bound_by", None),
        ("latency p50 (s)", "latency_p50_s", "{:.1f}"), ("latency p95 (s)", "latency_p95_s", "{:.1f}"),
        ("meets target", "meets_target", None),
        ("GPU-hours / 1k tasks", "gpu_hours_per_1k_tasks", "{:.2f}"),
        ("USD / 1k tasks", "cost_per_1k_tasks_usd", "{:.2f}"),
        ("  of which API", "api_cost_per_1k_tasks_usd", "{:.2f}"),
        ("cell: strong + weak", None, None), ("cell: max tasks/s", None, None),
        ("uncontended p95 (s)", "uncontended_latency_p95_s", "{:.1f}"),
    ]
    lines = [f"Capacity for {res['task_rate_per_s']:.4g} tasks/s with task latency p95 <= {res['latency_p95_target_s']:g} s",
             "", f"{'':<26}" + "".join(f"{n:>{w}}" for n in names)]
    if not any(P[n].get("api_cost_per_1k_tasks_usd") for n in names):
        rows = [r for r in rows if r[1] != "api_cost_per_1k_tasks_usd"]
    for label, key, fmt in rows:
        cells = []
        for n in names:
            r = P[n]
            if label.startswith("GPUs"):
                v = (f"{r['fleet_gpus']} ({r['strong_fleet_gpus']} + {r['weak_fleet_gpus']})"
                     if r.get("fleet_gpus") is not None else "-")
            elif label == "cell: strong + weak":
                v = f"{r['cell']['strong_replicas']} + {r['cell']['weak_replicas']}"
            elif label == "cell: max tasks/s":
                c = r["cell"]
                v = _f(c["max_task_rate_per_s"]) + (" (>=)" if c.get("rate_is_lower_bound") else "")
            else:
                v = _f(r.get(key), fmt or "{}")
            cells.append(f"{v:>{w}}")
        lines.append(f"{label:<26}" + "".join(cells))
    lines.append("")
    local = [n for n in names if P[n]["backend"] == "replicas"]
    lines.append(f"balance point B* of the strong replica{' (' + ', '.join(local) + ')' if local != names else ''}: "
                 f"{_f(res['balance_batch'], '{:.0f}')} sequences "
                 f"at the tasks' typical context ({res['balance_context_tokens']:.0f} tokens); its KV pool "
                 f"({res['kv_pool_bytes'] / 1e9:.0f} GB) holds {_f(res['kv_limit_sequences'], '{:.0f}')} sequences there"
                 + (", fewer than B*: the batch can never pass the balance point"
                    if res["kv_limit_sequences"] < res["balance_batch"] < float("inf") else ""))
    for n in names:
        r = P[n]
        if r.get("reason"):
            lines.append(f"{n}: {r['reason']}")
        if r.get("cost_note"):
            lines.append(f"{n}: {r['cost_note']}")
        if r.get("specagent_pays"):
            lines.append(f"{n}: {r['specagent_pays']['text']}")
        if r["cell"].get("rate_is_lower_bound"):
            lines.append(f"{n}: the cell met the target at the highest rate the probes can judge; "
                         "a larger --tasks may show it sustains more (fewer replicas)"
                         + ("; the replica counts above are an upper bound" if r.get("replicas_are_upper_bound") else ""))
    srcs = {v for n in names for v in (P[n].get("price_sources") or {}).values() if not v.startswith("no ")}
    for s in sorted(srcs):
        lines.append(f"price: {s}")
    lines += ["", "assumptions:"] + [f"  - {a}" for a in res["assumptions"]]
    return "\n".join(lines)

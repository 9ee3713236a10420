"""`costsim capacity`: replicas, sessions, latency and cost for a task rate, by simulation."""

from __future__ import annotations

import math
from typing import List, Optional

import typer


from ._common import (SCENARIO_OPTIONS, SETTING as _SETTING, UserError, dumps, load_tasks, parse_rate, parse_seconds,
                      split_names, with_options, user_errors)

#: The scenario options capacity shares with simulate and replay (the rest are its own).
_SHARED = ("p_accept", "K", "strong", "weak", "strong_device", "weak_device", "strong_gpus", "engine", "weak_engine",
           "expert_parallel", "p_dist", "rho", "strong_step_scale", "weak_step_scale", "verdict_tokens", "tool_latency",
           "api", "edge_device", "api_ttft", "api_tps", "seed", "json_out", "calibration")


@with_options({k: SCENARIO_OPTIONS[k] for k in _SHARED})
def capacity(
    task_rate: str = typer.Option(..., "--task-rate", help="Tasks arriving per unit time: 2/s, 120/min, 7200/h."),
    latency_p95: str = typer.Option("60s", "--latency-p95", help="Target p95 task latency: 60s, 2min."),
    protocols: str = typer.Option("strong-only,specagent", "--protocols", help="Comma-separated protocols to plan."),
    strong_price: Optional[float] = typer.Option(None, "--strong-price", help="USD per GPU-hour of the strong device [its profile's]."),
    weak_price: Optional[float] = typer.Option(None, "--weak-price", help="USD per GPU-hour of the weak device [its profile's]."),
    traces: Optional[List[str]] = typer.Option(None, "--trace", help="Plan for recorded tasks (JSONL or shipped name) instead of synthetic ones; repeatable."),
    tasks: int = typer.Option(400, "--tasks", min=1, max=100_000, help="Synthetic tasks per probe (tau² Airline shape); more tasks allow higher rates per cell."),
    tolerance: float = typer.Option(0.05, "--tolerance", help="Relative precision of the rate search."),
    **o,
):
    """Replicas, sessions, batch vs balance point, latency and cost per 1,000 tasks, per protocol.

    Searches, by bisection over load with the simulator, the highest task rate one cell of
    replicas (one strong, w weak) sustains under the latency target, then scales out.
    """
    rate = parse_rate(task_rate)
    target = parse_seconds(latency_p95)
    if tasks < 20:
        raise UserError(f"--tasks must be >= 20, got {tasks}")
    if not 0 < tolerance < 1:
        raise UserError(f"--tolerance must be in (0, 1), got {tolerance}")
    for name, v in (("--strong-price", strong_price), ("--weak-price", weak_price)):
        if v is not None and not 0 <= v < math.inf:
            raise UserError(f"{name} must be a finite number >= 0 USD per GPU-hour, got {v}")
    names = split_names(protocols, "--protocols")

    from costsim import capacity as cap

    from costsim.config import build_scenario

    with user_errors(ValueError):
        work = load_tasks(traces, tasks, o["seed"])
        settings = {_SETTING.get(k, k): v for k, v in o.items() if k != "json_out"}
        sc = build_scenario({**settings, "protocols": names}, work if traces else None)
        res = cap.plan(work, sc, rate, names, cap.Search(latency_p95_s=target, rel_tol=tolerance),
                       strong_price=strong_price, weak_price=weak_price)
    res.pop("cells")
    typer.echo(dumps(res) if o["json_out"] else render(res))


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
        ("USD / 1k tasks", "cost_per_1k_tasks", "{:.2f}"),
        ("  of which API", "api_cost_per_1k_tasks", "{:.2f}"),
        ("cell: strong + weak", None, None), ("cell: max tasks/s", None, None),
        ("uncontended p95 (s)", "uncontended_latency_p95_s", "{:.1f}"),
    ]
    lines = [f"Capacity for {res['task_rate_per_s']:.4g} tasks/s with task latency p95 <= {res['latency_p95_target_s']:g} s",
             "", f"{'':<26}" + "".join(f"{n:>{w}}" for n in names)]
    if not any(P[n].get("api_cost_per_1k_tasks") for n in names):
        rows = [r for r in rows if r[1] != "api_cost_per_1k_tasks"]
    for label, key, fmt in rows:
        cells = []
        for n in names:
            r = P[n]
            if label.startswith("GPUs"):
                g = r.get("gpus")
                v = f"{g['total']} ({g['strong']} + {g['weak']})" if g else "-"
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
    from costsim.config import ON_API

    local = [n for n in names if n not in ON_API]
    lines.append(f"balance point B* of the strong replica{' (' + ', '.join(local) + ')' if local != names else ''}: "
                 f"{_f(res['balance_batch'], '{:.0f}')} sequences "
                 f"at the tasks' median context ({res['balance_context_tokens']:.0f} tokens); its KV pool "
                 f"({res['kv_pool_bytes'] / 1e9:.0f} GB) holds {_f(res['kv_limit_sequences'], '{:.0f}')} sequences there"
                 + (", fewer than B*: the batch can never pass the balance point"
                    if res["kv_limit_sequences"] < res["balance_batch"] < float("inf") else ""))
    for n in names:
        r = P[n]
        if r.get("reason"):
            lines.append(f"{n}: {r['reason']}")
        if r.get("cost_note"):
            lines.append(f"{n}: {r['cost_note']}")
        if r["cell"].get("rate_is_lower_bound"):
            lines.append(f"{n}: the cell met the target at the highest rate the probes can judge; "
                         "a larger --tasks may show it sustains more (fewer replicas)"
                         + ("; the replica counts above are an upper bound" if r.get("replicas_are_upper_bound") else ""))
    srcs = {v for n in names for v in (P[n].get("price_sources") or {}).values() if not v.startswith("no ")}
    for s in sorted(srcs):
        lines.append(f"price: {s}")
    lines += ["", "assumptions:"] + [f"  - {a}" for a in res["assumptions"]]
    return "\n".join(lines)

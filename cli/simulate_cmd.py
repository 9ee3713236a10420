"""`costsim simulate` (synthetic trajectories) and `costsim replay` (recorded ones)."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ._common import (SCENARIO_OPTIONS as OPTIONS, SETTING, Progress, UserError, atomic_write, check_output, dumps,
                      read_traces, with_options, user_errors)

@with_options(OPTIONS)
def simulate(tasks: int = typer.Option(200, "--tasks", min=1, max=1_000_000, help="Synthetic tasks (tau² Airline shape), 1 to 10^6."),
             **o):
    """Run every protocol on the same synthetic trajectories; metrics with 95% intervals."""
    from costsim.traces.synthetic import generate

    if o["out"] is not None:
        _check_table(o["out"], ())  # before the run, not after it
    _run(generate(tasks, seed=o["seed"]), o, inputs=(), traced=False)


@with_options(OPTIONS)
def replay(traces: List[str] = typer.Argument(..., help="Trajectory JSONL files or shipped trace names."),
           verdicts: Optional[str] = typer.Option(None, "--verdicts", help="'recorded': use the traces' verdicts (p_u where missing)."),
           **o):
    """Run recorded trajectories through every protocol; the same table as `simulate`."""
    if verdicts not in (None, "recorded"):
        raise UserError(f"--verdicts must be 'recorded', got {verdicts!r}")
    if verdicts and o["p_dist"]:
        raise UserError("--verdicts recorded and --p-dist are exclusive")
    if verdicts:
        o["p_dist"] = f"recorded:{o['p_accept']}"
    tasks = read_traces(traces)
    if verdicts and not any(s.verdict is not None for t in tasks for s in t.steps):
        print(f"costsim: warning: no step of {', '.join(traces)} records a verdict: --verdicts recorded draws "
              f"every review at p_u = {o['p_accept']:g}", file=sys.stderr)
    empty = [t.task_id for t in tasks if not t.steps]
    if empty:  # no committed step to divide by: left out, and said so
        print(f"costsim: warning: {len(empty)} task(s) without steps left out: {', '.join(empty[:5])}"
              + (" ..." if len(empty) > 5 else ""), file=sys.stderr)
        tasks = [t for t in tasks if t.steps]
    if not tasks:
        raise UserError("no tasks with steps in " + ", ".join(traces))
    if o["out"] is not None:
        _check_table(o["out"], tuple(traces))
    _run(tasks, o, inputs=tuple(traces))


_NOT_SETTINGS = ("out", "json_out", "quiet")


def _run(tasks, o: dict, inputs: tuple, traced: bool = True):
    from costsim.config import build_scenario
    from costsim.sim.report import report

    settings = {SETTING.get(k, k): v for k, v in o.items() if k not in _NOT_SETTINGS}
    with user_errors(ValueError):
        sc = build_scenario(settings, tasks if traced else None)
        total = len(tasks) * len(sc.protocols)
        with Progress("simulating", total, quiet=o["quiet"] or total < 200) as bar:
            rows, result = report(tasks, sc, bar.advance)
    if o["out"]:
        _write_table(rows, o["out"], inputs)
    typer.echo(dumps(result) if o["json_out"] else render(result))


def _check_table(path, inputs):
    check_output(path, inputs)
    if not path.endswith((".parquet", ".csv")):
        raise UserError(f"--out {path}: expected a .parquet or .csv file name")


def _write_table(rows, path, inputs):
    import io

    import pandas as pd

    df = pd.DataFrame(rows)
    if path.endswith(".parquet"):
        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        data = buf.getvalue()
    else:  # .csv (_check_table has refused any other name)
        data = df.to_csv(index=False)
    atomic_write(path, data, inputs=inputs)


def _pm(m, scale=1.0, nd=3):
    lo, hi = m["ci95"]
    mean = m["mean"] * scale
    if lo is None or hi is None or hi != hi:
        return f"{mean:.{nd}g}"
    return f"{mean:.{nd}g} ± {(hi - lo) / 2 * scale:.2g}"


def _scales(ss: dict) -> list[str]:
    """The step-scale line, where a model decodes other than the recorded tokens."""
    if ss["strong"] == 1.0 and ss["weak"] == 1.0:
        return []
    return [f"step tokens decoded per recorded token: strong x{ss['strong']:.3g}, weak x{ss['weak']:.3g}, "
            f"repair rho {ss['rho']:.3g} ({ss['source']})"]


def render(result: dict) -> str:
    sc, cf = result["scenario"], result["closed_form"]
    cols = [("strong calls/task", "strong_calls_per_task", 1), ("strong decode tok/task", "strong_decode_tokens", 1),
            ("strong prefill tok/task", "strong_prefill_tokens", 1), ("HBM strong GB/task", "strong_hbm_bytes", 1e-9),
            ("HBM weak GB/task", "weak_hbm_bytes", 1e-9), ("HBM total GB/task", "hbm_bytes", 1e-9),
            ("TFLOP strong/task", "strong_flops", 1e-12), ("TFLOP weak/task", "weak_flops", 1e-12),
            ("wall s/task", "wall_s", 1), ("R (strong HBM)", "R", 1), ("R in strong time", "R_time", 1),
            ("L (wall time)", "L", 1), ("total HBM ratio", "hbm_ratio", 1), ("FLOPs ratio", "flops_ratio", 1),
            ("strong calls ratio", "strong_calls_ratio", 1), ("strong decoded share", "strong_decode_tokens_ratio", 1),
            ("steps per review", "steps_per_review", 1), ("strong batch (mean)", "strong_mean_batch", 1)]
    lines = [f"{sc['tasks']} tasks, p_u = {sc['p']:g}" + (f" ({sc['p_dist']})" if sc["p_dist"] else "")
             + f", K = {sc['K']}, seed {sc['seed']}, "
             + (f"open loop {sc['arrival_rate']:g} tasks/s" if sc["arrival_rate"] else f"{sc['sessions']} session(s)"),
             f"strong: {sc['strong']}", f"weak:   {sc['weak']}",
             *_scales(sc["step_scales"]),
             "mean per task ± 95% half-width; ratios are per committed step, paired with strong-only", ""]
    names = list(result["protocols"])
    w = max(22, *(len(n) + 2 for n in names))
    lines.append(f"{'':<24}" + "".join(f"{n:>{w}}" for n in names))
    for label, key, scale in cols:
        cells = (result["protocols"][n].get(key) for n in names)
        lines.append(f"{label:<24}" + "".join(f"{_pm(m, scale) if m else '-':>{w}}" for m in cells))
    exact = cf["exact"] if cf["method"] == "exact" else {}
    for label, key in (("R exact twin", "R"), ("L exact twin", "L")):
        if any(n in exact for n in names):
            lines.append(f"{label:<24}" + "".join(f"{exact[n][key]:>{w}.4g}" if n in exact else f"{'-':>{w}}"
                                                  for n in names))
    extra = [("API $/task", "api_cost_usd", 1), ("remote out tok/task", "remote_output_tokens", 1),
             ("API cost ratio", "api_cost_ratio", 1), ("remote out tok ratio", "remote_output_tokens_ratio", 1),
             ("wall ratio vs API", "wall_ratio_api", 1), ("escalations/task", "escalations_per_task", 1),
             ("wasted steps/task", "wasted_steps_per_task", 1), ("spec hits/task", "spec_hits_per_task", 1),
             ("wasted spec strong", "spec_wasted_strong_calls", 1), ("tool s saved/task", "tool_s_saved", 1),
             ("false accepts/task", "false_accepts_per_task", 1), ("false rejects/task", "false_rejects_per_task", 1),
             ("wrong writes/1000", "wrong_writes_per_1000_tasks", 1)]
    for label, key, scale in extra:  # only where some protocol has them
        cells = [result["protocols"][n].get(key) for n in names]
        if any(m and m["mean"] for m in cells):
            lines.append(f"{label:<24}" + "".join(f"{_pm(m, scale) if m else '-':>{w}}" for m in cells))
    if result.get("notes"):
        lines += ["", *("note: " + n for n in result["notes"])]
    rn = cf["renewal"]
    if cf["method"] == "exact":
        lines += ["", f"closed form (exact twin, {cf['protocol']}): R = {cf['R']:.4f}, L = {cf['L']:.4f}",
                  f"  assumptions: {cf['assumption']}"]
    else:
        lines += ["", f"no exact twin: {cf['exact']['unavailable']}"]
    lines += [f"paper's renewal form: R = {rn['R']:.3f}, L = {rn['L']:.3f} (roofline bytes/time); pass counting "
              f"R = {rn['R_passes']:.3f}, L = {rn['L_passes']:.3f} (v/d {rn['v_over_d_passes']:.3f}, rho {rn['rho']:g}, "
              f"kappa {rn['kappa']:.3f})", f"  assumptions: {rn['assumption']}"]
    return "\n".join(lines)

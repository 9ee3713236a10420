"""`costsim simulate` (synthetic trajectories) and `costsim replay` (recorded ones)."""

from __future__ import annotations

from typing import List, Optional

import typer

from costsim.config import COMMANDS, serving_words

from ._common import (SCENARIO_OPTIONS as OPTIONS, Progress, UserError, check_output, dumps, inputs_of, warn,
                      with_options, user_errors)

WORKERS_HELP = ("Processes for the independent runs (the protocols; an open-loop fleet's gcd(strong, weak) cells) "
                "[the CPUs, for runs large enough]; the rows are the same with 1.")


@with_options(OPTIONS)
def simulate(tasks: int = typer.Option(COMMANDS.simulate_tasks, "--tasks", min=1, max=1_000_000, help="Synthetic tasks (tau² Airline shape), 1 to 10^6."),
             workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP), **o):
    """Run every protocol on the same synthetic trajectories; metrics with 95% intervals."""
    from costsim import api

    inputs = inputs_of(o)
    if o["out"] is not None:
        _check_table(o["out"], inputs)  # before the run, not after it
    _run(lambda options, progress: api.simulate(tasks, progress=progress, workers=workers, **options), o, inputs=inputs)


@with_options(OPTIONS)
def replay(traces: List[str] = typer.Argument(..., help="Trajectory JSONL files or shipped trace names."),
           verdicts: Optional[str] = typer.Option(None, "--verdicts", help="'recorded': use the traces' verdicts (p_u where missing)."),
           workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP), **o):
    """Run recorded trajectories through every protocol; the same table as `simulate`."""
    from costsim import api

    inputs = inputs_of(o, *traces)
    if o["out"] is not None:
        _check_table(o["out"], inputs)
    _run(lambda options, progress: api.replay(traces, verdicts=verdicts, progress=progress, on_warning=warn, workers=workers,
                                              **options), o, inputs=inputs)


_NOT_OPTIONS = ("out", "json_out", "quiet")


def _run(run, o: dict, inputs: tuple):
    """``run(options, progress)`` under a progress bar; the table written, the result rendered."""
    options = {k: v for k, v in o.items() if k not in _NOT_OPTIONS}
    with user_errors(ValueError), Progress("simulating", quiet=o["quiet"], min_total=200) as bar:
        res = run(options, bar.advance)
    if o["out"]:
        res.write_table(check_output(o["out"], inputs))
    typer.echo(dumps(res.to_dict()) if o["json_out"] else render(res.data))


def _check_table(path, inputs):
    check_output(path, inputs)
    if not path.endswith((".parquet", ".csv")):
        raise UserError(f"--out {path}: expected a .parquet or .csv file name")


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
            ("steps per review", "steps_per_review", 1), ("reviewed chunk (steps)", "reviewed_chunk_steps", 1),
            ("strong share of HBM", "strong_hbm_share", 1), ("strong batch (mean)", "strong_mean_batch", 1)]
    if sc.get("prefix_cache", "hot") != "hot":  # the cache modelled: what it held, what it cost again
        cols += [("strong prefix hits (tok)", "strong_prefix_cache_hit_rate", 1),
                 ("weak prefix hits (tok)", "weak_prefix_cache_hit_rate", 1),
                 ("strong re-prefill tok/task", "strong_prefill_recomputed_tokens", 1),
                 ("weak re-prefill tok/task", "weak_prefill_recomputed_tokens", 1)]
    lines = [f"{sc['tasks']} tasks, p_u = {sc['p']:g}" + (f" ({sc['p_dist']})" if sc["p_dist"] else "")
             + f", K = {sc['K']}, seed {sc['seed']}, "
             + (f"open loop {sc['arrival_rate']:g} tasks/s" if sc["arrival_rate"] else f"{sc['sessions']} session(s)"),
             f"strong: {sc['strong']}", f"weak:   {sc['weak']}",
             serving_words(sc.get("prefix_cache", "hot"), sc.get("routing", "session")),
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
    lines += [f"renewal form (costsim's, over these chunk lengths): R = {rn['R']:.3f}, L = {rn['L']:.3f} (roofline bytes/time); pass counting "
              f"R = {rn['R_passes']:.3f}, L = {rn['L_passes']:.3f} (v/d {rn['v_over_d_passes']:.3f}, rho {rn['rho']:g}, "
              f"kappa {rn['kappa']:.3f})", f"  assumptions: {rn['assumption']}"]
    return "\n".join(lines)

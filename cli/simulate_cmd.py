"""`costsim simulate` (synthetic trajectories) and `costsim replay` (recorded ones)."""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from costsim.config import WORKLOAD

from ._common import ENGINE, EXPERT_PARALLEL, WEAK_ENGINE, Progress, UserError, atomic_write, check_output, dumps

# Options shared by both commands (Typer reads them from each signature).
P = typer.Option(0.8, "--p-accept", "-p", help="Per-step acceptance rate p_u, in [0, 1].")
K_ = typer.Option(WORKLOAD.K, "--K", "-K", help="Chunk size: most steps the weak model drafts per chunk.")
PDIST = typer.Option(None, "--p-dist", help="beta:a,b | markov:p_good,p_bad,switch_gb,switch_bg | recorded[:p].")
PROTOS = typer.Option(None, "--protocols", help=(
    "Comma-separated protocols [strong-only,weak-only,specagent]; also specagent-hold-responses, "
    "specagent-review-all, specagent-separate-repair, agentcollab, speculative-actions, self-spec, "
    "specagent-self-spec, edge-cloud (adds its baseline cloud-strong-only). See docs/protocols.md."))
SESSIONS = typer.Option(1, "--sessions", help="Concurrent agent sessions (closed loop).")
RATE = typer.Option(None, "--arrival-rate", help="Open loop: tasks per second, Poisson arrivals.")
SEED = typer.Option(0, "--seed", min=0, help="Seed of every random stream.")
STRONG = typer.Option(None, "--strong", help="Strong model [qwen3.5-397b-a17b].")
WEAK = typer.Option(None, "--weak", help="Weak model [qwen3.5-4b].")
SDEV = typer.Option(None, "--strong-device", help="Strong device [h20].")
WDEV = typer.Option(None, "--weak-device", help="Weak device [h20].")
SGPUS = typer.Option(None, "--strong-gpus", help="Devices of a strong replica [as many as hold it].")
SREP = typer.Option(1, "--strong-replicas", help="Strong replicas.")
WREP = typer.Option(1, "--weak-replicas", help="Weak replicas.")
RHO = typer.Option(None, "--rho", help="Repair tokens per rejection, per recorded token of the step [1, times --strong-step-scale].")
SSCALE = typer.Option(None, "--strong-step-scale", help="Tokens the strong model decodes per recorded token of a step it authors (thinking: > 1) [the trace's per-model tokens where its steps name both models, else 1].")
WSCALE = typer.Option(None, "--weak-step-scale", help="Tokens the weak model decodes per recorded token of a step it drafts [as --strong-step-scale].")
VERDICT = typer.Option(int(WORKLOAD.verdict_tokens), "--verdict-tokens", help="Tokens of a verdict.")
TOOL = typer.Option("0", "--tool-latency", help="Seconds per tool call, lognormal:median,sigma, or recorded[:fallback] (the trace's own tool times).")
RTT = typer.Option(0.0, "--network-rtt", help="Round trip to the strong model per call, seconds (edge-cloud).")
OUT = typer.Option(None, "--out", help="Write the per-task table (.parquet or .csv).")
JSON = typer.Option(False, "--json", help="Print one JSON object.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar.")
CALIB = typer.Option(None, "--calibration", help="Calibration TOML from `costsim calibrate`: measured endpoint times replace the roofline's.")
# The protocols beyond the paper's (docs/protocols.md).
FA = typer.Option(0.0, "--false-accept", help="SpecAgent verifier: P(accept a bad step) [0].")
FR = typer.Option(0.0, "--false-reject", help="SpecAgent verifier: P(reject a good step) [0].")
ESC = typer.Option(None, "--escalate-p", help="AgentCollab: P(no progress) per weak step [fitted to the paper, docs/protocols.md; --option stall=acceptance: 1 - p_u].")
SPAN = typer.Option(2, "--escalation-span", help="AgentCollab: strong steps of the first escalation, doubling after [2].")
SPEC = typer.Option(0.5, "--spec-hit", help="Speculative Actions: P(weak guess = strong step) [0.5].")
SELF = typer.Option(0.66, "--self-spec-hit", help="Tool-call self-speculation Hit@1 on read-only calls [0.66].")
API = typer.Option(None, "--api", help="Edge-cloud: API profile of the strong model [qwen3.5-397b-a17b].")
TTFT = typer.Option(None, "--api-ttft", help="Edge-cloud: API time to first token, s [profile's, else 1.0 (assumption)].")
TPS = typer.Option(None, "--api-tps", help="Edge-cloud: API output tokens/s [profile's, else 50 (assumption)].")
EDGE = typer.Option(None, "--edge-device", help="Edge-cloud: local device of the weak model [rtx-5090].")
OPTION = typer.Option(None, "--option", help="Further protocol option NAME=VALUE, repeatable (docs/protocols.md).")


def simulate(
    p_accept: float = P, K: int = K_, tasks: int = typer.Option(200, "--tasks", min=1, max=1_000_000, help="Synthetic tasks (tau² Airline shape), 1 to 10^6."),
    p_dist: Optional[str] = PDIST, protocols: Optional[str] = PROTOS, sessions: int = SESSIONS,
    arrival_rate: Optional[float] = RATE, seed: int = SEED, strong: Optional[str] = STRONG,
    weak: Optional[str] = WEAK, strong_device: Optional[str] = SDEV, weak_device: Optional[str] = WDEV,
    strong_gpus: Optional[int] = SGPUS, engine: Optional[str] = ENGINE, weak_engine: Optional[str] = WEAK_ENGINE,
    expert_parallel: bool = EXPERT_PARALLEL, strong_replicas: int = SREP, weak_replicas: int = WREP,
    rho: Optional[float] = RHO, strong_step_scale: Optional[float] = SSCALE, weak_step_scale: Optional[float] = WSCALE,
    verdict_tokens: int = VERDICT, tool_latency: str = TOOL, network_rtt: float = RTT,
    out: Optional[str] = OUT, json_out: bool = JSON, quiet: bool = QUIET, calibration: Optional[str] = CALIB,
    false_accept: float = FA, false_reject: float = FR, escalate_p: Optional[float] = ESC,
    escalation_span: int = SPAN, spec_hit: float = SPEC, self_spec_hit: float = SELF, api: Optional[str] = API,
    api_ttft: Optional[float] = TTFT, api_tps: Optional[float] = TPS, edge_device: Optional[str] = EDGE,
    option: Optional[List[str]] = OPTION,
):
    """Run every protocol on the same synthetic trajectories; metrics with 95% intervals."""
    from costsim.traces.synthetic import generate

    if out is not None:
        _check_table(out, ())  # before the run, not after it
    _run(generate(tasks, seed=seed), locals(), inputs=(), traced=False)


def replay(
    traces: List[str] = typer.Argument(..., help="Trajectory JSONL files or shipped trace names."),
    p_accept: float = P, K: int = K_,
    verdicts: Optional[str] = typer.Option(None, "--verdicts", help="'recorded': use the traces' verdicts (p_u where missing)."),
    p_dist: Optional[str] = PDIST, protocols: Optional[str] = PROTOS, sessions: int = SESSIONS,
    arrival_rate: Optional[float] = RATE, seed: int = SEED, strong: Optional[str] = STRONG,
    weak: Optional[str] = WEAK, strong_device: Optional[str] = SDEV, weak_device: Optional[str] = WDEV,
    strong_gpus: Optional[int] = SGPUS, engine: Optional[str] = ENGINE, weak_engine: Optional[str] = WEAK_ENGINE,
    expert_parallel: bool = EXPERT_PARALLEL, strong_replicas: int = SREP, weak_replicas: int = WREP,
    rho: Optional[float] = RHO, strong_step_scale: Optional[float] = SSCALE, weak_step_scale: Optional[float] = WSCALE,
    verdict_tokens: int = VERDICT, tool_latency: str = TOOL, network_rtt: float = RTT,
    out: Optional[str] = OUT, json_out: bool = JSON, quiet: bool = QUIET, calibration: Optional[str] = CALIB,
    false_accept: float = FA, false_reject: float = FR, escalate_p: Optional[float] = ESC,
    escalation_span: int = SPAN, spec_hit: float = SPEC, self_spec_hit: float = SELF, api: Optional[str] = API,
    api_ttft: Optional[float] = TTFT, api_tps: Optional[float] = TPS, edge_device: Optional[str] = EDGE,
    option: Optional[List[str]] = OPTION,
):
    """Run recorded trajectories through every protocol; the same table as `simulate`."""
    from costsim.traces import load
    from costsim.traces.jsonl import TraceError

    if verdicts not in (None, "recorded"):
        raise UserError(f"--verdicts must be 'recorded', got {verdicts!r}")
    if verdicts and p_dist:
        raise UserError("--verdicts recorded and --p-dist are exclusive")
    opts = dict(locals())
    if verdicts:
        opts["p_dist"] = f"recorded:{p_accept}"
    tasks = []
    try:
        for t in traces:
            tasks.extend(load(t).tasks)
    except (TraceError, OSError, ValueError) as e:
        raise UserError(str(e)) from None
    empty = [t.task_id for t in tasks if not t.steps]
    if empty:  # no committed step to divide by: left out, and said so
        print(f"costsim: warning: {len(empty)} task(s) without steps left out: {', '.join(empty[:5])}"
              + (" ..." if len(empty) > 5 else ""), file=sys.stderr)
        tasks = [t for t in tasks if t.steps]
    if not tasks:
        raise UserError("no tasks with steps in " + ", ".join(traces))
    if opts["out"] is not None:
        _check_table(opts["out"], tuple(traces))
    _run(tasks, opts, inputs=tuple(traces))


#: simulate/replay flag -> scenario setting (costsim.config), where the names differ.
_SETTING = {"p_accept": "p", "network_rtt": "network_rtt_s", "spec_hit": "spec_hit_rate",
            "self_spec_hit": "self_spec_hit_rate", "api_ttft": "api_ttft_s", "api_tps": "api_output_tps",
            "option": "options"}
_NOT_SETTINGS = ("traces", "tasks", "verdicts", "out", "json_out", "quiet")


def _settings(o: dict) -> dict:
    """The scenario settings among a command's parameters ``o``."""
    import inspect

    params = set(inspect.signature(simulate).parameters) | set(inspect.signature(replay).parameters)
    return {_SETTING.get(k, k): v for k, v in o.items() if k in params and k not in _NOT_SETTINGS}


def _run(tasks, o: dict, inputs: tuple, traced: bool = True):
    from costsim.config import build_scenario
    from costsim.sim.report import report

    try:
        sc = build_scenario(_settings(o), tasks if traced else None)
        total = len(tasks) * len(sc.protocols)
        with Progress("simulating", total, quiet=o["quiet"] or total < 200) as bar:
            rows, result = report(tasks, sc, bar.advance)
    except ValueError as e:
        raise UserError(str(e)) from None
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
    elif path.endswith(".csv"):
        data = df.to_csv(index=False)
    else:
        raise UserError(f"--out {path}: expected a .parquet or .csv file name")
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

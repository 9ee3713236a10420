"""`costsim predict`: the closed-form cost model for one scenario."""

from __future__ import annotations

from typing import Optional

import typer

from costsim.config import DEPLOYMENTS as D, SOURCES as SRC, WORKLOAD as W

from ._common import SCENARIO_OPTIONS, dumps, protocol_flag, with_options, user_errors

_SHARED = ("K", "strong", "weak", "strong_device", "weak_device", "strong_gpus", "strong_dtype", "weak_dtype", "engine", "weak_engine",
           "expert_parallel", "gpu_memory_utilization", "strong_step_scale", "weak_step_scale", "json_out")


def _origin(src: str, key: str) -> str:
    """Where a ratio not measured comes from, in a few words."""
    if src == "flag":
        return "given"
    if src.startswith("roofline"):
        return "from the roofline"
    return "by pass counting" if key == "v_over_d" else "by default"


@with_options({k: SCENARIO_OPTIONS[k] for k in _SHARED})
def predict(
    p_accept: float = typer.Option(..., "--p-accept", "-p", help="Per-step acceptance rate p_u, in [0, 1]."),
    steps: Optional[float] = typer.Option(None, help=f"Committed steps per task [{W.steps_per_task:g}: {SRC['steps_per_task']}]."),
    v_over_d: Optional[float] = typer.Option(None, "--v-over-d", help="Strong passes per verification / per authored step."),
    rho: Optional[float] = protocol_flag("rho", "--rho", default=None),
    kappa: Optional[float] = typer.Option(None, help="Weak step time / strong step time."),
    write_rate: Optional[float] = typer.Option(None, "--write-rate", help="Per-step probability of a state-changing call; chunks end at writes, K-read chunks auto-commit."),
    batch: Optional[int] = typer.Option(None, help=f"Decode batch on each replica (concurrent sessions) [{D.batch}: {SRC['batch']}]."),
    step_tokens: Optional[float] = typer.Option(None, "--step-tokens", help=f"Mean tokens per agent step d̄ [{W.step_tokens:g}: {SRC['step_tokens']}]."),
    obs_tokens: Optional[float] = typer.Option(None, "--obs-tokens", help=f"Mean observation tokens per step [{W.obs_tokens:g}: {SRC['obs_tokens']}]."),
    context_tokens: Optional[float] = typer.Option(None, "--context-tokens", help=f"Typical context length [{W.context_tokens:g}: {SRC['context_tokens']}]."),
    verdict_tokens: Optional[float] = typer.Option(None, "--verdict-tokens", help=f"Tokens of a verdict [{W.verdict_tokens:g}: {SRC['verdict_tokens']}]."),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="Calibration TOML from `costsim calibrate`."),
    correction_rate: Optional[float] = protocol_flag("correction_rate", "--correction-rate", default=None),
    correction_rho: Optional[float] = protocol_flag("correction_rho", "--correction-rho", default=None),
    p_dist: Optional[str] = typer.Option(None, "--p-dist", help="beta:a,b: p_u varies by task (what `costsim acceptance` fits); adds R_u and L_u averaged over tasks."),
    **o,
):
    """Closed-form SpecAgent cost per committed step, relative to Strong-only."""
    from costsim import api

    json_out = o.pop("json_out")
    with user_errors(ValueError):
        r = api.predict(p_accept, steps=steps, v_over_d=v_over_d, rho=rho, kappa=kappa, write_rate=write_rate,
                        batch=batch, calibration=calibration, step_tokens=step_tokens, obs_tokens=obs_tokens,
                        context_tokens=context_tokens, verdict_tokens=verdict_tokens, correction_rate=correction_rate, correction_rho=correction_rho, p_dist=p_dist, **o)
    typer.echo(dumps(r.to_dict()) if json_out else render(r.data))


def _f(x, nd=3):
    return "inf" if x == float("inf") else f"{x:.{nd}g}"


def render(r: dict) -> str:
    rf, s, w, src = r["roofline"], r["strong_deployment"], r["weak_deployment"], r["sources"]
    form = (f"every chunk reviewed at n = {r['K']} (the paper's form)" if r["write_rate"] is None else
            f"chunks end at a write (rate {r['write_rate']:g}/step) or auto-commit at {r['K']} reads; "
            f"mean reviewed chunk n = {r['mean_chunk_steps']:.2f}")
    B = r["balance_batch"]
    best_K = f"best K for this p_u (min L_u over K = 1..{r['best_K_searched']})"
    measured = [k for k in ("v_over_d", "rho", "kappa") if str(src.get(k, "")).startswith("calibration")]
    names = {"v_over_d": "v/d", "rho": "rho", "kappa": "kappa"}
    in_time = r["ratios_measure"] == "time"  # R_u's own terms measured in time (the result says)

    def unit(k, plain):
        return "(measured time ratio)" if str(src.get(k, "")).startswith("calibration") else plain

    lines = [
        f"SpecAgent vs Strong-only, per committed step — p_u = {r['p'] + 0.0:.12g}, K = {r['K']}",
        f"  {form}",
        "",
        (f"Calibrated (the paper's formulas; measured time ratios: {', '.join(names[k] for k in measured)}"
         + "".join(f"; {names[k]} {_origin(src.get(k, ''), k)}" for k in names if k not in measured) + ")"
         if measured else
         "Pass counting (the paper's model: memory-bound strong replica, time ∝ weight passes)"),
        (f"  R_u  strong replica time / Strong-only                         {r['R']:.3f}" if in_time else
         f"  R_u  strong weight passes (≈ strong HBM reads) / Strong-only   {r['R']:.3f}"),
        f"  L_u  wall time / Strong-only                                   {r['L']:.3f}",
        f"  committed steps per review                                     {r['commits_per_review']:.2f} steps",
        *([f"    of them in the reviewed chunk (the rest in unreviewed ones)  {r['reviewed_commits_per_review']:.2f} steps"]
          if r["write_rate"] is not None else []),
        f"  weak steps drafted per committed step                          {r['weak_steps_per_commit']:.2f} steps",
        f"  {'strong calls per task (' + format(r['steps_per_task'], 'g') + ' committed steps)':<63}"
        f"{r['strong_calls_per_task']:.2f} calls (Strong-only {r['strong_only_calls_per_task']:g})",
        (f"  limits: R(p=0) = v/d + rho = {r['R_limit_p0']:.3f};  R(p→1) = v/(n d) = {r['R_limit_p1']:.3f}"
         if r["write_rate"] is None else
         f"  limits (renewal form): R(p=0) = {r['R_limit_p0']:.3f};  R(p=1) = {r['R_limit_p1']:.3f} "
         f"(only chunks ending at a write are reviewed)"),
        f"  break-even kappa (L_u = 1)                                     {r['break_even_kappa']:.3f}"
        + ("  (never faster: R_u ≥ 1)" if r["break_even_kappa"] <= 0 else ""),
        f"  {best_K:<63}K = {r['best_K']}  (L_u = {r['best_K_L']:.3f})"
        + ("  (the largest K searched: L_u still falls with K)" if r["best_K"] == r["best_K_searched"] else ""),
        f"  {r['verdict']}",
        *([f"  v/d {r['v_over_d']:.3f} is a {r['tokens']['verdict_tokens']:g}-token verdict, an assumption; the paper's "
           f"VitaBench numbers imply {pv['v_over_d']:.3f} (a verdict of about {pv['verdict_tokens']:.0f} tokens by pass "
           f"counting). At that v/d: R_u = {pv['R']:.3f}, L_u = {pv['L']:.3f}, best K = {pv['best_K']} "
           f"(L_u = {pv['best_K_L']:.3f})."] if (pv := r.get("paper_v_over_d")) else []),
        "",
        "Parameters",
        f"  v/d    {r['v_over_d']:.4f} {unit('v_over_d', 'weight passes')}   {src['v_over_d']}",
        f"  rho    {r['rho']:.4f} {unit('rho', 'steps')}           {src['rho']}",
        *([f"  repair per rejection {r['rho_per_rejection']:.4f} steps: fused at rho for {1 - r['correction_rate']:.0%} of "
           f"rejections, a correction turn (1 prefill pass + {r['correction_rho']:g} steps) for {r['correction_rate']:.0%}"]
          if r["correction_rate"] else []),
        f"  kappa  {r['kappa']:.4f} (time ratio)    {src['kappa']}",
        f"  n      {r['mean_chunk_steps']:.4g} steps",
        *(f"  {k.split('_')[0]} step decodes {v:g}x its {r['tokens']['step_tokens']:g} tokens   {src[k]}"
          for k, v in r["step_scales"].items() if v != 1.0),
        "",
        f"Roofline (time, bytes and FLOPs per iteration; batch {r['batch']} per replica, context {r['tokens']['context_tokens']:g} tokens)",
        f"  strong: {s['model']} on {s['n_devices']}x {s['device']}, {s['dtype']} weights, {s['engine']}"
        + (", expert-parallel" if s["expert_parallel"] else "") + ";"
        f"  weak: {w['model']} on {w['n_devices']}x {w['device']}, {w['dtype']} weights, {w['engine']}",
        f"  strong step {rf['strong_step_s']:.3g} s, weak step {rf['weak_step_s']:.3g} s, "
        f"strong decode {rf['decode_s_per_token'] * 1e3:.3g} ms/token",
        f"  R in time (strong replica time / Strong-only)                  {rf['R_time']:.3f}",
        f"  L in time (wall time / Strong-only)                            {rf['L_time']:.3f}",
        f"  strong HBM bytes / Strong-only                                 {rf['strong_hbm_ratio']:.3f}",
        f"  total HBM bytes (strong + weak) / Strong-only                  {rf['total_hbm_ratio']:.3f}",
        f"  total FLOPs (strong + weak) / Strong-only                      {rf['total_flops_ratio']:.3f}",
        f"  balance point B* of the strong replica                         {_f(B)} sequences at this context"
        f" (peak FLOPs/bandwidth, costsim's reading of the paper's 37 on an H20: {r['balance_batch_paper']:.3g})",
        f"  KV pool of the strong replica                                  {r['kv_pool_bytes'] / 1e9:.0f} GB: "
        f"{r['max_sequences']} sequences at this context (batch {r['batch']} fits)",
        f"  batch {r['batch']} is {r['regime']}" + (" — past B*: extra FLOPs become time" if r["regime"] == "compute-bound" else ""),
        f"  verification prefill of {rf['verify_prefill_tokens_at_K']:g} tokens (chunk of {r['K']}): "
        f"{rf['verify_prefill_s_at_K']:.3g} s = {rf['verify_prefill_weight_passes_at_K']:.1f} weight-pass times "
        f"({'compute-bound' if rf['verify_prefill_compute_bound_at_K'] else 'memory-bound'})",
        f"  v/d in time at n = {r['K']}: {rf['v_over_d_time_at_K']:.4f} vs {r['v_over_d']:.4f} by pass counting"
        + (" — pass counting underestimates the review" if rf["v_over_d_time_at_K"] > 1.25 * r["v_over_d"] else ""),
    ]
    if r.get("calibration"):
        lines.append(f"  note: the roofline section uses the device and engine profiles, not {r['calibration']}")
        w = r.get("calibration_workload") or {}
        d_cal, d = w.get("step_tokens"), r["tokens"]["step_tokens"]
        if isinstance(d_cal, (int, float)) and d_cal > 0 and not 0.5 <= d / d_cal <= 2.0:
            lines.append(f"  note: the calibration measured {d_cal:g}-token steps; this prediction is for {d:g}-token "
                         "steps, and measured ratios need not carry over that far (calibrate with --step-tokens)")
    pd = r.get("over_p_dist")
    if pd:
        lines += ["", f"Over tasks whose p_u varies ({pd['p_dist']}, mean {pd['mean_p_accept']:.3f}):",
                  f"  R_u {pd['R']:.3f} and L_u {pd['L']:.3f}, against {pd['R_at_mean_p']:.3f} and {pd['L_at_mean_p']:.3f} "
                  f"at the mean p_u", f"  assumptions: {pd['assumption']}"]
    return "\n".join(lines)

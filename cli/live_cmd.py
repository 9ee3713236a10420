"""Live mode: `costsim calibrate`, `costsim validate`, `costsim serve-local`.

httpx, numpy, scipy and xllamacpp are imported inside the commands, never at load time.
"""

from __future__ import annotations

from typing import Optional

import typer

from costsim.config import LIVE, WORKLOAD

from ._common import Progress, UserError, atomic_write, check_output, dumps, shown, with_options, user_errors

_SHAPE_HELP = (f"tokens; default {WORKLOAD.step_tokens:g}/{WORKLOAD.obs_tokens:g}/{WORKLOAD.verdict_tokens:g} for remote "
               f"endpoints (predict's defaults), {LIVE.local_step_tokens}/{LIVE.local_obs_tokens}/"
               f"{LIVE.local_verdict_tokens} with --local")
_S, _I = Optional[str], Optional[int]
#: The options calibrate and validate share: the endpoints, the call shapes, the requests.
LIVE_OPTIONS = {
    "weak_url": (_S, typer.Option(None, "--weak-url", help="Base URL of the weak model's OpenAI-compatible server.")),
    "strong_url": (_S, typer.Option(None, "--strong-url", help="Base URL of the strong model's server.")),
    "local": (bool, typer.Option(False, "--local", help="Start two local llama.cpp servers with generated models and measure them.")),
    "api_key_env": (_S, typer.Option(None, "--api-key-env", help="Environment variable that holds the API key of both endpoints (never written anywhere).")),
    "weak_api_key_env": (_S, typer.Option(None, "--weak-api-key-env", help="Environment variable of the weak endpoint's API key [--api-key-env].")),
    "strong_api_key_env": (_S, typer.Option(None, "--strong-api-key-env", help="Environment variable of the strong endpoint's API key [--api-key-env].")),
    "K": (int, typer.Option(WORKLOAD.K, "--K", "-K", help="Chunk size: steps drafted per review (the chunk prefill is K (d + o) tokens).")),
    "step_tokens": (_I, typer.Option(None, "--step-tokens", help=f"Tokens of one agent step d ({_SHAPE_HELP}).")),
    "obs_tokens": (_I, typer.Option(None, "--obs-tokens", help="Tokens of one tool observation o.")),
    "verdict_tokens": (_I, typer.Option(None, "--verdict-tokens", help="Tokens of a verdict.")),
    "chunk_tokens": (_I, typer.Option(None, "--chunk-tokens", help="Tokens the strong model prefills per review [K (d + o)].")),
    "repair_tokens": (_I, typer.Option(None, "--repair-tokens", help="Tokens of a fused repair after a rejection [d].")),
    "shape_trace": (_S, typer.Option(None, "--shape-trace", help="Take step and observation tokens from a trace file or shipped trace (its typical step: means over its model calls).")),
    "repeats": (int, typer.Option(LIVE.repeats, "--repeats", help="Probes per shape (the fit uses per-shape medians).")),
    "timeout": (str, typer.Option(f"{LIVE.timeout_s:g}s", "--timeout", help="Per request, a duration (120, 2min) before it counts as failed.")),
    "retries": (int, typer.Option(LIVE.retries, "--retries", help="Retries per request (exponential backoff).")),
    "seed": (int, typer.Option(0, "--seed", min=0, help="Seed of the probe order and review outcomes (and of the local models).")),
    "model_dir": (_S, typer.Option(None, "--model-dir", help="Where --local keeps its generated models [~/.cache/costsim/models].")),
    "json_out": (bool, typer.Option(False, "--json", help="Print one JSON object.")),
}
@with_options(LIVE_OPTIONS)
def calibrate(
    out: str = typer.Option("calib.toml", "--out", "-o", help="Calibration file to write."),
    max_prompt_tokens: Optional[int] = typer.Option(None, "--max-prompt-tokens", help="Longest prefill probe [the chunk]."),
    max_output_tokens: Optional[int] = typer.Option(None, "--max-output-tokens", help="Longest decode probe [2 d]."),
    allow_cache: bool = typer.Option(False, "--allow-cache", help="Repeat identical prompts (prefix caching may then serve them)."),
    resume: bool = typer.Option(False, "--resume", help="Go on from the probes an interrupted run saved beside --out."),
    **o,
):
    """Measure two endpoints, fit prefill/decode/overhead per endpoint, write kappa, v/d, rho."""
    from costsim import api

    json_out = o.pop("json_out")
    inputs = _outputs(o, out)
    with user_errors(ValueError), Progress("calibrating") as bar:
        res = api.calibrate(max_prompt_tokens=max_prompt_tokens, max_output_tokens=max_output_tokens,
                            allow_cache=allow_cache, resume=resume, probes=out + ".probes.json",
                            progress=bar.advance, **o)
    atomic_write(out, res.toml(), inputs=inputs)
    typer.echo(dumps({"out": out, **res.to_dict()}) if json_out else render_calibration(res.data, out))


def _outputs(o: dict, output: str) -> tuple:
    """Check, before any probe, that a calibration file ``output`` and its probes beside it can be
    written and are not the run's input trace; the inputs, for the atomic write."""
    inputs = (o["shape_trace"],) if o["shape_trace"] else ()
    for path in (output, output + ".probes.json"):
        check_output(path, inputs)
    return inputs


def _ci(ci):
    return f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def render_calibration(res, output) -> str:
    w, rat = res["workload"], res["ratios"]
    lines = [f"Calibration written to {output}",
             f"  workload: step d = {w['step_tokens']}, observation o = {w['obs_tokens']}, verdict = {w['verdict_tokens']}, "
             f"chunk = {w['chunk_tokens']} (K = {w['K']}), repair = {w['repair_tokens']} tokens", ""]
    lines.append("Per-endpoint fit  t = overhead + prefill·P + decode·(N-1)   (weighted least squares on per-shape medians, 95% CI)")
    for role in ("weak", "strong"):
        f = res["fits"][role]
        lines.append(f"  {role:6s} {shown(res['urls'][role])}  model {shown(res['models'][role])}")
        lines.append(f"         prefill {f.prefill_s_per_token * 1e3:.4g} ms/token {_ci([x * 1e3 for x in f.ci95['prefill_s_per_token']])}"
                     f"   decode {f.decode_s_per_token * 1e3:.4g} ms/token {_ci([x * 1e3 for x in f.ci95['decode_s_per_token']])}"
                     f"   overhead {f.overhead_s * 1e3:.4g} ms {_ci([x * 1e3 for x in f.ci95['overhead_s']])}")
        lines.append(f"         {f.n_probes} probes, {f.n_shapes} shapes, R² = {f.r2:.4f}, worst shape residual {f.max_rel_residual:.1%}"
                     + ("" if res["forced_decode"].get(role) else "; output length NOT forced (server stops at EOS)"))
        sv = res["server"].get(role)
        if sv:
            parts = [f"server /metrics ({sv['flavor']}):"]
            for k, name in (("prefill_s_per_token", "prefill"), ("decode_s_per_token", "decode")):
                if k in sv:
                    parts.append(f"{name} {sv[k] * 1e3:.4g} ms/token (client fit {sv[k + '_rel_diff']:+.1%})")
            if "prefix_cache_hit_rate" in sv:
                parts.append(f"prefix-cache hits {sv['prefix_cache_hit_rate']:.1%}")
            lines.append("         " + "  ".join(parts))
    t, ci, ps, sec = rat["time"], rat["time_ci95"], rat["passes"], rat["seconds"]
    lines += ["", "Ratios for this workload (written to [ratios]; in time)",
              f"  kappa  {t['kappa']:.4f} {_ci(ci['kappa'])}   weak step {sec['weak_step']:.4g} s / strong step {sec['strong_step']:.4g} s",
              f"  v/d    {t['v_over_d']:.4f} {_ci(ci['v_over_d'])}   verification {sec['verify']:.4g} s / strong step"
              f"   (pass counting: {ps['v_over_d']:.4f})",
              f"  rho    {t['rho']:.4f} {_ci(ci['rho'])}   fused repair {sec['repair']:.4g} s / strong step   (pass counting: {ps['rho']:.4f})",
              f"  the verification prefill of {w['chunk_tokens']} tokens costs {rat['verify_prefill_pass_equivalents']:.1f} "
              "strong decode-iteration times (pass counting assumes 1)",
              f"  direct medians: kappa {res['direct']['kappa']:.4f}, verdict call / step call {res['direct']['v_over_d_no_repair']:.4f}"]
    for x in res["warnings"]:
        lines.append(f"warning: {x}")
    return "\n".join(lines)


@with_options(LIVE_OPTIONS)
def validate(
    p_accept: float = typer.Option(..., "--p-accept", "-p", help="Per-step acceptance rate p_u used to draw review outcomes."),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="Calibration file; without it, calibrate first in the same run."),
    tasks: Optional[int] = typer.Option(None, "--tasks", help=f"Tasks to run under each protocol [{LIVE.validate_tasks}; {LIVE.validate_tasks_local} with --local]."),
    steps: Optional[int] = typer.Option(None, "--steps", help=f"Committed steps per task [{LIVE.validate_steps}; {LIVE.validate_steps_local} with --local]."),
    calibration_out: Optional[str] = typer.Option(None, "--calibration-out", help="Without --calibration: write the calibration this run makes there, its probes saved beside it as they come (resumable)."),
    resume: bool = typer.Option(False, "--resume", help="With --calibration-out: go on from the probes an interrupted run saved."),
    **o,
):
    """Run SpecAgent for real (weak drafts, strong reviews) and Strong-only; measured vs predicted L."""
    from costsim import api

    json_out = o.pop("json_out")
    if calibration_out and not calibration:
        _outputs(o, calibration_out)
    with user_errors(ValueError), Progress("validating") as bar:
        out = api.validate(p_accept, calibration=calibration, tasks=tasks, steps=steps,
                           calibration_out=calibration_out, resume=resume, progress=bar.advance, **o).data
    typer.echo(dumps(out) if json_out else render_validation(out))


def render_validation(r) -> str:
    w, rat = r["workload"], r["ratios"]
    lines = [
        f"SpecAgent vs Strong-only, executed — p_u = {r['p']:g}, K = {r['K']}, {r['tasks']} tasks x {r['steps_per_task']} steps",
        f"  weak {r['urls']['weak']}   strong {r['urls']['strong']}",
        f"  shapes: step {w['step_tokens']}, observation {w['obs_tokens']}, verdict {w['verdict_tokens']}, "
        f"chunk {w['chunk_tokens']}, repair {w['repair_tokens']} tokens",
        f"  ratios from {r['calibration']}: kappa {rat['kappa']:.4f}, v/d {rat['v_over_d']:.4f}, rho {rat['rho']:.4f}",
        "",
        f"  {'per committed step / Strong-only':38s} {'measured':>9s} {'predicted':>9s} {'rel.err':>8s}",
        f"  {'L   wall time':38s} {r['L_measured']:9.4f} {r['L_predicted']:9.4f} {r['L_rel_error']:+8.1%}",
        f"  {'strong decoded tokens':38s} {r['strong_tokens_ratio_measured']:9.4f} {r['strong_tokens_ratio_predicted']:9.4f} "
        f"{r['strong_tokens_rel_error']:+8.1%}",
        f"  {'committed steps per review':38s} {r['commits_per_review_measured']:9.3f} {r['commits_per_review_predicted']:9.3f}",
        f"  {'weak steps drafted per committed step':38s} {r['weak_steps_per_commit_measured']:9.3f} {r['weak_steps_per_commit_predicted']:9.3f}",
        "",
        f"  Strong-only {r['strong_only_seconds_per_step']:.4g} s/step; SpecAgent {r['specagent_seconds_per_step']:.4g} s per committed step "
        f"({r['specagent']['reviews']} reviews, {r['specagent']['rejections']} rejected)",
        "  assumptions: sequential calls (one session, no batching), no tool latency, verdict outcomes drawn with p_u;",
        "  predicted: the renewal form (whole chunks of K); a measured task's last chunk ends with the task",
    ]
    retried = r["strong_only"]["retried_calls"] + r["specagent"]["retried_calls"]
    if retried:
        lines.append(f"warning: {retried} calls failed and were retried; each is timed by its answering attempt alone")
    return "\n".join(lines)


def serve_local(
    weak_port: int = typer.Option(0, "--weak-port", help="Port of the weak server [a free one]."),
    strong_port: int = typer.Option(0, "--strong-port", help="Port of the strong server [a free one]."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads per server [half the cores]."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the generated models."),
    model_dir: Optional[str] = typer.Option(None, "--model-dir", help="Where the generated models are kept [~/.cache/costsim/models]."),
    weak_size: str = typer.Option("weak", "--weak-size", help="Generated model of the weak server: tiny (~3M), weak (~16M), strong (~320M)."),
    strong_size: str = typer.Option("strong", "--strong-size", help="Generated model of the strong server."),
):
    """Start two local llama.cpp servers (generated ~16M and ~320M Llama models) until Ctrl-C."""
    import signal
    import time

    from costsim import api

    typer.echo("starting local llama.cpp servers (generated models; first use writes them)...", err=True)
    with user_errors(ValueError):
        res = api.serve_local(weak_port=weak_port, strong_port=strong_port, threads=threads, seed=seed,
                              model_dir=model_dir, weak_size=weak_size, strong_size=strong_size)
    servers = res["servers"]
    stop = {"now": False}
    old = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        for role, s in servers.items():
            typer.echo(f"{role:6s} {s.url}   random Llama, {res['params'][role] / 1e6:.0f}M parameters ({s.model})")
        typer.echo(f"try: costsim calibrate --weak-url {servers['weak'].url} --strong-url {servers['strong'].url}", err=True)
        typer.echo("Ctrl-C stops both servers.", err=True)
        while not stop["now"]:
            for s in servers.values():
                if not s.alive():
                    raise UserError(f"{s.role} server on port {s.port} exited: {s.log_tail()}")
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
        res.stop()
        typer.echo("stopped.", err=True)

"""`costsim predict`: the closed-form answer for one scenario, with the source of every input.

Each parameter resolves in this order: an explicit value (flag) > a calibration file > the
default (derived from the default profiles and the recorded tau²-Bench Airline run). The
result records where each came from.
"""

from __future__ import annotations

import numpy as np

from . import formulas, roofline
from .acceptance import beta_params
from .calibration import load_calibration
from .config import (DEPLOYMENTS, MAX_CALL_TOKENS, MAX_RATIO, MAX_STEPS, OPTIONS, SOURCES, WORKLOAD, SpecAgentOptions,
                     check_scale)
from .memory import kv_pool_bytes, max_sequences, require_fits
from .paper import vitabench_decomposition
from .payoff import specagent_payoff
from .profiles import Deployment
from .sizing import deployments


#: Chunk sizes the best K is searched over, 1 to this (or the K asked for, if larger): past a few
#: dozen steps L_u changes in the third decimal at most where p_u < 0.99.
BEST_K_SEARCH = 64


#: The flag each input of the closed form is given by (the others: ``--`` and the name, dashed).
_FLAGS = {"p": "--p-accept"}


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def check_closed_form(p, K, write_rate=None, ratios=None, name=_flag) -> None:
    """ValueError (one line) unless the closed form's inputs are within predict's bounds: ``p``
    in [0, 1], ``K`` a whole number of steps in [1, MAX_K] (:func:`costsim.formulas.check_K`),
    ``write_rate`` none or in (0, 1], and each of ``ratios`` (v/d, rho, kappa: name -> value or
    None) a finite number in [0, MAX_RATIO]. ``name``: how the message names an input (by
    default its flag). What predict refuses, and what `costsim report` checks before drawing a
    result's curve."""
    import numbers

    def real(v):
        return isinstance(v, numbers.Real) and not isinstance(v, bool)

    if not (real(p) and 0.0 <= p <= 1.0):
        raise ValueError(f"{name('p')} must be in [0, 1], got {p}")
    formulas.check_K(K, name("K"))
    if write_rate is not None and not (real(write_rate) and 0.0 < write_rate <= 1.0):
        raise ValueError(f"{name('write_rate')} must be in (0, 1], got {write_rate}")
    for k, v in (ratios or {}).items():
        if v is not None and not (real(v) and np.isfinite(v) and v >= 0):
            raise ValueError(f"{name(k)} must be a finite number >= 0, got {v}")
        if v is not None and v > MAX_RATIO:
            raise ValueError(f"{name(k)} must be at most {MAX_RATIO:g}, got {v:g}")


def ratios_measure(sources: dict) -> str:
    """What predict's R and L measure, by the sources of its v/d and rho (``sources``: name ->
    where each came from): 'time' where a calibration measured either (R in strong replica
    time), else 'weight passes' (the paper's pass counting). The one rule; the result says it
    as ``ratios_measure``."""
    measured = any(str(sources.get(k, "")).startswith("calibration") for k in ("v_over_d", "rho"))
    return "time" if measured else "weight passes"


def _validate(p, K, write_rate, batch, steps, overrides):
    ratios = ("v_over_d", "rho", "kappa")
    check_closed_form(p, K, write_rate, {k: overrides.get(k) for k in ratios})
    if batch < 1:
        raise ValueError(f"--batch must be >= 1, got {batch}")
    if not (np.isfinite(steps) and 0 < steps <= MAX_STEPS):
        raise ValueError(f"--steps must be a finite number in (0, {MAX_STEPS:g}], got {steps}")
    for k, v in overrides.items():
        if k not in ratios and v is not None and not (np.isfinite(v) and v >= 0):
            raise ValueError(f"--{k.replace('_', '-')} must be a finite number >= 0, got {v}")
    if overrides.get("step_tokens") is not None and overrides["step_tokens"] < 1:  # it divides
        raise ValueError(f"--step-tokens must be at least 1 token (a step decodes something), got {overrides['step_tokens']}")
    # Upper bounds on what sizes a call, as simulate's: far past any real agent, and short of
    # the float overflows that would print nan.
    for k in ("step_tokens", "obs_tokens", "verdict_tokens"):
        v = overrides.get(k)
        if v is not None and v > MAX_CALL_TOKENS:
            raise ValueError(f"--{k.replace('_', '-')} must be at most {MAX_CALL_TOKENS:g} tokens, got {v:g}")


def predict(p: float, K: int, *, v_over_d=None, rho=None, kappa=None, write_rate=None,
            batch=None, steps=None, calibration=None, step_tokens=None, obs_tokens=None,
            context_tokens=None, verdict_tokens=None, strong_step_scale=None, weak_step_scale=None,
            correction_rate=None, correction_rho=None, p_dist=None, **deploy) -> dict:
    """Every closed-form figure for one scenario, as a flat dict plus ``sources``/``assumptions``.

    Without ``write_rate`` every chunk is reviewed at n = K (the paper's form); with it, chunk
    lengths follow the renewal-reward model (a chunk ends at its first write or at K reads,
    which auto-commit), and ``n`` is reported as the mean reviewed chunk length.
    ``strong_step_scale``/``weak_step_scale``: tokens a model decodes per token of the d̄-token
    step it authors (a thinking model: > 1; default 1); a repair is a strong step (rho in its units).
    ``correction_rate``: the share of rejections fixed by a correction turn of its own (one more
    strong call, prefilling its prompt and decoding ``correction_rho`` strong steps) instead of the
    fused replacement; rho per rejection is then their mix (``rho_per_rejection``).
    """
    d = DEPLOYMENTS
    batch = d.batch if batch is None else batch
    steps = WORKLOAD.steps_per_task if steps is None else steps
    _validate(p, K, write_rate, batch, steps, dict(v_over_d=v_over_d, rho=rho, kappa=kappa,
                                                   step_tokens=step_tokens, obs_tokens=obs_tokens,
                                                   context_tokens=context_tokens, verdict_tokens=verdict_tokens))
    src = {}

    def pick(name, flag, calib_value=None, default=None, default_src=""):
        if flag is not None:
            src[name] = "flag"
            return float(flag)
        if calib_value is not None:
            src[name] = f"calibration: {cal.source}"
            return float(calib_value)
        src[name] = default_src
        return default

    cal = load_calibration(calibration) if calibration is not None else None
    cr = cal.ratios if cal else {}
    tok = {k: pick(k, v, None, getattr(WORKLOAD, k), "default: " + SOURCES[k]) for k, v in
           dict(step_tokens=step_tokens, obs_tokens=obs_tokens, context_tokens=context_tokens,
                verdict_tokens=verdict_tokens).items()}
    scale = {k: float(check_scale(v, f"--{k.replace('_', '-')}")) if v is not None else 1.0
             for k, v in (("strong_step_scale", strong_step_scale), ("weak_step_scale", weak_step_scale))}
    for k, v in (("strong_step_scale", strong_step_scale), ("weak_step_scale", weak_step_scale)):
        src[k] = "flag" if v is not None else "default: a step decodes its d̄ tokens"
    strong, weak = deployments(**deploy, batch=batch, context=tok["context_tokens"])
    for dep in (strong, weak):  # the batch of sessions, each at the typical context, must fit
        require_fits(dep, batch, tok["context_tokens"])
    lengths = np.arange(1, K + 1)
    if correction_rate is not None and not 0.0 <= correction_rate <= 1.0:
        raise ValueError(f"--correction-rate must be in [0, 1], got {correction_rate}")
    if correction_rho is not None and not 0.0 <= correction_rho <= MAX_RATIO:
        raise ValueError(f"--correction-rho must be a finite number in [0, {MAX_RATIO:g}], got {correction_rho}")
    pp = roofline.protocol_parameters(strong, weak, lengths, tok["step_tokens"], tok["obs_tokens"],
                                      tok["verdict_tokens"], rho if rho is not None else WORKLOAD.rho,
                                      tok["context_tokens"], strong_batch=batch, weak_batch=batch, **scale,
                                      correction_rate=SpecAgentOptions.correction_rate if correction_rate is None else correction_rate,
                                      correction_steps=SpecAgentOptions.correction_rho if correction_rho is None else correction_rho,
                                      correction_tokens=SpecAgentOptions.correction_tokens)

    # Pass counting (the paper): a verification is one prefill pass plus one pass per verdict
    # token; an authored step is d̄ passes (times the strong step scale).
    d_strong = tok["step_tokens"] * scale["strong_step_scale"]
    vd_passes = float(formulas.v_over_d_passes(tok["verdict_tokens"], d_strong))
    vd = pick("v_over_d", v_over_d, cr.get("v_over_d"), vd_passes,
              f"default: (1 prefill pass + {tok['verdict_tokens']:g} verdict tokens) / {d_strong:g}-token strong step")
    rho_ = pick("rho", rho, cr.get("rho"), WORKLOAD.rho, "default: " + SOURCES["rho"])
    c_rate = pick("correction_rate", correction_rate, None, SpecAgentOptions.correction_rate,
                  "default: " + OPTIONS["correction_rate"][1].metadata["help"])
    c_rho = pick("correction_rho", correction_rho, None, SpecAgentOptions.correction_rho,
                 "default: " + OPTIONS["correction_rho"][1].metadata["help"])
    # A correction turn is one prefill pass and c_rho strong steps of decoding (pass counting).
    rho_mix = (1.0 - c_rate) * rho_ + c_rate * (c_rho + 1.0 / d_strong)
    kap = pick("kappa", kappa, cr.get("kappa"), pp.kappa,
               f"roofline ({strong.engine.name} strong, {weak.engine.name} weak): weak step "
               f"{float(pp.weak_step.seconds):.3g} s / strong step {float(pp.strong_step.seconds):.3g} s at batch {batch}")

    if write_rate is None:
        pr = np.zeros(K)
        pr[-1] = 1.0
        pu = np.zeros(K)
    else:
        pr, pu = formulas.chunk_length_pmf_write_rate(write_rate, K)
    rr = formulas.renewal_ratios(p, pr, pu, vd, rho_mix, kap)
    reviews_per_commit = rr["reviews_per_cycle"] / rr["commits_per_cycle"]
    n_mean = float((pr * lengths).sum() / pr.sum()) if pr.sum() > 0 else float("nan")
    k_max = max(BEST_K_SEARCH, K)  # the K asked for is always among those searched
    if write_rate is None:
        R_, L_ = formulas.R(p, K, vd, rho_mix), formulas.L(p, K, vd, rho_mix, kap)
        best_k, best_L = formulas.best_K(p, vd, rho_mix, kap, K_max=k_max)
        bek = formulas.break_even_kappa(p, K, vd, rho_mix)
        cpr = formulas.commits_per_review(p, K)
    else:
        R_, L_ = rr["R"], rr["L"]
        best_k, best_L = formulas.best_K(p, vd, rho_mix, kap, K_max=k_max, write_rate=write_rate)
        # L is linear in kappa: L = R + kappa * w, so L = 1 at kappa = (1 - R) / w.
        bek = (1.0 - R_) / (rr["weak_steps_per_cycle"] / rr["commits_per_cycle"])
        cpr = 1.0 / reviews_per_commit  # every commit, unreviewed chunks' too (as strong calls count them)
        out_reviewed = rr["reviewed_commit_fraction"] / reviews_per_commit

    # Beside a default v/d (a verdict of the assumed size), the answer at the v/d the paper's own
    # numbers imply (its VitaBench decomposition): the verdict is the input costsim cannot measure
    # from the paper, and the two readings lead to different best K.
    paper_vd = None
    if src["v_over_d"].startswith("default"):
        vita = vitabench_decomposition()
        v = vita["v_over_d"]
        if write_rate is None:
            R_p, L_p = formulas.R(p, K, v, rho_mix), formulas.L(p, K, v, rho_mix, kap)
            bk_p, bl_p = formulas.best_K(p, v, rho_mix, kap, K_max=k_max)
        else:
            rp = formulas.renewal_ratios(p, pr, pu, v, rho_mix, kap)
            R_p, L_p = rp["R"], rp["L"]
            bk_p, bl_p = formulas.best_K(p, v, rho_mix, kap, K_max=k_max, write_rate=write_rate)
        paper_vd = {"v_over_d": float(v), "verdict_tokens": float(v * d_strong - 1.0), "R": float(R_p), "L": float(L_p),
                    "best_K": int(bk_p), "best_K_L": float(bl_p),
                    "source": f"{vita['source']} (costsim.paper.vitabench_decomposition); rho and kappa as above"}

    # The same ratios in time, HBM bytes and FLOPs from the roofline (v/d per chunk length).
    in_time = {}
    for cur in ("time", "hbm", "flops"):
        k_cur = pp.kappa if cur == "time" else 0.0
        r = formulas.renewal_ratios(p, pr, pu, None, pp.rho[cur], k_cur, v_over_d_per_length=pp.v_over_d[cur])
        in_time[cur] = r
    weak_share = {cur: _weak_share(pp, cur) for cur in ("hbm", "flops")}
    strong_decode = roofline.decode_step(strong, batch, tok["context_tokens"])
    B_star = roofline.balance_batch(strong, tok["context_tokens"])
    verify_K = roofline.prefill(strong, K * (tok["step_tokens"] + tok["obs_tokens"]), tok["context_tokens"])
    one_pass = roofline.decode_step(strong, 1, tok["context_tokens"])

    out = {
        "p": p, "K": K, "mean_chunk_steps": float(K) if write_rate is None else n_mean, "write_rate": write_rate,
        "R": float(R_), "L": float(L_),
        "commits_per_review": float(cpr),
        # of them, in the chunk the review passes (with a write rate some chunks are not reviewed)
        "reviewed_commits_per_review": float(cpr if write_rate is None else out_reviewed),
        "weak_steps_per_commit": float(rr["weak_steps_per_cycle"] / rr["commits_per_cycle"]),
        "reviews_per_commit": float(reviews_per_commit),
        # a review each, and a correction turn each for the share of rejections fixed apart
        "strong_calls_per_task": float(steps * (reviews_per_commit + c_rate * rr["rejections_per_cycle"]
                                                / rr["commits_per_cycle"])),
        "strong_only_calls_per_task": float(steps),
        "steps_per_task": float(steps),
        "v_over_d": vd, "rho": rho_, "kappa": kap, "correction_rate": c_rate, "correction_rho": c_rho,
        "rho_per_rejection": rho_mix,
        "break_even_kappa": float(bek),
        "best_K": int(best_k), "best_K_L": float(best_L), "best_K_searched": k_max,
        # The limits of the form reported: the paper's, or the renewal one's (reads commit unreviewed).
        "R_limit_p0": float(formulas.R_limit_p0(vd, rho_mix) if write_rate is None
                            else formulas.renewal_ratios(0.0, pr, pu, vd, rho_mix, kap)["R"]),
        "R_limit_p1": float(formulas.R_limit_p1(K, vd) if write_rate is None
                            else formulas.renewal_ratios(1.0, pr, pu, vd, rho_mix, kap)["R"]),
        "roofline": {
            "R_time": float(in_time["time"]["R"]), "L_time": float(in_time["time"]["L"]),
            "strong_hbm_ratio": float(in_time["hbm"]["R"]),
            "strong_flops_ratio": float(in_time["flops"]["R"]),
            "total_hbm_ratio": float(in_time["hbm"]["R"] + weak_share["hbm"] * rr["weak_steps_per_cycle"] / rr["commits_per_cycle"]),
            "total_flops_ratio": float(in_time["flops"]["R"] + weak_share["flops"] * rr["weak_steps_per_cycle"] / rr["commits_per_cycle"]),
            "v_over_d_time_at_K": float(pp.v_over_d["time"][-1]),
            "rho_time": pp.rho["time"],
            "strong_step_s": float(pp.strong_step.seconds), "weak_step_s": float(pp.weak_step.seconds),
            "verify_prefill_tokens_at_K": float(K * (tok["step_tokens"] + tok["obs_tokens"])),
            "verify_prefill_s_at_K": float(verify_K.seconds),
            "verify_prefill_weight_passes_at_K": float(verify_K.seconds / one_pass.seconds),
            "verify_prefill_compute_bound_at_K": bool(verify_K.compute_bound),
            "decode_s_per_token": float(strong_decode.seconds),
        },
        "paper_v_over_d": paper_vd,
        "balance_batch": B_star,
        "kv_pool_bytes": float(kv_pool_bytes(strong)),
        "max_sequences": max_sequences(strong, tok["context_tokens"]),
        "balance_batch_paper": float(roofline.balance_batch_paper(strong)),
        "batch": batch,
        "regime": "compute-bound" if bool(strong_decode.compute_bound) else "memory-bound",
        "strong_deployment": _describe(strong),
        "weak_deployment": _describe(weak),
        "tokens": tok,
        "step_scales": scale,
        "sources": src,
        "calibration": cal.path if cal else None,
        "ratios_measure": ratios_measure(src),
        "calibration_workload": (cal.raw.get("workload") if cal and isinstance(cal.raw.get("workload"), dict) else None),
    }
    # The one verdict (costsim.payoff): in time at this batch, the roofline's ratios where the user
    # gave or calibrated none (the pass-counted v/d above is the paper's model, not time).
    given = {k: src[k] == "flag" or src[k].startswith("calibration") for k in ("v_over_d", "rho", "kappa")}
    pay = specagent_payoff(strong, weak, p, K, tok["step_tokens"], tok["obs_tokens"], tok["verdict_tokens"], rho_,
                           tok["context_tokens"], batch, batch, write_rate=write_rate, pp=pp,
                           v_over_d=vd if given["v_over_d"] else None, kappa=kap if given["kappa"] else None,
                           rho_given=rho_mix if given["rho"] else None)
    out["specagent_pays"] = pay.to_dict()
    out["verdict"] = pay.text() + ("" if pay.pays else _smaller_K(out))
    if p_dist:
        out["over_p_dist"] = over_beta(p_dist, K, vd, rho_mix, kap, None if write_rate is None else (pr, pu))
    return out


def closed_form_ratios(p, K: int, vd: float, rho: float, kappa: float, chunks=None):
    """``(R_u, L_u)`` at ``p`` (a number or an array) in the form predict reports them: the
    paper's, every chunk K steps; or, with ``chunks`` (the chunk-length pmfs of a write rate,
    :func:`costsim.formulas.chunk_length_pmf_write_rate`), the renewal form. The one choice
    between the two forms, for predict's averages over p_u and `costsim report`'s curve."""
    if chunks is None:
        return formulas.R_and_L(p, K, vd, rho, kappa)
    r = formulas.renewal_ratios(p, *chunks, vd, rho, kappa)
    return r["R"], r["L"]


def over_beta(p_dist: str, K: int, vd: float, rho: float, kappa: float, chunks=None) -> dict:
    """R_u and L_u (pass counting, as predict's main answer) averaged over tasks whose p_u is
    drawn from ``p_dist`` = 'beta:a,b' (what `costsim acceptance` fits): each task's steps
    accepted at its own p_u, the mean of the per-task ratios by Gauss-Jacobi quadrature
    (:func:`costsim.formulas.expected_over_beta`). ``chunks``: the renewal form's chunk-length
    pmfs (a write rate), else every chunk at K (the paper's)."""
    a, b = beta_params(p_dist)

    def ratios(q):
        return np.stack(closed_form_ratios(q, K, vd, rho, kappa, chunks))

    R, L = formulas.expected_over_beta(ratios, a, b)
    mean = a / (a + b)
    at_mean = ratios(np.array([mean]))[:, 0]
    return {"p_dist": p_dist, "mean_p_accept": mean, "R": float(R), "L": float(L),
            "R_at_mean_p": float(at_mean[0]), "L_at_mean_p": float(at_mean[1]),
            "assumption": f"each task's p_u drawn from Beta({a:g}, {b:g}), its steps accepted at that p_u, independently; "
                          "the mean of the per-task ratios (pass counting, v/d, rho and kappa as above); it differs from the "
                          "ratio at the mean p_u by Jensen's gap (above it where the ratios are convex in p_u)"}


def _smaller_K(r: dict) -> str:
    """The best K's remedy, where another K makes SpecAgent pay at this kappa."""
    if r["best_K"] == r["K"] or r["best_K_L"] >= 1:
        return ""
    return f" Or K = {r['best_K']}: shorter chunks waste fewer drafts, L_u = {r['best_K_L']:.2f}."


def _describe(dep: Deployment) -> dict:
    return {"model": dep.model.name, "device": dep.device.name, "n_devices": dep.n_devices,
            "dtype": dep.weight_dtype, "engine": dep.engine.name, "expert_parallel": dep.expert_parallel}


def _weak_share(pp, cur):
    """Weak drafting cost of one step relative to a Strong-only step, in currency ``cur``."""
    f = {"hbm": "hbm_bytes", "flops": "flops"}[cur]
    return float(getattr(pp.weak_step, f) / getattr(pp.strong_step, f))

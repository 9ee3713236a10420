"""One simulation report: run the protocols, summarise, and put the closed form beside it."""

from __future__ import annotations

import numpy as np

from . import formulas, roofline, twin
from .acceptance import p_dist_parts, recorded_fallback, stationary_p
from .metrics import summarize
from .paper import published
from .config import COMMANDS, SpecAgentOptions
from .protocols import PROTOCOLS, drafts
from .protocols.chunking import DEFAULT_CHUNKING, chunk_distribution, chunks
from .scenario import Scenario, protocol_options
from .sim.run import simulate
from .traces.stats import step_shape


def closed_form(tasks, sc: Scenario) -> dict:
    """The analytic twins of a simulation, beside the simulated values.

    ``R`` and ``L`` (and ``exact``: every ratio, for every protocol with a twin) are the exact
    expectations of :mod:`costsim.twin` on the tasks' own fixed paths — what a one-session
    simulation estimates. Where the scenario has no exact twin (correlated verdicts, verifier
    errors, generative paths) they are the renewal form's, and ``exact`` says why not.
    ``renewal`` is costsim's renewal form over the same tasks: see :func:`renewal_form`.
    """
    # R and L are SpecAgent's: the run's own (first) SpecAgent variant, else plain SpecAgent's.
    spec = next((n for n in sc.protocols if drafts(n) and twin.has_twin(n)), "specagent")
    n = len(tasks)
    tasks = tasks[:COMMANDS.closed_form_tasks]  # a sample of a huge run (its source: config)
    sampled = f" (over the first {len(tasks):,} of {n:,} tasks)" if len(tasks) < n else ""
    renewal = renewal_form(tasks, sc, spec)
    out = {"R": renewal["R"], "L": renewal["L"], "method": "renewal", "protocol": spec, "renewal": renewal}
    why = twin.unavailable(tasks, sc)
    if why:
        out["exact"] = {"unavailable": why}
        out["assumption"] = f"renewal form (no exact twin: {why}): " + renewal["assumption"] + sampled
        return out
    exact = twin.ratios(tasks, sc, extra=(spec,))
    out.update(R=exact[spec]["R"], L=exact[spec]["L"], method="exact", protocol=spec, exact=exact)
    contended = sc.sessions > 1 or sc.arrival_rate
    out["assumption"] = ("exact expectation on the tasks' fixed paths: one task at a time on idle "
                         "replicas (roofline costs per call), independent verdicts, mean latencies"
                         + (" — the simulation shares replicas, so it may differ" if contended else "") + sampled)
    return out


def renewal_form(tasks, sc: Scenario, protocol: str = "specagent") -> dict:
    """costsim's renewal form over the tasks (the paper's R_u and L_u generalised to a
    distribution of chunk lengths, :func:`costsim.formulas.renewal_ratios`) over the
    tasks' own chunk-length distribution (every draft accepted) under ``protocol``'s chunking
    and review rules, independent acceptance at the rate the reviewer accepts a step
    (:func:`accept_rate`).

    ``R`` and ``L`` take v/d, rho and kappa from the roofline for the tasks' mean step and
    observation lengths and mean context (the typical step, :func:`step_shape`), uncontended (batch 1): R in strong HBM bytes, L in
    time — the currencies the simulator measures. ``R_passes`` and ``L_passes`` are the
    paper's pass counting (v = 1 prefill pass + verdict tokens, d = mean step tokens). It
    assumes a rejected chunk is redrawn (a fixed path drafts and reviews its steps again), one
    context for every step, and whole chunks: see :mod:`costsim.twin` for the exact value.
    """
    d, o, ctx = step_shape(tasks)
    opts = {**protocol_options(sc), **PROTOCOLS[protocol].fixed}  # an ablation's fixed options too
    rule = opts.get("chunking", DEFAULT_CHUNKING)
    dist = chunk_distribution([c for t in tasks for c in chunks(t.calls, sc.K, rule)], sc.K)
    pr, pu = np.asarray(dist["pmf_reviewed"]), np.asarray(dist["pmf_unreviewed"])
    if opts.get("review") == "all":  # the chunks that reach K unreviewed are reviewed too
        pr, pu = pr + pu, np.zeros_like(pu)
    # A rejection's repair: fused, or a correction turn of its own (every one with a separate
    # repair, the correction rate's share with the fused one): rho is their expectation.
    defaults = SpecAgentOptions()
    c_rate = 1.0 if opts.get("repair") == "separate" else opts.get("correction_rate", defaults.correction_rate)
    c_rho = opts.get("correction_rho", defaults.correction_rho)
    pp = roofline.protocol_parameters(sc.strong, sc.weak, np.arange(1, sc.K + 1), d, o,
                                      sc.verdict_tokens, sc.rho, ctx, strong_step_scale=sc.strong_step_scale,
                                      weak_step_scale=sc.weak_step_scale, correction_rate=c_rate,
                                      correction_steps=c_rho,
                                      correction_tokens=opts.get("correction_tokens", defaults.correction_tokens))
    # Passes are counted in Strong-only's steps: d times the strong step scale; a correction turn
    # is one prefill pass and its decoded steps.
    d_strong = d * sc.strong_step_scale
    vd = float(formulas.v_over_d_passes(sc.verdict_tokens, d_strong))
    rho = (1.0 - c_rate) * sc.rho + c_rate * (c_rho + 1.0 / d_strong)
    accept, p, beta, accept_words = accept_rate(sc)

    def ratios(p):  # R in HBM bytes, L in time; and both in passes
        hbm = formulas.renewal_ratios(p, pr, pu, None, pp.rho["hbm"], 0.0, v_over_d_per_length=pp.v_over_d["hbm"])
        time = formulas.renewal_ratios(p, pr, pu, None, pp.rho["time"], pp.kappa,
                                       v_over_d_per_length=pp.v_over_d["time"])
        passes = formulas.renewal_ratios(p, pr, pu, vd, rho, pp.kappa)
        return np.stack([hbm["R"], time["L"], passes["R"], passes["L"]])

    # Over a Beta of p_u, the mean of the ratios (each task's p_u applies to its steps alone).
    R, L, R_passes, L_passes = (formulas.expected_over_beta(lambda q: ratios(accept(q)), *beta) if beta
                                else ratios(accept(p)))
    return {"R": float(R), "L": float(L), "R_passes": float(R_passes), "L_passes": float(L_passes),
            "v_over_d_passes": vd, "rho": rho, "kappa": pp.kappa, "mean_step_tokens": d,
            "assumption": f"renewal over the tasks' chunk lengths ({rule} chunking, "
                          f"{'every chunk' if opts.get('review') == 'all' else 'held chunks'} reviewed, "
                          f"every draft accepted), independent acceptance {accept_words}, roofline v/d, rho, "
                          "kappa at batch 1 at the typical step: mean step, observation and context tokens"
                          + (f"; {c_rate:.0%} of rejections repaired in a correction turn of their own" if c_rate else "")}


def accept_rate(sc: Scenario):
    """What the renewal form takes for the chance that the reviewer accepts a drafted step:
    ``(that chance as a function of p_u, p_u, (a, b) of a Beta over p_u or None, in words)``. A
    verifier that accepts a bad step at ``false_accept`` and rejects a good one at
    ``false_reject`` accepts at p_u (1 - false_reject) + (1 - p_u) false_accept; a Markov
    chain's steps pass at its stationary rate (the form leaves out their correlation); recorded
    verdicts are not in it (the fallback p_u is)."""
    fa, fr = sc.false_accept, sc.false_reject
    kind, vals = p_dist_parts(sc.p_dist)
    p, beta, words = sc.p, None, "at p_u"
    if kind == "beta":
        beta, words = tuple(vals), f"at p_u ~ Beta({vals[0]:g}, {vals[1]:g}) per task (the mean over it)"
    elif kind == "markov":
        p = stationary_p(*vals)
        words = f"at the Markov chain's stationary p_u {p:.4g} (its correlation left out)"
    elif kind == "recorded":
        p, words = recorded_fallback(sc.p_dist, sc.p), "at the fallback p_u (the recorded verdicts are not in it)"
    if fa or fr:
        words += f", through the verifier's errors (false accept {fa:g}, false reject {fr:g})"
    return (lambda q: q * (1.0 - fr) + (1.0 - q) * fa), p, beta, words


def report(tasks, sc: Scenario, progress=None, workers: int | None = None):
    """``(rows, result)``: per-task rows and ``{"protocols": ..., "closed_form": ...}``; the
    simulation's independent runs on up to ``workers`` processes (:func:`costsim.sim.run.simulate`)."""
    rows = simulate(tasks, sc, progress, workers=workers, compact=True)
    result = {"protocols": summarize(rows), "closed_form": closed_form(tasks, sc),
              "scenario": {"p": sc.p, "K": sc.K, "p_dist": sc.p_dist, "sessions": sc.sessions,
                           "arrival_rate": sc.arrival_rate, "seed": sc.seed, "tasks": len(tasks),
                           "prefix_cache": sc.prefix_cache, "routing": sc.routing,
                           "strong": sc.strong.describe(), "weak": sc.weak.describe(),
                           "step_scales": {"strong": sc.strong_step_scale, "weak": sc.weak_step_scale, "rho": sc.rho,
                                           "source": sc.step_scale_source or "the recorded tokens"}}}
    # (a sequence that draws its tasks as read, SyntheticTasks, is read in its first ones only)
    result["notes"] = notes(tasks if isinstance(tasks, list) else tasks[:COMMANDS.closed_form_tasks], result)
    return rows, result


def notes(tasks, result) -> list[str]:
    """Plain-word lines for what would surprise a reader of the paper: SpecAgent slower than
    Strong-only, and, on a replayed tau² trace of the paper's domains, how its strong calls,
    decoded tokens and wall time compare with the paper's and why they differ."""
    prot, out = result["protocols"], []
    spec = [n for n in prot if drafts(n) and "wall_ratio" in prot[n]]
    kappa = result["closed_form"]["renewal"]["kappa"]
    for n in spec:
        m = prot[n]
        L = m["wall_ratio"]["mean"]
        if L > 1.0:
            so = prot["strong-only"]
            draft = m["weak_busy_s"]["mean"] / so["wall_s"]["mean"]
            out.append(f"{n} is slower than Strong-only here (wall ratio {L:.2f}): drafting alone takes {draft:.2f} of "
                       f"Strong-only's wall time, because a weak step takes {kappa:.2f} of a strong step on these "
                       f"deployments (kappa, batch 1); it pays when weak steps are much faster than strong ones.")
    domains = {t.domain for t in tasks}
    bench = published()["benchmark"].get(domains.pop().capitalize()) if len(domains) == 1 else None
    if bench and "trace" in bench and all(t.source.startswith("tau2:") for t in tasks) and "specagent" in prot \
            and "strong_calls_ratio" in prot["specagent"]:
        m, tau2, shares = prot["specagent"], published()["tau2"], published()["shares"]
        lo, hi = tau2["decoded_strong_share"]
        s_lo, s_hi = shares["strong_hbm_share"]
        out.append(f"the paper ({bench['trace']}'s domain, K = {bench['K']}): SpecAgent's strong calls "
                   f"{bench['specagent_calls']} / {bench['strong_only_calls']} = "
                   f"{bench['specagent_calls'] / bench['strong_only_calls']:.3f} of Strong-only's, here "
                   f"{m['strong_calls_ratio']['mean']:.3f} (other agents' recorded runs, p_u assumed); decoded strong "
                   f"tokens {lo:.0%}-{hi:.0%} there, {m['strong_decode_tokens_ratio']['mean']:.1%} here (a review "
                   f"decodes a verdict, not a step: the paper's share needs verdicts of a few hundred tokens or "
                   f"thinking strong steps); wall {bench['wall']} there, {m['wall_ratio']['mean']:.2f} here "
                   f"(kappa {kappa:.2f} here; the strong step scale that gives the paper's wall on the default "
                   f"deployments is computed in figures/README.md, costsim.paper.implied_strong_step_scale: "
                   f"--strong-step-scale, docs/protocols.md); committed steps (model calls) per review "
                   + (f"{m['steps_per_review']['mean']:.1f} here" if "steps_per_review" in m else "none here (no chunk "
                      "was reviewed)") + f", about {tau2['steps_per_review']} there; the strong "
                   f"model's share of SpecAgent's HBM reads {m['strong_hbm_share']['mean']:.0%} here, {s_lo:.0%}-{s_hi:.0%} "
                   f"over the paper's benchmarks (verdicts of a few dozen tokens, the weak model drafting every "
                   f"step: docs/protocols.md).")
    return out

"""The analytic twin of a simulation: exact expected per-task costs of Strong-only, Weak-only
and SpecAgent (and its ablations) on the tasks' own fixed trajectories.

Assumptions — those of a one-session simulation: one task at a time on otherwise idle replicas
(every call costs :meth:`costsim.roofline.Coefficients.solo_call`), verdicts independent per
step (Bernoulli p_u, a Beta-distributed p_u per task, or recorded verdicts with a fallback
p_u), tool and user latencies at their means, a reviewer without errors, a fixed path (not a
generative one that is redrawn after a repair). Within them nothing is approximated: on a fixed
path SpecAgent is a Markov chain whose state at a chunk boundary is the committed position and
what each model has cached and not yet seen; the expected costs are summed over its reachable
states, forward in position. This is what the simulator estimates by sampling, computed
independently of it: the tests hold the two to each other's Monte-Carlo interval.

Unlike the paper's renewal form (:func:`costsim.formulas.renewal_ratios`) it sees that a fixed
path drafts the steps after a rejection again (a held write is reviewed again), that a task
ends part-way through a chunk, and that contexts grow over a task.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import formulas, protocols
from ..traces.stats import chunk_end
from .agent import COUNTERS
from .metrics import PER_TASK, RATIOS
from .run import Scenario, protocol_options, replica_costs

#: The row columns the twin computes (expected values per task), as in the simulator's rows.
COLUMNS = tuple(f"{who}_{c}" for who in ("strong", "weak") for c in COUNTERS) + (
    "wall_s", "tool_s", "reviews", "rejections", "auto_commits", "committed_steps")
_COL = {c: i for i, c in enumerate(COLUMNS)}
_SPECAGENT_OPTIONS = ("K", "rho", "verdict_tokens", "hold", "review", "repair", "correction_tokens")


def unavailable(tasks, sc: Scenario) -> str | None:
    """Why the scenario has no exact twin (None if it has one)."""
    kind = (sc.p_dist or "").partition(":")[0]
    if kind == "markov":
        return "correlated (Markov) verdicts"
    if sc.false_accept or sc.false_reject:
        return "verifier errors"
    if any(t.meta.get("redraw") for t in tasks):
        return "generative trajectories (redrawn after a repair)"
    return None


def expected_rows(tasks, sc: Scenario, extra=()) -> dict:
    """``{protocol: array (tasks, COLUMNS)}`` of expected per-task values, for Strong-only (the
    baseline, always) and those of the scenario's protocols and of ``extra`` that have a twin.
    Raises ValueError where :func:`unavailable` says why not."""
    why = unavailable(tasks, sc)
    if why:
        raise ValueError(f"no exact twin: {why}")
    names = list(dict.fromkeys(n for n in ("strong-only", *sc.protocols, *extra) if has_twin(n)))
    kind, _, args = (sc.p_dist or "").partition(":")
    if kind == "beta":
        a, b = (float(x) for x in args.split(","))
        # The costs are polynomials in a task's p_u: Gauss–Jacobi quadrature over the Beta.
        return {n: formulas.expected_over_beta(lambda p, n=n: _rows(tasks, sc, n, p), a, b) for n in names}
    p = float(args) if kind == "recorded" and args else sc.p
    return {n: _rows(tasks, sc, n, np.array([p]), recorded=kind == "recorded")[..., 0] for n in names}


def ratios(tasks, sc: Scenario, extra=()) -> dict:
    """``{protocol: {metric: value}}``: the expected per-task metrics of
    :data:`costsim.sim.metrics.PER_TASK` and the ratios of :data:`~costsim.sim.metrics.RATIOS`
    to Strong-only (ratios of expected sums over the tasks, what the simulator's paired ratio
    estimates), for the protocols of :func:`expected_rows`."""
    rows = expected_rows(tasks, sc, extra)
    base = _with_totals(rows["strong-only"])
    out = {}
    for name, r in rows.items():
        col = _with_totals(r)
        m = {metric: float(col[c].mean()) for metric, c in PER_TASK.items()}
        m.update({metric: float(col[c].sum() / base[c].sum()) if base[c].sum() else float("nan")
                  for metric, c in RATIOS.items()})
        out[name] = m
    return out


def _with_totals(r):
    col = {c: r[:, i] for i, c in enumerate(COLUMNS)}
    for c in ("hbm_bytes", "flops"):
        col[c] = col[f"strong_{c}"] + col[f"weak_{c}"]
    return col


def has_twin(name: str) -> bool:
    """Whether protocol ``name`` has an exact twin: Strong-only, Weak-only, SpecAgent and its
    ablations."""
    fn = protocols.PROTOCOLS.get(name, (None,))[0]
    return name in ("strong-only", "weak-only") or fn is protocols.PROTOCOLS["specagent"][0]


def _rows(tasks, sc: Scenario, name: str, p, recorded: bool = False):
    """Expected rows, array (tasks, COLUMNS, len(p)), at each per-step pass probability in p."""
    (s_coef, s_call), (w_coef, w_call) = replica_costs(sc)
    budget = sc.token_budget
    models = {"strong": (lru_cache(maxsize=None)(lambda *a: s_coef.solo_call(*a, budget)), s_call),
              "weak": (lru_cache(maxsize=None)(lambda *a: w_coef.solo_call(*a, budget)), w_call)}
    latency = {"read": sc.tool_latency.mean, "write": sc.tool_latency.mean,
               "respond": sc.user_latency.mean, "final": 0.0}

    def call(vec, who, prefill, context, decode):
        secs, hbm, flops = models[who][0](prefill, context, decode)
        base = _COL[f"{who}_calls"]  # then the rest of COUNTERS, in their order:
        for k, v in enumerate((1.0, prefill, decode, hbm, flops, secs)):
            vec[base + k] += v
        vec[_COL["wall_s"]] += secs + models[who][1]

    def execute(vec, step):
        rec = sc.tool_latency.of(step) if step.kind in ("read", "write") else None
        lat = latency[step.kind] if rec is None else rec
        vec[_COL["wall_s"]] += lat
        vec[_COL["tool_s"]] += lat

    if recorded:
        def q(step):
            return p if step.verdict is None else np.full_like(p, float(step.verdict))
    else:
        def q(step):
            return p

    if name in ("strong-only", "weak-only"):
        who = name.partition("-")[0]
        out = np.empty((len(tasks), len(COLUMNS), len(p)))
        for t, task in enumerate(tasks):
            out[t] = np.asarray(_one_model(task, who, call, execute))[:, None]
        return out
    opts = protocol_options(sc)
    kw = {k: v for k, v in opts.items() if k in _SPECAGENT_OPTIONS}
    kw.update(protocols.PROTOCOLS[name][1])
    return np.stack([_specagent(task, p, q, call, execute, **kw) for task in tasks])


def _one_model(task, who, call, execute):
    """Strong-only / Weak-only (``protocols.strong_only``): deterministic on a fixed path."""
    vec = [0.0] * len(COLUMNS)
    steps = task.steps
    ctx, pending = 0, max(steps[0].context_tokens, 0) if steps else 0
    for st in steps:
        call(vec, who, pending, ctx, st.output_tokens)
        ctx += pending + st.output_tokens
        execute(vec, st)
        pending = st.observation_tokens
        vec[_COL["committed_steps"]] += 1
    return vec


def _specagent(task, p, q, call, execute, K=6, hold="writes", review="held", repair="fused", rho=1.0,
               verdict_tokens=24, correction_tokens=64):
    """Expected costs of ``protocols.specagent`` on the task's fixed path: array (COLUMNS, len(p)).

    ``layers[i]`` maps a state at a chunk boundary with i steps committed — (strong cached,
    strong unseen, weak cached, weak unseen) tokens — to its probability (an array over p)."""
    steps, N = task.steps, len(task.steps)
    init = max(steps[0].context_tokens, 0) if steps else 0
    vecs, masses = [], []  # each transition's costs and probability: summed at the end
    layers = [dict() for _ in range(N + 1)]
    layers[0][(0, init, 0, init)] = np.ones_like(p)

    def reach(i, state, mass):
        layers[i][state] = layers[i].get(state, 0.0) + mass

    for i in range(N):
        for (s_ctx, s_pend, w_ctx, w_pend), mass in layers[i].items():
            # --- draft: deterministic on a fixed path ---------------------------------------
            vec = [0.0] * len(COLUMNS)
            drafted, held, w_base = [], False, w_ctx + w_pend
            while i + len(drafted) < N:
                st = steps[i + len(drafted)]
                call(vec, "weak", w_pend, w_ctx, st.output_tokens)
                w_ctx, w_pend = w_ctx + w_pend + st.output_tokens, 0
                drafted.append(st)
                end, held = chunk_end(st.kind, len(drafted), K, hold)
                if held:
                    break
                execute(vec, st)
                w_pend = st.observation_tokens
                if end:
                    break
            n = len(drafted)
            chunk = sum(s.output_tokens + s.observation_tokens for s in drafted)
            if held:
                chunk -= drafted[-1].observation_tokens
            if not held and review != "all":
                vec[_COL["auto_commits"]] += 1
                vec[_COL["committed_steps"]] += n
                vecs.append(vec)
                masses.append(mass)
                reach(i + n, (s_ctx, s_pend + chunk, w_ctx, w_pend), mass)
                continue
            vecs.append(vec)
            masses.append(mass)
            # --- verify: the accepted prefix a is n with probability prod q, else the first miss
            survive = np.ones_like(p)
            for a in range(n + 1):
                if a < n:
                    qa = q(drafted[a])
                    pa, survive = survive * (1.0 - qa), survive * qa
                else:
                    pa = survive
                if not pa.any():
                    continue
                vec = [0.0] * len(COLUMNS)
                reject = a < n
                repair_tokens = int(round(rho * drafted[a].output_tokens)) if reject else 0
                decode = verdict_tokens + (repair_tokens if reject and repair == "fused" else 0)
                call(vec, "strong", s_pend + chunk, s_ctx, decode)
                vec[_COL["reviews"]] += 1
                if reject and repair == "separate":
                    call(vec, "strong", correction_tokens, s_ctx + s_pend + chunk + decode, repair_tokens)
                vec[_COL["rejections"]] += reject
                committed = drafted[: a + 1] if reject else drafted
                last = committed[-1]
                prefix = sum(s.output_tokens + s.observation_tokens for s in committed[:-1])
                s_ctx2, s_pend2 = s_ctx + s_pend + prefix + last.output_tokens, 0
                if reject:
                    w_ctx2, w_pend2 = w_base + prefix, last.output_tokens
                else:
                    w_ctx2, w_pend2 = w_base + prefix + last.output_tokens, 0
                if reject or held:
                    execute(vec, last)
                    s_pend2 += last.observation_tokens
                    w_pend2 += last.observation_tokens
                else:
                    s_ctx2 += last.observation_tokens
                    w_pend2 = last.observation_tokens
                vec[_COL["committed_steps"]] += len(committed)
                m = mass * pa
                vecs.append(vec)
                masses.append(m)
                reach(i + len(committed), (s_ctx2, s_pend2, w_ctx2, w_pend2), m)
    if not vecs:
        return np.zeros((len(COLUMNS), len(p)))
    return np.asarray(vecs).T @ np.stack(masses)

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

Unlike the renewal form (:func:`costsim.formulas.renewal_ratios`, costsim's) it sees that a fixed
path drafts the steps after a rejection again (a held write is reviewed again), that a task
ends part-way through a chunk, and that contexts grow over a task.
"""

from __future__ import annotations

import inspect
from functools import lru_cache, partial

import numpy as np

from . import formulas, protocols
from .acceptance import p_dist_parts, recorded_fallback
from .metrics import COUNTERS, PER_TASK, RATIOS
from .protocols.schedule import Boundary, Call, Chance, Count, Execute, Review
from .scenario import Scenario, protocol_options, replica_costs

#: The row columns the twin computes (expected values per task), as in the simulator's rows.
COLUMNS = tuple(f"{who}_{c}" for who in ("strong", "weak") for c in COUNTERS) + (
    "wall_s", "tool_s", "reviews", "reviewed_steps", "rejections", "auto_commits", "committed_steps")
_COL = {c: i for i, c in enumerate(COLUMNS)}


def unavailable(tasks, sc: Scenario) -> str | None:
    """Why the scenario has no exact twin (None if it has one)."""
    if p_dist_parts(sc.p_dist)[0] == "markov":
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
    kind, vals = p_dist_parts(sc.p_dist)
    if kind == "beta":
        a, b = vals
        # The costs are polynomials in a task's p_u: Gauss–Jacobi quadrature over the Beta.
        return {n: formulas.expected_over_beta(lambda p, n=n: _rows(tasks, sc, n, p), a, b) for n in names}
    p = recorded_fallback(sc.p_dist, sc.p)
    return {n: _rows(tasks, sc, n, np.array([p]), recorded=kind == "recorded")[..., 0] for n in names}


def ratios(tasks, sc: Scenario, extra=()) -> dict:
    """``{protocol: {metric: value}}``: the expected per-task metrics of
    :data:`costsim.metrics.PER_TASK` and the ratios of :data:`~costsim.metrics.RATIOS`
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
        reviews = col["reviews"].sum()
        m["steps_per_review"] = float(col["committed_steps"].sum() / reviews) if reviews else float("nan")
        m["reviewed_chunk_steps"] = float(col["reviewed_steps"].sum() / reviews) if reviews else float("nan")
        m["strong_hbm_share"] = float(col["strong_hbm_bytes"].sum() / col["hbm_bytes"].sum())
        out[name] = m
    return out


def _with_totals(r):
    col = {c: r[:, i] for i, c in enumerate(COLUMNS)}
    for c in ("hbm_bytes", "flops"):
        col[c] = col[f"strong_{c}"] + col[f"weak_{c}"]
    return col


def has_twin(name: str) -> bool:
    """Whether protocol ``name`` has an exact twin (its record says so: Strong-only, Weak-only,
    SpecAgent and its ablations), on the scenario's own deployments."""
    p = protocols.PROTOCOLS.get(name)
    return p is not None and p.twin


def _rows(tasks, sc: Scenario, name: str, p, recorded: bool = False):
    """Expected rows, array (tasks, COLUMNS, len(p)), at each per-step pass probability in p."""
    (s_coef, s_call), (w_coef, w_call) = replica_costs(sc)
    s_budget, w_budget = sc.limits(sc.strong)[0], sc.limits(sc.weak)[0]
    models = {"strong": (lru_cache(maxsize=None)(lambda *a: s_coef.solo_call(*a, s_budget)), s_call),
              "weak": (lru_cache(maxsize=None)(lambda *a: w_coef.solo_call(*a, w_budget)), w_call)}
    if recorded:
        def q(step):
            return p if step.verdict is None else np.full_like(p, float(step.verdict))
    else:
        def q(step):
            return p
    restart, latency = _restarter(sc, name), _latency(sc)
    return np.stack([_expect(task, restart(task), p, q, models, latency) for task in tasks])


def _latency(sc: Scenario):
    """Expected seconds of a step's side effect: its tool calls run together (recorded, or the
    expected longest of their draws), the user's reply, or none after the final answer."""
    tool, user = sc.tool_latency, sc.user_latency

    def lat(step) -> float:
        if step.kind in ("read", "write"):
            rec = tool.of(step)
            return rec if rec is not None else tool.mean_of(step.tool_calls)
        return user.mean if step.kind == "respond" else 0.0
    return lat


def _restarter(sc: Scenario, name: str):
    """``restart(task)(state)``: protocol ``name``'s schedule on ``task`` with the scenario's
    options, started at a boundary's state (None: at the start)."""
    schedule, fixed = protocols.schedule_of(name)
    takes = set(inspect.signature(schedule).parameters)
    kw = {k: v for k, v in protocol_options(sc).items() if k in takes - {"task", "start"}}
    kw.update(fixed)

    def restart(task):
        run = partial(schedule, task, **kw)
        return (lambda state: run(start=state)) if "start" in takes else (lambda state: run())
    return restart


def call_weights(tasks, sc: Scenario, name: str) -> list:
    """Per task, the expected number of each call a protocol makes and the expected value of
    every column no call costs, at the scenario's p_u (its deployments do not enter): a list of
    ``({(model, prefill, context, decode): expected calls}, {column: expected value})``.
    :func:`rows_of_weights` costs them on any deployments, so a search over deployments runs
    each schedule's branches once (expected costs are linear in the calls' costs)."""
    if sc.p_dist or unavailable(tasks, sc):
        raise ValueError("call weights need a plain per-step acceptance rate (no p_dist, no verifier errors)")
    p = np.array([sc.p])
    latency = _latency(sc)
    restart = _restarter(sc, name)
    out = []
    for task in tasks:
        calls, other = {}, [0.0] * len(COLUMNS)
        for items, m in _segments(task, restart(task), lambda step: p, np.ones_like(p)):
            w = float(m[0])
            for cmd in items:
                if type(cmd) is Call:
                    calls[cmd] = calls.get(cmd, 0.0) + w
            for k, v in enumerate(_cost([c for c in items if type(c) is not Call], None, latency)):
                other[k] += w * v
        out.append((calls, {c: other[i] for i, c in enumerate(COLUMNS) if other[i]}))
    return out


def rows_of_weights(weights, sc: Scenario, cost=None):
    """The expected rows, array (tasks, COLUMNS), of :func:`call_weights` on the scenario's
    deployments: what :func:`expected_rows` gives, summed over calls in another order.
    ``cost``: what costs one model's calls (default :func:`cost_of_calls`; a search caches it)."""
    cost = cost or cost_of_calls
    rows = np.zeros((len(weights), len(COLUMNS)))
    for i, (_, other) in enumerate(weights):
        for c, v in other.items():
            rows[i, _COL[c]] = v
    for who, dep, (coef, overhead) in zip(("strong", "weak"), (sc.strong, sc.weak), replica_costs(sc)):
        part = cost(weights, who, coef, overhead, sc.limits(dep)[0])
        base = _COL[f"{who}_calls"]
        rows[:, base:base + len(COUNTERS)] += part[:, :-1]
        rows[:, _COL["wall_s"]] += part[:, -1]
    return rows


def cost_of_calls(weights, model: str, coef, overhead_s: float, token_budget: int):
    """Per task, the expected COUNTERS of ``model``'s calls in :func:`call_weights` on replicas
    of coefficients ``coef`` (uncontended), then the wall time they add: array (tasks, 7)."""
    out = np.zeros((len(weights), len(COUNTERS) + 1))
    for i, (calls, _) in enumerate(weights):
        n = pre = dec = hbm = flops = secs = wall = 0.0
        for cmd, w in calls.items():
            if cmd.model != model:
                continue
            s_, h_, f_ = coef.solo_call(cmd.prefill, cmd.context, cmd.decode, token_budget)
            n, pre, dec = n + w, pre + w * cmd.prefill, dec + w * cmd.decode
            hbm, flops, secs, wall = hbm + w * h_, flops + w * f_, secs + w * s_, wall + w * (s_ + overhead_s)
        out[i] = (n, pre, dec, hbm, flops, secs, wall)
    return out


def _expect(task, restart, p, q, models, latency):
    """Expected costs of a schedule on ``task``: array (COLUMNS, len(p)). ``restart(state)``
    starts it at a boundary's state (None: at the start of the task)."""
    vecs, masses = [], []  # each segment's costs and probability: summed at the end
    for items, m in _segments(task, restart, q, np.ones_like(p)):
        vecs.append(_cost(items, models, latency))
        masses.append(m)
    if not vecs:
        return np.zeros((len(COLUMNS), len(p)))
    return np.asarray(vecs).T @ np.stack(masses)


def _segments(task, restart, q, one):
    """Every segment of a schedule on ``task`` with its probability (an array like ``one``):
    ``(commands after its script's last answer, probability)``.

    ``layers[i]`` maps each state at a boundary with i steps committed to its probability. From
    each state the schedule runs to its next boundary once for every sequence of review outcomes
    (a script); each run keeps only the commands after its script's last answer, weighted by
    the script's probability, so every command is counted once."""
    layers = [dict() for _ in range(len(task.calls) + 1)]
    layers[0][None] = one
    for i in range(len(task.calls)):
        for state, mass in layers[i].items():
            scripts = [((), mass)]
            while scripts:
                script, m = scripts.pop(0)
                items, branch, reached = _segment(restart(state), script)
                yield items, m
                if branch is not None:  # a review or chance past the script: one script per answer
                    scripts.extend((script + (a,), m * pa) for a, pa in _outcomes(branch, q, one) if pa.any())
                elif reached is not None:
                    layers[reached.position][reached.state] = layers[reached.position].get(reached.state, 0.0) + m


def _segment(gen, script):
    """Run ``gen`` from its starting boundary to the next one (or its end), answering its
    reviews from ``script``: ``(the commands after the script's last answer, the review past
    the script or None, the boundary reached or None)``."""
    items = []
    answered, value, first = 0, None, True
    while True:
        try:
            cmd = gen.send(value)
        except StopIteration:
            return items, None, None
        value = None
        kind = type(cmd)
        if kind is Boundary:
            if not first:
                return items, None, cmd
            first = False
            continue
        if kind is Review or kind is Chance:
            if answered == len(script):
                return items, cmd, None
            value = script[answered]
            answered += 1
            if answered == len(script):
                items = []  # the commands so far belong to the script's parents
            continue
        if answered < len(script):
            continue
        if kind is Call or kind is Execute or kind is Count:
            items.append(cmd)
        else:
            raise TypeError(f"the exact twin cannot run {cmd!r}")


def _cost(items, models, latency) -> list:
    """The COLUMNS of a segment's commands, in their order."""
    vec = [0.0] * len(COLUMNS)
    for cmd in items:
        kind = type(cmd)
        if kind is Call:
            fn, overhead = models[cmd.model]
            secs, hbm, flops = fn(cmd.prefill, cmd.context, cmd.decode)
            base = _COL[f"{cmd.model}_calls"]  # then the rest of COUNTERS, in their order:
            for k, v in enumerate((1.0, cmd.prefill, cmd.decode, hbm, flops, secs)):
                vec[base + k] += v
            vec[_COL["wall_s"]] += secs + overhead
        elif kind is Execute:
            step = cmd.step
            lat = latency(step)
            vec[_COL["wall_s"]] += lat
            vec[_COL["tool_s"]] += lat
        else:
            vec[_COL[cmd.name]] += cmd.n
    return vec


def _outcomes(cmd, q, one):
    """``(answer, probability)`` of each answer to ``cmd``: a :class:`Chance` is True with its
    probability; a review of ``steps`` accepts a = n with probability prod q, else a is the first
    rejected step."""
    if type(cmd) is Chance:
        yield True, one * cmd.p
        yield False, one * (1.0 - cmd.p)
        return
    steps = cmd.steps
    survive = np.ones_like(q(steps[0]))
    for a in range(len(steps) + 1):
        if a < len(steps):
            qa = q(steps[a])
            pa, survive = survive * (1.0 - qa), survive * qa
        else:
            pa = survive
        yield a, pa


"""Capacity planning with the simulator: replicas, sessions, latency and cost for a task rate.

The search is the one serving simulators use (e.g. Vidur's capacity search): find, by
bisection over load, the highest Poisson task rate one *cell* of replicas sustains with the
task-latency p95 under the target, then scale out: ``ceil(rate / cell_rate)`` cells. Ours
probes two rates a round, side by side on two processes where there are two CPUs (outward by
factors of 2 and 4, then by thirds: a round narrows the bracket 3-fold, not 2-fold; the rounds
are the same on any number of processes, so is the answer).

- A cell is one strong replica and ``w`` weak replicas (Strong-only: one strong; Weak-only:
  one weak). For a protocol that uses both (SpecAgent), ``w`` comes from two preliminary
  searches: the rate ``rs`` one strong replica sustains when weak replicas are ample, and the
  rate ``rw`` one weak replica sustains when strong replicas are ample; ``w = ceil(rs / rw)``.
  The cell itself is then searched with both limited; since both pools add latency it
  sustains less than ``rs``, and while it does, ``w`` grows in proportion (``refinements``
  times at most) as long as the cell's rate improves by more than the search's resolution.
  A cell sustains no more than ``rs``, and more weak replicas sustain no less (assumed), so
  these searches start from what is known: below ``rs``'s next grid point, above the last
  cell's rate.
- Replicas for a task rate λ: ``n = ceil(λ / cell_rate)`` cells, each with as many weak
  replicas as its share λ/n needs (``ceil(w · (λ/n) / cell_rate)``), so that no replica carries
  more load than in the cell found feasible. The cell does not depend on λ, so replica counts
  never fall as λ rises (see tests/test_capacity.py).
- The operating point (latency p50/p95, running batches, sessions in flight) is simulated
  for one cell at its share λ/n of the load.
- Rates are probed on the fixed grid start·(1 + rel_tol)^k. A probe judges a rate only if its
  arrivals span ``steady_spans`` times its own p95 latency (else the run never reaches a
  steady state); a probe of the given tasks within the target but too short for that runs
  again on them repeated, as many as it takes (up to ``max_probe_tasks``), so the search
  brackets the true rate instead of stopping at a floor; one already over the target fails
  the rate (a longer run of the same load only queues more). The judging does not involve the target, so a looser target never
  finds a lower rate, and never more replicas (hypothesis-tested over target and rate). A cell
  that meets the target at the highest rate even the longest probe can judge is reported as a
  lower bound ("(>=)").

Latency percentiles leave out the first ``warmup`` and the last ``cooldown`` fraction of
tasks by arrival (the empty start and the drain of an open-loop run). Everything is
deterministic: the same tasks and seeds in every probe (common random numbers), so only the
load differs between probes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from . import fleet_cost, roofline
from .config import COMMANDS, serving_words
from .distributed import fork_map
from .protocols import on_api, payoff_judges
from .memory import kv_pool_bytes, max_sequences
from .payoff import specagent_payoff
from .scenario import Scenario
from .sim.run import simulate
from .sizing import api_profile, edge_deployment
from .traces.stats import step_shape

#: Sentinel replica count for "ample": every task gets its own replica (no contention).
AMPLE = -1


@dataclass(frozen=True)
class Search:
    """How the search probes load."""

    latency_p95_s: float = COMMANDS.latency_p95_s
    rel_tol: float = COMMANDS.capacity_tolerance         # stop when hi / lo <= 1 + rel_tol
    warmup: float = 0.2            # leading fraction of tasks (by arrival) left out of percentiles
    cooldown: float = 0.1          # trailing fraction left out
    max_probes: int = 40
    max_weak_per_strong: int = 64
    steady_spans: float = 3.0      # a probe judges a rate if its arrivals span this many of its p95s
    max_probe_tasks: int = 10_000  # a probe too short to judge its rate repeats its tasks up to this many
    workers: int | None = None     # processes for a search round's probes (costsim.distributed.fork_map); None: the CPUs
    refinements: int = 2           # extra cell searches with more weak replicas per strong


@dataclass
class RateProbe:
    """One probe of a rate search: the rate, the p50 and p95 it gave, whether it met the target, and the cell."""

    rate: float
    p50_s: float
    p95_s: float
    feasible: bool
    strong: int
    weak: int


@dataclass
class Cell:
    """The largest Poisson task rate one cell sustains under the latency target."""

    protocol: str
    strong: int                    # strong replicas in the cell (0 or 1)
    weak: int                      # weak replicas in the cell
    rate: float                    # tasks/s the cell sustains (0 if the target is unreachable)
    feasible: bool
    uncontended_p95_s: float
    uncontended_p50_s: float
    capped: bool = False           # rate is the highest the probes could judge: a lower bound
    pool_rates: dict = field(default_factory=dict)   # 'strong'/'weak': rate of one replica alone
    probes: list = field(default_factory=list)


def steady_walls(rows, warmup: float = 0.2, cooldown: float = 0.1) -> np.ndarray:
    """Task wall times (s) over the steady part of a run: by arrival order, the first
    ``warmup`` and last ``cooldown`` fraction left out (all kept where too few are left)."""
    rows = sorted(rows, key=lambda r: r["task_index"])
    n = len(rows)
    lo, hi = int(math.floor(n * warmup)), n - int(math.floor(n * cooldown))
    if hi - lo < max(2, n // 4):  # too few tasks to trim: use them all
        lo, hi = 0, n
    return np.array([r["wall_s"] for r in rows[lo:hi]], float)


def latency_percentiles(rows, warmup: float = 0.2, cooldown: float = 0.1) -> tuple[float, float, float]:
    """(p50, p95, mean) of task wall time over the steady part of a run (:func:`steady_walls`)."""
    w = steady_walls(rows, warmup, cooldown)
    return float(np.percentile(w, 50)), float(np.percentile(w, 95)), float(w.mean())


def _replicas(k: int, n_tasks: int) -> int:
    return n_tasks if k == AMPLE else k


def _run(tasks, sc: Scenario, protocol: str, rate: float | None, strong: int, weak: int):
    sc = replace(sc, protocols=(protocol,), arrival_rate=rate, sessions=1,
                 strong_replicas=max(_replicas(strong, len(tasks)), 1),
                 weak_replicas=max(_replicas(weak, len(tasks)), 1))
    return simulate(tasks, sc)


def _pools(rows, protocol: str) -> tuple[bool, bool]:
    """Does ``protocol`` use replicas of its own on the strong and on the weak side? A strong
    model behind an API (edge-cloud protocols) is the provider's, not a replica to plan."""
    return (not on_api(protocol) and any(r["strong_calls"] > 0 for r in rows), any(r["weak_calls"] > 0 for r in rows))


def replica_deployments(sc: Scenario, protocol: str):
    """The (strong, weak) deployments replicas of ``protocol`` run on: the scenario's, or for
    the edge-cloud protocols (strong behind an API: None) the weak model on the edge device."""
    return (None, edge_deployment(sc.weak, sc.edge_device)) if on_api(protocol) else (sc.strong, sc.weak)


@dataclass(frozen=True)
class Edge:
    """What a rate search found on its grid start·(1 + rel_tol)^k: the highest grid point ``k``
    that met the target and was judged (None: none did), its rate, and whether judging is
    what stopped the search there (the rate is then a lower bound)."""

    k: int | None
    rate: float
    capped: bool


def _probe(tasks, sc, protocol, strong, weak, rate: float, srch: Search) -> tuple[RateProbe, bool]:
    """One probe of ``rate``, and whether it judged the rate (:func:`judgeable`). A probe within
    the target but too short to judge its rate runs again on the tasks repeated, until its
    arrivals span steady_spans of its own p95 (at most max_probe_tasks tasks). One already over
    the target fails the rate: a longer run of the same load only queues more."""
    work = tasks
    rows = _run(work, sc, protocol, rate, strong, weak)
    p50, p95, _ = latency_percentiles(rows, srch.warmup, srch.cooldown)
    while (p95 <= srch.latency_p95_s and rate > judgeable(len(work), p95, srch)
           and len(work) < srch.max_probe_tasks):
        work = _longer(tasks, len(work), p95, rate, srch)
        rows = _run(work, sc, protocol, rate, strong, weak)
        p50, p95, _ = latency_percentiles(rows, srch.warmup, srch.cooldown)
    good = p95 <= srch.latency_p95_s
    return RateProbe(rate, p50, p95, good, strong, weak), not good or rate <= judgeable(len(work), p95, srch)


def _bisect(tasks, sc, protocol, strong, weak, start, srch: Search, probes: list,
            lo: int | None = None, hi: int | None = None) -> Edge:
    """The largest rate with p95 <= target that a probe can judge (:func:`judgeable`), on the
    fixed grid start·(1 + rel_tol)^k, by a search of two probes a round run side by side
    (:func:`costsim.distributed.fork_map`, ``srch.workers``): outward by factors of 2 and 4
    until the edge is bracketed, then by thirds. ``lo``/``hi``, where given, are grid points already
    known to pass/fail (not probed again). The rounds do not depend on the workers, so neither
    does the answer; Edge(None, 0.0, False) if even start/1024 fails.

    The grid and the judging do not depend on the target, and both "meets the target" and "can
    be judged" only get harder as the rate rises, so a looser target never finds a lower rate,
    to the grid point. Where probes disagree with that order (noise), a round takes its lowest
    failing point as the edge's upper side and passes only below it."""
    g = 1.0 + srch.rel_tol
    seen: dict[int, tuple[bool, bool]] = {}  # k -> (met the target and judged, judged)

    def run(ks):
        ks = [k for k in dict.fromkeys(ks) if k not in seen]
        for k, (probe, judged) in zip(ks, fork_map(
                lambda k: _probe(tasks, sc, protocol, strong, weak, start * g**k, srch), ks, srch.workers)):
            probes.append(probe)
            seen[k] = (probe.feasible and judged, judged)
        return ks

    floor = -math.ceil(math.log(1024) / math.log(g))
    d = math.ceil(math.log(2) / math.log(g))  # grid points in a factor of 2
    budget = srch.max_probes
    while budget > 0:
        if lo is not None and hi is not None:
            if hi - lo <= 1:
                break
            ks = sorted({lo + max(1, round((hi - lo) / 3)), lo + max(1, round(2 * (hi - lo) / 3))} - {hi})
        elif hi is None:  # rising: 2 and 4 times the rate (first: the start and twice it)
            ks = [0, d] if lo is None else [lo + d, lo + 2 * d]
        else:  # falling: a half and a quarter
            ks = [max(hi - d, floor), max(hi - 2 * d, floor)]
        ks = run(ks[:budget])
        budget -= len(ks)
        for k in sorted(ks):
            if seen[k][0]:
                if hi is None or k < hi:
                    lo = k if lo is None else max(lo, k)
            elif hi is None or k < hi:
                hi = k
        if lo is None and hi is not None and hi <= floor:
            return Edge(None, 0.0, False)
    if lo is None:
        return Edge(None, 0.0, False)
    return Edge(lo, start * g**lo, hi is not None and hi in seen and not seen[hi][1])


def judgeable(n_tasks: int, p95_s: float, srch: Search) -> float:
    """The highest task rate a probe of ``n_tasks`` tasks can judge: their arrivals must span
    ``steady_spans`` times the probe's own p95 task latency, or the run never reaches a steady
    state. A cell that meets the target at the highest such rate is reported there, as a lower
    bound on what it sustains (more tasks raise it)."""
    return n_tasks / (srch.steady_spans * max(p95_s, 1e-9))


def _longer(tasks, n: int, p95_s: float, rate: float, srch: Search) -> list:
    """The tasks repeated for a run that a run of ``n`` found too short to judge ``rate``: 20%
    past what its p95 says it needs, at least twice as long, at most ``max_probe_tasks``."""
    return repeated(tasks, min(max(math.ceil(1.2 * srch.steady_spans * p95_s * rate), 2 * n), srch.max_probe_tasks))


def search_cell(tasks, sc: Scenario, protocol: str, srch: Search = Search()) -> Cell:
    """The cell of ``protocol`` and the highest task rate it sustains (see the module doc)."""
    base = _run(tasks, sc, protocol, None, AMPLE, AMPLE)  # one session at a time: uncontended
    p50_0, p95_0, mean_0 = latency_percentiles(base, 0.0, 0.0)
    uses_strong, uses_weak = _pools(base, protocol)
    cell = Cell(protocol, int(uses_strong), int(uses_weak), 0.0, False, p95_0, p50_0)
    if p95_0 > srch.latency_p95_s:
        return cell
    if not (uses_strong or uses_weak):  # nothing of ours to load: the provider scales
        cell.rate, cell.feasible = math.inf, True
        return cell
    start = 1.0 / max(mean_0, 1e-9)  # one task in flight on average
    if not (uses_strong and uses_weak):
        edge = _bisect(tasks, sc, protocol, *((1, AMPLE) if uses_strong else (AMPLE, 1)), start, srch, cell.probes)
        cell.rate, cell.capped, cell.feasible = edge.rate, edge.capped, edge.rate > 0
        return cell
    strong_alone, weak_alone = (_bisect(tasks, sc, protocol, *pools, start, srch, cell.probes)
                                for pools in ((1, AMPLE), (AMPLE, 1)))
    rs, rw = strong_alone.rate, weak_alone.rate
    cell.pool_rates = {"strong": rs, "weak": rw}
    if rs <= 0 or rw <= 0:
        return cell
    # Both pools add latency, so a cell of 1 strong and rs/rw weak replicas sustains less than
    # either pool alone. While the weak side is what limits the cell, give it more replicas.
    # Searches of a cell start at rs: their grid point 1 is the one the strong replica alone
    # failed, so it fails here too (known; unless that search only stopped at what it could
    # judge). More weak replicas sustain no less (assumed, as the bisection assumes an order in
    # rate): a refinement on the same grid only searches above the last edge, as if the next
    # point passed, and is kept only if it gains more than the resolution (2 grid points).
    w = min(max(math.ceil(rs / rw - 1e-9), 1), srch.max_weak_per_strong)
    last = None  # (grid start, edge) of the cell kept so far
    for _ in range(1 + srch.refinements):
        grid = min(rs, w * rw)
        over = 1 if grid == rs and not strong_alone.capped else None
        if last and last[0] == grid:
            edge = _bisect(tasks, sc, protocol, 1, w, grid, srch, cell.probes, lo=last[1].k + 1, hi=over)
            if edge.k < last[1].k + 2:
                break
        else:
            edge = _bisect(tasks, sc, protocol, 1, w, grid, srch, cell.probes, hi=over)
        if not edge.rate > cell.rate * (1.0 + srch.rel_tol):
            break
        cell.weak, cell.rate, cell.capped = w, edge.rate, edge.capped
        last = (grid, edge)
        nxt = min(math.ceil(w * rs / edge.rate - 1e-9), srch.max_weak_per_strong)
        if edge.rate >= rs / (1.0 + srch.rel_tol) or nxt <= w:
            break
        w = nxt
    cell.feasible = cell.rate > 0
    return cell


def replicas_for(cell: Cell, task_rate: float) -> tuple[int | None, int | None]:
    """(strong, weak) replicas for ``task_rate`` tasks/s: ``n = ceil(rate / cell rate)`` cells,
    each with the weak replicas its share of the load needs, ``ceil(w · share / cell rate)``,
    so that no replica carries more load than in the cell found feasible. Both counts are
    non-decreasing in ``task_rate``."""
    if not cell.feasible:
        return None, None
    n = _cells(cell, task_rate)
    return cell.strong * n, n * _weak_per_cell(cell, task_rate / n)


def _cells(cell: Cell, task_rate: float) -> int:
    # A hair of slack so that a rate exactly at a multiple of the cell's does not round up.
    return max(math.ceil(task_rate / cell.rate - 1e-9), 1)


def _weak_per_cell(cell: Cell, cell_rate: float) -> int:
    if not cell.weak:
        return 0
    if not cell.strong:
        return 1
    return min(max(math.ceil(cell.weak * cell_rate / cell.rate - 1e-9), 1), cell.weak)


def steady_run(tasks, sc: Scenario, protocol: str, rate: float, strong: int, weak: int,
               srch: Search = Search(), at_least: int = 0):
    """One cell (``strong``/``weak`` replicas, or AMPLE) at ``rate`` tasks/s of Poisson
    arrivals, judged as a probe is (:func:`judgeable`): the tasks repeated, from ``at_least``
    of them, until the arrivals span ``steady_spans`` of the run's own p95 (at most
    ``max_probe_tasks``). Returns (rows, p50 s, p95 s, mean s, whether it got steady)."""
    work = repeated(tasks, max(len(tasks), min(at_least, srch.max_probe_tasks)))
    while True:
        rows = _run(work, sc, protocol, rate, strong, weak)
        p50, p95, mean = latency_percentiles(rows, srch.warmup, srch.cooldown)
        steady = rate <= judgeable(len(work), p95, srch)
        if steady or len(work) >= srch.max_probe_tasks:
            return rows, p50, p95, mean, steady
        work = _longer(tasks, len(work), p95, rate, srch)


def operating_point(tasks, sc: Scenario, cell: Cell, task_rate: float, srch: Search = Search()) -> dict:
    """Simulate one cell at its share of ``task_rate``: latency, running batches, sessions.

    The fleet is ``n`` identical cells with tasks spread evenly, so one cell at rate / n (as a
    Poisson stream: burstier than round-robin, so conservative) stands for all of them.
    """
    n = _cells(cell, task_rate)
    rate = task_rate / n
    s_sim = cell.strong or AMPLE
    w_sim = _weak_per_cell(cell, rate) or AMPLE
    rows, p50, p95, mean, steady = steady_run(tasks, sc, cell.protocol, rate, s_sim, w_sim, srch)
    r0 = rows[0]
    in_flight = rate * mean  # Little's law over the steady part, per cell
    return {
        "latency_p50_s": p50, "latency_p95_s": p95, "latency_mean_s": mean,
        "sessions_in_flight": in_flight * n,
        "sessions_per_strong_replica": in_flight / cell.strong if cell.strong else None,
        "sessions_per_weak_replica": in_flight / w_sim if cell.weak else None,
        "strong_batch": r0["strong_mean_batch"] if cell.strong else None,
        "weak_batch": r0["weak_mean_batch"] if cell.weak else None,
        "strong_utilisation": r0["strong_utilisation"] if cell.strong else None,
        "strong_kv_blocked_share": r0["strong_kv_blocked_share"] if cell.strong else None,
        # in tokens, over the cell's replicas (1 where the cache is always hot: nothing looked up)
        "strong_prefix_cache_hit_rate": r0["strong_prefix_cache_hit_rate"] if cell.strong else None,
        "weak_prefix_cache_hit_rate": r0["weak_prefix_cache_hit_rate"] if cell.weak else None,
        "strong_calls_per_task": float(np.mean([r["strong_calls"] for r in rows])),
        "weak_calls_per_task": float(np.mean([r["weak_calls"] for r in rows])),
        "api_cost_per_task_usd": float(np.mean([r.get("api_cost_usd", 0.0) for r in rows])),
        "simulated": {"cells": n, "task_rate_per_cell": rate, "strong_replicas": cell.strong,
                      "weak_replicas": w_sim if cell.weak else 0, "tasks": len(rows),
                      "steady": steady},
    }


def repeated(tasks, n: int) -> list:
    """The tasks in order, repeated (or cut) to ``n``: a longer run of the same workload."""
    return [tasks[i % len(tasks)] for i in range(n)]


def size_for_rate(tasks, sc: Scenario, task_rate: float, protocols=COMMANDS.capacity_protocols,
                  srch: Search = Search(), cells: dict | None = None, strong_price=None, weak_price=None,
                  progress=None, workers: int | None = None) -> dict:
    """The full answer for each protocol: replicas, sessions, batch vs B*, latency, cost.

    ``cells`` (protocol -> :class:`Cell`) skips the search when given (it does not depend on
    ``task_rate``). A cell's independent searches run on up to ``workers`` processes (default:
    the CPUs; the same answer as one, :func:`costsim.distributed.fork_map`). ``progress(k,
    total)`` is called as each protocol is sized (its cell searched and its operating point
    simulated).
    """
    if not task_rate > 0:
        raise ValueError(f"--task-rate must be > 0 tasks/s, got {task_rate}")
    if not srch.latency_p95_s > 0:
        raise ValueError(f"--latency-p95 must be > 0 s, got {srch.latency_p95_s}")
    cells = dict(cells or {})
    d, o, ctx = step_shape(tasks)  # the tasks' typical step: B* is quoted at its context
    b_star = roofline.balance_batch(sc.strong, ctx)
    kv_limit = max_sequences(sc.strong, ctx) if sc.kv_cap else math.inf
    srch = replace(srch, workers=workers)
    out = {}
    for name in protocols:
        # One protocol at a time, each forking its own independent searches: SpecAgent's search
        # is most of the time, so forking the protocols would leave a core idle beside it.
        cell = cells.get(name) or search_cell(tasks, sc, name, srch)
        op = operating_point(tasks, sc, cell, task_rate, srch) if cell.feasible else None
        cells[name] = cell
        s, w = replicas_for(cell, task_rate)
        res = {"backend": "api" if on_api(name) else "replicas",
               "feasible": cell.feasible, "strong_replicas": s, "weak_replicas": w,
               # scaled out on a rate the probes could only bound from below: at most this many
               "replicas_are_upper_bound": bool(cell.capped and s is not None and task_rate > cell.rate),
               "cell": {"strong_replicas": cell.strong, "weak_replicas": cell.weak,
                        "max_task_rate_per_s": cell.rate, "rate_is_lower_bound": cell.capped,
                        "pool_rates_per_s": cell.pool_rates,
                        "probes": len(cell.probes)},
               "uncontended_latency_p50_s": cell.uncontended_p50_s,
               "uncontended_latency_p95_s": cell.uncontended_p95_s,
               "balance_batch": b_star}
        if not cell.feasible:
            res.update(sessions_per_strong_replica=None, strong_batch=None, past_balance_point=None,
                       latency_p50_s=None, latency_p95_s=None, fleet_gpus=None,
                       strong_fleet_gpus=None, weak_fleet_gpus=None, gpu_hours_per_1k_tasks=None,
                       cost_per_1k_tasks_usd=None, meets_target=False,
                       reason=f"the uncontended task latency p95 is {cell.uncontended_p95_s:.1f} s, above the "
                              f"target {srch.latency_p95_s:g} s: no number of replicas reaches it")
        else:
            res.update(op)
            res["past_balance_point"] = (op["strong_batch"] > b_star) if op["strong_batch"] is not None else None
            res["bound_by"] = bound_by(op["strong_batch"], op["strong_kv_blocked_share"], b_star,
                                       min((h for h in (op["strong_prefix_cache_hit_rate"], op["weak_prefix_cache_hit_rate"])
                                            if h is not None), default=1.0))
            # within the rate search's resolution: the cells' rates are known to rel_tol
            res["meets_target"] = op["latency_p95_s"] <= srch.latency_p95_s * (1.0 + srch.rel_tol)
            s_dep, w_dep = replica_deployments(sc, name)
            res.update(fleet_cost.costs(s_dep, w_dep, s, w, task_rate, op["api_cost_per_task_usd"],
                                        strong_price, weak_price))
            if payoff_judges(name):  # the one verdict, at the operating batches
                res["specagent_pays"] = specagent_payoff(
                    s_dep, w_dep, sc.p, sc.K, d, o, sc.verdict_tokens, sc.rho, ctx, op["strong_batch"] or 1.0,
                    op["weak_batch"] or 1.0, strong_step_scale=sc.strong_step_scale,
                    weak_step_scale=sc.weak_step_scale).to_dict()
        out[name] = res
        if progress:
            progress(1, len(protocols))
    return {"task_rate_per_s": task_rate, "latency_p95_target_s": srch.latency_p95_s,
            "protocols": out, "cells": cells, "balance_batch": b_star, "balance_context_tokens": ctx,
            "kv_limit_sequences": kv_limit, "kv_pool_bytes": kv_pool_bytes(sc.strong),
            "assumptions": assumptions(tasks, sc, srch, protocols)}


#: A strong replica whose queue waited for KV room this share of its busy time is memory bound.
KV_BOUND_SHARE = 0.05
#: A cell whose replicas found less than this share of their calls' context in their prefix
#: caches (in tokens) is bound by the cache: its load evicts the prefixes of its own sessions
#: (an assumption: 5% of the context prefilled again is where re-prefill starts to show).
CACHE_BOUND_HIT_RATE = 0.95


def bound_by(strong_batch, kv_blocked_share, b_star: float, cache_hit_rate: float = 1.0) -> str:
    """What limits a strong replica at the operating point: its KV pool (calls waited for room
    in at least :data:`KV_BOUND_SHARE` of its busy time), compute (the batch is past B*, so
    more load is slower iterations), or else the latency target itself (memory-bound decode
    whose iterations grow with the batch); and, where the cell's replicas evict their own
    sessions' prefixes (their hit rate, in tokens, under :data:`CACHE_BOUND_HIT_RATE`), the
    prefix cache."""
    if strong_batch is None:
        return "no strong replica"
    kv, compute = kv_blocked_share >= KV_BOUND_SHARE, strong_batch > b_star
    if kv and compute:
        what = "compute and KV memory"
    else:
        what = "KV memory" if kv else "compute" if compute else "latency target"
    if cache_hit_rate < CACHE_BOUND_HIT_RATE:
        what += f", and the prefix cache (it holds {cache_hit_rate:.0%} of the context its calls send again)"
    return what


def assumptions(tasks, sc: Scenario, srch: Search, protocols=()) -> list[str]:
    from .measured import latency_under_load

    local = [n for n in protocols if not on_api(n)]
    remote = [n for n in protocols if on_api(n)]
    return [
        f"workload: {len(tasks)} tasks, p_u = {sc.p:g}" + (f" ({sc.p_dist})" if sc.p_dist else "")
        + f", K = {sc.K}, rho = {sc.rho:g}, verdict {sc.verdict_tokens} tokens, seed {sc.seed}",
        *([f"strong: {sc.strong.describe()}; weak: {sc.weak.describe()}"
           + (f" ({', '.join(local)})" if remote else "")] if local or not remote else []),
        *([f"{', '.join(remote)}: the strong model behind the API {api_profile(sc.api).name} (no strong replicas); weak: "
           f"{edge_deployment(sc.weak, sc.edge_device).describe()}"] if remote else []),
        "arrivals: Poisson, open loop; each replica batches continuously (token budget, most sequences: strong %d, "
        "%d; weak %d, %d); %s" % (*sc.limits(sc.strong), *sc.limits(sc.weak), serving_words(sc.prefix_cache, sc.routing)),
        f"latency: task wall time from arrival to last step, p95 over tasks {srch.warmup:.0%}..{1 - srch.cooldown:.0%} "
        "by arrival (warm-up and drain left out); tool latency "
        + (f"{sc.tool_latency.seconds:g} s" if sc.tool_latency.seconds else "0 (generation time only)"),
        f"search: bisection over task rate per cell to {srch.rel_tol:.0%}, probes of {len(tasks)} tasks (repeated, up "
        f"to {srch.max_probe_tasks:,}, where a rate needs more) whose arrivals must span >= {srch.steady_spans:g} "
        "times their own p95 latency to judge a rate; a cell is one "
        "strong replica and w weak ones, w from the rates one strong and one weak replica sustain alone; "
        "cells = ceil(task rate / cell rate), reported latency from one cell at its share, simulated as a probe "
        f"(arrivals spanning >= {srch.steady_spans:g} of its p95); 'meets target' allows the search's "
        f"{srch.rel_tol:.0%} resolution over the target",
        latency_under_load(),
        "balance point B* = smallest decode batch at which an iteration of the strong replica is compute bound "
        "at the tasks' typical context (mean over their model calls); past it SpecAgent's extra prefill FLOPs cost time",
        "memory: each replica admits a call only when its KV (context + prompt + output) and state fit the free "
        "pool (weights and the engine's reserve taken out: costsim.memory), others wait in FIFO order"
        if sc.kv_cap else "memory: the KV pool is not enforced (kv_cap off)",
        "cost: every replica is paid by the hour, busy or idle; GPU prices from the hardware profiles "
        "(on-demand list prices, each with its source and date: `costsim hardware show`) unless given",
    ]

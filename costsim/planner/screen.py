"""Plan's screen: every configuration costed in milliseconds, analytically.

The exact twin's expected calls of each schedule, costed on each deployment (:class:`Rows`),
and each replica a batching server whose mean decode batch solves Little's law (:class:`Pool`);
:meth:`Screen.cheapest_fleet` finds the replica counts of least cost that meet a target. The
method and its measured error against the simulator: docs/plan.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .. import roofline
from ..acceptance import beta_mean
from ..fleet_cost import usd_per_1k_tasks
from ..memory import max_sequences
from ..profiles import Deployment
from ..traces.stats import step_shape
from .space import Config, scenario_of


@dataclass
class Pool:
    """What a task puts on one pool of replicas (strong or weak), and how its replicas batch.

    ``decode_s`` and ``prefill_s``: per task, seconds of its calls' decode and prefill at batch 1.
    Under load a decode iteration of B sequences takes ``f(B)`` times one of a single sequence,
    and the prefills of other calls take the replica ``u = rate · prefill_s`` of the time
    (iterations that carry a prefill chunk are longer), so decode time stretches by
    ``f(B) / (1 - u)``; a prefill runs as it would alone."""

    dep: Deployment
    decode_s: float
    prefill_s: float
    f: np.ndarray                  # f[B]: decode iteration time at batch B over batch 1 (f[0] = f[1] = 1)
    cap: int                       # most sequences a replica runs (max_seqs, KV pool at the mean context)

    def batch(self, rate_per_replica: float) -> tuple[float, float] | None:
        """(mean decode batch, decode stretch) at ``rate_per_replica`` tasks/s (None: overloaded)."""
        u = rate_per_replica * self.prefill_s
        if u >= 1.0:
            return None
        load = rate_per_replica * self.decode_s
        B = load
        for _ in range(500):
            if B > self.cap:
                return None
            stretch = self.stretch(B) / (1.0 - u)
            nxt = load * stretch
            if abs(nxt - B) <= 1e-6 * max(B, 1.0):
                return (nxt, stretch) if nxt <= self.cap else None
            B = nxt
        return None

    def stretch(self, B: float) -> float:
        """f at a fractional batch (linear between whole batches)."""
        if B <= 1.0:
            return 1.0
        i = int(B)
        if i + 1 >= len(self.f):
            return float(self.f[-1]) * B / (len(self.f) - 1)
        return float(self.f[i] + (B - i) * (self.f[i + 1] - self.f[i]))


@dataclass
class Screened:
    """The screen's answer for one configuration at one task rate."""

    config: Config
    feasible: bool
    strong_replicas: int = 0
    weak_replicas: int = 0
    gpus: int = 0
    cost_per_1k: float | None = None
    p95_s: float = math.inf
    uncontended_p95_s: float = math.inf
    strong_batch: float | None = None
    weak_batch: float | None = None
    why: str = ""


def _pool(dep: Deployment, col: dict, who: str, context: float, max_seqs: int) -> Pool:
    """A pool from the twin's expected rows: its calls' mean prefill and decode tokens per task,
    costed at batch 1 at the mean context (the busy seconds split in that proportion)."""
    cap = int(min(max_seqs, max_sequences(dep, context)))
    Bs = np.arange(0, cap + 2, dtype=float)
    t = np.asarray(roofline.decode_step(dep, np.maximum(Bs, 1.0), context).seconds, float)
    calls = float(col[f"{who}_calls"].mean())
    pre_tok, dec_tok = float(col[f"{who}_prefill_tokens"].mean()), float(col[f"{who}_decode_tokens"].mean())
    pre = calls * float(roofline.prefill(dep, pre_tok / calls, context).seconds) if calls else 0.0
    dec = dec_tok * float(t[1])
    busy = float(col[f"{who}_busy_s"].mean())
    share = pre / (pre + dec) if pre + dec > 0 else 0.0
    return Pool(dep, busy * (1.0 - share), busy * share, t / t[1], cap)


class Rows:
    """Expected per-task rows (:mod:`costsim.twin` COLUMNS) of any configuration, from one
    run of each schedule's branches per (protocol, K): the calls' costs per pool and deployment
    are cached, so a search over deployments costs each deployment once."""

    def __init__(self, tasks, base):
        self.tasks, self.base = tasks, base
        self._weights, self._parts = {}, {}
        self.context = step_shape(tasks)[2]

    def __call__(self, c: Config) -> dict:
        from ..twin import COLUMNS, call_weights, cost_of_calls, rows_of_weights

        key = (c.protocol, c.K)
        sc = scenario_of(self.base, c)
        if c.api:  # billed per call in order (what the provider has cached): simulated, one task at a time
            from ..sim.run import simulate

            rows = simulate(self.tasks, replace(sc, sessions=1, arrival_rate=None))
            return {name: np.array([r[name] for r in rows], float) for name in (*COLUMNS, "api_cost_usd")}
        if key not in self._weights:
            # The call weights take one p_u: a Beta's mean (the confirmations draw each task's own).
            one_p = replace(sc, p_dist=None, p=beta_mean(sc.p_dist)) if sc.p_dist else sc
            self._weights[key] = call_weights(self.tasks, one_p, c.protocol)
        deps = {"strong": sc.strong, "weak": sc.weak}

        def cached(weights, who, coef, overhead, budget):  # each pool's deployment costed once
            pk = (key, who, deps[who])
            if pk not in self._parts:
                self._parts[pk] = cost_of_calls(weights, who, coef, overhead, budget)
            return self._parts[pk]
        rows = rows_of_weights(self._weights[key], sc, cached)
        return {name: rows[:, i] for i, name in enumerate(COLUMNS)}


class Screen:
    """The screen of one configuration: its expected rows once, then any task rate and target."""

    def __init__(self, rows: Rows, config: Config):
        col = rows(config)
        self.config, self.wall, self.context = config, col["wall_s"], rows.context
        self.api_cost = float(col["api_cost_usd"].mean()) if "api_cost_usd" in col else 0.0  # USD per task
        self.pools = {}
        for who, dep in (("strong", config.strong), ("weak", config.weak)):
            if dep is not None and col[f"{who}_calls"].sum() > 0:
                self.pools[who] = _pool(dep, col, who, rows.context, rows.base.limits(dep)[1])
        self.uncontended_p95 = float(np.percentile(self.wall, 95))

    def latency(self, rate: float, replicas: dict) -> tuple[float, dict] | None:
        """(p95 seconds, {pool: batch}) at ``rate`` tasks/s over ``replicas`` per pool; None if a
        pool is overloaded."""
        mean0 = float(self.wall.mean())
        extra, batches = 0.0, {}
        for name, pool in self.pools.items():
            got = pool.batch(rate / replicas[name])
            if got is None:
                return None
            batches[name], stretch = got
            extra += pool.decode_s * (stretch - 1.0)
        return self.uncontended_p95 * (mean0 + extra) / mean0 if mean0 > 0 else 0.0, batches

    def cell_rate(self, target_s: float, weak_per_strong: int = 1) -> float:
        """The highest rate one strong and ``weak_per_strong`` weak replicas sustain under the
        target (bisection; 0 if the target is below the uncontended p95)."""
        if self.uncontended_p95 > target_s:
            return 0.0
        reps = {"strong": 1, "weak": weak_per_strong} if "strong" in self.pools else {"weak": 1}

        def ok(r):
            out = self.latency(r, reps)
            return out is not None and out[0] <= target_s
        lo, hi = 0.0, 1.0
        while ok(hi) and hi < 1e6:
            lo, hi = hi, hi * 2
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return lo

    def cheapest_fleet(self, rate: float, target_s: float, prices: dict) -> Screened:
        """The replica counts of least cost that meet ``target_s`` at ``rate`` tasks/s."""
        c = self.config
        out = Screened(c, False, uncontended_p95_s=self.uncontended_p95)
        if self.uncontended_p95 > target_s:
            out.why = f"uncontended p95 {self.uncontended_p95:.1f} s is above the target"
            return out
        names = list(self.pools)
        if not names:  # the provider's capacity: no replicas of ours, no contention
            out.feasible, out.p95_s = True, self.uncontended_p95
            out.cost_per_1k = 1000.0 * self.api_cost
            return out
        gpu = {k: self.pools[k].dep.n_devices for k in names}
        price = {k: prices.get(self.pools[k].dep.device.name) for k in names}
        if any(v is None for v in price.values()):
            out.why = "no price for " + ", ".join(sorted(self.pools[k].dep.device.name for k in names if price[k] is None))
            return out

        def least(name, fixed, bad=0, ok=None):
            """Fewest replicas of pool ``name`` meeting the target with the others at ``fixed``;
            ``bad``: a count known to miss it (0 at least), ``ok``: one known to meet it."""
            def good(n):
                r = self.latency(rate, {**fixed, name: n})
                return r is not None and r[0] <= target_s
            if ok is None:
                hi = max(bad * 2, 1)
                while not good(hi):
                    bad, hi = hi, hi * 2
                    if hi > 1 << 20:
                        return None
            else:
                hi = ok
            lo = bad
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if good(mid) else (mid, hi)
            return hi

        best = None
        if len(names) == 1:
            n = least(names[0], {})
            cands = [] if n is None else [{names[0]: n}]
        else:
            # Every strong count from the fewest that meets the target with the weak pool ample
            # to twice that, each with the fewest weak replicas that then meet it; the cheapest
            # pair wins (more strong replicas only pay while they save weak ones).
            n_s0 = least("strong", {"weak": 1 << 20})
            cands = []
            if n_s0 is not None:
                # Exact pruning (the scan was linear in the fleet: minutes at 200 tasks/s): no
                # strong count needs fewer weak replicas than an ample strong pool does, so a
                # count whose cost with those is no cheaper than the best found ends the scan,
                # as does the first count that already needs only those.
                n_w_min = least("weak", {"strong": 1 << 20}) or 1
                floor_w = n_w_min * gpu["weak"] * price["weak"]
                cheapest, prev = math.inf, None
                for n_s in range(n_s0, 2 * n_s0 + 1):
                    if n_s * gpu["strong"] * price["strong"] + floor_w >= cheapest:
                        break
                    # More strong replicas never need more weak ones: the last count bounds this one.
                    n_w = least("weak", {"strong": n_s}, bad=n_w_min - 1, ok=prev)
                    if n_w is not None:
                        prev = n_w
                        cands.append({"strong": n_s, "weak": n_w})
                        cheapest = min(cheapest, n_s * gpu["strong"] * price["strong"] + n_w * gpu["weak"] * price["weak"])
                        if n_w <= n_w_min:
                            break
        for reps in cands:
            usd_h = sum(reps[k] * gpu[k] * price[k] for k in reps)
            if best is None or usd_h < best[0]:
                best = (usd_h, reps)
        if best is None:
            out.why = "no replica count meets the target (a pool saturates)"
            return out
        usd_h, reps = best
        p95, batches = self.latency(rate, reps)
        out.feasible = True
        out.strong_replicas, out.weak_replicas = reps.get("strong", 0), reps.get("weak", 0)
        out.gpus = sum(reps[k] * gpu[k] for k in reps)
        out.cost_per_1k = usd_per_1k_tasks(usd_h, rate, self.api_cost)
        out.p95_s = p95
        out.strong_batch, out.weak_batch = batches.get("strong"), batches.get("weak")
        return out


def pareto(points: list[Screened]) -> list[Screened]:
    """The feasible points not beaten on both cost per task and p95 latency, cheapest first."""
    feas = sorted((s for s in points if s.feasible), key=lambda s: (s.cost_per_1k, s.p95_s))
    front, best_p95 = [], math.inf
    for s in feas:
        if s.p95_s < best_p95:
            front.append(s)
            best_p95 = s.p95_s
    return front

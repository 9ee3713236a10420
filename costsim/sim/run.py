"""Run protocols over tasks on simulated replicas; collect one row per task per protocol.

Every protocol runs in its own SimPy environment, on its own replicas, over the same tasks,
with the same per-task random streams (common random numbers: the ratios between protocols are
paired). Sessions are closed-loop (``sessions`` agents each working through tasks back to
back) or open-loop (tasks arriving as a Poisson process of ``arrival_rate`` per second).
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from .. import protocols
from ..acceptance import parse_p_dist
from ..scenario import Scenario, check, protocol_options, replica_costs
from . import hosted
from .agent import TaskRun
from .replica import Replica


def simulate(tasks, sc: Scenario, progress=None) -> list[dict]:
    """Rows (dicts) of per-task metrics for every protocol of the scenario, in task order.

    ``progress``, if given, is called with the number of tasks finished since the last call.
    """
    check(sc)
    root = np.random.SeedSequence(sc.seed)  # task i's stream: its i-th child (LazyGenerator)
    rows = []
    for name in sc.protocols:
        rows.extend(_run_protocol(name, tasks, root, sc, progress))
    return rows


def _run_protocol(name, tasks, root, sc: Scenario, progress):
    env = simpy.Environment()
    on_api = protocols.on_api(name)
    if on_api:
        strong, weak = hosted.replicas(env, sc)
    else:
        (s_coef, s_call_s), (w_coef, w_call_s) = replica_costs(sc)
        pool = None if sc.kv_cap else math.inf
        strong = [Replica(env, sc.strong, f"strong{i}", *sc.limits(sc.strong), s_call_s, s_coef, pool)
                  for i in range(sc.strong_replicas)]
        weak = [Replica(env, sc.weak, f"weak{i}", *sc.limits(sc.weak), w_call_s, w_coef, pool)
                for i in range(sc.weak_replicas)]
    proc = protocols.get(name, **protocol_options(sc))
    make_acceptance = parse_p_dist(sc.p_dist, sc.p)
    rows = [None] * len(tasks)

    def begin(i):
        rng = LazyGenerator(root, i)
        tr = TaskRun(env, tasks[i], strong[i % len(strong)], weak[i % len(weak)], make_acceptance(rng),
                     rng, sc.tool_latency, sc.user_latency)
        tr.wakes_alone = True  # a session or arrival process: its start, then its own events
        return hosted.BilledRun(tr) if on_api else tr

    def end(i, tr):
        row = tr.finish()
        row.update(task_id=tasks[i].task_id, protocol=name, task_index=i, start_s=tr.start, end_s=tr.end)
        rows[i] = row
        if progress:
            progress(1)

    if sc.arrival_rate:
        def one(i):
            tr = begin(i)
            yield from proc(tr, tasks[i])
            end(i, tr)

        def arrivals():
            rng = np.random.default_rng(np.random.SeedSequence([sc.seed, 0xA11]))
            for i in range(len(tasks)):
                env.process(one(i))
                yield env.timeout(rng.exponential(1.0 / sc.arrival_rate))
        env.process(arrivals())
    else:
        queue = iter(range(len(tasks)))

        def session():  # the task's process inlined: a level less of generators per event
            for i in queue:
                tr = begin(i)
                yield from proc(tr, tasks[i])
                end(i, tr)
        for _ in range(min(sc.sessions, len(tasks))):
            env.process(session())
    env.run()
    horizon = env.now
    run_wide = {"strong_mean_batch": float(np.mean([s.mean_batch for s in strong])),
                "weak_mean_batch": float(np.mean([w.mean_batch for w in weak])),
                "strong_utilisation": float(sum(s.busy_s for s in strong) / (horizon * len(strong))) if horizon else 0.0,
                "strong_kv_blocked_share": float(sum(getattr(s, "kv_blocked_s", 0.0) for s in strong)
                                                 / max(sum(s.busy_s for s in strong), 1e-12)),
                "makespan_s": horizon}
    for r in rows:
        r.update(run_wide)
    return rows


class LazyGenerator:
    """Task ``i``'s ``numpy.random.Generator``, from the ``i``-th child of the ``root``
    SeedSequence (``root.spawn(n)[i]`` for a root that has spawned none), both made on first use: many tasks draw nothing
    (Strong-only without latencies; SpecAgent without a review), and making them costs as much
    as simulating a few steps. Draws are those of the generator itself; what is read of it is
    kept as an attribute, so that the next read is a plain one."""

    def __init__(self, root: np.random.SeedSequence, i: int):
        self._root, self._i, self._gen = root, i, None

    def __getattr__(self, name):  # only for what is not an attribute yet
        if name.startswith("_"):  # its own, before __init__ has set them (a copy, an unpickling)
            raise AttributeError(name)
        if self._gen is None:
            r = self._root
            self._gen = np.random.default_rng(
                np.random.SeedSequence(r.entropy, spawn_key=(*r.spawn_key, self._i), pool_size=r.pool_size))
        value = getattr(self._gen, name)
        setattr(self, name, value)
        return value

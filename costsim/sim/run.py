"""Run protocols over tasks on simulated replicas; collect one row per task per protocol.

Every protocol runs in its own SimPy environment, on its own replicas, over the same tasks,
with the same per-task random streams (common random numbers: the ratios between protocols are
paired). Sessions are closed-loop (``sessions`` agents each working through tasks back to
back) or open-loop (tasks arriving as a Poisson process of ``arrival_rate`` per second).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import simpy

from .. import protocols
from ..profiles import Deployment
from .acceptance import parse_p_dist
from .agent import Latency, TaskRun
from .replica import Replica


@dataclass(frozen=True)
class Scenario:
    """Everything a simulation run needs besides the tasks."""

    strong: Deployment
    weak: Deployment
    p: float = 0.8
    K: int = 6
    p_dist: str | None = None
    protocols: tuple = protocols.DEFAULT
    rho: float = 1.0
    verdict_tokens: int = 24
    sessions: int = 1
    arrival_rate: float | None = None
    strong_replicas: int = 1
    weak_replicas: int = 1
    token_budget: int = 8192
    max_seqs: int = 256
    tool_latency: Latency = field(default_factory=Latency)
    user_latency: Latency = field(default_factory=Latency)
    network_rtt_s: float = 0.0    # added to every strong call (the strong model is remote)
    seed: int = 0


def validate(sc: Scenario) -> None:
    """Raise ValueError with a one-line message for an impossible scenario."""
    if not 0.0 <= sc.p <= 1.0:
        raise ValueError(f"--p-accept must be in [0, 1], got {sc.p}")
    if sc.K < 1:
        raise ValueError(f"--K must be an integer >= 1, got {sc.K}")
    if sc.sessions < 1 or sc.strong_replicas < 1 or sc.weak_replicas < 1:
        raise ValueError("--sessions and replica counts must be >= 1")
    if sc.arrival_rate is not None and not sc.arrival_rate > 0:
        raise ValueError(f"--arrival-rate must be > 0 tasks/s, got {sc.arrival_rate}")
    if sc.rho < 0 or sc.verdict_tokens < 0 or sc.network_rtt_s < 0:
        raise ValueError("--rho, --verdict-tokens and --network-rtt must be >= 0")
    for name in sc.protocols:
        protocols.get(name)
    parse_p_dist(sc.p_dist, sc.p)


def simulate(tasks, sc: Scenario, progress=None) -> list[dict]:
    """Rows (dicts) of per-task metrics for every protocol of the scenario, in task order.

    ``progress``, if given, is called with the number of tasks finished since the last call.
    """
    validate(sc)
    seeds = np.random.SeedSequence(sc.seed).spawn(len(tasks))
    rows = []
    for name in sc.protocols:
        rows.extend(_run_protocol(name, tasks, seeds, sc, progress))
    return rows


def _run_protocol(name, tasks, seeds, sc: Scenario, progress):
    env = simpy.Environment()
    strong = [Replica(env, sc.strong, f"strong{i}", sc.token_budget, sc.max_seqs, sc.network_rtt_s)
              for i in range(sc.strong_replicas)]
    weak = [Replica(env, sc.weak, f"weak{i}", sc.token_budget, sc.max_seqs) for i in range(sc.weak_replicas)]
    proc = protocols.get(name, K=sc.K, rho=sc.rho, verdict_tokens=sc.verdict_tokens)
    make_acceptance = parse_p_dist(sc.p_dist, sc.p)
    rows = [None] * len(tasks)

    def one(i):
        task = tasks[i]
        rng = np.random.default_rng(seeds[i])
        tr = TaskRun(env, task, strong[i % len(strong)], weak[i % len(weak)], make_acceptance(rng),
                     rng, sc.tool_latency, sc.user_latency)
        yield from proc(tr, task)
        row = tr.finish()
        row.update(task_id=task.task_id, protocol=name, task_index=i, start_s=tr.start, end_s=env.now)
        rows[i] = row
        if progress:
            progress(1)

    if sc.arrival_rate:
        def arrivals():
            rng = np.random.default_rng(np.random.SeedSequence([sc.seed, 0xA11]))
            for i in range(len(tasks)):
                env.process(one(i))
                yield env.timeout(rng.exponential(1.0 / sc.arrival_rate))
        env.process(arrivals())
    else:
        queue = iter(range(len(tasks)))

        def session():
            for i in queue:
                yield from one(i)
        for _ in range(min(sc.sessions, len(tasks))):
            env.process(session())
    env.run()
    horizon = env.now
    for r in rows:
        r["strong_mean_batch"] = float(np.mean([s.mean_batch for s in strong]))
        r["weak_mean_batch"] = float(np.mean([w.mean_batch for w in weak]))
        r["strong_utilisation"] = float(sum(s.busy_s for s in strong) / (horizon * len(strong))) if horizon else 0.0
        r["makespan_s"] = horizon
    return rows

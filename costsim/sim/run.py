"""Run protocols over tasks on simulated replicas; collect one row per task per protocol.

Every protocol runs in its own SimPy environment, on its own replicas, over the same tasks,
with the same per-task random streams (common random numbers: the ratios between protocols are
paired). Sessions are closed-loop (``sessions`` agents each working through tasks back to
back) or open-loop (tasks arriving as a Poisson process of ``arrival_rate`` per second).

Task ``i`` is served by strong replica ``i % S`` and weak replica ``i % W`` (all its calls).
Two tasks interact only through a replica they share, so an open-loop fleet is exactly
``g = gcd(S, W)`` independent *cells*: cell ``c`` holds the tasks, the strong and the weak
replicas whose index is ``c`` modulo ``g``. :func:`simulate` runs such a fleet cell by cell
(each cell in an environment of its own, on forked processes or a Dask cluster), with rows
bit-identical to the whole-fleet run (:func:`_run_protocol`), which stays the reference. A
closed-loop run does not split (its sessions pull from one queue), nor does a protocol whose
strong model is an API (one server for every task: ``g = 1``).
"""

from __future__ import annotations

import math

import numpy as np
import simpy

from .. import protocols
from ..acceptance import parse_p_dist
from ..distributed import fork_map, max_workers, run_dask
from ..metrics import Rows
from ..scenario import Scenario, check, protocol_options, replica_costs
from . import hosted
from .agent import TaskRun
from .replica import Replica

#: Chunks of cells per worker: a few, so that a slow chunk does not leave the others idle,
#: and not one per cell, so that 1,000 cells do not pay 1,000 round trips to a worker.
CHUNKS_PER_WORKER = 4
#: Chunks of cells on a Dask cluster (``scheduler``) when ``workers`` does not size it.
DASK_CHUNKS = 64
#: With ``workers=None``, at least this many tasks per forked worker: a fork pool costs about
#: 50 ms to start, what ~125 SpecAgent tasks cost to simulate (benchmarks/bench_cells.py), so
#: a small run stays in this process.
MIN_TASKS_PER_WORKER = 500


def simulate(tasks, sc: Scenario, progress=None, *, workers: int | None = None, scheduler: str | None = None,
             cells: bool = True, compact: bool = False):
    """Rows (dicts) of per-task metrics for every protocol of the scenario, in task order.

    ``progress``, if given, is called with the number of tasks finished since the last call
    (per task in this process; per chunk of cells from other processes). An open-loop fleet
    that splits into independent cells (module docstring) is run cell by cell unless ``cells``
    is False (the whole-fleet reference run): on ``workers`` forked processes (None: the CPUs,
    at most one per :data:`MIN_TASKS_PER_WORKER` tasks; 1: in this process), or on the Dask
    cluster at ``scheduler`` if given. The rows are the same, bit for bit, whichever way.
    ``compact``: the rows as :class:`costsim.metrics.Rows` (by column, each cell's as it
    ends: the memory of a run of 10^5..10^6 tasks), not a list of dicts. ``tasks`` may be any
    sequence: a cell reads a task when it arrives (a :class:`costsim.traces.synthetic.SyntheticTasks`
    then holds only those in flight).
    """
    check(sc)
    root = np.random.SeedSequence(sc.seed)  # task i's stream: its i-th child (LazyGenerator)
    g = {name: n_cells(name, sc) if cells else 1 for name in sc.protocols}
    # The protocols that do not split are independent runs too: side by side, then the cells.
    whole = [name for name in sc.protocols if g[name] == 1]
    w = 1 if scheduler else _pool(workers, len(whole) * len(tasks))
    done = (lambda: progress(len(tasks))) if progress and w > 1 else None
    runs = dict(zip(whole, fork_map(lambda name: _run_protocol(name, tasks, root, sc, None if done else progress, compact),
                                    whole, w, done)))
    rows = Rows() if compact else []
    for name in sc.protocols:
        got = runs[name] if g[name] == 1 else _run_cells(name, tasks, root, sc, g[name], progress, workers, scheduler, compact)
        rows = rows + got
    return rows


def _pool(workers: int | None, tasks: int) -> int:
    """Processes for ``tasks`` tasks of independent runs: ``workers`` where given, else the
    CPUs, at most one per :data:`MIN_TASKS_PER_WORKER` tasks (at least one)."""
    return workers or max(1, min(max_workers(), tasks // MIN_TASKS_PER_WORKER))


def n_cells(name: str, sc: Scenario) -> int:
    """How many independent cells protocol ``name`` of ``sc`` splits into: ``gcd(S, W)`` for an
    open-loop run on replicas of its own, else 1 (closed loop: the sessions share one queue of
    tasks; on an API: one server takes every task's strong calls; routed per call: every task
    may reach every replica)."""
    if not sc.arrival_rate or protocols.on_api(name) or sc.routing == "call":
        return 1
    return math.gcd(int(sc.strong_replicas), int(sc.weak_replicas))


# --- the whole fleet in one environment: the reference -------------------------------------------


def _run_protocol(name, tasks, root, sc: Scenario, progress, compact=False):
    """Protocol ``name``'s rows, the whole fleet in one environment (every closed-loop run,
    and the reference of the cell-by-cell one). Its horizon, ``makespan_s``, is the time of its
    last event: in an open loop, at least the end of the arrival process's last wait, one
    interarrival after the last task arrived."""
    env = simpy.Environment()
    on_api = protocols.on_api(name)
    if on_api:
        strong, weak = hosted.replicas(env, sc)
    else:
        costs = replica_costs(sc)
        strong, weak = _replicas(env, sc, costs, range(sc.strong_replicas), range(sc.weak_replicas))
    rows = [None] * len(tasks)
    S, W = len(strong), len(weak)
    if sc.routing == "call":  # one balancer per pool for every call (an API is one server already)
        pools = (strong[0] if on_api else RoundRobin(strong), RoundRobin(weak))
        pick = lambda i: pools  # noqa: E731
    else:
        def pick(i):
            return strong[i % S], weak[i % W]
    begin, proc, end = _task_steps(env, name, root, sc, rows, progress, pick)

    if sc.arrival_rate:
        def one(i):
            task = tasks[i]
            tr = begin(i, task)
            yield from proc(tr, task)
            end(i, task, tr)

        def arrivals():
            rng = _arrival_rng(sc)
            for i in range(len(tasks)):
                env.process(one(i))
                yield env.timeout(rng.exponential(1.0 / sc.arrival_rate))
        env.process(arrivals())
    else:
        queue = iter(range(len(tasks)))

        def session():  # the task's process inlined: a level less of generators per event
            for i in queue:
                task = tasks[i]
                tr = begin(i, task)
                yield from proc(tr, task)
                end(i, task, tr)
        for _ in range(min(sc.sessions, len(tasks))):
            env.process(session())
    env.run()
    run_wide = _run_wide([_stats(s) for s in strong], [_stats(w) for w in weak], env.now)
    for r in rows:
        r.update(run_wide)
    return Rows.of(rows) if compact else rows


class RoundRobin:
    """A pool behind a stateless load balancer (routing "call"): each call to the next of its
    replicas in turn, whatever session it is of."""

    def __init__(self, replicas: list):
        self.replicas, self.rtt_s, self._next = replicas, replicas[0].rtt_s, 0

    def submit(self, prefill_tokens: int, context: int, decode_tokens: int, session=None):
        rep = self.replicas[self._next]
        self._next = (self._next + 1) % len(self.replicas)
        return rep.submit(prefill_tokens, context, decode_tokens, session)


def _replicas(env, sc: Scenario, costs, strong_ids, weak_ids) -> tuple[list, list]:
    """``(strong, weak)`` replicas of the scenario's deployments, named by their index in the
    fleet (``strong_ids``, ``weak_ids``); ``costs``: :func:`costsim.scenario.replica_costs`."""
    (s_coef, s_call_s), (w_coef, w_call_s) = costs
    pool, cache = None if sc.kv_cap else math.inf, sc.prefix_cache
    strong = [Replica(env, sc.strong, f"strong{i}", *sc.limits(sc.strong), s_call_s, s_coef, pool, cache)
              for i in strong_ids]
    weak = [Replica(env, sc.weak, f"weak{i}", *sc.limits(sc.weak), w_call_s, w_coef, pool, cache) for i in weak_ids]
    return strong, weak


def _task_steps(env, name, root, sc: Scenario, rows, progress, pick):
    """``(begin, proc, end)`` of a task's process in ``env``: ``begin(i, task)`` makes task
    ``i``'s run on the replicas ``pick(i)`` gives (strong, weak), ``proc(tr, task)`` is the
    protocol's process, ``end(i, task, tr)`` puts its row into ``rows[i]`` and counts it."""
    on_api = protocols.on_api(name)
    proc = protocols.get(name, **protocol_options(sc))
    make_acceptance = parse_p_dist(sc.p_dist, sc.p)

    def begin(i, task):
        rng = LazyGenerator(root, i)  # by the task's index in the whole run: cells draw the same
        strong, weak = pick(i)
        tr = TaskRun(env, task, strong, weak, make_acceptance(rng), rng, sc.tool_latency, sc.user_latency)
        tr.wakes_alone = True  # a session or arrival process: its start, then its own events
        return hosted.BilledRun(tr) if on_api else tr

    def end(i, task, tr):
        row = tr.finish()
        row.update(task_id=task.task_id, protocol=name, task_index=i, start_s=tr.start, end_s=tr.end)
        rows[i] = row
        if progress:
            progress(1)

    return begin, proc, end


def _arrival_rng(sc: Scenario):
    """The generator of the open-loop run's interarrival times (one stream for the whole run)."""
    return np.random.default_rng(np.random.SeedSequence([sc.seed, 0xA11]))


def _stats(rep) -> tuple:
    """What the run-wide fields need of a replica (or API server): ``(mean batch, busy
    seconds, seconds busy while a call waited for KV room, context tokens looked up in its
    prefix cache, of them resident, calls looked up, of them wholly resident)`` (an API server,
    or a replica whose cache is always hot, looks nothing up: zeros)."""
    g = getattr
    return (rep.mean_batch, rep.busy_s, g(rep, "kv_blocked_s", 0.0), g(rep, "prefix_queried_tokens", 0),
            g(rep, "prefix_hit_tokens", 0), g(rep, "prefix_queried_calls", 0), g(rep, "prefix_hit_calls", 0))


def _run_wide(strong, weak, horizon) -> dict:
    """The fields every row of a run gets, from its replicas' :func:`_stats` in fleet order
    and its horizon (simulated seconds; the time of its last event). One function for both
    the whole-fleet and the cell-by-cell run: the same sums in the same order, the same bits."""
    busy = sum(s[1] for s in strong)

    def hit_rate(reps, queried, hits) -> float:  # 1 where nothing was looked up: nothing missed
        q = sum(r[queried] for r in reps)
        return float(sum(r[hits] for r in reps) / q) if q else 1.0

    return {"strong_mean_batch": float(np.mean([s[0] for s in strong])),
            "weak_mean_batch": float(np.mean([w[0] for w in weak])),
            "strong_utilisation": float(busy / (horizon * len(strong))) if horizon else 0.0,
            "strong_kv_blocked_share": float(sum(s[2] for s in strong) / max(busy, 1e-12)),
            "strong_prefix_cache_hit_rate": hit_rate(strong, 3, 4), "weak_prefix_cache_hit_rate": hit_rate(weak, 3, 4),
            "strong_prefix_cache_call_hit_rate": hit_rate(strong, 5, 6),
            "weak_prefix_cache_call_hit_rate": hit_rate(weak, 5, 6),
            "makespan_s": horizon}


# --- cell by cell --------------------------------------------------------------------------------


def arrival_times(sc: Scenario, n: int) -> tuple[list[float], float]:
    """``(times, end)``: the open-loop run's arrival time of each of ``n`` tasks (simulated
    seconds) and the time its arrival process ends (one interarrival after the last task),
    with the whole run's draws and float additions: SimPy puts ``env.timeout(d)`` at
    ``now + d``, so ``t[i + 1] = t[i] + d[i]`` from ``t[0] = 0`` (its initial time)."""
    rng, rate = _arrival_rng(sc), sc.arrival_rate
    times, t = [], 0
    for _ in range(n):
        times.append(t)
        t = t + rng.exponential(1.0 / rate)
    return times, t


def delays_to(now: float, t: float) -> tuple[float, ...]:
    """Delays ``d1, d2, ...`` (seconds, >= 0) that take a clock at ``now`` to exactly ``t >=
    now`` when added in turn, as SimPy adds a timeout's delay (``now + d``). One where ``now +
    (t - now)`` is ``t`` (always when ``now >= t / 2``: then ``t - now`` is exact, Sterbenz);
    else ``now + d`` can miss ``t`` for every float ``d`` (when ``d`` is in ``t``'s binade it
    moves the sum in steps of ``t``'s ulp, and ``now``'s lower bits may fall on a tie that rounds
    away from ``t``), so the clock first hops three quarters of the way, past ``t / 2``, from
    where the second delay is exact."""
    d = t - now
    if now + d == t:
        return (d,)
    hop = 0.75 * d
    m = now + hop  # in (t / 2, t): 3/4 of the way with a relative error of ~1e-16
    d = t - m
    if not (hop >= 0 and d >= 0 and m + d == t):  # never: see above
        raise ArithmeticError(f"no float delays take {now!r} to {t!r}")
    return hop, d


def _run_cells(name, tasks, root, sc: Scenario, g: int, progress, workers, scheduler, compact=False):
    """Protocol ``name``'s rows, run as ``g`` independent cells (module docstring) grouped
    into chunks: in this process, on forked workers, or on Dask at ``scheduler``. The run-wide
    fields are then those of the whole fleet (:func:`_run_wide`)."""
    n = len(tasks)
    times, end = arrival_times(sc, n)
    # A cell is (c, its tasks as (index, arrival time), ascending): it reads a task as it arrives.
    cell_list = [(c, [(i, times[i]) for i in range(c, n, g)]) for c in range(g)]
    costs = replica_costs(sc)
    if scheduler:
        results = _on_dask(name, sc, root, costs, g, cell_list, tasks, progress, workers, scheduler, compact)
    else:
        w = _pool(workers, n)
        if w <= 1:  # in this process: progress per task
            results = [_run_cell(name, sc, root, costs, g, c, ts, tasks, progress, compact) for c, ts in cell_list]
        else:
            chunks = _chunks(cell_list, CHUNKS_PER_WORKER * w)
            sizes = iter([sum(len(ts) for _, ts in ch) for ch in chunks])
            done = (lambda: progress(next(sizes))) if progress else None
            # the workers read the tasks from this process's (forked) memory: nothing is sent
            per_chunk = fork_map(lambda ch: _run_chunk((name, sc, root, costs, g, ch, tasks, compact)), chunks, w, done)
            results = [r for rs in per_chunk for r in rs]
    return _merge(results, n, g, sc, end, compact)


def _chunks(cell_list: list, k: int) -> list[list]:
    """``cell_list`` cut into at most ``k`` runs of consecutive cells of near-equal length
    (the cells hold near-equal numbers of tasks)."""
    k = min(k, len(cell_list))
    return [cell_list[j * len(cell_list) // k:(j + 1) * len(cell_list) // k] for j in range(k)]


def _run_chunk(job) -> list[tuple]:
    """:func:`_run_cell` of each cell of ``job = (name, sc, root, costs, g, cells, tasks,
    compact)``, in order. A module function of picklable arguments: Dask sends it to its workers."""
    name, sc, root, costs, g, cells, tasks, compact = job
    return [_run_cell(name, sc, root, costs, g, c, ts, tasks, None, compact) for c, ts in cells]


def _on_dask(name, sc, root, costs, g, cell_list, tasks, progress, workers, scheduler, compact) -> list[tuple]:
    """The cells' results from the Dask cluster at ``scheduler``, in ``DASK_CHUNKS`` chunks
    (or ``CHUNKS_PER_WORKER`` per worker where ``workers`` says how many it has), each sent
    the tasks of its cells only."""
    chunks = _chunks(cell_list, CHUNKS_PER_WORKER * workers if workers else DASK_CHUNKS)
    out = [None] * len(chunks)

    def finish(k, result):
        out[k] = result
        if progress:
            progress(sum(len(ts) for _, ts in chunks[k]))

    run_dask(_run_chunk, [(k, (name, sc, root, costs, g, ch, {i: tasks[i] for _, ts in ch for i, _ in ts}, compact))
                          for k, ch in enumerate(chunks)], finish, scheduler)
    return [r for rs in out for r in rs]


def _run_cell(name, sc: Scenario, root, costs, g: int, c: int, cell_tasks, tasks, progress=None, compact=False) -> tuple:
    """Cell ``c`` of ``g`` run alone: its tasks ``cell_tasks`` (``(index, arrival time)``,
    ascending; task ``i`` is ``tasks[i]``, read as it arrives) on the fleet's replicas ``c, c +
    g, ...`` of each side. Returns
    ``(rows, strong stats, weak stats, horizon)``: the rows in the tasks' order, each replica's
    :func:`_stats` in fleet order, and the time of the cell's last event. Assumes an open loop
    on replicas of its own (:func:`n_cells`)."""
    env = simpy.Environment()
    S, W = int(sc.strong_replicas), int(sc.weak_replicas)
    strong, weak = _replicas(env, sc, costs, range(c, S, g), range(c, W, g))
    rows = {}
    # Task i's replicas are i % S and i % W of the fleet, both = c (mod g): their place here is // g.
    begin, proc, end = _task_steps(env, name, root, sc, rows, progress,
                                   lambda i: (strong[i % S // g], weak[i % W // g]))

    def one(i, task):
        tr = begin(i, task)
        yield from proc(tr, task)
        end(i, task, tr)

    def arrivals():
        # As the whole run's arrival process, at this cell's arrivals only: resumed at exactly
        # t, it starts the task (an urgent event at t, before any other then), then waits.
        for i, t in cell_tasks:
            if t != env.now:
                for d in delays_to(env.now, t):  # rarely two: a hop is an event of its own, which changes no row
                    yield env.timeout(d)
            env.process(one(i, tasks[i]))
    env.process(arrivals())
    env.run()
    cell_rows = [rows[i] for i, _ in cell_tasks]
    return Rows.of(cell_rows) if compact else cell_rows, [_stats(s) for s in strong], [_stats(w) for w in weak], env.now


def _merge(results, n: int, g: int, sc: Scenario, end, compact=False):
    """The whole run's rows, in task order, from the cells' :func:`_run_cell` results (cell
    ``c`` at place ``c``), with the whole fleet's run-wide fields: replicas back in fleet order,
    and the horizon the whole run's, the latest of the cells' and of its arrival process's
    ``end``."""
    S, W = int(sc.strong_replicas), int(sc.weak_replicas)
    strong, weak = [None] * S, [None] * W
    horizon = end
    for c, (_, s_stats, w_stats, now) in enumerate(results):
        strong[c::g], weak[c::g] = s_stats, w_stats
        if now > horizon:
            horizon = now
    run_wide = _run_wide(strong, weak, horizon)
    if compact:
        return Rows.interleaved([r[0] for r in results], n).with_columns(run_wide)
    rows = [None] * n
    for c, (cell_rows, *_) in enumerate(results):
        rows[c::g] = cell_rows
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

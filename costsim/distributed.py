"""Generic runners of a function over independent items: on a Dask cluster or a local one
(:func:`run_dask`: sweeps, plan's screen, a fleet's cells), or on forked processes of this
machine (:func:`fork_map`: capacity's protocols, a fleet's cells; a fork starts in ~50 ms where
a Dask cluster takes seconds). They know nothing of what they run. Dask is imported only when it runs.
"""

from __future__ import annotations

import os

#: How long to wait for a Dask scheduler to answer before giving up (Dask's own default is 30 s).
SCHEDULER_TIMEOUT_S = 5.0


_JOB = None  # (fn, items) of the fork_map under way: the forked workers inherit it, nothing is pickled


def _run_job(i: int):
    fn, items = _JOB
    return fn(items[i])


_IN_WORKER = False  # a pool's worker (daemonic) cannot start a pool of its own: it maps serially


def _worker_start():
    global _IN_WORKER
    import signal

    _IN_WORKER = True
    # Ctrl-C and SIGTERM are the parent's to handle: it stops the pool (a SIGTERM to each
    # worker) and says one line. The parent forked us with both blocked (see fork_map): a
    # SIGTERM that came since is delivered now, and ends this worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def fork_map(fn, items, workers: int | None = None, done=None) -> list:
    """``[fn(x) for x in items]``, computed on up to ``workers`` forked processes (default: the
    CPUs), in order; ``done()`` after each item, in order. ``fn`` may be a closure: the workers
    inherit it by fork, only the results are pickled. Serial where there is one item or worker,
    no fork, inside another fork_map's worker or any daemonic process (a Dask worker's: it may
    not have children), or off the main thread (a threaded Dask worker: the job under way is
    one per process, and forking a threaded process is unsafe); the results are the same either
    way: each item must depend on its inputs alone."""
    global _JOB
    import multiprocessing as mp
    import signal
    import threading

    items = list(items)
    n = min(workers or max_workers(), len(items))
    if (n <= 1 or _IN_WORKER or "fork" not in mp.get_all_start_methods() or mp.current_process().daemon
            or threading.current_thread() is not threading.main_thread()):
        out = []
        for x in items:
            out.append(fn(x))
            if done:
                done()
        return out
    _JOB = (fn, items)
    try:
        # An interrupt while the pool starts would leave it half made, its workers running
        # with this process's handlers: it is held until the pool is whole, then stops it.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            pool = mp.get_context("fork").Pool(n, initializer=_worker_start)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        with pool:
            out = []
            for r in pool.imap(_run_job, range(len(items))):
                out.append(r)
                if done:
                    done()
            return out
    finally:
        _JOB = None


def max_workers() -> int:
    """The most workers of a local cluster: the CPUs here (more only share them; 1,000 ran the
    machine out of memory)."""
    return os.cpu_count() or 1


def check_workers(workers) -> None:
    """ValueError (one line) unless ``workers`` is None or a whole number in [1, :func:`max_workers`]."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or not 1 <= workers <= max_workers()):
        raise ValueError(f"--workers must be in [1, {max_workers()}]: each worker is a process computing flat out, "
                         f"one per CPU here, got {workers!r}")


def public_address(address: str) -> str:
    """A scheduler address without its credentials (``tcp://user:pass@host:8786`` ->
    ``tcp://host:8786``), for messages."""
    scheme, sep, rest = str(address).rpartition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


def run_dask(fn, todo, finish, scheduler=None, workers=None, processes=True):
    """Run ``fn(arg)`` for each ``(key, arg)`` of ``todo`` on Dask: the cluster at ``scheduler``,
    or a local one of ``workers`` workers (default: one per CPU, at most one per item), each in
    its own process unless ``processes=False``; ``finish(key, result)`` as each finishes."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:  # pragma: no cover - dask is a dependency
        raise ValueError("Dask is not installed: pip install 'dask[distributed]', or run with --serial") from None
    import logging

    # An interrupted or failed run must end in our one line, not in pages of the cluster's own
    # shutdown noise, here and in the worker processes (which read Dask's config from the
    # environment they are started with). Not even its errors: a worker whose heartbeat finds
    # the scheduler already closed logs one, with a traceback (CI, 2026-12-02). A task's own
    # error reaches us anyway, raised by its future.
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "critical")
    cluster = None
    check_workers(workers)
    if scheduler:
        try:
            client = Client(scheduler, timeout=SCHEDULER_TIMEOUT_S)
        except Exception as e:  # Dask's own message may quote the address, credentials and all
            raise ValueError(f"--scheduler {public_address(scheduler)}: no scheduler answered within "
                             f"{SCHEDULER_TIMEOUT_S:g} s ({type(e).__name__})") from None
    else:
        n = workers or min(os.cpu_count() or 1, len(todo))
        cluster = LocalCluster(n_workers=max(n, 1), threads_per_worker=1, processes=processes,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = {client.submit(fn, c, key=f"costsim-{cid}", pure=False): cid for cid, c in todo}
        for fut in as_completed(futures):
            finish(futures[fut], fut.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

"""A generic Dask runner: a function over independent items, on a cluster or a local one.

Sweeps (:mod:`costsim.sweep`) and plan's screen (:mod:`costsim.planner`) hand it their own
function; it knows nothing of either. Dask is imported only when it runs.
"""

from __future__ import annotations

import os

#: How long to wait for a Dask scheduler to answer before giving up (Dask's own default is 30 s).
SCHEDULER_TIMEOUT_S = 5.0


def max_workers() -> int:
    """The most workers of a local cluster: the CPUs here (more only share them; 1,000 ran the
    machine out of memory)."""
    return os.cpu_count() or 1


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
    # shutdown warnings: its loggers say only what is an error, here and in the worker processes
    # (which read Dask's config from the environment they are started with).
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
    cluster = None
    if workers is not None and not 1 <= workers <= max_workers():
        raise ValueError(f"--workers must be in [1, {max_workers()}]: each worker is a process computing flat out, "
                         "one per CPU here (a larger cluster: --scheduler)")
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

"""The two endpoints of a live run: given URLs, or two local llama.cpp servers started for it."""

from __future__ import annotations

import signal
import sys
from contextlib import contextmanager


def key_envs(both, weak, strong) -> tuple:
    """(weak, strong) API-key variables: each endpoint's own, else the shared one. A key is sent
    only to the endpoint it is given for."""
    return (weak or both, strong or both)


@contextmanager
def open_endpoints(weak, strong, local, key_envs, timeout, retries, model_dir=None, seed=0):
    """``(weak, strong)`` :class:`~costsim.live.client.Endpoint` s, closed (and the local
    servers stopped, on SIGTERM too) on the way out. ``key_envs``: (weak, strong) environment
    variables of the API keys (None: no key). ValueError (one line) for a bad combination or a
    local server that does not start."""
    from .client import Endpoint, check_limits

    if local and (weak or strong):
        raise ValueError("give either --local or --weak-url/--strong-url, not both")
    if not local and not (weak and strong):
        raise ValueError("both --weak-url and --strong-url are needed (or --local)")
    check_limits(timeout, retries)  # before local servers start, and without a --*-url prefix
    servers = None

    def _term(*_):
        raise KeyboardInterrupt  # SIGTERM stops the local servers too, through the finally below

    old_term = signal.signal(signal.SIGTERM, _term) if local else None
    try:
        if local:
            from .local import LocalServerError, LocalServers

            print("starting local llama.cpp servers (generated models; first use writes them)...", file=sys.stderr)
            try:
                servers = LocalServers(seed=seed, model_dir=model_dir).start()
            except LocalServerError as e:
                raise ValueError(str(e)) from None
            weak, strong = servers.weak.url, servers.strong.url
            key_envs = (None, None)
        eps = []
        for role, u, k in zip(("weak", "strong"), (weak, strong), key_envs):
            try:
                eps.append(Endpoint(u, api_key_env=k, timeout_s=timeout, retries=retries))
            except ValueError as e:
                raise ValueError(f"--{role}-url {e}") from None
        try:
            yield eps[0], eps[1]
        finally:
            for e in eps:
                e.close()
    finally:
        if servers is not None:
            servers.stop()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)

"""A serving benchmark's requests replayed on one simulated replica: what a load generator such
as ``vllm bench serve`` sends (request lengths and send times, :mod:`costsim.loadgen`) and
when each request's first and last tokens come back.

Each request is a client: it waits for a free slot when the client caps its concurrency
(``--max-concurrency``), pays the engine's per-request overhead (HTTP, tokenisation, admission)
on its way in, then is served by :class:`.replica.Replica`
(continuous batching, chunked prefill at the token budget, KV admission in arrival order). The
iteration that finishes a prompt samples its first output token, so a request of ``O`` output
tokens decodes ``O - 1`` more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from ..profiles import Deployment
from .replica import Replica


@dataclass(frozen=True)
class Timeline:
    """One benchmark run, in simulated seconds from the first send. Per request (in send
    order): ``arrived_s`` (when the load generator released it), ``sent_s`` (when the client
    sent it, after waiting for a slot), ``first_token_s``, ``finished_s``, and ``in_flight``
    (requests arrived and not finished when it arrived, itself included). ``iterations``: the replica's iteration log
    (:attr:`.replica.Replica.iteration_log`). ``busy_s``, ``kv_blocked_s`` (busy time in which
    a queued request waited for KV room) and ``kv_peak_bytes`` are the replica's totals."""

    arrived_s: np.ndarray
    sent_s: np.ndarray
    first_token_s: np.ndarray
    finished_s: np.ndarray
    in_flight: np.ndarray
    iterations: list
    busy_s: float
    kv_blocked_s: float
    kv_peak_bytes: float


def run(dep: Deployment, input_lens, output_lens, send_s, overhead_s, max_concurrency: int | None = None,
        token_budget: int | None = None, max_seqs: int | None = None, coef=None) -> Timeline:
    """Serve request ``i`` (``input_lens[i]`` prompt tokens, ``output_lens[i]`` >= 1 output
    tokens) arriving at ``send_s[i]`` seconds (non-decreasing) on one replica of ``dep``, after
    ``overhead_s[i]`` seconds on its way in.
    ``max_concurrency``: the most requests the client has out at once (None: no cap);
    ``token_budget`` and ``max_seqs``: the engine's scheduler limits (default: the engine's on
    this device, ``dep.token_budget`` and ``dep.max_seqs``); ``coef``: cost coefficients other
    than the deployment's roofline (a calibrated engine)."""
    n = len(input_lens)
    env = simpy.Environment()
    rep = Replica(env, dep, token_budget=token_budget or dep.token_budget, max_seqs=max_seqs or dep.max_seqs, coef=coef)
    rep.iteration_log = []
    slots = simpy.Resource(env, capacity=max_concurrency) if max_concurrency else None
    arrived, sent, first, done, in_flight = (np.full(n, np.nan) for _ in range(5))
    count = [0, 0]  # arrived, finished

    def request(i, prompt, output, overhead):
        arrived[i] = env.now
        count[0] += 1
        in_flight[i] = count[0] - count[1]
        if slots is not None:
            slot = slots.request()
            yield slot
        sent[i] = env.now
        if overhead > 0:
            yield env.timeout(overhead)
        r = rep.submit(prompt, 0, output - 1)
        yield r.done
        first[i], done[i] = r.first_token, r.finished
        count[1] += 1
        if slots is not None:
            slots.release(slot)

    def client():
        t = 0.0
        for i in range(n):
            if send_s[i] > t:
                yield env.timeout(send_s[i] - t)
                t = send_s[i]
            env.process(request(i, int(input_lens[i]), int(output_lens[i]), float(overhead_s[i])))

    env.process(client())
    env.run()
    return Timeline(arrived, sent, first, done, in_flight, rep.iteration_log, rep.busy_s, rep.kv_blocked_s, rep.kv_peak_bytes)

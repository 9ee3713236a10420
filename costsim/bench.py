"""``costsim bench``: what ``vllm bench serve`` would report for a deployment, simulated.

The load (:mod:`costsim.loadgen`) is replayed on the simulator's replica
(:mod:`costsim.sim.bench`: continuous batching, chunked prefill at the engine's token budget,
KV admission), and the result is summarised with vLLM's keys and units: ``duration`` (s),
``completed``, token totals, throughputs (requests or tokens per second) and, per latency
metric (``ttft``, ``tpot``, ``itl``, ``e2el``, in ms), ``mean_``, ``median_``, ``std_`` and
``pNN_`` of it. As vLLM defines them: TTFT is send to first token; TPOT a request's (latency -
TTFT) / (output tokens - 1), over requests with more than one; ITL every gap between a
request's consecutive tokens, over all requests; E2EL send to last token. Percentiles are
numpy's linear interpolation, as vLLM's ``np.percentile``.

What the simulation does not model is said in the result's ``notes``, and an open-loop rate
the deployment cannot serve is reported as such (``overload``) rather than as a steady state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import loadgen, roofline
from .profiles import Deployment
from .sim import bench as sim_bench

#: vLLM's latency metrics (``--percentile-metrics``), each reported in ms.
LATENCIES = ("ttft", "tpot", "itl", "e2el")
#: The queue counts as growing (the offered rate overloads the deployment) when requests in
#: flight grow, over the second half of the arrivals, by more than this share of the offered
#: rate (a stable queue's count wanders around a level: its fitted slope is near 0).
OVERLOAD_GROWTH = 0.05


@dataclass(frozen=True)
class BenchResult:
    """``metrics``: vLLM's result keys (and units); ``overload``: None, or what an open-loop
    rate the deployment cannot keep up with did (offered and served rates in requests/s, the
    growth of requests in flight in requests/s, and the count in flight at the first and last
    arrivals); ``notes``: what the figures assume, in plain words."""

    metrics: dict
    overload: dict | None
    notes: tuple[str, ...]


#: How far a request's overhead on its way in strays from the engine's mean, either way, as a
#: share of the mean (:func:`request_overheads`): an assumption.
OVERHEAD_SPREAD = 0.5


def request_overheads(dep: Deployment, load: loadgen.Load) -> np.ndarray:
    """Each request's overhead on its way in (HTTP, tokenisation, the hand-off to the
    scheduler), in seconds: uniform within :data:`OVERHEAD_SPREAD` of the engine's
    ``request_overhead_ms`` either way. An assumption: it varies from request to request, and
    so a request lands at a varying point of the iteration in flight. A fixed overhead would
    have every closed-loop request land at the same point, one overhead after the iteration
    that finished its predecessor, and the time to first token climb in steps of one
    iteration as the overhead grows. The spread is narrow because measured single-stream
    times to first token are: GPUStack's vLLM on an H100, Qwen3-8B at concurrency 1, mean 59.0
    ms and p99 73.5 ms with the prompts' own spread in it (benchmarks/measured/serving.toml)."""
    mean_s = dep.engine.request_overhead_ms * 1e-3
    rng = np.random.default_rng([load.seed, 1])  # a stream of its own: the lengths and arrivals stay as drawn
    return mean_s * rng.uniform(1.0 - OVERHEAD_SPREAD, 1.0 + OVERHEAD_SPREAD, load.num_prompts)


def percentile_key(p: float) -> str:
    """vLLM's name for percentile ``p``: 'p99', 'p99.9'."""
    return f"p{int(p)}" if float(p) == int(p) else f"p{p}"


def run(dep: Deployment, load: loadgen.Load, percentile_metrics=LATENCIES, percentiles=(99.0,),
        token_budget: int | None = None, max_seqs: int | None = None, coef=None, requests=None) -> BenchResult:
    """Simulate ``load`` on one replica of ``dep`` and summarise it as ``vllm bench serve``
    does (module docstring). ``token_budget`` and ``max_seqs``: the server's scheduler limits
    (default: the engine's on the device); ``coef``: calibrated cost coefficients instead of
    the roofline's; ``requests``: ``(input_lens, output_lens, send_s)`` to send instead of
    drawing them from ``load`` (a measured run's, :func:`costsim.loadgen.sent`)."""
    unknown = set(percentile_metrics) - set(LATENCIES)
    if unknown:
        raise ValueError(f"unknown percentile metric(s) {', '.join(sorted(unknown))}: use {', '.join(LATENCIES)}")
    for p in percentiles:
        if not (0 < p < 100):
            raise ValueError(f"metric percentiles must be in (0, 100), got {p!r}")
    ins, outs, send = loadgen.draw(load) if requests is None else requests
    tl = sim_bench.run(dep, ins, outs, send, request_overheads(dep, load), load.max_concurrency, token_budget, max_seqs,
                       coef)
    coef = coef or roofline.coefficients(dep)
    duration = float(tl.finished_s.max())
    samples = {
        "ttft": _plain(tl.first_token_s - tl.sent_s),
        "tpot": _plain(((tl.finished_s - tl.first_token_s) / np.maximum(outs - 1, 1))[outs > 1]),
        "itl": _gaps(tl.iterations, coef),
        "e2el": _plain(tl.finished_s - tl.sent_s),
    }
    n, n_in, n_out = len(ins), int(ins.sum()), int(outs.sum())
    m = dict(duration=duration, completed=n, failed=0, total_input_tokens=n_in, total_output_tokens=n_out,
             request_throughput=n / duration, output_throughput=n_out / duration,
             total_token_throughput=(n_in + n_out) / duration,
             max_concurrent_requests=int(_max_in_flight(tl.sent_s, tl.finished_s)))
    for name in percentile_metrics:
        values, counts = samples[name]
        m[f"mean_{name}_ms"] = _mean(values, counts) * 1e3
        m[f"median_{name}_ms"] = _percentile(values, counts, 50.0) * 1e3
        m[f"std_{name}_ms"] = _std(values, counts) * 1e3
        for p in percentiles:
            m[f"{percentile_key(p)}_{name}_ms"] = _percentile(values, counts, p) * 1e3
    overload = _overload(load, tl)
    return BenchResult(m, overload, _notes(dep, load, tl, overload, replayed=requests is not None))


# --- samples: (sorted-or-not values, integer counts), exact to numpy on the repeated values --

def _plain(x):
    return np.asarray(x, float), np.ones(len(x), dtype=np.int64)


def _gaps(log, coef):
    """Every token gap of every request: an iteration's seconds, once per sequence that was
    decoding through it (a mixed iteration's decoders, then each decode iteration's batch)."""
    values, counts = [], []
    for running, mixed_s, B, ctx, m in log:
        if running:
            values.append([mixed_s])
            counts.append([running])
        if m and B:
            values.append(coef.decode_iteration_seconds(B, ctx, m))
            counts.append(np.full(m, B))
    if not values:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    return np.concatenate(values).astype(float), np.concatenate(counts).astype(np.int64)


def _mean(v, c) -> float:
    return float(np.dot(v, c) / c.sum()) if c.sum() else math.nan


def _std(v, c) -> float:
    if not c.sum():
        return math.nan
    mu = np.dot(v, c) / c.sum()
    return float(np.sqrt(np.dot((v - mu) ** 2, c) / c.sum()))  # numpy's std: the population's


def _percentile(v, c, q) -> float:
    """``np.percentile(np.repeat(v, c), q)`` (linear interpolation) without the repeat."""
    total = int(c.sum())
    if not total:
        return math.nan
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(c[order])
    pos = q / 100.0 * (total - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    a, b = v[np.searchsorted(cum, lo, side="right")], v[np.searchsorted(cum, hi, side="right")]
    return float(a + (pos - lo) * (b - a))


def _max_in_flight(start, end) -> int:
    """The most requests between their send and their last token at any instant."""
    t = np.concatenate([start, end])
    step = np.concatenate([np.ones(len(start)), -np.ones(len(end))])
    order = np.lexsort((step, t))  # at a tie, a finish (-1) before a send (+1)
    return int(np.cumsum(step[order]).max())


# --- what the figures mean ---------------------------------------------------------------

def _overload(load, tl) -> dict | None:
    """Whether requests in flight grew through the second half of an open-loop run."""
    if math.isinf(load.request_rate) or load.num_prompts < 20:
        return None
    half = load.num_prompts // 2
    t, q = tl.arrived_s[half:], tl.in_flight[half:]
    growth = float(np.polyfit(t, q, 1)[0]) if t[-1] > t[0] else 0.0
    if growth <= OVERLOAD_GROWTH * load.request_rate:
        return None
    return dict(offered_rate=load.request_rate, served_rate=load.num_prompts / float(tl.finished_s.max()),
                in_flight_growth=growth, in_flight_first=float(tl.in_flight[0]), in_flight_last=float(tl.in_flight[-1]))


def _notes(dep, load, tl, overload, replayed: bool = False) -> tuple[str, ...]:
    notes = ["every request produces exactly its output length (as with --ignore-eos); "
             + ("lengths and send times are the measured run's (--arrivals)" if replayed else
                "lengths and arrivals are costsim's draws from vLLM's distributions, not vLLM's own numbers")]
    if overload:
        notes.append(
            f"overloaded: {overload['offered_rate']:g} requests/s offered, {overload['served_rate']:.3g} served; "
            f"requests in flight grew by {overload['in_flight_growth']:.3g} a second (to {overload['in_flight_last']:.0f} "
            "at the last arrival). The latencies grow with --num-prompts: they are not a steady state")
    if tl.kv_blocked_s > 0:
        notes.append(
            f"the KV pool was full for {tl.kv_blocked_s / tl.busy_s:.0%} of the busy time: costsim reserves a request's "
            "whole KV (prompt and output) when it is admitted and never preempts; vLLM allocates as tokens come "
            "and, when blocks run out, preempts the newest request and recomputes it later. Not modelled: "
            "at this memory pressure vLLM runs larger batches and pays for recomputation")
    if dep.engine.name != "vllm":
        notes.append(f"{dep.engine.display_name} is scheduled as vLLM's V1 scheduler schedules (decodes first, "
                     "then prompt chunks in arrival order within the token budget, in one iteration)")
    return tuple(notes)

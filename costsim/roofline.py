"""The cost of one engine iteration on a deployment: seconds, HBM bytes, FLOPs.

One iteration processes ``prefill_tokens`` new prompt tokens after ``prefill_context`` cached
tokens and/or one decode token for each of ``decode_batch`` sequences at ``decode_context``.

- FLOPs: 2 per active parameter per token, plus attention 4·heads·head_dim per (query, key)
  pair in each KV layer (QKᵀ and AV).
- HBM bytes: the weights the iteration touches — all dense/shared weights, and for MoE the
  union of routed experts its T tokens select, E·(1 - (1 - k/E)^T) per layer (uniform routing
  assumed), not T·k — plus the KV cache read (the context of every sequence) and written.
- Time: max(compute, memory) with the device's efficiency factors, plus tensor-parallel
  all-reduces (two per layer, ring, bandwidth and a fixed latency) and the per-iteration
  overhead. The memory-bound ⇄ compute-bound switch is what the paper's pass counting ignores.

All functions broadcast numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .profiles import DTYPE_BYTES, Deployment

#: Latency of one all-reduce launch over NVLink (assumption: ~10 µs, NCCL small-message latency).
ALLREDUCE_LATENCY_S = 10e-6


@dataclass(frozen=True)
class Cost:
    """Cost of one iteration (or a sum of them). Arrays broadcast like the inputs."""

    seconds: np.ndarray
    hbm_bytes: np.ndarray
    flops: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(*(getattr(self, f) + getattr(other, f) for f in _FIELDS))

    def scale(self, k) -> "Cost":
        """This cost repeated k times (k may be an array)."""
        return Cost(*(getattr(self, f) * np.asarray(k, float) for f in _FIELDS))

    @property
    def compute_bound(self):
        return np.asarray(self.compute_s) >= np.asarray(self.memory_s)


_FIELDS = ("seconds", "hbm_bytes", "flops", "compute_s", "memory_s")


def weight_bytes_touched(dep: Deployment, tokens):
    """Bytes of weights read by an iteration over ``tokens`` tokens (union of routed experts)."""
    m, b = dep.model, DTYPE_BYTES[dep.weight_dtype]
    t = np.asarray(tokens, float)
    if not m.is_moe:
        return np.where(t > 0, m.total_params_b * 1e9 * b, 0.0)
    frac = 1.0 - (1.0 - m.experts_per_token / m.num_experts) ** t
    routed = m.n_moe_layers * m.num_experts * frac * m.expert_params
    return np.where(t > 0, (m.always_active_params + routed) * b, 0.0)


def iteration(dep: Deployment, decode_batch=0, decode_context=0, prefill_tokens=0, prefill_context=0) -> Cost:
    """Cost of one engine iteration mixing a prefill chunk and a decode batch."""
    m, dev, n = dep.model, dep.device, dep.n_devices
    B, Cd = np.asarray(decode_batch, float), np.asarray(decode_context, float)
    T, Cp = np.asarray(prefill_tokens, float), np.asarray(prefill_context, float)
    tokens = B + T
    kvb = m.kv_bytes_per_token(dep.kv_dtype)
    # Prefill attends each new token to the context and, causally, to half the new tokens.
    pairs = B * Cd + T * (Cp + T / 2.0)
    flops = 2.0 * m.active_params_b * 1e9 * tokens + 4.0 * m.num_attention_heads * m.head_dim * m.n_kv_layers * pairs
    kv_read = kvb * (B * Cd + np.where(T > 0, Cp, 0.0))
    hbm = weight_bytes_touched(dep, tokens) + kv_read + kvb * tokens
    compute_s = flops / (n * dev.dense_tflops(dep.weight_dtype) * 1e12 * dev.flops_efficiency)
    memory_s = hbm / (n * dev.hbm_bandwidth_gbps * 1e9 * dev.bandwidth_efficiency)
    comm_s = 0.0
    if n > 1:
        act_bytes = tokens * m.hidden_size * DTYPE_BYTES["bf16"]
        link = max(dev.interconnect_bandwidth_gbps, 1e-9) * 1e9
        per_allreduce = 2.0 * (n - 1) / n * act_bytes / link + ALLREDUCE_LATENCY_S
        comm_s = np.where(tokens > 0, 2.0 * m.num_layers * per_allreduce, 0.0)
    seconds = np.where(tokens > 0, np.maximum(compute_s, memory_s) + comm_s + dev.iteration_overhead_s, 0.0)
    return Cost(seconds, hbm, flops, compute_s, memory_s)


def decode_step(dep: Deployment, batch, context) -> Cost:
    """One decode iteration: one new token for each of ``batch`` sequences at ``context``."""
    return iteration(dep, decode_batch=batch, decode_context=context)


def prefill(dep: Deployment, tokens, context=0) -> Cost:
    """Prefill of ``tokens`` new tokens after ``context`` cached ones, as one iteration."""
    return iteration(dep, prefill_tokens=tokens, prefill_context=context)


def balance_batch(dep: Deployment, context=0, max_batch: int = 1 << 16) -> float:
    """Smallest decode batch at which an iteration is compute-bound (inf if it never is).

    Accounts for MoE expert union and KV reads at ``context``: with long contexts the KV
    traffic grows as fast as the FLOPs and the balance point can recede to infinity.
    """
    b = np.arange(1, max_batch + 1, dtype=float)
    c = iteration(dep, decode_batch=b, decode_context=context)
    hit = np.nonzero(c.compute_s >= c.memory_s)[0]
    return float(b[hit[0]]) if hit.size else float("inf")


def balance_batch_paper(dep: Deployment) -> float:
    """The paper's balance point: peak FLOPs / (bandwidth per byte of weights), datasheet peaks.

    B* = (peak FLOP/s / bandwidth B/s) · bytes per parameter / 2 — e.g. 148 TFLOPS / 4.0 TB/s at
    2 bytes/param gives 37 sequences on an H20. It ignores expert union and KV traffic.
    """
    dev = dep.device
    return dev.dense_tflops(dep.weight_dtype) * 1e12 / (dev.hbm_bandwidth_gbps * 1e9) * DTYPE_BYTES[dep.weight_dtype] / 2.0


def step(dep: Deployment, output_tokens, input_tokens, context, batch=1) -> Cost:
    """One agent step: prefill ``input_tokens`` (the new observation) after ``context``, then
    decode ``output_tokens`` iterations at ``batch`` (context held at its value after the
    prefill; the decode batch is shared with other sessions, whose cost is attributed to them)."""
    pre = prefill(dep, input_tokens, context)
    dec = decode_step(dep, batch, np.asarray(context, float) + input_tokens)
    return pre + _per_sequence(dec, batch).scale(output_tokens)


def _per_sequence(c: Cost, batch) -> Cost:
    """Attribute a shared decode iteration to one sequence: its latency is the iteration's, its
    bytes and FLOPs are a 1/batch share."""
    b = np.maximum(np.asarray(batch, float), 1.0)
    return Cost(c.seconds, c.hbm_bytes / b, c.flops / b, c.compute_s, c.memory_s)


@dataclass(frozen=True)
class ProtocolParameters:
    """The cost model's v/d, rho and kappa in one currency (time, HBM bytes or FLOPs).

    ``v_over_d`` is per chunk length (last axis: lengths 1..N) because the verification prefill
    grows with the chunk; ``verify_compute_bound`` says for each length whether that prefill is
    compute-bound. ``strong_step`` / ``weak_step`` / ``verify`` are the underlying costs.
    """

    v_over_d: dict
    rho: dict
    kappa: float
    strong_step: Cost
    weak_step: Cost
    verify: Cost
    verify_compute_bound: np.ndarray


def protocol_parameters(strong: Deployment, weak: Deployment, lengths, step_tokens, obs_tokens,
                        verdict_tokens, rho_steps, context, strong_batch=1, weak_batch=1) -> ProtocolParameters:
    """v/d, rho and kappa from the roofline, for reviewed chunks of the given ``lengths``.

    A Strong-only step prefills one observation (o tokens) and decodes d tokens. A review
    prefills the chunk the strong model did not write, n·(d + o) tokens, and decodes the verdict;
    a repair decodes ``rho_steps``·d tokens. A weak step is a step on the weak deployment. Each
    quantity is reported in seconds (``"time"``), HBM bytes (``"hbm"``) and FLOPs (``"flops"``),
    attributed per sequence at the given batches.
    """
    n = np.asarray(lengths, float)
    d, o = float(step_tokens), float(obs_tokens)
    s_step = step(strong, d, o, context, strong_batch)
    w_step = step(weak, d, o, context, weak_batch)
    verify = step(strong, verdict_tokens, n * (d + o), context, strong_batch)
    repair = _per_sequence(decode_step(strong, strong_batch, context), strong_batch).scale(rho_steps * d)
    cur = {"time": "seconds", "hbm": "hbm_bytes", "flops": "flops"}
    return ProtocolParameters(
        v_over_d={k: getattr(verify, f) / getattr(s_step, f) for k, f in cur.items()},
        rho={k: float(getattr(repair, f) / getattr(s_step, f)) for k, f in cur.items()},
        kappa=float(w_step.seconds / s_step.seconds),
        strong_step=s_step, weak_step=w_step, verify=verify,
        verify_compute_bound=prefill(strong, n * (d + o), context).compute_bound,
    )

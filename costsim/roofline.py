"""The cost of one engine iteration on a deployment: seconds, HBM bytes, FLOPs.

One iteration processes ``prefill_tokens`` new prompt tokens after ``prefill_context`` cached
tokens and/or one decode token for each of ``decode_batch`` sequences at ``decode_context``.

- FLOPs: 2 per active parameter per token (the input embedding is a look-up), attention
  4·heads·head_dim per (query, key) pair in each full-attention layer (MLA, absorbed:
  heads·(4·kv_lora_rank + 2·rope)), sliding-window layers' pairs within their window, and
  4 per recurrent-state value per token in linear-attention layers.
- HBM bytes: the weights the iteration touches — dense and shared weights (not the untied
  input embedding), and for MoE the union of routed experts its T tokens select,
  E·(1 - (1 - k/E)^T) per layer (uniform routing), each part in its own precision — plus the
  KV cache read (the context of every sequence; heads replicated past TP = KV heads, MLA's
  latent on every rank) and written, plus per sequence the sliding windows and the linear
  layers' recurrent state (read and written).
- Time: max(compute, memory) at the engine's achieved fractions of the device's peaks, plus
  the engine's fixed latencies: per iteration, per layer, per MoE layer, and per collective —
  an all-reduce after each tensor-parallel mixer and MLP, or a dispatch and a combine
  all-to-all per MoE layer under expert parallelism — with the collectives' bytes over the
  interconnect. The memory-bound ⇄ compute-bound switch is what the paper's pass counting ignores.

All functions broadcast numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache, cached_property

import numpy as np

from .formulas import repair_decode_scale
from .memory import STATE_DTYPE
from .profiles import DTYPE_BYTES, Deployment, ProfileError

#: Activations cross the interconnect in BF16 (vLLM, SGLang and TensorRT-LLM all-reduce in the
#: model's activation dtype).
ACTIVATION_DTYPE = "bf16"


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


def attention_pairs(tokens, context):
    """Query-key pairs of prefilling ``tokens`` new tokens after ``context`` cached ones: each
    new token attends to the context and, causally, to half the new ones (the FLOPs of
    attention and what a prefill reads of the KV cache scale with it)."""
    return tokens * (context + tokens / 2.0)


def context_sum(iterations, first_context):
    """Sum of one sequence's context over ``iterations`` decode iterations that start at
    ``first_context`` and grow by one token each: what its attention reads in them."""
    return iterations * first_context + iterations * (iterations - 1) / 2.0


@dataclass(frozen=True)
class Coefficients:
    """The roofline of one deployment reduced to constants: the single place its formula lives.

    An iteration is described by ``tokens`` processed, attention (query, key) ``pairs`` and KV
    tokens read; :meth:`cost` works on Python floats (the simulator's hot path) and on numpy
    arrays alike.
    """

    flops_per_token: float       # 2 · active parameters (+ sliding-window and linear-state work)
    flops_per_pair: float        # attention FLOPs per (query, key) pair over the full-attention layers
    kv_bytes_per_token: float    # over all ranks (replicated KV heads counted on each)
    always_bytes: float          # dense + shared weights, read by every iteration
    routed_bytes: float          # all routed experts (0 for dense models)
    keep: float                  # 1 - k/E: chance a token skips a given expert (1 for dense)
    compute_rate: float          # achieved FLOP/s over all devices
    memory_rate: float           # achieved B/s over all devices
    comm_s_per_token: float      # collectives' bytes over the interconnect, per token
    fixed_s: float               # engine latencies: per iteration, per layer, per collective
    seq_bytes: float = 0.0       # per sequence in the iteration: sliding windows + recurrent state

    def weight_bytes(self, tokens):
        """Weights read by an iteration over ``tokens`` tokens: E·(1-(1-k/E)^T) experts a layer
        (for a whole number of tokens, the simulator's case, tabulated as it is asked for)."""
        if type(tokens) is not int:
            return (self.always_bytes + self.routed_bytes * (1.0 - self.keep**tokens)) * (tokens > 0)
        w = self._weight_table.get(tokens)
        if w is None:
            w = self._weight_table[tokens] = self.weight_bytes(float(tokens))
        return w

    @cached_property
    def _weight_table(self) -> dict:
        return {}

    def cost(self, tokens, pairs, kv_read_tokens, seqs=None) -> Cost:
        return Cost(*self.terms(tokens, pairs, kv_read_tokens, seqs))

    def terms(self, tokens, pairs, kv_read_tokens, seqs=None) -> tuple:
        """The iteration's ``(seconds, hbm_bytes, flops, compute_s, memory_s)``: :meth:`cost`
        as a plain tuple, for the simulator's hot path on Python floats. ``seqs`` sequences
        take part (default: ``tokens``, a decode-only iteration)."""
        flops = self.flops_per_token * tokens + self.flops_per_pair * pairs
        hbm = (self.weight_bytes(tokens) + self.kv_bytes_per_token * (kv_read_tokens + tokens)
               + self.seq_bytes * (tokens if seqs is None else seqs))
        compute_s, memory_s = flops / self.compute_rate, hbm / self.memory_rate
        busy = tokens > 0
        # max(a, b) written with abs() so that Python floats (the simulator) skip numpy.
        bound_s = (compute_s + memory_s + abs(compute_s - memory_s)) / 2.0
        seconds = (bound_s + self.comm_s_per_token * tokens + self.fixed_s) * busy
        return seconds, hbm, flops, compute_s, memory_s

    def prefill_chunk(self, tokens, context) -> tuple:
        """:meth:`terms` of one iteration prefilling ``tokens`` new tokens after ``context``
        cached ones: each new token attends to the context and, causally, to half the new ones."""
        busy = tokens > 0
        return self.terms(tokens, attention_pairs(tokens, context), context * busy, busy * 1.0)

    def solo_call(self, prefill: int, context: int, decode: int, token_budget: int) -> tuple:
        """``(seconds, hbm_bytes, flops)`` of one call on an otherwise idle replica: its prefill
        in iterations of at most ``token_budget`` tokens, then ``decode`` iterations at batch 1.
        What the simulator's replica charges an uncontended call (its test checks they agree)."""
        secs = hbm = flops = 0.0
        while prefill > token_budget:
            s, h, f = self.prefill_chunk(token_budget, context)[:3]
            secs, hbm, flops = secs + s, hbm + h, flops + f
            prefill, context = prefill - token_budget, context + token_budget
        pre, run = self.solo(prefill, context, decode)
        return float(secs + pre[0] + run[0]), float(hbm + pre[1] + run[1]), float(flops + pre[2] + run[2])

    @cached_property
    def _solo_constants(self) -> tuple:
        """What :meth:`solo` (and :meth:`decode_run`) read, in one tuple: the coefficients and
        the decode lines' constants at batch 1 (see :meth:`_decode_lines`)."""
        return (self.flops_per_token, self.flops_per_pair, self.kv_bytes_per_token, self.seq_bytes,
                self.compute_rate, self.memory_rate, self.always_bytes, self.routed_bytes, self.keep,
                self.comm_s_per_token, self.fixed_s, self.flops_per_token * 1,
                self.flops_per_pair * 1 / self.compute_rate, float(self.weight_bytes(1)),
                self.kv_bytes_per_token * 1 / self.memory_rate, self.comm_s_per_token * 1 + self.fixed_s)

    def solo(self, tokens: int, context: int, m: int) -> tuple:
        """``(prefill_chunk(tokens, context), decode_run(1, context + tokens, m))``: an
        uncontended call's epoch, the simulator's hot path, in one call (the same arithmetic,
        so the same numbers to the last bit: a test holds them equal; written out, with
        :meth:`_sum_max` inlined, because it is a fifth of the time of a simulated step)."""
        fpt, fpp, kvb, sqb, cr, mr, always, routed, keep, comm, fixed, fpt1, c1, wb1, m1, extra = self._solo_constants
        if tokens > 0:
            flops = fpt * tokens + fpp * (tokens * (context + tokens / 2.0))
            hbm = (always + routed * (1.0 - keep**tokens)) + kvb * (context + tokens) + sqb * 1.0
            compute_s, memory_s = flops / cr, hbm / mr
            secs = (compute_s + memory_s + abs(compute_s - memory_s)) / 2.0 + comm * tokens + fixed
            pre = (secs, hbm, flops, compute_s, memory_s)
        else:
            pre = self.prefill_chunk(tokens, context)
        if m <= 0:
            return pre, (0.0, 0.0, 0.0)
        C = context + tokens
        c0 = (fpt1 + fpp * C) / cr
        m0 = (wb1 + kvb * (C + 1) + sqb * 1) / mr
        if c1 == m1:
            busy = m * (c0 if c0 > m0 else m0) + c1 * m * (m - 1) / 2.0
        else:  # _sum_max(c0, c1, m0, m1, m)
            a0, a1, b0, b1 = c0, c1, m0, m1
            k = math.ceil((b0 - a0) / (a1 - b1))
            k = 0 if k < 0 else m if k > m else k  # clamped to [0, m], without two builtins
            if a1 < b1:
                a0, a1, b0, b1 = b0, b1, a0, a1
            busy = k * b0 + b1 * k * (k - 1) / 2.0 + (m - k) * a0 + a1 * (k + m - 1) * (m - k) / 2.0
        return pre, (busy + extra * m, (m0 * m + m1 * m * (m - 1) / 2.0) * mr, (c0 * m + c1 * m * (m - 1) / 2.0) * cr)

    def decode_run(self, batch: float, context_sum: float, m: int):
        """Totals of ``m`` consecutive decode iterations of ``batch`` sequences whose contexts
        sum to ``context_sum`` at the first and grow by one token each per iteration.

        Compute and memory time are both linear in the iteration index, so the sum of their
        maximum splits at one crossing and is summed in closed form. Returns
        ``(seconds, hbm_bytes, flops)``.
        """
        # _decode_lines and _sum_max written out (the simulator plans one run per epoch; a
        # test holds this equal to them to the last bit)
        fpt, fpp, kvb, sqb, cr, mr, _, _, _, comm, fixed, _, _, _, _, _ = self._solo_constants
        B, C = batch, context_sum
        c0, c1 = (fpt * B + fpp * C) / cr, fpp * B / cr
        m0, m1 = (float(self.weight_bytes(B)) + kvb * (C + B) + sqb * B) / mr, kvb * B / mr
        if m <= 0:
            busy = 0.0
        elif c1 == m1:
            busy = m * (c0 if c0 > m0 else m0) + c1 * m * (m - 1) / 2.0
        else:
            a0, a1, b0, b1 = c0, c1, m0, m1
            k = math.ceil((b0 - a0) / (a1 - b1))
            k = 0 if k < 0 else m if k > m else k
            if a1 < b1:
                a0, a1, b0, b1 = b0, b1, a0, a1
            busy = k * b0 + b1 * k * (k - 1) / 2.0 + (m - k) * a0 + a1 * (k + m - 1) * (m - k) / 2.0
        return (busy + (comm * B + fixed) * m, (m0 * m + m1 * m * (m - 1) / 2.0) * mr,
                (c0 * m + c1 * m * (m - 1) / 2.0) * cr)

    def decode_iterations_within(self, batch: float, context_sum: float, m: int, seconds: float) -> int:
        """How many of those ``m`` iterations complete within ``seconds`` (bisection)."""
        c0, c1, m0, m1, extra = self._decode_lines(batch, context_sum)
        lo, hi = 0, m
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._sum_max(c0, c1, m0, m1, mid) + extra * mid <= seconds:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def decode_iteration_seconds(self, batch: float, context_sum: float, m: int) -> np.ndarray:
        """The seconds of each of those ``m`` iterations, one by one (their sum is
        :meth:`decode_run`'s): what a benchmark's inter-token latencies are made of."""
        c0, c1, m0, m1, extra = self._decode_lines(batch, context_sum)
        i = np.arange(max(int(m), 0), dtype=float)
        return np.maximum(c0 + c1 * i, m0 + m1 * i) + extra

    def _decode_lines(self, B, C):
        c0 = (self.flops_per_token * B + self.flops_per_pair * C) / self.compute_rate
        c1 = self.flops_per_pair * B / self.compute_rate
        m0 = (float(self.weight_bytes(B)) + self.kv_bytes_per_token * (C + B) + self.seq_bytes * B) / self.memory_rate
        m1 = self.kv_bytes_per_token * B / self.memory_rate
        return c0, c1, m0, m1, self.comm_s_per_token * B + self.fixed_s

    @staticmethod
    def _sum_max(c0, c1, m0, m1, e):
        """sum_{i=0}^{e-1} max(c0 + c1 i, m0 + m1 i): the two lines cross once at most, so it
        is two arithmetic series (written out: this is the simulator's innermost loop)."""
        if e <= 0:
            return 0.0
        if c1 == m1:
            return e * (c0 if c0 > m0 else m0) + c1 * e * (e - 1) / 2.0
        k = min(max(math.ceil((m0 - c0) / (c1 - m1)), 0), e)  # first i where the faster-growing line leads
        if c1 < m1:  # c leads before k, m from k on
            c0, c1, m0, m1 = m0, m1, c0, c1
        # m leads on [0, k), c on [k, e)
        return k * m0 + m1 * k * (k - 1) / 2.0 + (e - k) * c0 + c1 * (k + e - 1) * (e - k) / 2.0


def _internode(dev, m, n) -> float:
    """The device profile's inter-node link (GB/s per GPU, both directions), or a one-line
    refusal where it has none."""
    if not dev.can_span(n):
        raise ProfileError(f"{m.name} on {n}x {dev.name} spans more than a node of {dev.gpus_per_node}: the profile has no "
                           "internode_bandwidth_gb_per_s and internode_latency_us to cost its collectives on")
    return dev.internode_bandwidth_gb_per_s


def bandwidth_fraction(dep: Deployment) -> float:
    """The share of peak bandwidth the engine's decode reaches on this deployment: the device's
    own where its profile (``families``) has one (the H20's, the Ada cards': measured on the
    device, it holds for every precision); else its 4-bit weight-only kernels' where the weights
    are 4-bit integers and the engine has a figure for them; else the engine's fraction."""
    eng, dev = dep.engine, dep.device
    own = any("bandwidth_fraction" in eng.families.get(key, {}) for key in (dev.name, dev.family))
    if eng.int4_bandwidth_fraction and dep.weight_dtype.startswith("int4") and not own:
        return eng.int4_bandwidth_fraction
    return eng.fraction("bandwidth_fraction", dev)


def moe_layer_us(dep: Deployment) -> float:
    """The engine's fixed latency of one MoE layer, µs, as the deployment runs its experts:
    whole on one GPU, tensor-sharded over several, or placed whole over several."""
    eng = dep.engine
    if dep.n_devices == 1:
        return eng.moe_layer_latency_us
    return eng.moe_ep_layer_latency_us if dep.expert_parallel else eng.moe_tp_layer_latency_us


@cache
def coefficients(dep: Deployment) -> Coefficients:
    """The :class:`Coefficients` of a deployment (cached: deployments are frozen)."""
    m, dev, n, eng = dep.model, dep.device, dep.n_devices, dep.engine
    b, b_exp, b_act = (DTYPE_BYTES[dep.weight_dtype], DTYPE_BYTES[dep.expert_precision],
                       DTYPE_BYTES[ACTIVATION_DTYPE])
    routed = m.routed_params
    always = (m.always_active_params if m.is_moe else m.total_params_b * 1e9) - m.input_embedding_params
    head = float(m.vocab_size * m.hidden_size) if m.head_16bit else 0.0  # the output head, read in BF16
    per_pair = m.num_attention_heads * ((4.0 * m.kv_lora_rank + 2.0 * m.qk_rope_head_dim) if m.is_mla else 4.0 * m.head_dim)
    flops_per_token = (2.0 * (m.active_params_b * 1e9 - m.input_embedding_params)
                       + 4.0 * m.num_attention_heads * m.head_dim * m.sliding_layers * m.sliding_window
                       + 4.0 * m.linear_layers * m.linear_state_elements)

    # Collectives: an all-reduce after every tensor-parallel mixer and MLP; under expert
    # parallelism each MoE layer swaps its all-reduce for a dispatch and a combine all-to-all
    # of the k expert copies of every token. Ring all-reduce moves 2(n-1)/n of the message.
    moe_layers = m.n_moe_layers if m.is_moe else 0
    comm_tok = fixed_coll_us = 0.0
    if n > 1:
        if not dev.interconnect_bandwidth_gb_per_s > 0:  # its collectives cross the link: no figure, no cost
            raise ProfileError(f"{dev.name} has no interconnect_bandwidth_gb_per_s in its profile: {m.name} on {n} GPUs "
                               "cannot be costed without it (GB/s, both directions, per GPU)")
        a2a = 2 * moe_layers if dep.expert_parallel else 0
        ar = 2 * m.num_layers - a2a // 2
        link = dev.interconnect_bandwidth_gb_per_s * 1e9 / 2.0  # datasheets give both directions
        msg = m.hidden_size * b_act  # a token's activations, bytes
        if n <= dev.gpus_per_node:
            comm_tok = (ar * 2.0 * (n - 1) / n + a2a * m.experts_per_token * (n - 1) / n) * msg / link
            fixed_coll_us = ar * eng.collective_us("allreduce", n) + a2a * eng.collective_us("alltoall", n)
        else:  # across nodes: a ring's slowest hop is a NIC; a token's copies to other nodes' experts go out on it
            nic = _internode(dev, m, n) * 1e9 / 2.0
            here = dev.gpus_per_node
            comm_tok = (ar * 2.0 * (n - 1) / n * msg / nic
                        + a2a * m.experts_per_token * msg * ((n - here) / n / nic + (here - 1) / n / link))
            fixed_coll_us = (ar + a2a) * dev.internode_latency_us
    fixed_s = (eng.iteration_overhead_ms * 1e-3 + 1e-6 * (m.num_layers * eng.layer_latency_us
               + moe_layers * moe_layer_us(dep) + fixed_coll_us))
    return Coefficients(
        flops_per_token=flops_per_token,
        flops_per_pair=per_pair * m.n_kv_layers,
        kv_bytes_per_token=m.kv_bytes_per_token(dep.kv_dtype, n),
        always_bytes=(always - head) * b + head * DTYPE_BYTES["bf16"], routed_bytes=routed * b_exp,
        keep=1.0 - m.experts_per_token / m.num_experts if m.is_moe else 1.0,
        compute_rate=n * dev.dense_tflops(dep.weight_dtype) * 1e12 * eng.fraction("flops_fraction", dev),
        memory_rate=n * dev.hbm_bandwidth_gb_per_s * 1e9 * bandwidth_fraction(dep),
        comm_s_per_token=comm_tok, fixed_s=fixed_s,
        seq_bytes=m.sequence_traffic_bytes(dep.kv_dtype, STATE_DTYPE, n),
    )


def calibrated(coef: Coefficients, prefill_s_per_token: float, decode_s_per_token: float) -> Coefficients:
    """Coefficients whose rates reproduce measured per-token times (``costsim calibrate``).

    The effective compute rate is set so that prefilling one token takes
    ``prefill_s_per_token`` and the memory rate so that a batch-1 decode iteration's weight read
    takes ``decode_s_per_token``; overheads are then inside those rates (per-call overhead is
    the caller's). Batch, context and expert-union effects still come from the roofline's shape.
    A ``prefill_s_per_token`` of 0 is a prefill the measurement did not resolve (calibrate's
    bounded fit at its bound): the roofline's compute rate is kept, not made infinite.
    """
    if prefill_s_per_token < 0 or decode_s_per_token <= 0:
        raise ValueError("calibrated times per token must be: decode > 0, prefill >= 0")
    compute_rate = coef.flops_per_token / prefill_s_per_token if prefill_s_per_token > 0 else coef.compute_rate
    return replace(coef, compute_rate=compute_rate,
                   memory_rate=float(coef.weight_bytes(1.0)) / decode_s_per_token,
                   comm_s_per_token=0.0, fixed_s=0.0)


def weight_bytes_touched(dep: Deployment, tokens):
    """Bytes of weights read by an iteration over ``tokens`` tokens (union of routed experts)."""
    return coefficients(dep).weight_bytes(np.asarray(tokens, float))


def iteration(dep: Deployment, decode_batch=0, decode_context=0, prefill_tokens=0, prefill_context=0) -> Cost:
    """Cost of one engine iteration mixing a prefill chunk and a decode batch."""
    B, Cd = np.asarray(decode_batch, float), np.asarray(decode_context, float)
    T, Cp = np.asarray(prefill_tokens, float), np.asarray(prefill_context, float)
    pairs = B * Cd + attention_pairs(T, Cp)
    kv_read = B * Cd + Cp * (T > 0)
    return coefficients(dep).cost(B + T, pairs, kv_read, B + (T > 0))


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
    def compute_bound(b):
        return bool(iteration(dep, decode_batch=b, decode_context=context).compute_bound)

    # compute - memory time is convex in the batch (linear minus concave expert union), so once
    # compute-bound an iteration stays so: bisect for the first such batch.
    if not compute_bound(max_batch):
        return float("inf")
    lo, hi = 1, max_batch
    while lo < hi:
        mid = (lo + hi) // 2
        if compute_bound(mid):
            hi = mid
        else:
            lo = mid + 1
    return float(lo)


def balance_batch_paper(dep: Deployment) -> float:
    """The balance point by datasheet peaks alone: peak FLOPs / (bandwidth per byte of weights).

    B* = (peak FLOP/s / bandwidth B/s) · bytes per parameter / 2 — 148 TFLOPS / 4.0 TB/s at 2
    bytes/param gives 37 sequences on an H20. The paper states only "about 37 sequences on an
    H20"; this formula is costsim's reading of it (it reproduces that number). It ignores expert
    union and KV traffic.
    """
    dev = dep.device
    return dev.dense_tflops(dep.weight_dtype) * 1e12 / (dev.hbm_bandwidth_gb_per_s * 1e9) * DTYPE_BYTES[dep.weight_dtype] / 2.0


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
                        verdict_tokens, rho_steps, context, strong_batch=1, weak_batch=1,
                        strong_step_scale=1.0, weak_step_scale=1.0, correction_rate=0.0, correction_steps=0.0,
                        correction_tokens=0.0) -> ProtocolParameters:
    """v/d, rho and kappa from the roofline, for reviewed chunks of the given ``lengths``.

    A Strong-only step prefills one observation (o tokens) and decodes d tokens (times
    ``strong_step_scale``: decoded per recorded step token). A review prefills the chunk the
    strong model did not write, n·(d + o) tokens, and decodes the verdict; a repair is
    ``rho_steps`` strong steps of decoding (:func:`costsim.formulas.repair_decode_scale`), or at
    ``correction_rate`` a correction turn of its own, which prefills ``correction_tokens`` and
    decodes ``correction_steps`` strong steps (rho is their expectation per rejection). A weak step is a step on the weak deployment (d times ``weak_step_scale``
    decoded). Each
    quantity is reported in seconds (``"time"``), HBM bytes (``"hbm"``) and FLOPs (``"flops"``),
    attributed per sequence at the given batches.
    """
    n = np.asarray(lengths, float)
    d, o = float(step_tokens), float(obs_tokens)
    s_step = step(strong, strong_step_scale * d, o, context, strong_batch)
    w_step = step(weak, weak_step_scale * d, o, context, weak_batch)
    verify = step(strong, verdict_tokens, n * (d + o), context, strong_batch)
    repair = _per_sequence(decode_step(strong, strong_batch, context), strong_batch).scale(
        repair_decode_scale(rho_steps, strong_step_scale) * d)
    correction = step(strong, repair_decode_scale(correction_steps, strong_step_scale) * d, correction_tokens, context,
                      strong_batch)
    cur = {"time": "seconds", "hbm": "hbm_bytes", "flops": "flops"}
    return ProtocolParameters(
        v_over_d={k: getattr(verify, f) / getattr(s_step, f) for k, f in cur.items()},
        rho={k: float(((1.0 - correction_rate) * getattr(repair, f) + correction_rate * getattr(correction, f))
                      / getattr(s_step, f)) for k, f in cur.items()},
        kappa=float(w_step.seconds / s_step.seconds),
        strong_step=s_step, weak_step=w_step, verify=verify,
        verify_compute_bound=prefill(strong, n * (d + o), context).compute_bound,
    )

"""What a serving benchmark reports for one deployment: TTFT, TPOT/ITL, throughput.

The view is steady-state continuous batching under a closed loop of ``concurrency`` requests
(``vllm bench serve --max-concurrency C``, SGLang's ``bench_serving``, TensorRT-LLM's
``trtllm-bench``): every request prefills ``input_len`` tokens and then decodes
``output_len``; a finished request is replaced at once. Per engine iteration:

- the B = C·(O-1)/(O-1+n_c) requests in their decode phase each add one token (a request
  spends O-1 iterations decoding after the one that ends its prefill, and its prefill takes
  n_c = ceil(I / s) chunks of s = min(I, budget - B) tokens, the last one what is left: s_j,
  each attending to the chunks before it);
- arrivals come at B/(O-1) per iteration, so the iterations carry I·B/(O-1) prefill tokens on
  average, packed into chunks of s: a fraction f = min(1, I·B/((O-1)·s)) of the iterations
  carries a chunk, the rest are pure decode.

Hence (t(B, T) is one roofline iteration decoding B sequences at context I + O/2 while
prefilling T tokens):

    ITL  = (1 - f)·t(B, 0) + f·t(B, I·B/((O-1)·f))          mean inter-token latency = TPOT
    TTFT = r + Σ_j t(B', s_j) + (ITL/2 if C > 1)               B' = the others decoding meanwhile
    output tokens/s = C·O / (TTFT + (O-1)·ITL)

where r is the engine's per-request overhead (HTTP, tokenisation, admission). Means, not medians: with a fixed I and O the two differ by the spread of where prefills land,
which this view does not model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import roofline
from .profiles import Deployment


@dataclass(frozen=True)
class ServingPoint:
    """One benchmark point: times in seconds, throughput in tokens per second."""

    concurrency: float
    input_len: float
    output_len: float
    ttft_s: float
    itl_s: float          # mean inter-token latency, = TPOT (time per output token after the first)
    output_tok_s: float   # output tokens per second over all requests
    decode_batch: float   # mean sequences decoding per iteration
    prefill_fraction: float  # share of iterations that carry a prefill chunk
    e2e_s: float          # one request, first byte to last token

    @property
    def total_tok_s(self) -> float:
        return self.output_tok_s * (self.input_len + self.output_len) / max(self.output_len, 1)


def _ts(dep: Deployment, batch, context, tokens, prefill_context):
    return roofline.iteration(dep, decode_batch=batch, decode_context=context,
                              prefill_tokens=tokens, prefill_context=prefill_context).seconds


def _t(dep: Deployment, batch, context, tokens, prefill_context) -> float:
    return float(_ts(dep, batch, context, tokens, prefill_context))


def serving_point(dep: Deployment, concurrency: float, input_len: float, output_len: float,
                  token_budget: int | None = None) -> ServingPoint:
    """The steady state of ``concurrency`` closed-loop requests of ``input_len`` prompt and
    ``output_len`` output tokens on ``dep`` (module docstring). ``token_budget`` defaults to the
    engine's on the device (``dep.token_budget``)."""
    C, I, O = float(concurrency), float(input_len), float(output_len)
    if not (C >= 1 and I >= 0 and O >= 1) or not all(map(math.isfinite, (C, I, O))):
        raise ValueError("concurrency must be >= 1, input_len >= 0 and output_len >= 1 (finite)")
    budget = token_budget or dep.token_budget
    ctx = I + O / 2.0
    if O <= 1:  # prefill only: the C prompts are one batch of prefill work
        ttft = dep.engine.request_overhead_ms * 1e-3 + prefill_time(dep, I, batch=C)
        return ServingPoint(C, I, O, ttft, 0.0, C * O / ttft if ttft else math.inf, 0.0, 1.0, ttft)
    # Solve for B and the chunk size together (B sets the budget left for prefill).
    B = C
    for _ in range(50):
        chunk = max(min(I, budget - B), 1.0) if I else 0.0
        n_c = math.ceil(I / chunk) if I else 0
        B_new = C * (O - 1) / (O - 1 + n_c)
        if abs(B_new - B) < 1e-9:
            break
        B = B_new
    per_it = I * B / (O - 1)  # prefill tokens per iteration, on average
    f = min(1.0, per_it / chunk) if I else 0.0
    itl = (1.0 - f) * _t(dep, B, ctx, 0, 0) + (f * _t(dep, B, ctx, per_it / f, (I - chunk) / 2.0) if f else 0.0)
    others = max(C - 1.0, 0.0) * (O - 1) / (O - 1 + n_c)
    own_chunk = max(min(I, budget - others), 1.0)  # the budget the others' decodes leave
    ttft = dep.engine.request_overhead_ms * 1e-3 + (_prompt_chunks_s(dep, others, ctx, I, own_chunk) if I else 0.0)
    if C > 1:
        ttft += itl / 2.0  # the iteration in flight when the request arrives
    e2e = ttft + (O - 1) * itl
    return ServingPoint(C, I, O, ttft, itl, C * O / e2e, B, f, e2e)


def _prompt_chunks_s(dep: Deployment, batch, context, input_len, chunk) -> float:
    """Seconds of the iterations that carry one prompt of ``input_len`` tokens in chunks of
    ``chunk`` (the last one what is left), each after the chunks before it, beside ``batch``
    sequences decoding at ``context``."""
    starts = np.arange(math.ceil(input_len / chunk)) * chunk
    sizes = np.minimum(chunk, input_len - starts)
    return float(np.sum(_ts(dep, batch, context, sizes, starts)))


def decode_point(dep: Deployment, batch: float, input_len: float, output_len: float) -> ServingPoint:
    """An offline latency run (``vllm bench latency``, ``llama-bench``): ``batch`` prompts of
    ``input_len`` prefilled together in chunks of the engine's budget, then ``output_len`` decode
    iterations of the whole batch. Its ITL is the mean decode iteration, at context I + O/2."""
    B, I, O = float(batch), float(input_len), float(output_len)
    ttft = dep.engine.request_overhead_ms * 1e-3 + prefill_time(dep, I, batch=B)
    itl = _t(dep, B, I + O / 2.0, 0, 0) if O >= 1 else 0.0
    e2e = ttft + max(O - 1, 0) * itl
    return ServingPoint(B, I, O, ttft, itl, B * O / e2e if e2e else math.inf, B, 0.0, e2e)


def prefill_time(dep: Deployment, input_len: float, batch: float = 1.0) -> float:
    """Seconds to prefill ``batch`` prompts of ``input_len`` tokens on an idle replica, in
    iterations of at most the engine's budget (a prompt's later chunks attend to its earlier)."""
    total, budget = batch * input_len, dep.token_budget
    if not math.isfinite(total) or total / budget > 1e6:
        raise ValueError(f"{batch:g} prompts of {input_len:g} tokens: more than 10^6 iterations of prefill")
    coef, I = roofline.coefficients(dep), max(input_len, 1.0)
    secs, done = 0.0, 0.0
    while done < total:
        t = min(budget, total - done)
        # The chunk's tokens belong to several prompts: the rest of the one in progress (after
        # its `o` tokens already in), whole ones, and the start of the next; each attends only
        # to its own prompt.
        o = done % I
        first = min(t, I - o)
        whole, last = divmod(t - first, I)
        pairs = (roofline.attention_pairs(first, o) + whole * roofline.attention_pairs(I, 0)
                 + roofline.attention_pairs(last, 0))
        secs += float(coef.cost(t, pairs, o, 1 + whole + (last > 0)).seconds)
        done += t
    return secs

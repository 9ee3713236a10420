"""The serving-benchmark view against a hand computation of its steady state."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costsim import roofline as rl
from costsim import serving
from costsim.profiles import Deployment, load_device, load_engine, load_model


def t(dep, B, ctx, T, pctx):
    return float(rl.iteration(dep, decode_batch=B, decode_context=ctx, prefill_tokens=T, prefill_context=pctx).seconds)


def dep(engine="vllm", model="llama-3.1-8b", device="h100", n=1):
    return Deployment(load_model(model), load_device(device), n, "bf16", engine=load_engine(engine))


def test_serving_point_by_hand():
    d = dep()
    C, I, O = 32, 1000, 200
    # Budget 8192 - B leaves room for a whole prompt: one chunk, n_c = 1, so B = 32·199/200.
    B = C * (O - 1) / (O - 1 + 1)
    per_it = I * B / (O - 1)          # prefill tokens per iteration on average: 160
    f = per_it / I                      # iterations that carry a prompt: 16%
    # A chunk is a whole prompt, so it attends to itself only: prefill context 0.
    itl = (1 - f) * t(d, B, I + O / 2, 0, 0) + f * t(d, B, I + O / 2, per_it / f, 0)
    others = (C - 1) * (O - 1) / O
    ttft = d.engine.request_overhead_ms * 1e-3 + t(d, others, I + O / 2, I, 0) + itl / 2
    pt = serving.serving_point(d, C, I, O)
    assert pt.decode_batch == pytest.approx(B)
    assert pt.prefill_fraction == pytest.approx(f)
    assert pt.itl_s == pytest.approx(itl, rel=1e-12)
    assert pt.ttft_s == pytest.approx(ttft, rel=1e-12)
    assert pt.output_tok_s == pytest.approx(C * O / (ttft + (O - 1) * itl), rel=1e-12)


def test_long_prompts_are_chunked_by_the_budget():
    d = dep()
    pt = serving.serving_point(d, 4, 20000, 100)
    # Each 20,000-token prompt takes ceil(20000 / (8192 - B)) = 3 chunks, during which it does
    # not decode: B = 4·99/(99 + 3).
    assert pt.decode_batch == pytest.approx(4 * 99 / 102)
    B = 4 * 99 / 102
    # Arrivals bring 20000·B/99 tokens an iteration, packed in chunks of 8192 - B.
    assert pt.prefill_fraction == pytest.approx(20000 * B / 99 / (8192 - B))


def test_concurrency_one_is_one_request_alone():
    d = dep()
    pt = serving.serving_point(d, 1, 500, 100)
    B = 99 / 100
    # No one else decodes while its prompt is prefilled, and no iteration is in flight on arrival.
    assert pt.ttft_s == pytest.approx(d.engine.request_overhead_ms * 1e-3 + t(d, 0, 550, 500, 0))
    assert pt.decode_batch == pytest.approx(B)


def test_decode_point_is_an_offline_batch():
    d = dep()
    pt = serving.decode_point(d, 8, 32, 128)
    # The 8 prompts share one iteration; each attends to its own 32 tokens, not to the others'.
    coef = rl.coefficients(d)
    ttft = d.engine.request_overhead_ms * 1e-3 + float(coef.cost(8 * 32, 8 * 32 * 16, 0, 8).seconds)
    assert ttft < d.engine.request_overhead_ms * 1e-3 + t(d, 0, 0, 8 * 32, 0)  # one 256-token sequence
    itl = t(d, 8, 32 + 64, 0, 0)
    assert pt.e2e_s == pytest.approx(ttft + 127 * itl)
    assert pt.output_tok_s == pytest.approx(8 * 128 / pt.e2e_s)


def test_prefill_chunks_that_span_prompts():
    """Three 5,000-token prompts in chunks of the 8,192-token budget: the first chunk holds
    prompt 1 and the first 3,192 tokens of prompt 2, the second the rest of prompt 2 (after its
    3,192 cached tokens) and prompt 3."""
    d = dep()
    coef = rl.coefficients(d)
    first = coef.cost(8192, rl.attention_pairs(5000, 0) + rl.attention_pairs(3192, 0), 0, 2).seconds
    second = coef.cost(15000 - 8192, rl.attention_pairs(1808, 3192) + rl.attention_pairs(5000, 0), 3192, 2).seconds
    assert serving.prefill_time(d, 5000, batch=3) == pytest.approx(float(first + second), rel=1e-12)
    # One prompt alone is the single-sequence case.
    assert serving.prefill_time(d, 5000) == pytest.approx(t(d, 0, 0, 5000, 0), rel=1e-12)


@given(C=st.integers(1, 256), I=st.integers(0, 16000), O=st.integers(2, 2000))
def test_more_concurrency_more_throughput_and_no_faster_tokens(C, I, O):
    d = dep()
    a, b = serving.serving_point(d, C, I, O), serving.serving_point(d, C + 8, I, O)
    assert b.itl_s >= a.itl_s * (1 - 1e-9)
    assert b.output_tok_s >= a.output_tok_s * (1 - 1e-9) or b.prefill_fraction == 1.0
    assert all(math.isfinite(x) and x >= 0 for x in (a.ttft_s, a.itl_s, a.output_tok_s))


def test_bad_points_raise():
    with pytest.raises(ValueError):
        serving.serving_point(dep(), 0, 100, 10)
    with pytest.raises(ValueError):
        serving.serving_point(dep(), 1, float("nan"), 10)

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
    itl = (1 - f) * t(d, B, I + O / 2, 0, 0) + f * t(d, B, I + O / 2, per_it / f, I / 2)
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
    ttft = d.engine.request_overhead_ms * 1e-3 + t(d, 0, 0, 8 * 32, 0)
    itl = t(d, 8, 32 + 64, 0, 0)
    assert pt.e2e_s == pytest.approx(ttft + 127 * itl)
    assert pt.output_tok_s == pytest.approx(8 * 128 / pt.e2e_s)


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

"""Roofline costs against hand-derived values and the paper's balance point."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import roofline as rl
from costsim.profiles import Deployment, ModelSpec, load_device, load_model

from conftest import IDEAL_ENGINE, LLAMA_8B_CONFIG, MIXTRAL_CONFIG


def test_hf_config_llama_8b(hf_config):
    m = load_model(hf_config(LLAMA_8B_CONFIG))
    assert m.total_params_b == pytest.approx(8.03, rel=0.01)  # model card: 8.03B
    assert m.active_params_b == m.total_params_b and not m.is_moe
    assert m.kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2


def test_hf_config_mixtral(hf_config):
    m = load_model(hf_config(MIXTRAL_CONFIG))
    assert m.total_params_b == pytest.approx(46.7, rel=0.01)  # model card: 46.7B total
    assert m.active_params_b == pytest.approx(12.9, rel=0.01)  # 12.9B active
    assert m.is_moe and m.num_experts == 8 and m.experts_per_token == 2


def test_dense_decode_is_weight_bytes_over_bandwidth(hf_config, toy_device):
    m = load_model(hf_config(LLAMA_8B_CONFIG))
    dep = Deployment(m, toy_device, 1, "bf16", engine=IDEAL_ENGINE)
    c = rl.decode_step(dep, 1, 0)
    embed = 128256 * 4096  # untied input embedding: one row gathered per token, not read whole
    w = (m.total_params_b * 1e9 - embed) * 2
    assert c.hbm_bytes == pytest.approx(w + m.kv_bytes_per_token())
    assert c.seconds == pytest.approx(c.hbm_bytes / 2000e9)
    assert c.flops == pytest.approx(2 * (m.active_params_b * 1e9 - embed))
    assert not c.compute_bound


def test_moe_reads_union_of_experts(toy_device, toy_moe):
    dep = Deployment(toy_moe, toy_device, 1, "bf16", engine=IDEAL_ENGINE)
    one = rl.weight_bytes_touched(dep, 1)
    assert one == pytest.approx(toy_moe.active_params_b * 1e9 * 2)  # batch 1 reads only top-k
    many = rl.weight_bytes_touched(dep, 10_000)
    assert many == pytest.approx(toy_moe.total_params_b * 1e9 * 2, rel=1e-6)
    # Batch 8 touches E(1-(1-k/E)^8) experts per layer, fewer than 8k.
    frac = 1 - (1 - 4 / 64) ** 8
    routed = 10 * 64 * frac * toy_moe.expert_params
    assert rl.weight_bytes_touched(dep, 8) == pytest.approx((toy_moe.always_active_params + routed) * 2)
    assert 64 * frac < 8 * 4


@given(b1=st.integers(1, 512), b2=st.integers(1, 512), ctx=st.integers(0, 32768))
def test_decode_time_monotone_in_batch(b1, b2, ctx):
    from costsim.profiles import Device

    dev = Device(name="d", display_name="d", memory_gb=96, hbm_bandwidth_gb_per_s=4000, bf16_dense_tflops=148, source="t",
                 interconnect_bandwidth_gb_per_s=900)
    m = ModelSpec(name="m", display_name="m", num_layers=40, hidden_size=4096, num_attention_heads=32,
                  num_kv_heads=4, head_dim=128, total_params_b=100, active_params_b=10, source="t",
                  num_experts=128, experts_per_token=8)
    dep = Deployment(m, dev, 4, "bf16")
    lo, hi = sorted((b1, b2))
    a, b = rl.decode_step(dep, lo, ctx), rl.decode_step(dep, hi, ctx)
    assert a.seconds <= b.seconds and a.hbm_bytes <= b.hbm_bytes and a.flops <= b.flops


def test_paper_balance_point_on_h20(hf_config):
    from costsim.profiles import load_device

    dep = Deployment(load_model(hf_config(LLAMA_8B_CONFIG)), load_device("h20"), 1, "bf16")
    assert rl.balance_batch_paper(dep) == pytest.approx(37.0)


def test_balance_batch_dense_matches_algebra(hf_config, toy_device):
    m = load_model(hf_config(LLAMA_8B_CONFIG))
    dep = Deployment(m, toy_device, 1, "bf16", engine=IDEAL_ENGINE)
    # compute 2·A·B / F >= (W + B·kvb) / BW  <=>  B >= (W/BW) / (2A/F - kvb/BW), context 0.
    embed = 128256 * 4096
    A, W, kvb = m.active_params_b * 1e9 - embed, (m.total_params_b * 1e9 - embed) * 2, m.kv_bytes_per_token()
    want = np.ceil((W / 2000e9) / (2 * A / 400e12 - kvb / 2000e9))
    assert rl.balance_batch(dep, 0) == want
    assert rl.decode_step(dep, want, 0).compute_bound and not rl.decode_step(dep, want - 1, 0).compute_bound


def test_balance_recedes_with_context_and_can_vanish(hf_config, toy_device):
    m = load_model(hf_config(LLAMA_8B_CONFIG))
    dep = Deployment(m, toy_device, 1, "bf16", engine=IDEAL_ENGINE)
    assert rl.balance_batch(dep, 0) < rl.balance_batch(dep, 100) < rl.balance_batch(dep, 300)
    # Decode attention with GQA-8 in bf16: past ~570 tokens of context a sequence's KV read
    # (C·131072 B at 2 TB/s) outlasts its FLOPs ((15e9 + 524288·C) at 400 TFLOPS), for any batch.
    assert rl.balance_batch(dep, 1000) == float("inf")


def test_long_prefill_is_compute_bound_and_costs_many_passes(toy_device, toy_moe):
    dep = Deployment(toy_moe, toy_device, 1, "bf16", engine=IDEAL_ENGINE)
    pre = rl.prefill(dep, 2000, 4000)
    one = rl.decode_step(dep, 1, 4000)
    assert pre.compute_bound
    flops = 2 * 3e9 * 2000 + 4 * 8 * 128 * 10 * 2000 * (4000 + 1000)
    assert pre.flops == pytest.approx(flops)
    assert pre.seconds == pytest.approx(flops / 400e12)
    assert pre.seconds > 5 * one.seconds  # pass counting would call it one pass


def test_tensor_parallel_adds_allreduce_and_splits_work(hf_config, toy_device):
    from dataclasses import replace

    m = load_model(hf_config(LLAMA_8B_CONFIG))
    eng = replace(IDEAL_ENGINE, allreduce_latency_us={"2": 4.0, "8": 10.0})  # 4 GPUs: 7 us, midway in log2
    one, four = Deployment(m, toy_device, 1, engine=eng), Deployment(m, toy_device, 4, engine=eng)
    c1, c4 = rl.decode_step(one, 1, 1000), rl.decode_step(four, 1, 1000)
    # 8 KV heads over 4 ranks: no replication, so the bytes split four ways. Two ring
    # all-reduces per layer of 2(n-1)/n of the 8 KB activation over 200 GB/s a direction.
    comm = 2 * 32 * (2 * 3 / 4 * 4096 * 2 / 200e9 + 7e-6)
    assert c4.seconds == pytest.approx(c1.memory_s / 4 + comm)


def test_protocol_parameters(toy_device, toy_moe, hf_config):
    strong = Deployment(toy_moe, toy_device, 1, engine=IDEAL_ENGINE)
    weak = Deployment(load_model(hf_config(LLAMA_8B_CONFIG)), toy_device, 1, engine=IDEAL_ENGINE)
    pp = rl.protocol_parameters(strong, weak, np.arange(1, 7), 100, 150, 20, 1.0, 4000, 4, 4)
    vd = pp.v_over_d["time"]
    assert vd.shape == (6,) and np.all(np.diff(vd) > 0)  # longer chunk, longer review
    assert pp.kappa == pytest.approx(float(pp.weak_step.seconds / pp.strong_step.seconds))
    # A repair of rho·d tokens costs rho·d decode iterations: less than a whole step (no prefill).
    assert 0 < pp.rho["time"] < 1.0


@given(B=st.integers(1, 300), ctx=st.integers(0, 20000), m=st.integers(1, 400), dtype=st.sampled_from(["bf16", "fp8"]))
def test_decode_run_closed_form_equals_iteration_sum(B, ctx, m, dtype):
    from costsim.profiles import load_device

    dep = Deployment(load_model("qwen3.5-397b-a17b"), load_device("h20"), 8, dtype)
    coef = rl.coefficients(dep)
    i = np.arange(m)
    it = rl.iteration(dep, decode_batch=B, decode_context=(ctx + i * B) / B)  # contexts grow together
    sec, hbm, flops = coef.decode_run(B, ctx, m)
    assert sec == pytest.approx(it.seconds.sum(), rel=1e-9)
    assert hbm == pytest.approx(it.hbm_bytes.sum(), rel=1e-9)
    assert flops == pytest.approx(it.flops.sum(), rel=1e-9)
    # Iterations completed by a given time: the prefix sums bracket it.
    cum = np.cumsum(it.seconds)
    t = cum[m // 2] * 0.999 if m > 1 else cum[0] * 0.5
    k = coef.decode_iterations_within(B, ctx, m, t)
    assert (k == 0 or cum[k - 1] <= t * (1 + 1e-12)) and (k == m or cum[k] > t)


def test_scalar_and_array_costs_agree():
    from costsim.profiles import load_device

    dep = Deployment(load_model("qwen3-30b-a3b"), load_device("h100"), 1, "bf16")
    coef = rl.coefficients(dep)
    arr = coef.cost(np.array([1.0, 37.0, 512.0]), np.array([4e3, 1e5, 3e6]), np.array([4e3, 1e5, 3e6]))
    for j, (t, p) in enumerate([(1.0, 4e3), (37.0, 1e5), (512.0, 3e6)]):
        assert float(coef.cost(t, p, p).seconds) == pytest.approx(arr.seconds[j])


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 20000), st.integers(0, 60000), st.integers(0, 2000),
       st.sampled_from(["qwen3-8b", "qwen3-30b-a3b", "qwen3.5-397b-a17b"]), st.integers(1, 8))
def test_solo_is_prefill_chunk_then_decode_run_to_the_last_bit(tokens, context, m, model, n_dev):
    # The simulator's fused hot path must be the same arithmetic as the two general forms.
    c = rl.coefficients(Deployment(load_model(model), load_device("h20"), n_dev))
    pre, run = c.solo(tokens, context, m)
    assert pre == c.prefill_chunk(tokens, context)
    assert run == (c.decode_run(1, context + tokens, m) if m > 0 else (0.0, 0.0, 0.0))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.integers(0, 200_000), st.integers(0, 2000),
       st.sampled_from(["qwen3-8b", "qwen3-30b-a3b", "qwen3.5-397b-a17b"]), st.integers(1, 8))
def test_decode_run_is_its_decode_lines_summed_to_the_last_bit(B, ctx, m, model, n_dev):
    # decode_run is written out for speed; it must be _sum_max over _decode_lines exactly.
    c = rl.coefficients(Deployment(load_model(model), load_device("h20"), n_dev))
    c0, c1, m0, m1, extra = c._decode_lines(B, ctx)
    assert c.decode_run(B, ctx, m) == (c._sum_max(c0, c1, m0, m1, m) + extra * m,
                                       (m0 * m + m1 * m * (m - 1) / 2.0) * c.memory_rate,
                                       (c0 * m + c1 * m * (m - 1) / 2.0) * c.compute_rate)


def test_a_replica_past_one_node_pays_the_network():
    # Sixteen H100s are two HGX nodes: every all-reduce crosses the InfiniBand NICs (100 GB/s a
    # GPU both ways, 75 us a small all-reduce as NCCL measured it), where eight pay NVLink's
    # 900 GB/s and the engine's custom all-reduce.
    from costsim.profiles import ProfileError, load_engine

    m, dev, eng = load_model("llama-3.1-70b"), load_device("h100"), load_engine("vllm")
    eight = rl.coefficients(Deployment(m, dev, 8, "bf16", engine=eng))
    sixteen = rl.coefficients(Deployment(m, dev, 16, "bf16", engine=eng))
    ar = 2 * m.num_layers
    msg = m.hidden_size * 2.0
    assert sixteen.comm_s_per_token == pytest.approx(ar * 2 * 15 / 16 * msg / (dev.internode_bandwidth_gb_per_s * 1e9 / 2))
    assert eight.comm_s_per_token == pytest.approx(ar * 2 * 7 / 8 * msg / (dev.interconnect_bandwidth_gb_per_s * 1e9 / 2))
    fixed8 = eight.fixed_s - 1e-6 * ar * eng.collective_us("allreduce", 8)
    assert sixteen.fixed_s == pytest.approx(fixed8 + 1e-6 * ar * dev.internode_latency_us)
    # A part whose profile says nothing of a network between its servers is refused past one.
    with pytest.raises(ProfileError, match="spans more than a node of 8: the profile has no internode_bandwidth_gb_per_s"):
        rl.coefficients(Deployment(m, load_device("l40s"), 16, "bf16", engine=eng))

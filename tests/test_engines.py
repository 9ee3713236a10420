"""Engine profiles and the architecture terms of the roofline: MLA, hybrid linear attention,
sliding windows, per-component precision, KV replication, expert parallelism."""

from dataclasses import replace

import pytest

from costsim import roofline as rl
from costsim.profiles import (DTYPE_BYTES, Deployment, ProfileError, load_device, load_engine, load_model, names,
                              weight_bytes)

from conftest import IDEAL_ENGINE

# Real config.json shapes, the keys as their checkpoints spell them (values from the published
# config.json files of each model on Hugging Face).
DEEPSEEK_V3 = {
    "_name_or_path": "deepseek-ai/DeepSeek-V3", "model_type": "deepseek_v3", "num_hidden_layers": 61,
    "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}
QWEN35_397B = {
    "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
    "text_config": {
        "model_type": "qwen3_5_moe_text", "num_hidden_layers": 60, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 2, "head_dim": 256, "attn_output_gate": True, "moe_intermediate_size": 1024,
        "shared_expert_intermediate_size": 1024, "num_experts": 512, "num_experts_per_tok": 10,
        "linear_num_value_heads": 64, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 15, "vocab_size": 248320,
        "tie_word_embeddings": False, "dtype": "bfloat16", "mlp_only_layers": [],
    },
}
GPT_OSS_120B = {
    "model_type": "gpt_oss", "num_hidden_layers": 36, "hidden_size": 2880, "intermediate_size": 2880,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 128,
    "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128, "vocab_size": 201088,
    "layer_types": ["sliding_attention", "full_attention"] * 18, "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
}
NEMOTRON_H = {
    "model_type": "nemotron_h", "num_hidden_layers": 52, "hidden_size": 4096, "intermediate_size": 21504,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "mamba_num_heads": 128, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
}


def test_every_engine_figure_has_a_source():
    assert {"vllm", "sglang", "trtllm", "llamacpp", "ideal"} <= set(names("engines"))
    for n in names("engines"):
        e = load_engine(n)
        for k in ("iteration_overhead_ms", "layer_latency_us", "bandwidth_fraction", "flops_fraction"):
            assert k in e.sources, f"{n}: no source for {k}"
        if e.allreduce_latency_us:
            assert "allreduce_latency_us" in e.sources


def test_default_engine_is_vllm_and_named_in_deployments():
    from costsim.sizing import deployments

    s, w = deployments()
    assert s.engine.name == w.engine.name == "vllm"
    s, w = deployments(engine="sglang", weak_engine="llama.cpp")
    assert (s.engine.name, w.engine.name) == ("sglang", "llamacpp")
    with pytest.raises(ProfileError, match="unknown engine 'tgi'; known: ideal, llamacpp"):
        load_engine("tgi")


def test_collective_latency_interpolates_in_log2():
    e = replace(IDEAL_ENGINE, allreduce_latency_us={"2": 4.0, "8": 10.0})
    assert e.collective_us("allreduce", 1) == 0.0
    assert e.collective_us("allreduce", 2) == 4.0
    assert e.collective_us("allreduce", 4) == pytest.approx(7.0)
    assert e.collective_us("allreduce", 16) == 10.0  # held flat past the table


def test_bad_engine_profiles_fail_with_one_line(tmp_path):
    p = tmp_path / "e.toml"
    base = ('name = "e"\ndisplay_name = "e"\nversion = "1"\nsource = "t"\niteration_overhead_ms = 1\n'
            'layer_latency_us = 1\nflops_fraction = 0.5\n')
    p.write_text(base + "bandwidth_fraction = 1.5\n")
    with pytest.raises(ProfileError, match="must be in \\(0, 1\\]"):
        load_engine(str(p))
    p.write_text(base + 'bandwidth_fraction = 0.5\nallreduce_latency_us = { "one" = 3 }\n')
    with pytest.raises(ProfileError, match="maps GPU counts >= 2"):
        load_engine(str(p))
    p.write_text(base + 'bandwidth_fraction = "fast"\n')
    with pytest.raises(ProfileError, match="bandwidth_fraction must be a number"):
        load_engine(str(p))


def test_engine_latencies_add_to_every_iteration(hf_config):
    from conftest import LLAMA_8B_CONFIG

    m, dev = load_model(hf_config(LLAMA_8B_CONFIG)), load_device("h100")
    eng = replace(IDEAL_ENGINE, iteration_overhead_ms=1.0, layer_latency_us=10.0, bandwidth_fraction=0.5)
    ideal = rl.decode_step(Deployment(m, dev, 1, engine=IDEAL_ENGINE), 1, 0)
    real = rl.decode_step(Deployment(m, dev, 1, engine=eng), 1, 0)
    # Half the bandwidth doubles the memory time; 1 ms + 32 layers x 10 us are added.
    assert float(real.seconds) == pytest.approx(2 * float(ideal.seconds) + 1e-3 + 32 * 10e-6)
    assert float(real.hbm_bytes) == pytest.approx(float(ideal.hbm_bytes))


def test_mla_config_parses_and_caches_the_latent_on_every_rank(hf_config):
    m = load_model(hf_config(DEEPSEEK_V3))
    assert m.total_params_b == pytest.approx(671, rel=0.01)  # DeepSeek-V3 report: 671B total
    assert m.active_params_b == pytest.approx(37, rel=0.02)  # 37B activated
    assert m.is_mla and m.kv_lora_rank == 512 and m.qk_rope_head_dim == 64
    assert m.n_moe_layers == 58 and m.default_dtype == "fp8"
    # (512 + 64) values a token and layer, held whole by each tensor-parallel rank
    assert m.kv_bytes_per_token("bf16", tp=1) == 61 * 576 * 2
    assert m.kv_bytes_per_token("bf16", tp=8) == 8 * 61 * 576 * 2


def test_hybrid_linear_attention_config_and_state_traffic(hf_config):
    m = load_model(hf_config(QWEN35_397B))
    assert m.total_params_b == pytest.approx(397, rel=0.01) and m.active_params_b == pytest.approx(17, rel=0.03)
    assert (m.n_kv_layers, m.linear_layers) == (15, 45)
    # DeltaNet state 64 x 128 x 128 plus conv state (2·16·128 + 64·128) x 3, a sequence and layer
    assert m.linear_state_elements == 64 * 128 * 128 + (2 * 16 * 128 + 64 * 128) * 3
    # 2 KV heads over 8 ranks: replicated to one per rank
    assert m.kv_heads_stored(8) == 8 and m.kv_heads_stored(1) == 2
    assert m.kv_bytes_per_token("bf16", tp=8) == 15 * 8 * 2 * 256 * 2
    # A decode iteration reads and writes each sequence's state once; a prefill chunk once too.
    dep = Deployment(m, load_device("h20"), 8, "fp8", engine=IDEAL_ENGINE)
    state = 2 * 45 * m.linear_state_elements * 2
    one, four = rl.decode_step(dep, 1, 0), rl.decode_step(dep, 4, 0)
    kv = m.kv_bytes_per_token("bf16", 8)
    w1, w4 = rl.weight_bytes_touched(dep, 1), rl.weight_bytes_touched(dep, 4)
    assert float(one.hbm_bytes) == pytest.approx(w1 + kv + state)
    assert float(four.hbm_bytes) == pytest.approx(w4 + 4 * kv + 4 * state)
    pre = rl.prefill(dep, 1000, 0)
    assert float(pre.hbm_bytes) == pytest.approx(rl.weight_bytes_touched(dep, 1000) + 1000 * kv + state)


def test_sliding_window_and_mxfp4_experts(hf_config):
    m = load_model(hf_config(GPT_OSS_120B))
    assert m.total_params_b == pytest.approx(116.8, rel=0.01)  # gpt-oss model card: 116.83B
    assert (m.n_kv_layers, m.sliding_layers, m.sliding_window) == (18, 18, 128)
    assert m.expert_dtype == "mxfp4" and m.default_dtype == "bf16"
    routed = 36 * 128 * m.expert_params
    assert weight_bytes(m, "bf16") == pytest.approx((m.total_params_b * 1e9 - routed) * 2 + routed * 4.25 / 8)
    assert weight_bytes(m, "bf16") / 1e9 == pytest.approx(65, rel=0.05)  # the checkpoint is about 65 GB
    # The windows cost a sequence a fixed read whatever its context.
    dep = Deployment(m, load_device("h100"), 1, engine=IDEAL_ENGINE)
    window = 18 * 128 * 8 * 2 * 64 * 2
    a, b = rl.decode_step(dep, 1, 1000), rl.decode_step(dep, 1, 2000)
    assert float(b.hbm_bytes - a.hbm_bytes) == pytest.approx(1000 * m.kv_bytes_per_token())
    assert rl.coefficients(dep).seq_bytes == pytest.approx(window)


def test_mamba_hybrid_config(hf_config):
    m = load_model(hf_config(NEMOTRON_H))
    assert m.n_kv_layers == 4 and m.linear_layers == NEMOTRON_H["hybrid_override_pattern"].count("M")
    inner = 128 * 64
    assert m.linear_state_elements == inner * 128 + (inner + 2 * 8 * 128) * 3


def test_untied_embedding_is_not_read_whole(hf_config):
    from conftest import LLAMA_8B_CONFIG

    tied = {**LLAMA_8B_CONFIG, "tie_word_embeddings": True}
    a, b = load_model(hf_config(LLAMA_8B_CONFIG)), load_model(hf_config(tied, "tied.json"))
    dev = load_device("h100")
    ra = rl.decode_step(Deployment(a, dev, 1, engine=IDEAL_ENGINE), 1, 0)
    rb = rl.decode_step(Deployment(b, dev, 1, engine=IDEAL_ENGINE), 1, 0)
    # Tied: the table is the output head, read whole, and counted once in the parameters.
    assert a.total_params_b - b.total_params_b == pytest.approx(128256 * 4096 / 1e9)
    assert float(ra.hbm_bytes) == pytest.approx(float(rb.hbm_bytes))


def test_expert_parallel_swaps_the_moe_allreduce_for_two_all_to_alls(toy_moe, toy_device):
    eng = replace(IDEAL_ENGINE, allreduce_latency_us={"2": 5.0, "8": 5.0}, alltoall_latency_us={"2": 9.0, "8": 9.0})
    tp = rl.coefficients(Deployment(toy_moe, toy_device, 4, engine=eng))
    ep = rl.coefficients(Deployment(toy_moe, toy_device, 4, engine=eng, expert_parallel=True))
    # 10 layers: TP has 20 all-reduces; EP keeps the 10 attention ones and adds 20 all-to-alls.
    assert tp.fixed_s == pytest.approx(20 * 5e-6)
    assert ep.fixed_s == pytest.approx(10 * 5e-6 + 20 * 9e-6)
    link = 400e9 / 2
    assert ep.comm_s_per_token == pytest.approx((10 * 2 * 3 / 4 + 20 * 4 * 3 / 4) * 1024 * 2 / link)


def test_bad_hf_configs_are_one_line_errors(hf_config, tmp_path):
    with pytest.raises(ProfileError, match="needs num_hidden_layers, hidden_size and num_attention_heads > 0"):
        load_model(hf_config({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 0}))
    with pytest.raises(ProfileError, match="num_key_value_heads must be a number"):
        load_model(hf_config({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                              "num_key_value_heads": "4"}))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ProfileError, match="not a readable JSON config"):
        load_model(str(deep))
    assert "mxfp4" in DTYPE_BYTES and DTYPE_BYTES["mxfp4"] == 4.25 / 8

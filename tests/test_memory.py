"""Memory as a resource: KV capacity by hand, refusals in every command, the pool's invariants."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costsim import memory
from costsim.measured import measured_path
from costsim.cli.main import main as _main
from costsim.profiles import Deployment, load_device, load_engine, load_model


def run(argv, capsys):
    code = _main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


H20_BYTES = 97871 * 2**20  # what an H20's driver reports


def test_kv_capacity_llama_70b_on_two_h20_by_hand():
    dep = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
    # vLLM takes 0.9 of what the driver reports (97,871 MiB, 102.6 GB) and keeps 4 GB of it:
    # 88.4 GB a GPU for weights and KV.
    pool = 2 * (H20_BYTES * 0.9 - 4e9) - 70.6e9 * 2
    assert memory.kv_pool_bytes(dep) == pytest.approx(pool)
    per_token = 80 * 8 * 2 * 128 * 2  # 8 KV heads over 2 ranks: none replicated
    assert memory.sequence_bytes(dep, 4756) == pytest.approx(4756 * per_token)
    assert memory.max_sequences(dep, 4756) == math.floor(pool / (4756 * per_token)) == 22


def test_kv_capacity_qwen35_397b_fp8_on_eight_h20_by_hand():
    dep = Deployment(load_model("qwen3.5-397b-a17b"), load_device("h20"), 8, "fp8")
    pool = 8 * (H20_BYTES * 0.9 - 4e9) - 397e9
    per_token = 15 * 8 * 2 * 256 * 2  # 2 KV heads replicated to one on each of 8 ranks
    state = 45 * 1_085_440 * 2  # DeltaNet state a sequence, BF16
    assert memory.kv_pool_bytes(dep) == pytest.approx(pool)
    assert memory.sequence_bytes(dep, 8000) == pytest.approx(8000 * per_token + state)
    assert memory.max_sequences(dep, 8000) == math.floor(pool / (8000 * per_token + state)) == 286


def test_devices_to_hold_and_refusals():
    m, d = load_model("qwen3.5-397b-a17b"), load_device("h20")
    assert memory.devices_to_hold(m, d, "fp8") == 8
    assert memory.devices_to_hold(m, d, "bf16") == 16
    small = Deployment(m, load_device("rtx-4090"), 1, "fp8")
    with pytest.raises(memory.DoesNotFit, match="needs 397 GB of weights.*the smallest count that holds them is 32"):
        memory.require_fits(small)
    big = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
    with pytest.raises(memory.DoesNotFit, match="at most 22 sequences at that context"):
        memory.require_fits(big, batch=23, context=4756)
    memory.require_fits(big, batch=22, context=4756)
    with pytest.raises(memory.DoesNotFit, match="needs FP4 tensor cores"):
        memory.require_fits(Deployment(load_model("deepseek-v3"), load_device("h200"), 8, "nvfp4"))


@given(util=st.floats(0.5, 1.0), reserve=st.floats(0, 10), ctx=st.integers(1, 200_000))
def test_pool_holds_what_it_says(util, reserve, ctx):
    from dataclasses import replace

    eng = replace(load_engine(), memory_utilization=util, reserve_gb=reserve)
    dep = Deployment(load_model("qwen3-30b-a3b"), load_device("h200"), 1, "bf16", engine=eng)
    n = memory.max_sequences(dep, ctx)
    pool = memory.kv_pool_bytes(dep)
    assert n * memory.sequence_bytes(dep, ctx) <= max(pool, 0) * (1 + 1e-12)
    assert (n + 1) * memory.sequence_bytes(dep, ctx) > pool


@pytest.mark.parametrize("argv", [
    ["roofline", "--model", "llama-3.1-70b", "--device", "a100", "--gpus", "1", "--dtype", "fp8", "--batch", "8"],
    ["roofline", "--model", "llama-3.1-70b", "--device", "h100", "--gpus", "2", "--batch", "256", "--context", "128000"],
    ["roofline", "--model", "llama-3.1-8b", "--device", "h100", "--batch", "256", "--context", "128000"],
    ["predict", "-p", "0.8", "--K", "6", "--strong-device", "rtx-4090", "--strong-gpus", "1"],
    ["predict", "-p", "0.8", "--K", "6", "--batch", "400"],
    ["simulate", "-p", "0.8", "--K", "6", "--tasks", "3", "--strong-device", "rtx-4090", "--strong-gpus", "1", "-q"],
    ["capacity", "--task-rate", "1/s", "--latency-p95", "60s", "--strong-device", "rtx-4090", "--strong-gpus", "1"],
    ["hardware", "show", "a100", "--model", "llama-3.1-70b", "--gpus", "1"],
    ["roofline", "--model", "qwen3-8b", "--device", "h100", "--gpus", "3"],  # 32 heads do not split 3 ways
    ["predict", "-p", "0.8", "--K", "6", "--strong-gpus", "1000"],
])
def test_commands_refuse_what_does_not_fit(argv, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.startswith("costsim: error: ") and err.count("\n") == 1, err
    assert "smallest count that holds them" in err or "at most" in err or "cannot split" in err


def test_roofline_prints_kv_capacity(capsys):
    code, out, _ = run(["roofline", "--model", "llama-3.1-8b", "--device", "h100", "--batch", "4", "--context", "8000"], capsys)
    assert code == 0 and "KV pool" in out and "sequences of 8,000" in out
    import json

    code, out, _ = run(["roofline", "--model", "llama-3.1-8b", "--device", "h100", "--batch", "4", "--context", "8000",
                        "--json"], capsys)
    r = json.loads(out)
    dep = Deployment(load_model("llama-3.1-8b"), load_device("h100"), 1, "bf16")
    assert r["kv_capacity_sequences"] == memory.max_sequences(dep, 8000)
    assert r["kv_pool_bytes"] == pytest.approx(memory.kv_pool_bytes(dep))


def test_roofline_says_unbounded_where_a_sequence_holds_no_kv(capsys):
    import json

    argv = ["roofline", "--model", "llama-3.1-8b", "--device", "h100", "--batch", "1", "--context", "0"]
    code, out, _ = run(argv, capsys)
    assert code == 0 and "sequences unbounded at 0 tokens of context" in out and "4,611,686" not in out
    code, out, _ = run(argv + ["--json"], capsys)
    assert json.loads(out)["kv_capacity_sequences"] is None
    code, out, _ = run(["hardware", "show", "h100", "--model", "llama-3.1-8b", "--context", "0"], capsys)
    assert code == 0 and "sequences unbounded at 0 tokens of context" in out


def test_engines_pick_their_share_of_memory_as_they_do():
    # SGLang's mem_fraction_static rule (0.5.10), as its source computes it: an H100 at TP 8
    # 0.812, an H20 at TP 8 0.844 and 0.833 for an MLA model, an H200 at TP 1 0.903; a share
    # the user gives replaces it.
    assert memory.sglang_mem_fraction_static(81559, 8, False) == 0.812
    assert memory.sglang_mem_fraction_static(97871, 8, False) == 0.844
    assert memory.sglang_mem_fraction_static(97871, 8, True) == 0.833
    assert memory.sglang_mem_fraction_static(143771, 1, False) == 0.903
    from costsim.sizing import deployment

    # DeepSeek-V3 in FP8 on 8x H20 under SGLang runs (Ant Group's LMSYS post, 2025-09-26, and
    # SGLang PR #11854, with --mem-fraction-static 0.9): it fits, by SGLang's default share and by
    # 0.9, with the pool the latter leaves.
    dsv3 = deployment("deepseek-v3", "h20", 8, "fp8", "sglang")
    memory.require_fits(dsv3)
    wide = deployment("deepseek-v3", "h20", 8, "fp8", "sglang", gpu_memory_utilization=0.9)
    assert memory.kv_pool_bytes(wide) == pytest.approx(8 * 0.9 * H20_BYTES - dsv3.weight_bytes)
    assert memory.share_taken(wide) == pytest.approx(0.9)
    # TensorRT-LLM's KV pool is 0.9 of what the weights and its reserve leave.
    trt = deployment("llama-3.1-70b", "h100", 2, "bf16", "trtllm")
    free = trt.device.memory_bytes - 4e9 - trt.weight_bytes / 2
    assert memory.kv_pool_bytes(trt) == pytest.approx(2 * 0.9 * free)
    with pytest.raises(ValueError, match="--gpu-memory-utilization must be in"):
        deployment("llama-3.1-8b", "h100", 1, None, "vllm", gpu_memory_utilization=1.5)


def test_a_small_gpu_keeps_its_familys_reserve():
    # vLLM profiles its activations for its 2,048-token budget on the Ada cards and the RTX 5090
    # (2.25 GB, its own log on an RTX 5090), not the 4 GB of an H200: DeutscheKI ran QwQ-32B-AWQ
    # on one RTX 4090 at --max-model-len 4096, which the larger reserve would refuse.
    from costsim.sizing import deployment

    ada = deployment(str(Path(measured_path()).parent / "configs/QwQ-32B-AWQ/config.json"), "rtx-4090", 1)
    assert ada.weight_dtype == "int4-g128"
    assert memory.reserve_bytes(ada.device, ada.engine) == 2.25e9
    assert memory.reserve_bytes(load_device("h100"), ada.engine) == 4e9
    pool = 24564 * 2**20 * 0.9 - 2.25e9 - ada.weight_bytes
    assert memory.kv_pool_bytes(ada) == pytest.approx(pool)
    memory.require_fits(ada, 1, 4096)
    with pytest.raises(memory.DoesNotFit):
        memory.require_fits(replace(ada, engine=replace(ada.engine, families={})), 1, 4096)

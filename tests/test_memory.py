"""Memory as a resource: KV capacity by hand, refusals in every command, the pool's invariants."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costsim import memory
from costsim.cli.main import main as _main
from costsim.profiles import Deployment, load_device, load_engine, load_model


def run(argv, capsys):
    code = _main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_kv_capacity_llama_70b_on_two_h20_by_hand():
    dep = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
    # vLLM takes 0.9 of 96 GB a GPU and keeps 4 GB of it: 82.4 GB a GPU for weights and KV.
    pool = 2 * (96e9 * 0.9 - 4e9) - 70.6e9 * 2
    assert memory.kv_pool_bytes(dep) == pytest.approx(pool)
    per_token = 80 * 8 * 2 * 128 * 2  # 8 KV heads over 2 ranks: none replicated
    assert memory.sequence_bytes(dep, 4756) == pytest.approx(4756 * per_token)
    assert memory.max_sequences(dep, 4756) == math.floor(pool / (4756 * per_token)) == 15


def test_kv_capacity_qwen35_397b_fp8_on_eight_h20_by_hand():
    dep = Deployment(load_model("qwen3.5-397b-a17b"), load_device("h20"), 8, "fp8")
    pool = 8 * (96e9 * 0.9 - 4e9) - 397e9
    per_token = 15 * 8 * 2 * 256 * 2  # 2 KV heads replicated to one on each of 8 ranks
    state = 45 * 1_085_440 * 2  # DeltaNet state a sequence, BF16
    assert memory.kv_pool_bytes(dep) == pytest.approx(pool)
    assert memory.sequence_bytes(dep, 8000) == pytest.approx(8000 * per_token + state)
    assert memory.max_sequences(dep, 8000) == math.floor(pool / (8000 * per_token + state)) == 242


def test_devices_to_hold_and_refusals():
    m, d = load_model("qwen3.5-397b-a17b"), load_device("h20")
    assert memory.devices_to_hold(m, d, "fp8") == 8
    assert memory.devices_to_hold(m, d, "bf16") == 16
    small = Deployment(m, load_device("rtx-4090"), 1, "fp8")
    with pytest.raises(memory.DoesNotFit, match="needs 397 GB of weights.*the smallest count that holds them is 32"):
        memory.require_fits(small)
    big = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
    with pytest.raises(memory.DoesNotFit, match="at most 15 sequences at that context"):
        memory.require_fits(big, batch=16, context=4756)
    memory.require_fits(big, batch=15, context=4756)
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

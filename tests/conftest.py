import json
import os

import pytest
from hypothesis import settings

# CI runs the property tests with a fixed seed: a red build must be reproducible. Locally they
# explore new examples on every run.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

from costsim.profiles import Device, ModelSpec, load_engine

LLAMA_8B_CONFIG = {
    "_name_or_path": "meta-llama/Llama-3.1-8B", "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
MIXTRAL_CONFIG = {
    "_name_or_path": "mistralai/Mixtral-8x7B-v0.1", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000, "torch_dtype": "bfloat16",
}


@pytest.fixture
def hf_config(tmp_path):
    def write(cfg, name="config.json"):
        p = tmp_path / name
        p.write_text(json.dumps(cfg))
        return str(p)

    return write


@pytest.fixture
def toy_device():
    return Device(name="toy", display_name="Toy GPU", memory_gb=80, hbm_bandwidth_gb_per_s=2000,
                  bf16_dense_tflops=400, source="test", interconnect_bandwidth_gb_per_s=400)


@pytest.fixture
def toy_moe():
    return ModelSpec(name="toy-moe", display_name="Toy MoE", num_layers=10, hidden_size=1024,
                     num_attention_heads=8, num_kv_heads=2, head_dim=128, total_params_b=20.0,
                     active_params_b=3.0, source="test", num_experts=64, experts_per_token=4)


def costsim_argv() -> list[str]:
    """How a user runs the command: the installed ``costsim`` console script beside this
    interpreter (``python -m`` from the checkout would import the source tree instead of the
    installed package, which has the CLI mapped into ``costsim.cli``)."""
    import shutil
    import sys
    from pathlib import Path

    script = Path(sys.executable).with_name("costsim")
    return [str(script)] if script.exists() else [shutil.which("costsim") or "costsim"]


# The shipped ideal engine: no fixed latencies, datasheet peaks (the paper's roofline).
IDEAL_ENGINE = load_engine("ideal")


def ideal(params_b):
    """A dense model without KV cache on an ideal device: one iteration = params_b seconds."""
    from costsim.profiles.deployment import ideal as deployment

    return deployment(params_b)


def run_costsim(*args):
    """Run ``costsim ARGS`` in a subprocess, as a user would: (exit code, stdout, stderr)."""
    import subprocess

    p = subprocess.run([*costsim_argv(), *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def run_json(capsys, *args):
    """Run ``costsim ARGS --json`` in this process; its output, parsed."""
    import json

    from costsim.cli.main import main

    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)

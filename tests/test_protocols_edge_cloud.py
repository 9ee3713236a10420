"""Edge-cloud: API billing by hand, the cost ratio against formulas.api_cost_ratio where the two
coincide, and the paper's finding that wall time need not drop while API cost does."""

import numpy as np
import pytest

from costsim import formulas, roofline
from costsim.sizing import deployments
from costsim.memory import devices_to_hold
from costsim.profiles import Deployment, load_api, load_device
from costsim.metrics import summarize
from costsim.scenario import Latency, Scenario
from costsim.sim import simulate
from costsim.traces.schema import Step, Task
from costsim.traces.synthetic import Shape, generate

from conftest import ideal

API_TOML = """
name = "test-api"
display_name = "test API"
model = "m"
provider = "test"
price_input_per_mtok_usd = {pin}
price_cached_input_per_mtok_usd = {pc}
price_output_per_mtok_usd = {pout}
source = "test"
date = "2026-01"
"""
IDEAL_TOML = """
name = "ideal-edge"
display_name = "ideal edge device"
memory_gb = 1e6
hbm_bandwidth_gb_per_s = 2.0
bf16_dense_tflops = 1e12
source = "test"
"""


@pytest.fixture
def api(tmp_path):
    def write(pin=0.6, pc=0.12, pout=3.6):
        p = tmp_path / f"api-{pin}-{pc}-{pout}.toml"
        p.write_text(API_TOML.format(pin=pin, pc=pc, pout=pout))
        return str(p)
    return write


def test_cloud_strong_only_billing_and_latency_by_hand(api):
    # Two reads (5 tokens out, 3 back), 2 tokens of initial context. Call 1: 2 fresh input
    # tokens, 5 out. Call 2: the observation and the model's own step are fresh (8), the
    # initial context is cached (2), 5 out. Latency per call: TTFT 1 s + 5 / 50 s + RTT 0.1 s.
    t = Task("t", tuple(Step("read", 5, 3, context_tokens=2) for _ in range(2)))
    s, w = deployments()
    sc = Scenario(strong=s, weak=w, protocols=("cloud-strong-only",), api=api(), api_ttft_s=1.0,
                  api_output_tps=50.0, network_rtt_s=0.1, tool_latency=Latency(0.5))
    r = simulate([t], sc)[0]
    assert (r["remote_input_tokens"], r["remote_cached_tokens"], r["remote_output_tokens"]) == (10, 2, 10)
    assert r["api_cost_usd"] == pytest.approx((10 * 0.6 + 2 * 0.12 + 10 * 3.6) / 1e6)
    assert r["wall_s"] == pytest.approx(2 * (0.1 + 1.0 + 0.1 + 0.5))
    assert r["strong_calls"] == r["remote_calls"] == 2 and r["strong_hbm_bytes"] == 0


def _ratio_case(api, p, pc):
    d, o, tv, rho, n = 30, 10, 12, 1.0, 4
    shape = Shape.fixed(steps=400, output_tokens=d, obs_tokens=o, initial_context=0)
    tasks = generate(12, seed=3, shape=shape, deterministic_length=True)
    s, w = deployments()
    sc = Scenario(strong=s, weak=w, p=p, K=n, rho=rho, verdict_tokens=tv, seed=2,
                  protocols=("edge-cloud", "cloud-strong-only"), api=api(pc=pc), edge_device="rtx-5090",
                  options=(("review", "all"),))
    out = summarize(simulate(tasks, sc))["edge-cloud"]
    ep = load_api(sc.api)
    want, out_tok = formulas.api_cost_ratio(p, n, 0.0, d, o, tv, rho, ep.price_input_per_mtok_usd,
                                            ep.price_cached_input_per_mtok_usd, ep.price_output_per_mtok_usd)
    return out, float(want), float(out_tok), (d, o, tv, rho, n, ep)


def test_edge_cloud_cost_ratio_equals_the_closed_form_where_they_coincide(api):
    # Reads only, every chunk of n = K reviewed, every draft accepted (p = 1), cached input
    # free: each review bills n(d + o) fresh tokens and a verdict, each Strong-only step d + o
    # fresh and d out — exactly formulas.api_cost_ratio.
    out, want, out_tok, _ = _ratio_case(api, p=1.0, pc=0.0)
    assert out["api_cost_ratio"]["mean"] == pytest.approx(want, rel=1e-3)
    assert out["remote_output_tokens_ratio"]["mean"] == pytest.approx(out_tok, rel=1e-3)


def test_edge_cloud_cost_ratio_with_rejections_is_the_closed_form_plus_the_repaired_observation(api):
    # With rejections the simulator also bills, per rejection, the observation of the repaired
    # step as fresh input (the closed form's review adds only the chunk): + pin·o·(1-p^n)/E.
    p = 0.8
    out, want, out_tok, (d, o, tv, rho, n, ep) = _ratio_case(api, p=p, pc=0.0)
    E = float(formulas.commits_per_review(p, n))
    base = ep.price_input_per_mtok_usd * (d + o) + ep.price_output_per_mtok_usd * d
    corr = ep.price_input_per_mtok_usd * o * (1 - p**n) / E / base
    lo, hi = out["api_cost_ratio"]["ci95"]
    half = (hi - lo) / 2 * 3.29 / 1.96
    assert abs(out["api_cost_ratio"]["mean"] - (want + corr)) < half + 2e-3
    assert out["remote_output_tokens_ratio"]["mean"] == pytest.approx(out_tok, rel=0.05)


def test_wall_time_need_not_drop_when_the_local_weak_step_is_as_slow_as_the_hosted_strong():
    # The paper's MCP-Atlas finding. Stated parameters: Qwen3.5-4B on an RTX 5090 (roofline),
    # tau²-shaped synthetic tasks, p_u = 0.8, K = 6, 0.5 s tools. A hosted strong model whose
    # output speed matches the local decode (TTFT 0) makes a weak step about as slow as a
    # strong one: wall time stays at or above Strong-only over the API while remote output
    # tokens and API cost fall. A slow API (TTFT 1 s, 50 tokens/s) instead makes it fall.
    s, w = deployments()
    local = Deployment(w.model, load_device("rtx-5090"), devices_to_hold(w.model, load_device("rtx-5090")), "bf16")
    tok_s = float(roofline.decode_step(local, 1, 6000).seconds)
    tasks = generate(30, seed=5)
    common = dict(strong=s, weak=w, p=0.8, K=6, tool_latency=Latency(0.5), seed=1,
                  protocols=("edge-cloud", "cloud-strong-only"))
    fast = summarize(simulate(tasks, Scenario(api_ttft_s=0.0, api_output_tps=1.0 / tok_s, **common)))["edge-cloud"]
    assert fast["wall_ratio_api"]["mean"] > 0.95
    assert fast["api_cost_ratio"]["ci95"][1] < 0.8
    assert fast["remote_output_tokens_ratio"]["ci95"][1] < 0.5
    slow = summarize(simulate(tasks, Scenario(api_ttft_s=1.0, api_output_tps=50.0, **common)))["edge-cloud"]
    assert slow["wall_ratio_api"]["ci95"][1] < 0.8
    assert slow["api_cost_ratio"]["mean"] == pytest.approx(fast["api_cost_ratio"]["mean"])


def test_edge_cloud_runs_the_weak_model_on_the_edge_device(tmp_path, api):
    dev = tmp_path / "ideal-edge.toml"
    dev.write_text(IDEAL_TOML)
    t = Task("t", tuple(Step("read", 5, 3, context_tokens=2) for _ in range(3)))
    s, _ = deployments()
    w = ideal(4.0)  # a dense model without KV cache under the ideal engine
    r = simulate([t], Scenario(strong=s, weak=w, K=6, protocols=("edge-cloud",), api=api(),
                               edge_device=str(dev)))[0]
    # Three drafted reads committed without review: weak only, 3 calls of 1 + 5 passes of the
    # weak model's bf16 weights at 2 GB/s.
    assert r["strong_calls"] == 0 and r["api_cost_usd"] == 0
    assert r["wall_s"] == pytest.approx(3 * 6 * w.model.total_params_b * 2 / 2.0, rel=1e-3)
    assert np.isfinite(r["weak_hbm_bytes"]) and r["weak_hbm_bytes"] > 0

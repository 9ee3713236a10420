"""The roofline against the measured validation set: the fit, the hold-out errors, the
weak/strong ratios, and the readers of the set and of `vllm bench serve` results."""

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costsim import measured as v
from costsim.profiles import ProfileError, load_engine

from conftest import costsim_argv


@pytest.fixture(scope="module")
def cases():
    return v.load_cases()


@pytest.fixture(scope="module")
def fit(cases):
    return v.fit_engines(cases)


def test_the_set_spans_what_it_must(cases):
    assert len(cases) >= 40
    groups = {g: [c for c in cases if c.group == g] for g in v.GROUPS}
    assert all(groups.values())
    assert any(c.gpus == 8 for c in groups["moe-multi"])
    assert sum(c.concurrency >= 32 for c in cases) >= 8
    assert sum(c.metric == "ttft_ms" or c.scenario == "prefill" for c in cases) >= 4
    assert {c.split for c in cases} == {"fit", "holdout"}
    assert all(c.source and c.quote for c in cases)
    # Under load: closed loops and open loops, TTFT, TPOT/ITL and end-to-end latency at their
    # medians and 99th percentiles and throughput, with their lengths, in both splits.
    loaded = [c for c in cases if c.scenario in v.UNDER_LOAD]
    assert len({v.run_of(c) for c in loaded}) >= 15
    assert {c.scenario for c in loaded} == {"serving", "rate"}
    assert {(c.metric, c.statistic) for c in loaded} >= {("ttft_ms", "median"), ("ttft_ms", "p99"), ("tpot_ms", "median"),
                                                         ("tpot_ms", "p99"), ("e2el_ms", "median"), ("output_tok_s", "")}
    assert all(c.input_len > 0 and c.output_len >= 1 for c in loaded)
    for split in ("fit", "holdout"):
        assert {v.metric_group(c) for c in loaded if c.split == split} == set(v.METRIC_GROUPS)
    # A run's figures share its split: a hold-out run is held out whole; but for one run of the
    # set's first version, split figure by figure before the set had runs under load.
    by_run = {}
    for c in loaded:
        by_run.setdefault(v.run_of(c), {})[c.id] = c.split
    mixed = [ids for ids in by_run.values() if len(set(ids.values())) > 1]
    assert [sorted(ids) for ids in mixed] == [["sglcb-qwen3-235b-2507-bf16-8xb200-tp8-c1-tpot",
                                               "sglcb-qwen3-235b-2507-bf16-8xb200-tp8-c1-ttft"]]


def test_shipped_engine_values_are_the_fit(fit):
    engines, rep = fit
    for name, fitted in engines.items():
        shipped = load_engine(name)
        for k in (*rep["shared"], *rep["per_engine"][name]):  # shared, and those it has its own of
            kind, _, dev = k.partition("@")
            got = fitted.families[dev][kind] if dev else getattr(fitted, kind)
            want = shipped.families[dev][kind] if dev else getattr(shipped, kind)
            # A value fitted at its bound, 0, lies where the fit's optimum is flat: the solver stops a
            # few microseconds off it on one machine and on it on another (2026-12-02: vLLM's
            # iteration overhead 0.0023 ms here, 0 where it was fitted), far below what the
            # measurements resolve (milliseconds). Elsewhere: the fit's own digits.
            tol = 1e-2 if want == 0 else 1e-3
            assert want == pytest.approx(got, rel=2e-3, abs=tol), f"{name}.{k}: shipped {want}, fit {got}"
    # The fit improves on the priors and uses only fit cases.
    assert rep["rms_log_after"] < rep["rms_log_before"]
    fit_ids = {c.id for c in v.load_cases() if c.split == "fit"}
    assert set().union(*map(set, rep["cases"].values())) == fit_ids


def test_errors_against_measurement(cases):
    rows = v.evaluate(cases)  # raises on a deployment the model refuses: every case ran in reality
    summ = {(s["split"], s["group"]): s for s in v.summary(rows)}
    # The memory model agrees that nearly every measured run could hold its batch.
    assert sum(not r["fits_memory"] for r in rows) <= 0.1 * len(rows)
    # What the model reaches (docs/cost-model.md, "How far from measurement"), kept from getting
    # worse: every hold-out group within 20% at the median (11%, 17%, 11%, 11% now).
    for (split, g), s in summ.items():
        if split == "holdout":
            assert s["median_abs_error"] <= 0.20, (g, s)
    # Per what is measured: TPOT/ITL, end-to-end latency, throughput and the 99th percentiles
    # within 25% on the hold-out (17%, 15%, 8%, 4% now); TTFT within 45% (36% now: the target of
    # 25% is not reached; docs/cost-model.md says which cases and why).
    by_metric = {s["metric_group"]: s for s in v.summary(rows, "metric_group") if s["split"] == "holdout"}
    for g in ("tpot-itl", "e2e", "throughput", "p99"):
        assert by_metric[g]["median_abs_error"] <= 0.25, (g, by_metric[g])
    assert by_metric["ttft"]["median_abs_error"] <= 0.45
    # The priors alone (no fit) are far worse: the fit is what closes the gap.
    ideal = load_engine("ideal")
    rows0 = v.evaluate(cases, {c.engine: ideal for c in cases})
    med = lambda rs: sorted(abs(r["error"]) for r in rs)[len(rs) // 2]  # noqa: E731
    assert med(rows) < 0.5 * med(rows0)


def test_weak_strong_ratios_from_one_harness(cases):
    pairs = v.harness_pairs(v.evaluate(cases))
    assert len(pairs) >= 10
    within = [abs(p["error"]) <= 0.20 for p in pairs]
    assert sum(within) >= 0.75 * len(pairs)
    for p in pairs:  # a pair is a smaller model against the largest of its harness row
        assert p["weak"] != p["strong"]


def test_predicted_metric_units(cases):
    # The closed forms: TPOT and ITL are one number; a batch's throughput is its size times the
    # output over the latency.
    c = next(c for c in cases if c.scenario == "decode" and c.metric == "output_tok_s")
    e2e = v.predict(replace(c, metric="e2e_latency_s"))
    assert v.predict(c) == pytest.approx(c.concurrency * c.output_len / e2e)
    # Under load, each metric is the simulated benchmark's key in the metric's unit.
    c = next(c for c in cases if c.scenario == "serving" and c.metric == "tpot_ms")
    res = v.simulated(v.deployment(c), v.load_of(c))
    assert v.predict(c) == res.metrics[f"{c.statistic}_tpot_ms"]
    assert v.predict(replace(c, metric="e2e_latency_s")) == pytest.approx(res.metrics[f"{c.statistic}_e2el_ms"] / 1e3)
    assert v.predict(replace(c, metric="output_tok_s", statistic="")) == res.metrics["output_throughput"]


BENCH = {
    "date": "20261201-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 200, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 16, "completed": 200,
    "total_input_tokens": 204800, "total_output_tokens": 25600, "output_throughput": 2100.0,
    "median_ttft_ms": 60.0, "median_tpot_ms": 7.4, "median_itl_ms": 7.1, "mean_ttft_ms": 65.0,
}


def test_vllm_bench_serve_result_is_read_as_cases(tmp_path):
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(BENCH))
    got = v.load_cases(p, model="llama-3.1-8b", device="h100", gpus=1, engine="vllm", weight_dtype="bf16")
    assert {(c.metric, c.statistic) for c in got} == {("ttft_ms", "median"), ("ttft_ms", "mean"), ("tpot_ms", "median"),
                                                      ("itl_ms", "median"), ("output_tok_s", "")}
    c = got[0]
    assert (c.scenario, c.concurrency, c.num_prompts, c.input_len, c.output_len) == ("serving", 16, 200, 1024, 128)
    assert {(c.metric, c.statistic): c.value for c in got}[("tpot_ms", "median")] == 7.4
    with pytest.raises(ProfileError, match="give --model and --device"):
        v.load_cases(p)
    p.write_text(json.dumps({"completed": 0}))
    with pytest.raises(ProfileError, match="not a `vllm bench serve` result"):
        v.load_cases(p, model="llama-3.1-8b", device="h100")


def test_appended_results_metadata_and_sweep_summaries(tmp_path):
    # --append-result: one object a line; an open-loop run is judged at its rate; --metadata
    # tp=2 device=... model=... say the deployment, and a flag overrides them.
    open_loop = {**BENCH, "request_rate": 4.0, "max_concurrency": None, "tp": "2", "device": "h100",
                 "model": "llama-3.1-70b", "p99_ttft_ms": 130.0}
    p = tmp_path / "runs.json"
    p.write_text(json.dumps(BENCH) + "\n" + json.dumps(open_loop))
    got = v.load_cases(p, model="llama-3.1-8b", device="h100")
    first, second = [c for c in got if "#1" in c.id], [c for c in got if "#2" in c.id]
    assert {c.scenario for c in first} == {"serving"} and {c.scenario for c in second} == {"rate"}
    assert second[0].request_rate == 4.0 and second[0].gpus == 2 and second[0].group == "dense-tp"
    assert second[0].model == "llama-3.1-8b"  # the flag over the metadata
    assert ("ttft_ms", "p99") in {(c.metric, c.statistic) for c in second}
    one = tmp_path / "open.json"
    one.write_text(json.dumps(open_loop))
    assert {c.model for c in v.load_cases(one)} == {"llama-3.1-70b"}  # the metadata alone
    # What each result was read as, in words; every case is costed.
    rows = v.evaluate(got)
    assert all(r["predicted"] > 0 for r in rows)
    assert "open loop at 4 requests/s" in v.describe_run(second[0]) and "2x h100" in v.describe_run(second[0])
    # vllm bench sweep: summary.json is a list of results, summary.csv a row a run.
    s = tmp_path / "summary.json"
    s.write_text(json.dumps([BENCH, {**BENCH, "max_concurrency": 32}]))
    assert {c.concurrency for c in v.load_cases(s, model="llama-3.1-8b", device="h100")} == {16, 32}
    csv = tmp_path / "summary.csv"
    keys = ["", "run_number", *BENCH]
    csv.write_text(",".join(keys) + "\n" + ",".join(["0", "0", *map(str, BENCH.values())]) + "\n")
    got = v.load_cases(csv, model="llama-3.1-8b", device="h100")
    assert {(c.metric, c.statistic): c.value for c in got}[("ttft_ms", "mean")] == 65.0
    bad = tmp_path / "bad.json"
    bad.write_text("{not json\n")
    with pytest.raises(ProfileError, match="not a JSON result"):
        v.load_cases(bad, model="llama-3.1-8b", device="h100")
    bad.write_text(json.dumps({**BENCH, "tp": "many"}))
    assert v.load_cases(bad, model="llama-3.1-8b", device="h100")[0].gpus == 1  # unreadable metadata: the default


def test_bad_case_files(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("x = 1\n")
    with pytest.raises(ProfileError, match="no \\[\\[case\\]\\] tables"):
        v.load_cases(p)
    row = dict(id="a", group="dense-1gpu", split="fit", engine="vllm", device="h100", gpus=1, model="llama-3.1-8b",
               weight_dtype="bf16", scenario="serving", concurrency=1, input_len=10, output_len=10, metric="tpot_ms",
               statistic="mean", value=5.0, source="s")
    toml = lambda r: "[[case]]\n" + "".join(f"{k} = {json.dumps(x)}\n" for k, x in r.items())  # noqa: E731
    p.write_text(toml({**row, "metric": "speed"}))
    with pytest.raises(ProfileError, match="case 1 \\(a\\): metric must be one of"):
        v.load_cases(p)
    p.write_text(toml({**row, "value": -1}))
    with pytest.raises(ProfileError, match="value must be a finite number > 0"):
        v.load_cases(p)
    p.write_text(toml(row) + toml(row))
    with pytest.raises(ProfileError, match="duplicate id"):
        v.load_cases(p)
    p.write_text(toml({**row, "statistic": ""}))
    with pytest.raises(ProfileError, match="a latency under load needs a statistic"):
        v.load_cases(p)
    p.write_text(toml({**row, "scenario": "rate", "request_rate": 2.0}))
    with pytest.raises(ProfileError, match="an open-loop case needs num_prompts"):
        v.load_cases(p)
    p.write_text(toml({**row, "scenario": "decode"}))
    with pytest.raises(ProfileError, match="are for cases under load"):
        v.load_cases(p)


def test_cli_validate_and_fit(tmp_path):
    import subprocess

    r = subprocess.run([*costsim_argv(), "roofline", "validate", "--json"], capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    assert len(out["cases"]) >= 40 and out["summary"] and out["pairs"]
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(BENCH))
    r = subprocess.run([*costsim_argv(), "roofline", "validate", str(p), "--model", "llama-3.1-8b", "--device", "h100"],
                       capture_output=True, text=True, check=True)
    assert "bench:median_tpot_ms" in r.stdout and "holdout" in r.stdout and "read as: vllm, 1x h100" in r.stdout
    r = subprocess.run([*costsim_argv(), "roofline", "validate", str(p)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give --model and --device" in r.stderr
    # The fit's printout, on a part of the set (the whole set's fit is the fixture's, above).
    head, *blocks = v.measured_path().read_text().split("\n[[case]]\n")
    part = tmp_path / "part.toml"
    part.write_text("\n[[case]]\n".join([head, *[b for b in blocks if 'engine = "vllm"' in b][:12]]))
    r = subprocess.run([*costsim_argv(), "roofline", "fit", str(part)], capture_output=True, text=True, check=True)
    assert "hardware/engines/vllm.toml" in r.stdout and "bandwidth_fraction = " in r.stdout


def test_an_engine_has_a_parameter_of_its_own_only_with_runs_to_fit_it(cases):
    # An MoE latency by layout is an engine's own with MIN_RUNS fit runs of that layout; with
    # fewer it is shared by the engines that lack it; a 4-bit fraction needs 4-bit runs.
    def case(i, engine, group="moe-multi", ep=False, dtype="fp8", split="fit"):
        return replace(cases[0], id=f"c{i}", engine=engine, group=group, expert_parallel=ep, weight_dtype=dtype,
                       split=split, concurrency=float(i + 1))
    few = [case(i, "sglang") for i in range(v.MIN_RUNS - 1)]
    many = [case(10 + i, "vllm") for i in range(v.MIN_RUNS)]
    held = [case(20 + i, "sglang", split="holdout") for i in range(5)]  # the hold-out never counts
    slots = v.fit_parameters(few + many + held)
    assert ("vllm", "moe_tp_layer_latency_us") in slots and ("sglang", "moe_tp_layer_latency_us") not in slots
    assert (None, "moe_tp_layer_latency_us") in slots  # sglang's, fitted on its own two runs
    assert not any(k == "int4_bandwidth_fraction" for _, k in slots)
    int4 = [replace(case(30 + i, "vllm", group="dense-1gpu", dtype="int4-g128"), device="a100-80gb")
            for i in range(v.MIN_RUNS)]
    assert ("vllm", "int4_bandwidth_fraction") in v.fit_parameters(many + int4)
    # a device with a fraction of its own takes it for 4-bit weights too (roofline.bandwidth_fraction)
    assert ("vllm", "int4_bandwidth_fraction") not in v.fit_parameters(many + [replace(c, device="h20") for c in int4])
    # Off the devices with a fraction of their own, an engine's bandwidth fraction acts.
    on_ada = [replace(c, device="rtx-4090") for c in many]
    assert ("vllm", "bandwidth_fraction") not in v.fit_parameters(on_ada)


# --- bench result files and validation TOML from anywhere (issue 31) ---------------------------

_ANY = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**30), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=8), st.sampled_from(["inf", "Infinity", "nan", "1e308", "-1", "abc"]),
                 st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
_KEYS = ["completed", "total_input_tokens", "total_output_tokens", "request_rate", "max_concurrency", "burstiness",
         "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "output_throughput", "request_throughput", "label", "date"]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(result=st.dictionaries(st.sampled_from(_KEYS), _ANY, max_size=len(_KEYS)), as_list=st.booleans())
def test_a_bench_result_file_of_any_content_gives_sane_cases_or_one_line(tmp_path_factory, result, as_list):
    """Before 2026-12-02 a result's fields were used unchecked: "completed": Infinity raised
    OverflowError, and a TTFT of 1e308 ms became a case."""
    import json

    from costsim.measured import MAX_FIGURE, load_cases
    from costsim.profiles import ProfileError

    p = tmp_path_factory.mktemp("r") / "result.json"
    p.write_text(json.dumps([result] if as_list else result))
    try:
        cases = load_cases(p, model="llama-3.1-8b", device="h100")
    except ProfileError as e:
        assert "\n" not in str(e)
        return
    assert cases and all(0 < c.value <= MAX_FIGURE and c.num_prompts >= 1 for c in cases)


@pytest.mark.parametrize("text", ["case = [1]", "case = [[1]]", 'case = ["x"]', "case = [{}]"])
def test_a_validation_case_that_is_not_a_table_is_one_line(tmp_path, text):
    from costsim.measured import load_cases
    from costsim.profiles import ProfileError

    p = tmp_path / "v.toml"
    p.write_text(text)
    with pytest.raises(ProfileError, match=r"case 1 "):
        load_cases(p)

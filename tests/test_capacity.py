"""Capacity planning: the rate search, replica counts monotone in load, the fleet meeting the
target when simulated whole, cost, and the `costsim capacity` command."""

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import fleet_cost
from costsim import capacity_search as cap
from costsim.cli.main import main as _main
from costsim.profiles import Deployment, load_device, load_model
from costsim.scenario import Scenario
from costsim.sim import simulate
from costsim.traces.synthetic import Shape, generate

SHORT = Shape(steps_mean=6.0, initial_context=1500)


def run(argv):
    try:
        return _main(argv)
    except SystemExit as e:
        return e.code


def deps(device="h20"):
    dev = load_device(device)
    return (Deployment(load_model("qwen3-30b-a3b"), dev, 1, "bf16"),
            Deployment(load_model("qwen3-8b"), dev, 1, "bf16"))


@pytest.fixture(scope="module")
def small():
    """A small workload and its searched cells (the search does not depend on the task rate)."""
    s, w = deps()
    tasks = generate(90, seed=3, shape=SHORT)
    sc = Scenario(strong=s, weak=w, p=0.8, K=6, seed=1)
    # An uncontended task takes about 66 s at p95 here (Qwen3-30B-A3B on one H20 under the vLLM
    # profile), so the target leaves room for contention above that.
    srch = cap.Search(latency_p95_s=120.0, rel_tol=0.08)
    cells = {n: cap.search_cell(tasks, sc, n, srch) for n in ("strong-only", "specagent")}
    return tasks, sc, srch, cells


# --- replica counts never fall as the load rises ------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(strong=st.sampled_from([0, 1]), weak=st.integers(0, 40), cell_rate=st.floats(1e-3, 50),
       r1=st.floats(1e-4, 500), r2=st.floats(1e-4, 500))
def test_replicas_are_monotone_in_task_rate_for_any_cell(strong, weak, cell_rate, r1, r2):
    if not strong:
        weak = 1  # a cell without a strong replica is one weak replica (Weak-only)
    cell = cap.Cell("x", strong, weak, cell_rate, True, 1.0, 1.0)
    lo, hi = sorted((r1, r2))
    s1, w1 = cap.replicas_for(cell, lo)
    s2, w2 = cap.replicas_for(cell, hi)
    assert s1 <= s2 and w1 <= w2
    # No replica carries more load than in the cell found feasible.
    if strong:
        assert hi / s2 <= cell_rate * (1 + 1e-9)
    if weak:
        assert hi / w2 <= cell_rate / weak * (1 + 1e-9)


@settings(max_examples=12, deadline=None)
@given(r1=st.floats(0.01, 3.0), r2=st.floats(0.01, 3.0))
def test_planned_replicas_are_monotone_in_task_rate(small, r1, r2):
    tasks, sc, srch, cells = small
    lo, hi = sorted((r1, r2))
    a = cap.size_for_rate(tasks, sc, lo, tuple(cells), srch, cells=cells)["protocols"]
    b = cap.size_for_rate(tasks, sc, hi, tuple(cells), srch, cells=cells)["protocols"]
    for name in cells:
        assert a[name]["strong_replicas"] <= b[name]["strong_replicas"]
        assert a[name]["weak_replicas"] <= b[name]["weak_replicas"]
        assert a[name]["fleet_gpus"] <= b[name]["fleet_gpus"]


def test_search_does_not_depend_on_the_task_rate(small):
    tasks, sc, srch, cells = small
    again = cap.search_cell(tasks, sc, "specagent", srch)
    assert (again.rate, again.weak, again.strong) == (cells["specagent"].rate, cells["specagent"].weak, 1)


# --- the search finds the edge of feasibility ---------------------------------------------------


def test_cell_rate_is_feasible_and_a_little_more_is_not(small):
    tasks, sc, srch, cells = small
    for name, cell in cells.items():
        assert cell.feasible and 0 < cell.rate < math.inf
        final = [p for p in cell.probes if (p.strong, p.weak) == (cell.strong or cap.AMPLE, cell.weak or cap.AMPLE)]
        at = [p for p in final if p.rate == cell.rate]
        assert at and all(p.feasible and p.p95_s <= srch.latency_p95_s for p in at)
        if not cell.capped:
            above = [p for p in final if not p.feasible and p.rate > cell.rate]
            assert above and min(p.rate for p in above) <= cell.rate * (1 + srch.rel_tol) * (1 + 1e-9)
    spec = cells["specagent"]
    assert set(spec.pool_rates) == {"strong", "weak"} and spec.weak >= 1


def test_whole_fleet_simulated_at_once_meets_the_target(small):
    # The plan is made from one cell; simulate the whole fleet at the full rate instead (tasks
    # round-robin over all replicas) and check the latency target holds there too.
    tasks, sc, srch, cells = small
    rate = 2.5 * cells["specagent"].rate
    res = cap.size_for_rate(tasks, sc, rate, ("specagent",), srch, cells=cells)["protocols"]["specagent"]
    S, W = res["strong_replicas"], res["weak_replicas"]
    assert S >= 3 and W >= S
    many = generate(int(3 * rate * srch.latency_p95_s) + 1, seed=5, shape=SHORT)
    from dataclasses import replace

    rows = simulate(many, replace(sc, protocols=("specagent",), arrival_rate=rate, strong_replicas=S, weak_replicas=W))
    _, p95, _ = cap.latency_percentiles(rows)
    assert p95 <= srch.latency_p95_s * 1.1
    assert res["meets_target"] and res["latency_p95_s"] <= srch.latency_p95_s * (1 + srch.rel_tol)


def test_sessions_follow_littles_law(small):
    tasks, sc, srch, cells = small
    res = cap.size_for_rate(tasks, sc, 0.5, ("strong-only",), srch, cells=cells)["protocols"]["strong-only"]
    assert res["sessions_in_flight"] == pytest.approx(0.5 * res["latency_mean_s"])
    assert res["sessions_per_strong_replica"] == pytest.approx(res["sessions_in_flight"] / res["strong_replicas"])
    # The operating point is judged as a probe is: on arrivals that span steady_spans of its p95.
    sim = res["simulated"]
    assert sim["steady"] and sim["tasks"] / sim["task_rate_per_cell"] >= srch.steady_spans * res["latency_p95_s"]


def test_unreachable_target_is_reported_not_planned():
    s, w = deps()
    tasks = generate(30, seed=1, shape=SHORT)
    sc = Scenario(strong=s, weak=w)
    res = cap.size_for_rate(tasks, sc, 1.0, ("strong-only",), cap.Search(latency_p95_s=0.5))["protocols"]["strong-only"]
    assert res["feasible"] is False and res["strong_replicas"] is None and res["cost_per_1k_tasks_usd"] is None
    assert "uncontended task latency p95" in res["reason"]


def test_faster_device_sustains_more_per_replica():
    # Decode of a small-batch MoE is bandwidth bound: B200 (8 TB/s) beats H20 (4 TB/s, and 0.35
    # of it achieved by the engine fit).
    tasks = generate(200, seed=2, shape=SHORT)  # enough that the probes can judge B200's rate
    srch = cap.Search(latency_p95_s=120.0, rel_tol=0.1)
    rates = {}
    for dev in ("h20", "b200"):
        s, w = deps(dev)
        rates[dev] = cap.search_cell(tasks, Scenario(strong=s, weak=w), "strong-only", srch).rate
    assert rates["b200"] > 1.5 * rates["h20"] > 0


def test_batch_past_balance_point_is_flagged():
    # A dense 70B model on H20 has a finite B* at short context (37 by the paper's datasheet
    # form; higher under the engines' achieved fractions, 0.40 of the bandwidth against 0.44 of
    # the FLOPs, which make compute relatively cheaper). Under a latency target its
    # compute-bound prefills keep the batch below that; a cell pushed to 1 task/s (the loose
    # capacity a planner might assume) runs the strong replica far past it, and is flagged.
    # On 4 GPUs its KV pool holds more sequences than B*; on 2 it does not, and the same load is
    # bound by KV memory instead, with the batch held below B*.
    weak = Deployment(load_model("llama-3.1-8b"), load_device("h20"), 1, "bf16")
    tasks = generate(200, seed=4, shape=SHORT)
    srch = cap.Search(latency_p95_s=10_000.0)
    loose = {"strong-only": cap.Cell("strong-only", 1, 0, 1.0, True, 0.0, 0.0)}
    sc = Scenario(strong=Deployment(load_model("llama-3.1-70b"), load_device("h20"), 4, "bf16"), weak=weak)
    res = cap.size_for_rate(tasks, sc, 1.0, ("strong-only",), srch, cells=loose)
    r = res["protocols"]["strong-only"]
    assert 37 < res["balance_batch"] < res["kv_limit_sequences"]
    assert r["strong_batch"] > res["balance_batch"] and r["past_balance_point"] is True and "compute" in r["bound_by"]
    calm = cap.size_for_rate(tasks, sc, 0.01, ("strong-only",), srch, cells=loose)["protocols"]["strong-only"]
    assert calm["strong_batch"] < res["balance_batch"] and calm["past_balance_point"] is False
    assert calm["bound_by"] == "latency target"
    two = replace(sc, strong=Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16"))
    tight = cap.size_for_rate(tasks, two, 1.0, ("strong-only",), srch, cells=loose)
    t = tight["protocols"]["strong-only"]
    assert tight["kv_limit_sequences"] < tight["balance_batch"]
    assert t["bound_by"] == "KV memory" and t["past_balance_point"] is False


# --- cost ------------------------------------------------------------------------------------------


def test_cost_is_gpu_hours_times_price_and_unknown_without_a_price():
    s, w = deps("h100")
    c = fleet_cost.costs(s, w, strong=2, weak=3, task_rate=0.5)
    hours = 1000 / 0.5 / 3600
    assert c["gpu_hours_per_1k_tasks"] == pytest.approx(5 * hours)
    assert c["cost_per_1k_tasks_usd"] == pytest.approx(5 * hours * 3.99)
    assert "h100-sxm.toml" in c["price_sources"]["strong"]
    from dataclasses import replace

    s20, w20 = deps("h20")
    c = fleet_cost.costs(s20, w20, strong=1, weak=1, task_rate=1.0)  # priced: CompShare's list price
    assert c["cost_per_1k_tasks_usd"] == pytest.approx(2 * 1000 / 3600 * 1.06)

    def unpriced(d):
        return replace(d, device=replace(d.device, usd_per_gpu_hour=None))
    s20, w20 = unpriced(s20), unpriced(w20)
    c = fleet_cost.costs(s20, w20, strong=1, weak=1, task_rate=1.0)
    assert c["cost_per_1k_tasks_usd"] is None and "h20" in c["cost_note"]
    c = fleet_cost.costs(s20, w20, strong=1, weak=1, task_rate=1.0, strong_price=2.0, weak_price=1.0)
    assert c["cost_per_1k_tasks_usd"] == pytest.approx(3.0 * 1000 / 3600)
    c = fleet_cost.costs(s20, w20, strong=0, weak=2, task_rate=1.0, api_cost_per_task=0.01, weak_price=1.0)
    assert c["cost_per_1k_tasks_usd"] == pytest.approx(2.0 * 1000 / 3600 + 10.0)


# --- the command ----------------------------------------------------------------------------------


def test_parse_rate_and_seconds():
    from costsim.units import parse_rate, parse_seconds

    assert parse_rate("2/s") == 2 and parse_rate("120/min") == 2 and parse_rate("7200 / h") == 2
    assert parse_rate("0.5") == 0.5
    assert parse_seconds("60s") == 60 and parse_seconds("1.5min") == 90 and parse_seconds("500ms") == 0.5
    for bad in ("fast", "2/fortnight", "0/s", "-1/s"):
        with pytest.raises(ValueError, match="--task-rate"):
            parse_rate(bad)
    with pytest.raises(ValueError, match="--latency-p95"):
        parse_seconds("soon")


def test_command_json_has_the_documented_keys(capsys):
    argv = ["capacity", "--strong", "qwen3-30b-a3b", "--weak", "qwen3-8b", "--strong-device", "h100",
            "--weak-device", "h100", "--p-accept", "0.8", "--K", "6", "--task-rate", "1/s",
            "--latency-p95", "120s", "--tasks", "60", "--tolerance", "0.1"]  # both protocols' uncontended p95 below it
    assert run(argv) == 0
    text = capsys.readouterr().out
    assert "strong replicas" in text and "latency p95 (s)" in text and "assumptions:" in text
    assert "h100-sxm.toml" in text  # the price's source is printed
    assert run(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for name in ("strong-only", "specagent"):
        p = out["protocols"][name]
        for key in ("strong_replicas", "weak_replicas", "sessions_per_strong_replica", "strong_batch",
                    "past_balance_point", "latency_p95_s", "cost_per_1k_tasks_usd"):
            assert key in p, key
        assert p["cost_per_1k_tasks_usd"] > 0
    assert out["protocols"]["strong-only"]["weak_replicas"] == 0
    assert any("Poisson" in a for a in out["assumptions"])


def test_command_errors_are_one_line(capsys):
    assert run(["capacity", "--task-rate", "lots"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("costsim: error: --task-rate") and "\n" not in err
    assert run(["capacity", "--task-rate", "1/s", "--protocols", "nope", "--tasks", "20"]) == 2
    assert "unknown protocol" in capsys.readouterr().err


def test_api_protocols_plan_no_strong_replicas_and_add_token_cost():
    # edge-cloud: the strong model is an API (the provider scales), the weak model runs on the
    # edge device (rtx-5090, priced in its profile); cost = GPU-hours + the API's token bill.
    s, w = deps()
    tasks = generate(40, seed=6, shape=SHORT)
    sc = Scenario(strong=s, weak=w, api="glm-5")
    res = cap.size_for_rate(tasks, sc, 0.1, ("edge-cloud", "cloud-strong-only"), cap.Search(latency_p95_s=600.0, rel_tol=0.2))
    edge, cloud = res["protocols"]["edge-cloud"], res["protocols"]["cloud-strong-only"]
    assert edge["strong_replicas"] == 0 and edge["weak_replicas"] >= 1 and edge["strong_fleet_gpus"] == 0
    assert "rtx-5090.toml" in edge["price_sources"]["weak"]
    assert cloud["strong_replicas"] == cloud["weak_replicas"] == 0 and res["cells"]["cloud-strong-only"].rate == math.inf
    assert cloud["cost_per_1k_tasks_usd"] == pytest.approx(cloud["api_cost_per_1k_tasks_usd"]) and cloud["cost_per_1k_tasks_usd"] > 0
    # The assumptions name the hardware these protocols use: the API and the edge device, not 1x H20.
    said = " ".join(res["assumptions"])
    assert "behind the API glm-5" in said and "RTX 5090" in said and "H20" not in said
    gpu_part = edge["weak_fleet_gpus"] * edge["weak_usd_per_gpu_hour"] * 1000 / 0.1 / 3600
    assert edge["cost_per_1k_tasks_usd"] == pytest.approx(gpu_part + edge["api_cost_per_1k_tasks_usd"])
    assert 0 < edge["api_cost_per_1k_tasks_usd"] < cloud["api_cost_per_1k_tasks_usd"]


@settings(max_examples=6, deadline=None)
@given(t1=st.sampled_from([90.0, 150.0, 600.0, 3600.0, 1e9]), t2=st.sampled_from([90.0, 150.0, 600.0, 3600.0, 1e9]),
       r1=st.floats(0.05, 2.0), r2=st.floats(0.05, 2.0))
def test_plans_never_need_more_for_a_looser_target_or_a_lower_rate(t1, t2, r1, r2):
    # A probe judges a rate only when its arrivals span a few of its own p95 latencies, not of
    # the target: so a looser target can only find a cell that sustains as much or more.
    s, w = deps()
    tasks = generate(40, seed=3, shape=SHORT)
    sc = Scenario(strong=s, weak=w, p=0.8, K=6, seed=1)
    (lo_t, hi_t), (lo_r, hi_r) = sorted((t1, t2)), sorted((r1, r2))
    # (probes repeat their 40 tasks up to 400: enough to hold the property, quick to run)
    tight = cap.search_cell(tasks, sc, "strong-only", cap.Search(latency_p95_s=lo_t, rel_tol=0.1, max_probe_tasks=400))
    loose = cap.search_cell(tasks, sc, "strong-only", cap.Search(latency_p95_s=hi_t, rel_tol=0.1, max_probe_tasks=400))
    assert loose.rate >= tight.rate
    for cell in (tight, loose):
        if cell.feasible:
            assert cap.replicas_for(cell, lo_r)[0] <= cap.replicas_for(cell, hi_r)[0]
    if tight.feasible:
        assert cap.replicas_for(loose, hi_r)[0] <= cap.replicas_for(tight, hi_r)[0]


def test_a_probe_too_short_to_judge_its_rate_repeats_its_tasks_instead_of_capping():
    # 40 tasks cannot judge the rates this cell sustains; repeated, they can: the search
    # brackets the true rate (a failing probe above it) instead of reporting a floor.
    s, w = deps()
    tasks = generate(40, seed=3, shape=SHORT)
    sc = Scenario(strong=s, weak=w, p=0.8, K=6, seed=1)
    short = cap.search_cell(tasks, sc, "strong-only", cap.Search(latency_p95_s=150.0, rel_tol=0.1, max_probe_tasks=40))
    full = cap.search_cell(tasks, sc, "strong-only", cap.Search(latency_p95_s=150.0, rel_tol=0.1))
    assert short.capped and not full.capped
    assert full.rate > short.rate
    assert any(p.rate > full.rate and not p.feasible for p in full.probes)
    assert any(p.rate == full.rate and p.feasible for p in full.probes)


@given(st.floats(min_value=0.0, max_value=1e5, allow_nan=False), st.sampled_from([("ms", 1e-3), ("s", 1.0), ("", 1.0),
                                                                                 ("min", 60.0), ("h", 3600.0)]))
def test_every_duration_flag_reads_durations_one_way(x, unit):
    # One reader for every duration: the latency target, a tool's or a user's latency (fixed or a
    # lognormal's median), the network round trip, the live mode's timeout.
    from costsim.scenario import Latency, build_scenario
    from costsim.units import parse_seconds

    u, scale = unit
    text = f"{x!r}{u}"
    assert parse_seconds(text, "--x", zero=True) == pytest.approx(x * scale, rel=1e-12)
    if x * scale <= 1e6:
        assert Latency.parse(text).seconds == pytest.approx(x * scale, rel=1e-12)
        assert Latency.parse(f"lognormal:{text},0.5").seconds == pytest.approx(x * scale, rel=1e-12)
    if x * scale <= 1e6 and x < 10:
        sc = build_scenario({"network_rtt_s": text, "tool_latency": text})
        assert sc.network_rtt_s == pytest.approx(x * scale) and sc.tool_latency.seconds == pytest.approx(x * scale)


def test_a_bad_duration_names_its_flag():
    from costsim.units import parse_seconds

    with pytest.raises(ValueError, match="--network-rtt"):
        parse_seconds("-1", "--network-rtt", zero=True)
    with pytest.raises(ValueError, match="--timeout must be a finite duration > 0"):
        parse_seconds("0ms", "--timeout")
    assert run(["simulate", "--tasks", "2", "--tool-latency", "500ms", "--network-rtt", "50ms"]) == 0
    assert run(["simulate", "--tasks", "2", "--tool-latency", "5x"]) != 0


def test_capacity_exits_3_when_nothing_meets_the_target(capsys):
    # The answer is printed (each protocol's uncontended p95 above 5 s), then one line on stderr
    # and exit 3: a script can tell "no fleet meets this" from success and from bad input (2).
    argv = ["capacity", "--task-rate", "1/s", "--latency-p95", "5s", "--tasks", "40", "--tolerance", "0.2"]
    assert run(argv) == 3
    cap = capsys.readouterr()
    assert "meets target" in cap.out
    assert cap.err == "costsim: no configuration meets the target: no protocol keeps the task-latency p95 within 5 s at 1 tasks/s\n"
    assert run(argv + ["--json"]) == 3 and json.loads(capsys.readouterr().out)["protocols"]


def test_capacity_reports_progress_per_protocol_and_takes_q():
    # A capacity run is a minute of simulation: the API reports each protocol sized, the CLI
    # draws it as a bar on a terminal (none in a pipe, none with -q).
    from costsim import api

    seen = []
    api.capacity(1.0, latency_p95=300, tasks=40, tolerance=0.3, progress=lambda k, total=None: seen.append((k, total)))
    assert seen == [(1, 2), (1, 2)]
    assert run(["capacity", "--task-rate", "1/s", "--latency-p95", "300s", "--tasks", "40", "--tolerance", "0.3", "-q"]) == 0


def test_an_infeasible_protocol_has_the_feasible_ones_keys():
    # A protocol no replica count makes meet the target still has every key a table or a
    # notebook reads (gpus, cost, latency), as None.
    from costsim import api

    res = api.capacity(1.0, latency_p95="5s", tasks=40, tolerance=0.3)
    feasible = api.capacity(1.0, latency_p95="300s", tasks=40, tolerance=0.3, cells=None)
    for name, r in res["protocols"].items():
        assert not r["feasible"] and r["fleet_gpus"] is None and r["cost_per_1k_tasks_usd"] is None
        assert {"fleet_gpus", "gpu_hours_per_1k_tasks", "cost_per_1k_tasks_usd", "latency_p95_s"} <= set(feasible["protocols"][name])


def test_capacity_on_several_processes_is_bit_identical_to_one():
    """A search round's two probes are independent runs: on forked processes
    (costsim.distributed.fork_map) the answer is the serial one, to the bit."""
    from costsim import api

    kw = dict(latency_p95="120s", protocols="specagent")
    assert api.capacity(0.5, workers=1, **kw).to_dict() == api.capacity(0.5, workers=2, **kw).to_dict()


def test_fork_map_keeps_order_runs_closures_and_maps_serially_inside_a_worker():
    import os

    from costsim.distributed import fork_map

    base = 10
    pids = fork_map(lambda x: (x + base, os.getpid()), range(4), workers=2)
    assert [v for v, _ in pids] == [10, 11, 12, 13] and os.getpid() not in {p for _, p in pids}
    nested = fork_map(lambda x: fork_map(lambda y: y * x, range(3), workers=2), [1, 2], workers=2)
    assert nested == [[0, 1, 2], [0, 2, 4]]
    done = []
    assert fork_map(lambda x: -x, [5], workers=2, done=lambda: done.append(1)) == [-5] and done == [1]


@settings(max_examples=60, deadline=None)
@given(edge=st.floats(1e-4, 1e4), start=st.floats(0.01, 10.0), tol=st.sampled_from([0.01, 0.05, 0.3]),
       hint=st.integers(-3, 3))
def test_the_rate_search_finds_the_grid_edge_in_few_probes(edge, start, tol, hint):
    """On a rate order that holds (pass up to ``edge`` tasks/s, fail above), the two-probe
    search finds the last grid point at or under the edge, from nothing known or from bounds
    known around it: rounds of two probes, each a factor of 4 outward until the edge is
    bracketed, then each a third of the bracket."""
    g = 1.0 + tol
    calls = []

    def probe(tasks, sc, protocol, strong, weak, rate, srch):
        calls.append(rate)
        return cap.RateProbe(rate, rate, rate, rate <= edge, strong, weak), True

    srch = cap.Search(rel_tol=tol, workers=1, max_probes=200)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cap, "_probe", probe)
        _edge_searches(srch, edge, start, g, hint, calls)


def _edge_searches(srch, edge, start, g, hint, calls):
    truth = math.floor(math.log(edge / start) / math.log(g) + 1e-9)
    floor = -math.ceil(math.log(1024) / math.log(g))
    found = cap._bisect([], None, "x", 1, 1, start, srch, [])
    if truth < floor:  # under start/1024: nothing passes
        assert found.k is None and found.rate == 0.0
        return
    assert found.k == truth and not found.capped
    d = math.ceil(math.log(2) / math.log(g))
    span = abs(truth) + 1
    # outward a factor of 4 a round (2 probes), then a third of the bracket a round
    assert len(calls) <= (span / d + 2) + 2 * (math.log(2 * d, 3) + 2)
    # From known bounds around the edge (as a refinement starts): the same edge, none re-probed.
    calls.clear()
    lo, hi = truth - 1 - abs(hint), truth + 1 + abs(hint)
    again = cap._bisect([], None, "x", 1, 1, start, srch, [], lo=lo, hi=hi)
    assert again.k == truth and {start * g**lo, start * g**hi}.isdisjoint(calls)
    assert len(calls) <= 2 * (math.log(hi - lo, 3) + 1)


def test_a_cell_that_evicts_its_own_sessions_prefixes_is_bound_by_the_cache():
    assert cap.bound_by(4.0, 0.0, 100.0) == "latency target"
    assert cap.bound_by(4.0, 0.0, 100.0, cap.CACHE_BOUND_HIT_RATE) == "latency target"
    said = cap.bound_by(400.0, 0.2, 100.0, 0.61)
    assert said == "compute and KV memory, and the prefix cache (it holds 61% of the context its calls send again)"

"""An open-loop fleet simulated cell by cell (costsim.sim.run) against the whole-fleet run, the
reference: the rows are the same to the bit (their reprs are equal, so every float has the same
bits and every number the same type), whatever the cells, the workers or the cluster."""

import math
import random
from dataclasses import replace

import pytest

from costsim.profiles import Deployment, load_device, load_model
from costsim.scenario import Latency, Scenario
from costsim.sim import run
from costsim.sim.run import arrival_times, delays_to, n_cells, simulate
from costsim.traces.synthetic import Shape, generate

# Llama-3.1-70B on 2 H20s (its KV pool holds few 1,500-token tasks) and an 8B weak model: at
# 1.5 tasks/s per strong replica the replicas batch, queue, and (on some fleets) wait for KV room.
STRONG = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
WEAK = Deployment(load_model("llama-3.1-8b"), load_device("h20"), 1, "bf16")
TASKS = generate(96, seed=4, shape=Shape(initial_context=1500, steps_mean=8))


def fleet(S: int, W: int, **kw) -> Scenario:
    """An open-loop fleet of S strong and W weak replicas, tool and user latencies drawn per call."""
    kw = {"arrival_rate": 1.5 * S, "protocols": ("strong-only", "specagent"), **kw}
    return Scenario(strong=STRONG, weak=WEAK, p=0.8, K=6, strong_replicas=S, weak_replicas=W, seed=5, kv_cap=True,
                    tool_latency=Latency(0.3, 0.8), user_latency=Latency(2.0, 0.5), **kw)


def same(a: list[dict], b: list[dict]) -> bool:
    """Row for row, every key, every bit (a float's repr round-trips it)."""
    return a == b and repr(a) == repr(b)


@pytest.mark.parametrize("S,W", [(2, 4), (4, 6), (3, 3), (8, 8), (3, 4)])
def test_cell_by_cell_rows_are_the_whole_fleets_bit_for_bit(S, W):
    sc = fleet(S, W)
    assert n_cells("specagent", sc) == math.gcd(S, W)
    whole = simulate(TASKS, sc, cells=False)
    assert same(simulate(TASKS, sc, workers=1), whole)
    # Not vacuous: the replicas batch (a fleet mean above 1 needs a replica above 1).
    by = {r["protocol"]: r for r in whole}
    assert by["strong-only"]["strong_mean_batch"] > 1 and by["specagent"]["weak_mean_batch"] > 1
    assert [r["task_index"] for r in whole] == list(range(len(TASKS))) * 2


def test_the_kv_cap_binds_in_a_fleet_compared():
    rows = simulate(TASKS, fleet(2, 4, protocols=("strong-only",)), cells=False)
    assert rows[0]["strong_kv_blocked_share"] > 0.1


def test_more_cells_than_tasks_and_no_tasks():
    sc = fleet(8, 8)
    assert same(simulate(TASKS[:5], sc, workers=1), simulate(TASKS[:5], sc, cells=False))
    assert simulate([], sc, workers=1) == []


def test_forked_workers_give_the_same_rows_as_one():
    sc = fleet(4, 8)
    one = simulate(TASKS, sc, workers=1)
    assert same(simulate(TASKS, sc, workers=2), one)
    assert same(one, simulate(TASKS, sc, cells=False))


def test_every_protocol_splits_or_stays_whole_to_the_same_rows():
    # Timed protocols (background processes), the ablations, and the edge-cloud ones on an API
    # (they stay whole: one server takes every strong call).
    from costsim.protocols import PROTOCOLS, on_api

    sc = fleet(2, 2, protocols=tuple(PROTOCOLS))
    assert {n_cells(name, sc) for name in PROTOCOLS} == {1, 2}
    assert all(n_cells(name, sc) == 1 for name in PROTOCOLS if on_api(name))
    tasks = TASKS[:24]
    assert same(simulate(tasks, sc, workers=1), simulate(tasks, sc, cells=False))


def test_closed_loop_runs_stay_whole_and_unchanged():
    sc = fleet(4, 4, arrival_rate=None, sessions=8)
    assert n_cells("specagent", sc) == 1
    rows = simulate(TASKS, sc)
    assert same(rows, simulate(TASKS, sc, cells=False))
    assert same(rows, simulate(TASKS, sc, workers=2))


def test_progress_counts_every_task_once():
    sc = fleet(4, 6)
    for kw in ({"cells": False}, {"workers": 1}, {"workers": 2}):
        got = []
        simulate(TASKS, sc, got.append, **kw)
        assert sum(got) == 2 * len(TASKS), kw


def test_a_cell_starts_its_tasks_at_the_whole_runs_arrival_times():
    sc = fleet(4, 6)
    times, end = arrival_times(sc, len(TASKS))
    rows = simulate(TASKS, replace(sc, protocols=("strong-only",)), workers=1)
    assert [r["start_s"] for r in rows] == times and end <= rows[0]["makespan_s"]


def test_delays_reach_the_arrival_time_exactly():
    # Here no single float delay does: now's lower bits fall on a tie that rounds away from t.
    now, t = 15.104891094445328, 120.88995980580641
    assert now + (t - now) != t
    rng = random.Random(1)
    cases = [(now, t)] + [(rng.uniform(0, x) * rng.random() ** 3, x)
                          for x in (rng.uniform(0, 1e3) * rng.choice((1e-3, 1, 1e6)) for _ in range(20000))]
    for now, t in cases:
        clock = now
        for d in delays_to(now, t):
            assert d >= 0
            clock = clock + d
        assert clock == t


def test_a_hop_on_the_way_to_an_arrival_changes_no_row(monkeypatch):
    # Hops are rare; here every arrival takes one (an extra event in the cell).
    def always_hop(now, t):
        hop = 0.75 * (t - now)
        m = now + hop
        assert m + (t - m) == t
        return hop, t - m

    sc = fleet(3, 3)
    whole = simulate(TASKS, sc, cells=False)
    monkeypatch.setattr(run, "delays_to", always_hop)
    assert same(simulate(TASKS, sc, workers=1), whole)


def test_cells_on_a_dask_cluster_give_the_same_rows():
    distributed = pytest.importorskip("distributed")
    sc = fleet(4, 6)
    whole = simulate(TASKS, sc, cells=False)
    got = []
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        rows = simulate(TASKS, sc, got.append, scheduler=cl.scheduler_address)
    assert same(rows, whole)
    assert sum(got) == 2 * len(TASKS)

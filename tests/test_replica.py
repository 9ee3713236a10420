"""The serving replica (continuous batching per engine iteration) against a naive per-iteration
batcher, and its KV pool: admissions wait for room."""

import math

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import roofline
from costsim.profiles import Deployment, load_device, load_model
from costsim.metrics import summarize
from costsim.scenario import Scenario
from costsim.sim import Replica, simulate
from costsim.traces.synthetic import Shape, generate


def naive_batcher(dep, arrivals, budget, max_seqs, pool=math.inf):
    """Finish time of each request, one iteration at a time (the rule the replica implements:
    FIFO chunked prefill under a token budget, every running sequence decodes each iteration,
    arrivals join at the next iteration boundary; a request is admitted only when its whole
    footprint, KV for context + prompt + output plus its state, fits in the free ``pool``)."""
    from costsim.memory import state_bytes

    kvb, seq = roofline.coefficients(dep).kv_bytes_per_token, state_bytes(dep)
    reqs = [dict(t=t, pre=p, ctx=c, dec=d, held=0.0) for t, p, c, d in arrivals]
    order = sorted(range(len(reqs)), key=lambda i: reqs[i]["t"])
    now, queue, running, done, k = 0.0, [], [], {}, 0
    hbm = flops = used = peak = 0.0
    while len(done) < len(reqs):
        while k < len(order) and reqs[order[k]]["t"] <= now:
            queue.append(order[k])
            k += 1
        if not queue and not running:
            now = reqs[order[k]]["t"]
            continue
        b, seats, chunks = max(budget - len(running), 1), max_seqs - len(running), []
        for i in queue:
            if b <= 0 or seats <= 0:
                break
            if not reqs[i]["held"]:
                need = kvb * (reqs[i]["ctx"] + reqs[i]["pre"] + reqs[i]["dec"]) + seq
                if used + need > pool:
                    break
                reqs[i]["held"], used = need, used + need
                peak = max(peak, used)
            t = min(reqs[i]["pre"], b)
            chunks.append((i, t))
            b -= t
            seats -= 1
        B = len(running)
        pairs = sum(reqs[i]["ctx"] for i in running) + sum(t * (reqs[i]["ctx"] + t / 2) for i, t in chunks)
        kv = sum(reqs[i]["ctx"] for i in running) + sum(reqs[i]["ctx"] for i, t in chunks if t)
        c = roofline.coefficients(dep).cost(B + sum(t for _, t in chunks), pairs, kv, B + len(chunks))
        now += float(c.seconds)
        hbm += float(c.hbm_bytes)
        flops += float(c.flops)
        still = []
        for i in running:
            reqs[i]["ctx"] += 1
            reqs[i]["dec"] -= 1
            if reqs[i]["dec"] > 0:
                still.append(i)
            else:
                done[i], used = now, used - reqs[i]["held"]
        for i, t in chunks:
            reqs[i]["ctx"] += t
            reqs[i]["pre"] -= t
            if reqs[i]["pre"] <= 0:
                queue.remove(i)
                if reqs[i]["dec"] > 0:
                    still.append(i)
                else:
                    done[i], used = now, used - reqs[i]["held"]
        running = still
    return done, hbm, flops, peak


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 3), st.integers(1, 3000), st.integers(0, 9000), st.integers(1, 200)),
                min_size=1, max_size=12),
       st.integers(64, 4096), st.integers(1, 6), st.sampled_from([math.inf, 40_000, 15_000]))
def test_replica_matches_naive_iteration_loop(arrivals, budget, max_seqs, pool_tokens):
    # The KV cap at ample, binding and tight pools (in tokens of the model's KV; every single
    # request fits even the tightest: 3000 + 9000 + 200 < 15,000).
    dep = Deployment(load_model("qwen3-30b-a3b"), load_device("h100"), 1)
    pool = pool_tokens * roofline.coefficients(dep).kv_bytes_per_token
    env = simpy.Environment()
    rep = Replica(env, dep, token_budget=budget, max_seqs=max_seqs, kv_pool_bytes=pool)
    finished = {}

    def client(i, t, p, c, d):
        yield env.timeout(t)
        req = rep.submit(p, c, d)
        yield req.done
        finished[i] = (env.now, req)

    for i, a in enumerate(arrivals):
        env.process(client(i, *a))
    env.run()
    want, hbm, flops, peak = naive_batcher(dep, arrivals, budget, max_seqs, pool)
    for i in range(len(arrivals)):
        assert finished[i][0] == pytest.approx(want[i], rel=1e-9, abs=1e-12)
    assert rep.kv_peak_bytes == pytest.approx(peak) and rep.kv_peak_bytes <= pool and rep.kv_used == pytest.approx(0)
    assert rep.hbm_bytes == pytest.approx(hbm, rel=1e-9)
    assert rep.flops == pytest.approx(flops, rel=1e-9)
    # Attribution to requests adds up to the replica's totals.
    assert sum(r.hbm_bytes for _, r in finished.values()) == pytest.approx(hbm, rel=1e-9)
    assert sum(r.flops for _, r in finished.values()) == pytest.approx(flops, rel=1e-9)


def test_kv_pool_caps_the_batch_and_queues_the_rest():
    # Llama-3.1-70B on 2 H20s: 35.5 GB of KV pool, 22 sequences at 4,756 tokens, far below its
    # B*: under load the batch is held at what fits and the rest wait. Without the cap the same
    # load runs a batch past B*; with it the tasks queue, so they take longer.
    from dataclasses import replace

    from costsim.memory import max_sequences

    strong = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
    weak = Deployment(load_model("llama-3.1-8b"), load_device("h20"), 1, "bf16")
    assert max_sequences(strong, 4756) == 22 < roofline.balance_batch(strong, 3000)
    tasks = generate(120, seed=4, shape=Shape(initial_context=1500))
    sc = Scenario(strong=strong, weak=weak, sessions=64, protocols=("strong-only",))
    capped = summarize(simulate(tasks, sc))["strong-only"]
    free = summarize(simulate(tasks, replace(sc, kv_cap=False)))["strong-only"]
    assert capped["strong_mean_batch"]["mean"] <= max_sequences(strong, 1500) + 1e-9
    assert free["strong_mean_batch"]["mean"] > 2 * capped["strong_mean_batch"]["mean"]
    assert capped["wall_s"]["mean"] > free["wall_s"]["mean"]


class _CountingEnv(simpy.Environment):
    processed = 0

    def step(self):
        _CountingEnv.processed += bool(self._queue)  # the last call finds none: the run ends
        return super().step()


@pytest.mark.parametrize("kw", [dict(sessions=1), dict(sessions=3), dict(sessions=1, tool_latency="0.4"),
                                dict(arrival_rate=0.05), dict(sessions=2, user_latency="lognormal:1,0.5")])
def test_a_call_run_at_once_is_what_waiting_on_its_epoch_gives(kw, monkeypatch):
    # Replica.run_or_submit runs a call that ends before any event is due without an event;
    # with it replaced by the event road (submit, then wait) every row is the same, to the bit.
    from costsim.sizing import deployments
    from costsim.sim import run
    from costsim.scenario import Latency

    strong, weak = deployments()
    kw = {k: Latency.parse(v) if k.endswith("latency") else v for k, v in kw.items()}
    sc = Scenario(strong=strong, weak=weak, p=0.7, K=4, protocols=("strong-only", "specagent", "agentcollab"),
                  weak_replicas=2, **kw)
    tasks = generate(12, seed=3)
    monkeypatch.setattr(run.simpy, "Environment", _CountingEnv)
    _CountingEnv.processed = 0
    at_once = simulate(tasks, sc)
    events_at_once = _CountingEnv.processed
    monkeypatch.setattr(Replica, "run_or_submit", Replica.submit)
    _CountingEnv.processed = 0
    assert simulate(tasks, sc) == at_once
    assert events_at_once < _CountingEnv.processed
    if kw == {"sessions": 1}:  # alone on its replicas, a session runs on few events
        assert 3 * events_at_once < _CountingEnv.processed


def test_a_session_alone_with_prompts_within_the_budget_needs_no_event_per_call(monkeypatch):
    # Strong-only, one session, no tool time: the process's start and end are its only events
    # (a prompt above the token budget is prefilled in chunks, by the general road).
    from costsim.sizing import deployments
    from costsim.sim import run

    strong, weak = deployments()
    tasks = generate(20, seed=5, shape=Shape(initial_context=2000))
    assert max(max(t.initial_context, *(s.observation_tokens for s in t.steps)) for t in tasks) <= 8192
    monkeypatch.setattr(run.simpy, "Environment", _CountingEnv)
    _CountingEnv.processed = 0
    rows = simulate(tasks, Scenario(strong=strong, weak=weak, protocols=("strong-only",)))
    assert _CountingEnv.processed == 2
    assert sum(r["strong_calls"] for r in rows) == sum(len(t.steps) for t in tasks)


def test_a_task_driven_from_a_shared_wake_up_runs_no_call_at_once():
    # A process that drives a schedule after an event another process also waits on must not
    # move the clock past that other process: a TaskRun made outside the simulator's own
    # processes takes the event road (wakes_alone is False) until its first wait of its own.
    from costsim.sizing import deployments
    from costsim.protocols import strong_only
    from costsim.acceptance import Bernoulli
    from costsim.sim.agent import TaskRun

    strong, weak = deployments()
    env = simpy.Environment()
    reps = Replica(env, strong), Replica(env, weak)
    task = generate(1, seed=2)[0]
    tr = TaskRun(env, task, *reps, Bernoulli(None, 1.0), None)
    gate, seen = env.event(), []

    def driver():
        yield gate
        yield from tr.drive(strong_only.schedule(task))

    def other():
        yield gate
        seen.append(env.now)

    def opener():  # then an event far ahead: nothing else is due while the task runs
        yield env.timeout(1.0)
        gate.succeed()
        yield env.timeout(1e6)

    for p in (driver(), other(), opener()):
        env.process(p)
    env.run()
    assert seen == [1.0]
    assert tr.row["strong_calls"] == len(task.steps) and env.now > 1.0

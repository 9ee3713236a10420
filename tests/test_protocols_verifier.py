"""Verifier errors: false accepts let wrong writes reach the environment, false rejects cost
repairs; rates 0 leave SpecAgent exactly as it was."""

import math

import pytest

from costsim import protocols
from costsim.sizing import deployments
from costsim.metrics import summarize
from costsim.scenario import Scenario
from costsim.sim import simulate
from costsim.traces.synthetic import Shape, generate

N_STEPS, N_TASKS = 50, 40


def writes_only():
    # Every step a state-changing call: each chunk is one held write, reviewed exactly once
    # (on a rejection the strong model's repair replaces it and is executed).
    shape = Shape.fixed(steps=N_STEPS, output_tokens=20, obs_tokens=5, p_write=1.0, initial_context=10)
    return generate(N_TASKS, seed=9, shape=shape, deterministic_length=True)


def scenario(**kw):
    s, w = deployments(strong="qwen3-30b-a3b", weak="qwen3-8b", strong_device="h100", weak_device="h100")
    return Scenario(strong=s, weak=w, protocols=("specagent",), seed=4, **kw)


def within(x, mean, var, z=4.0):
    return abs(x - mean) <= z * math.sqrt(var)


def test_zero_rates_leave_specagent_unchanged():
    tasks = generate(20, seed=1)
    a = simulate(tasks, scenario(p=0.7))
    b = simulate(tasks, scenario(p=0.7, false_accept=0.0, false_reject=0.0))
    assert a == b
    assert protocols.get("specagent", false_accept=0.0).keywords == {"false_accept": 0.0}


def test_false_accepts_reach_the_environment_at_rate_1_minus_p_times_fa():
    p, fa = 0.6, 0.25
    rows = simulate(writes_only(), scenario(p=p, false_accept=fa))
    reviews = sum(r["reviews"] for r in rows)
    assert reviews == N_TASKS * N_STEPS
    errors = sum(r["irreversible_errors"] for r in rows)
    q = (1 - p) * fa  # a write is bad and the reviewer accepts it
    assert within(errors, reviews * q, reviews * q * (1 - q))
    assert sum(r["false_accepts"] for r in rows) == errors
    rejections = sum(r["rejections"] for r in rows)
    r_ = (1 - p) * (1 - fa)
    assert within(rejections, reviews * r_, reviews * r_ * (1 - r_))
    m = summarize(rows)["specagent"]
    assert m["wrong_writes_per_1000_tasks"]["mean"] == pytest.approx(1000 * errors / N_TASKS)


def test_false_rejects_cost_repairs_of_good_steps():
    fr = 0.3
    rows = simulate(writes_only(), scenario(p=1.0, false_reject=fr))
    reviews = sum(r["reviews"] for r in rows)
    rejects = sum(r["rejections"] for r in rows)
    assert sum(r["false_rejects"] for r in rows) == rejects
    assert within(rejects, reviews * fr, reviews * fr * (1 - fr))
    assert sum(r["irreversible_errors"] for r in rows) == 0
    # Each false reject costs a repair: more strong decode than a perfect verifier.
    perfect = simulate(writes_only(), scenario(p=1.0))
    assert sum(r["strong_decode_tokens"] for r in rows) > sum(r["strong_decode_tokens"] for r in perfect)


def test_truth_draws_stay_paired_with_plain_specagent():
    # The verifier's errors come from a side stream: with false rejects only, every
    # reviewer-accepted prefix is the truth's prefix cut earlier, never later.
    tasks = generate(30, seed=2)
    plain = simulate(tasks, scenario(p=0.8))
    noisy = simulate(tasks, scenario(p=0.8, false_reject=0.2))
    assert sum(r["false_rejects"] for r in noisy) > 0
    assert sum(r["reviews"] for r in noisy) >= sum(r["reviews"] for r in plain)

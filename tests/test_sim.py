"""The simulator against independent references: a naive per-iteration batcher and the
closed forms (within Monte-Carlo intervals), plus determinism and contention."""

import math

import numpy as np
import pytest
from conftest import ideal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costsim import formulas, roofline
from costsim.profiles import Deployment, load_device, load_model
from costsim.metrics import summarize
from costsim.scenario import Scenario
from costsim.sim import simulate
from costsim.traces.synthetic import Shape, generate

Z999 = 3.2905  # 99.9% two-sided: the tests below are deterministic (fixed seeds)


# --- the replica against a naive per-iteration reference ---------------------------------------


# --- the simulator against the closed form ------------------------------------------------------


def ratio_within(ratio, want):
    lo, hi = ratio["ci95"]
    half = (hi - lo) / 2 * Z999 / 1.96
    return abs(ratio["mean"] - want) <= half + 1e-12


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(p=st.floats(0.3, 0.95), n=st.integers(1, 8), d=st.integers(5, 60), tv=st.integers(0, 30),
       rho=st.sampled_from([0.0, 0.5, 1.0, 1.5]), kappa=st.floats(0.05, 1.0))
def test_simulated_R_L_agree_with_paper_closed_form(p, n, d, tv, rho, kappa):
    # All reads, every chunk reviewed at length n: the paper's setting. A step prefills its
    # observation (1 pass) and decodes d tokens: d + 1 passes; a review 1 + tv passes; a fused
    # repair round(rho d) passes.
    shape = Shape.fixed(steps=1000, output_tokens=d, obs_tokens=3, initial_context=2)
    tasks = generate(20, seed=7, shape=shape, deterministic_length=True)
    sc = Scenario(strong=ideal(1.0), weak=ideal(kappa), p=p, K=n, rho=rho, verdict_tokens=tv,
                  protocols=("strong-only", "specagent-review-all"), seed=3)
    out = summarize(simulate(tasks, sc))["specagent-review-all"]
    vd, rho_cf = (1 + tv) / (d + 1), round(rho * d) / (d + 1)
    assert ratio_within(out["R"], float(formulas.R(p, n, vd, rho_cf)))
    assert ratio_within(out["L"], float(formulas.L(p, n, vd, rho_cf, kappa)))
    E = float(formulas.commits_per_review(p, n))
    assert out["strong_calls_per_task"]["mean"] == pytest.approx(1000 / E, rel=0.03)


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(p=st.floats(0.3, 0.95), K=st.integers(2, 8), q=st.floats(0.05, 0.6), kappa=st.floats(0.05, 1.0))
def test_simulated_R_L_agree_with_renewal_form(p, K, q, kappa):
    # Reads and writes (probability q): chunks end at a write (reviewed) or at K reads
    # (committed unreviewed). Generative tasks redraw the path after a rejection.
    d, tv, rho = 30, 10, 1.0
    shape = Shape.fixed(steps=1000, output_tokens=d, obs_tokens=3, p_write=q, initial_context=2)
    tasks = generate(20, seed=11, shape=shape, deterministic_length=True, fresh_after_reject=True)
    sc = Scenario(strong=ideal(1.0), weak=ideal(kappa), p=p, K=K, rho=rho, verdict_tokens=tv,
                  protocols=("strong-only", "specagent"), seed=5)
    out = summarize(simulate(tasks, sc))["specagent"]
    R, L = formulas.renewal_R_L(p, K, q, (1 + tv) / (d + 1), rho * d / (d + 1), kappa)
    assert ratio_within(out["R"], float(R))
    assert ratio_within(out["L"], float(L))


def test_fixed_trajectories_review_more_than_the_renewal_form():
    # On a fixed (replayed) path a rejection before a write leaves the write in the next chunk,
    # so it is reviewed again: more reviews than the renewal form's fresh chunks.
    shape = Shape.fixed(steps=1000, output_tokens=30, obs_tokens=3, p_write=0.2, initial_context=2)
    fixed = generate(20, seed=2, shape=shape, deterministic_length=True)
    fresh = generate(20, seed=2, shape=shape, deterministic_length=True, fresh_after_reject=True)
    sc = Scenario(strong=ideal(1.0), weak=ideal(0.2), p=0.6, K=6, protocols=("strong-only", "specagent"))
    r_fixed = summarize(simulate(fixed, sc))["specagent"]["R"]
    r_fresh = summarize(simulate(fresh, sc))["specagent"]["R"]
    assert r_fixed["ci95"][0] > r_fresh["ci95"][1]


# --- determinism --------------------------------------------------------------------------------


def test_same_seed_same_numbers_different_seed_different():
    s, w = Deployment(load_model("qwen3-30b-a3b"), load_device("h100"), 1), Deployment(load_model("qwen3-8b"), load_device("h100"), 1)
    tasks = generate(40, seed=1)
    a = simulate(tasks, Scenario(strong=s, weak=w, seed=1, sessions=4, p_dist="beta:4,1"))
    b = simulate(tasks, Scenario(strong=s, weak=w, seed=1, sessions=4, p_dist="beta:4,1"))
    c = simulate(tasks, Scenario(strong=s, weak=w, seed=2, sessions=4, p_dist="beta:4,1"))
    assert a == b
    spec = lambda rows: [r["strong_calls"] for r in rows if r["protocol"] == "specagent"]  # noqa: E731
    assert spec(a) != spec(c)
    # Strong-only does not draw acceptance: identical across seeds.
    so = lambda rows: [r["wall_s"] for r in rows if r["protocol"] == "strong-only"]  # noqa: E731
    assert so(a) == so(c)


def test_acceptance_processes_have_the_stated_means():
    from costsim.acceptance import Markov, parse_p_dist

    rng = np.random.default_rng(0)
    steps = [None] * 10
    bern = parse_p_dist(None, 0.7)(rng)
    # Mean accepted prefix of n steps: sum_{k=1..n} p^k.
    js = [bern.accepted(steps) for _ in range(20000)]
    want = sum(0.7**k for k in range(1, 11))
    assert np.mean(js) == pytest.approx(want, abs=4 * np.std(js) / math.sqrt(len(js)))
    mk = Markov(rng, 0.95, 0.3, 0.1, 0.3)
    passes = total = 0
    for _ in range(20000):
        j = mk.accepted([None])
        passes += j
        total += 1
    assert passes / total == pytest.approx(mk.stationary_p, abs=0.02)
    with pytest.raises(ValueError, match="beta:a,b"):
        parse_p_dist("beta:1", 0.5)


# --- contention: past the balance point extra FLOPs become time ---------------------------------


def test_spec_strong_time_ratio_rises_past_the_balance_point():
    # A dense strong model at short context has a finite balance point; SpecAgent's strong
    # prefill FLOPs (the whole drafted chunk) cost little while the strong replica is memory
    # bound, but become time once it is compute bound. On 4 H20s its KV pool holds more
    # sequences than B* (on 2 it does not: see the next test). docs/cost-model.md quotes these.
    from costsim.memory import max_sequences

    strong, weak, B_star, res = _contention(4)
    assert 20 < B_star < max_sequences(strong, 3000)
    lo, hi = res[1]["specagent-hold-responses"], res[256]["specagent-hold-responses"]
    assert res[256]["strong-only"]["strong_mean_batch"]["mean"] > B_star  # past B* under load
    assert round(lo["R_time"]["mean"], 2) == 0.26 and round(hi["R_time"]["mean"], 2) == 1.13


def test_a_kv_pool_that_caps_the_batch_below_the_balance_point_keeps_the_ratio_low():
    # On 2 H20s the pool holds fewer sequences than B*: the batch never passes it, so the
    # extra prefill FLOPs stay cheap (the ratio rises far less than on 4 H20s, above).
    strong, weak, B_star, res = _contention(2)
    from costsim.memory import max_sequences

    cap = max(r["strong_mean_batch"]["mean"] for r in res[256].values())
    assert cap <= max_sequences(strong, 1500) < B_star  # the tasks start at 1,500 tokens
    assert round(res[256]["specagent-hold-responses"]["R_time"]["mean"], 2) == 0.66


def _contention(gpus):
    """Llama-3.1-70B on ``gpus`` H20s (8B weak), Strong-only and SpecAgent at 1 and 256 sessions."""
    strong = Deployment(load_model("llama-3.1-70b"), load_device("h20"), gpus, "bf16")
    weak = Deployment(load_model("llama-3.1-8b"), load_device("h20"), 1, "bf16")
    tasks = generate(300, seed=4, shape=Shape(initial_context=1500))
    res = {}
    for sessions in (1, 256):
        sc = Scenario(strong=strong, weak=weak, p=0.8, K=6, sessions=sessions, strong_replicas=1,
                      weak_replicas=8, protocols=("strong-only", "specagent-hold-responses"))
        res[sessions] = summarize(simulate(tasks, sc))
    return strong, weak, roofline.balance_batch(strong, 3000), res




def test_a_lazy_generator_draws_what_its_spawned_child_would():
    import copy

    from costsim.sim.run import LazyGenerator

    for seed in (0, 7, 2**80):
        children = np.random.SeedSequence(seed).spawn(5)
        for i in (0, 3, 4):
            lazy = LazyGenerator(np.random.SeedSequence(seed), i)
            want = np.random.default_rng(children[i])
            assert lazy.random() == want.random() and lazy.standard_normal() == want.standard_normal()
    # A copy (before or after a draw) is a generator in the same state, not a recursion.
    fresh = LazyGenerator(np.random.SeedSequence(1), 2)
    assert copy.deepcopy(fresh).random() == fresh.random()
    assert copy.deepcopy(fresh).random() == fresh.random()


def test_numpy_numbers_are_numbers_to_a_scenario():
    from costsim.sizing import deployments

    s, w = deployments()
    tasks = generate(4, seed=1)
    a = simulate(tasks, Scenario(strong=s, weak=w, sessions=np.int32(2), strong_replicas=np.int64(1), p=0.5))
    b = simulate(tasks, Scenario(strong=s, weak=w, sessions=2, strong_replicas=1, p=0.5))
    assert repr(a) == repr(b)


def test_the_simulator_and_the_twin_chunk_at_the_engines_token_budget():
    # llama.cpp's budget is 512 tokens (its n_ubatch), vLLM's 8,192 on an H20: a scenario that
    # sets none runs each replica at its engine's, so a 3,000-token prompt takes six iterations
    # of prefill under llama.cpp where vLLM takes one, each reading the weights again.
    from dataclasses import replace

    from costsim.scenario import build_scenario
    from costsim.twin import expected_rows, COLUMNS

    tasks = generate(2, seed=1, shape=Shape(initial_context=3000))
    sc = build_scenario({"engine": "llamacpp", "protocols": "strong-only", "strong": "llama-3.1-8b", "weak": "qwen3-4b"})
    assert sc.limits(sc.strong) == (512, 256)
    assert build_scenario({"protocols": "strong-only"}).limits(build_scenario({}).strong) == (8192, 1024)
    hbm = lambda s: summarize(simulate(tasks, s))["strong-only"]["strong_hbm_bytes"]["mean"]  # noqa: E731
    assert hbm(sc) == pytest.approx(hbm(replace(sc, token_budget=512)))
    assert hbm(sc) - hbm(replace(sc, token_budget=8192)) > sc.strong.weight_bytes  # more weight passes a task
    twin = expected_rows(tasks, sc)["strong-only"][:, COLUMNS.index("strong_hbm_bytes")].mean()
    assert twin == pytest.approx(hbm(sc), rel=1e-6)

"""The exact twin (costsim.twin) against the simulator: to rounding where both are exact
(a brute-force enumeration of every verdict sequence through the real SimPy protocol), and
within the Monte-Carlo interval where the simulator samples."""

from unittest.mock import ANY

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ideal

from costsim import formulas, protocols, roofline
from costsim.sizing import deployments
from costsim.profiles import Deployment, load_device, load_model
from costsim import twin
from costsim.metrics import summarize
from costsim.scenario import Latency, Scenario
from costsim.sim import Replica, TaskRun, simulate
from costsim.report import closed_form, renewal_form
from costsim.scenario import protocol_options, replica_costs
from costsim.traces.schema import Step, Task
from costsim.protocols.chunking import CHUNKINGS, chunks
from costsim.traces.synthetic import Shape, generate

Z999 = 3.2905  # 99.9% two-sided: the tests below are deterministic (fixed seeds)
MOE_TP = Deployment(load_model("qwen3-30b-a3b"), load_device("h20"), 2)  # MoE, tensor parallel


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 20000), st.integers(0, 30000), st.integers(0, 300), st.integers(64, 8192),
       st.sampled_from(["qwen3-8b", "qwen3-30b-a3b"]), st.integers(1, 4))
def test_solo_call_is_what_an_idle_replica_charges(prefill, context, decode, budget, model, n_dev):
    dep = Deployment(load_model(model), load_device("h20"), n_dev)
    env = simpy.Environment()
    rep = Replica(env, dep, token_budget=budget)
    req = rep.submit(prefill, context, decode)
    env.run()
    secs, hbm, flops = roofline.coefficients(dep).solo_call(prefill, context, decode, budget)
    assert req.finished == pytest.approx(secs, rel=1e-12, abs=1e-15)
    assert req.busy_s == pytest.approx(secs, rel=1e-9, abs=1e-15)
    assert req.hbm_bytes == pytest.approx(hbm, rel=1e-9, abs=1e-6)
    assert req.flops == pytest.approx(flops, rel=1e-9, abs=1e-6)


# --- exact: every verdict sequence through the real protocol -------------------------------------


class _Branch(Exception):
    pass


class Scripted:
    """An acceptance process answering from a script; past its end it asks to branch."""

    def __init__(self, script):
        self.script, self.ns = script, []

    def accepted(self, steps):
        if len(self.ns) == len(self.script):
            raise _Branch(len(steps), tuple(steps))
        self.ns.append(tuple(steps))
        return self.script[len(self.ns) - 1]


def brute_force(task, sc, name, q):
    """E[row] of protocol ``name`` on ``task``: the simulator run once for each verdict
    sequence, weighted by its probability (``q(step)``: the step's chance to pass)."""
    (s_coef, s_call), (w_coef, w_call) = replica_costs(sc)
    proc = protocols.get(name, **protocol_options(sc))
    expected, todo = {}, [()]
    while todo:
        script = todo.pop()
        env = simpy.Environment()
        strong = Replica(env, sc.strong, token_budget=sc.limits(sc.strong)[0], rtt_s=s_call, coef=s_coef)
        weak = Replica(env, sc.weak, token_budget=sc.limits(sc.weak)[0], rtt_s=w_call, coef=w_coef)
        acc = Scripted(script)
        tr = TaskRun(env, task, strong, weak, acc, np.random.default_rng(0), sc.tool_latency, sc.user_latency)
        env.process(proc(tr, task))
        try:
            env.run()
        except _Branch as b:
            n = b.args[0]
            todo.extend(script + (a,) for a in range(n + 1))
            continue
        prob = 1.0
        for a, steps in zip(script, acc.ns):
            for s in steps[:a]:
                prob *= q(s)
            if a < len(steps):
                prob *= 1.0 - q(steps[a])
        if prob == 0.0:
            continue
        row = tr.finish()
        for c in twin.COLUMNS:
            expected[c] = expected.get(c, 0.0) + prob * row[c]
    return expected


step_st = st.builds(Step, kind=st.sampled_from(["read", "read", "write", "respond", "final"]),
                    output_tokens=st.integers(1, 400), observation_tokens=st.integers(0, 3000),
                    verdict=st.sampled_from([None, None, True, False]))


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=st.lists(step_st, min_size=1, max_size=7), init=st.integers(0, 6000), p=st.floats(0.0, 1.0),
       K=st.integers(1, 4),
       # every protocol whose record says the twin costs it (Strong-only is each run's baseline)
       name=st.sampled_from([n for n, r in protocols.PROTOCOLS.items() if r.twin and n != "strong-only"]),
       rho=st.sampled_from([0.0, 0.5, 1.0]), recorded=st.booleans(), budget=st.sampled_from([512, 8192]),
       chunking=st.sampled_from(CHUNKINGS))
def test_twin_equals_enumeration_of_every_verdict_sequence(steps, init, p, K, name, rho, recorded, budget, chunking):
    steps = [Step(**{**{f: getattr(s, f) for f in s.__slots__}, "context_tokens": init if i == 0 else -1})
             for i, s in enumerate(steps)]
    task = Task("t", tuple(steps))
    strong, weak = deployments()
    sc = Scenario(strong=strong, weak=MOE_TP, p=p, K=K, rho=rho, protocols=("strong-only", name),
                  p_dist="recorded" if recorded else None, token_budget=budget, network_rtt_s=0.05,
                  options=(("chunking", chunking),),
                  tool_latency=Latency(0.3), user_latency=Latency(2.0))

    def q(s):
        return p if not recorded or s.verdict is None else float(s.verdict)

    want = brute_force(task, sc, name, q)
    got = dict(zip(twin.COLUMNS, twin.expected_rows([task], sc)[name][0]))
    for c in twin.COLUMNS:
        assert got[c] == pytest.approx(want.get(c, 0.0), rel=1e-9, abs=1e-9), c


def test_twin_at_p1_reviews_the_chunks_the_trace_statistics_count():
    tasks = generate(200, seed=4)
    strong, weak = deployments()
    for rule in CHUNKINGS:
        sc = Scenario(strong=strong, weak=weak, p=1.0, K=6, protocols=("specagent",), options=(("chunking", rule),))
        rows = twin.expected_rows(tasks, sc)["specagent"]
        reviews = rows[:, twin.COLUMNS.index("reviews")]
        want = [sum(c.reviewed for c in chunks(t.steps, 6, rule)) for t in tasks]
        assert reviews.tolist() == pytest.approx(want)
        assert rows[:, twin.COLUMNS.index("rejections")].sum() == 0


@settings(max_examples=15, deadline=None, derandomize=True)
@given(p=st.floats(0.05, 0.99), n=st.integers(1, 8), d=st.integers(5, 60), tv=st.integers(0, 30),
       rho=st.sampled_from([0.0, 0.5, 1.0, 1.5]), kappa=st.floats(0.05, 1.0))
def test_twin_in_the_papers_setting_is_the_papers_formula(p, n, d, tv, rho, kappa):
    # All reads, every chunk reviewed, an ideal memory-bound device (one iteration = one weight
    # pass): the paper's setting, where a fixed path is as good as a fresh one. The twin of one
    # long task must be formulas.R / L but for its end (a last chunk of < n steps): a relative
    # difference of at most about n / N.
    N = 600
    shape = Shape.fixed(steps=N, output_tokens=d, obs_tokens=3, initial_context=2)
    tasks = generate(1, seed=7, shape=shape, deterministic_length=True)
    sc = Scenario(strong=ideal(1.0), weak=ideal(kappa), p=p, K=n, rho=rho, verdict_tokens=tv,
                  protocols=("strong-only", "specagent-review-all"))
    got = twin.ratios(tasks, sc)["specagent-review-all"]
    vd, rho_cf = (1 + tv) / (d + 1), round(rho * d) / (d + 1)
    assert got["R"] == pytest.approx(float(formulas.R(p, n, vd, rho_cf)), rel=2 * n / N)
    assert got["L"] == pytest.approx(float(formulas.L(p, n, vd, rho_cf, kappa)), rel=2 * n / N)


# --- within the simulator's Monte-Carlo interval -------------------------------------------------


def within(sim, want):
    lo, hi = sim["ci95"]
    half = (hi - lo) / 2 * Z999 / 1.96
    return abs(sim["mean"] - want) <= half + 1e-12


@pytest.mark.parametrize("kw", [
    {},
    {"p_dist": "beta:4,1", "tool_latency": Latency(0.5, 0.8), "user_latency": Latency(3.0, 0.5)},
    {"p": 0.5, "K": 3, "protocols": ("strong-only", "specagent-hold-responses", "specagent-separate-repair")},
])
def test_simulation_agrees_with_its_twin(kw):
    strong, weak = deployments()
    tasks = generate(600, seed=9)
    sc = Scenario(**{"strong": strong, "weak": weak, "p": 0.8, "K": 6, "seed": 2,
                     "protocols": ("strong-only", "weak-only", "specagent"), **kw})
    sim = summarize(simulate(tasks, sc))
    exact = twin.ratios(tasks, sc)
    for name in sc.protocols:
        for metric in ("R", "R_time", "L", "hbm_ratio", "flops_ratio", "strong_calls_ratio",
                       "strong_calls_per_task", "wall_s", "reviews_per_task"):
            assert within(sim[name][metric], exact[name][metric]), (name, metric)


def test_closed_form_falls_back_to_the_renewal_form_and_says_why():
    strong, weak = deployments()
    tasks = generate(30, seed=1)
    cf = closed_form(tasks, Scenario(strong=strong, weak=weak, p_dist="markov:0.9,0.3,0.1,0.3"))
    assert cf["method"] == "renewal" and "Markov" in cf["exact"]["unavailable"]
    assert cf["R"] == cf["renewal"]["R"]
    cf = closed_form(tasks, Scenario(strong=strong, weak=weak, false_accept=0.1))
    assert cf["method"] == "renewal" and "verifier" in cf["exact"]["unavailable"]
    cf = closed_form(generate(30, seed=1, fresh_after_reject=True), Scenario(strong=strong, weak=weak))
    assert cf["method"] == "renewal" and "generative" in cf["exact"]["unavailable"]


def test_the_renewal_form_takes_the_rate_at_which_the_reviewer_accepts():
    strong, weak = deployments()
    tasks = generate(30, seed=1)

    def renewal(**kw):
        return renewal_form(tasks, Scenario(strong=strong, weak=weak, **kw))

    at = renewal(p=0.3 * 0.5 + 0.7 * 0.1)  # p_u (1 - false reject) + (1 - p_u) false accept
    assert renewal(p=0.3, false_reject=0.5, false_accept=0.1) == {**at, "assumption": ANY}
    # A Markov chain at its stationary rate (0.9·0.3 + 0.3·0.1) / 0.4 = 0.75; -p is not read.
    assert renewal(p=0.2, p_dist="markov:0.9,0.3,0.1,0.3")["R"] == pytest.approx(renewal(p=0.75)["R"], rel=1e-12)
    # A Beta over p_u: the mean of the form over it (Jensen: not the form at its mean 0.4).
    from scipy import integrate, stats

    mean = integrate.quad(lambda q: renewal(p=q)["R"] * stats.beta.pdf(q, 2, 3), 0, 1, epsabs=1e-10)[0]
    assert renewal(p=0.9, p_dist="beta:2,3")["R"] == pytest.approx(mean, rel=1e-7)
    assert abs(mean - renewal(p=0.4)["R"]) > 1e-3


def test_the_renewal_form_is_that_of_the_ablation_run():
    strong, weak = deployments()
    tasks = generate(30, seed=1)
    sc = Scenario(strong=strong, weak=weak, protocols=("strong-only", "specagent-review-all"))
    cf = closed_form(tasks, sc)
    same = renewal_form(tasks, Scenario(strong=strong, weak=weak, options=(("review", "all"),)))
    assert cf["protocol"] == "specagent-review-all" and cf["renewal"]["R"] == same["R"]
    assert same["R"] > renewal_form(tasks, Scenario(strong=strong, weak=weak))["R"]  # more chunks reviewed


# --- the mixed repair: a rejection fixed in a correction turn of its own at a rate -------------------


def test_a_correction_turn_at_its_rate_is_one_more_strong_call_per_rejection():
    # [read, write] at p_u = 0: the read is rejected and repaired, then the held write: two reviews,
    # two rejections, and at correction rate 0.3 an expected 0.6 correction turns besides.
    task = Task("t", (Step("read", 5, 3, context_tokens=2), Step("write", 5, 3)))
    strong, weak = ideal(1.0), ideal(0.2)
    for rate, calls in ((0.0, 2.0), (0.3, 2.6), (1.0, 4.0)):
        sc = Scenario(strong=strong, weak=weak, p=0.0, K=6, protocols=("strong-only", "specagent"),
                      options=(("correction_rate", rate),))
        got = twin.ratios([task], sc)["specagent"]
        assert got["strong_calls_per_task"] == pytest.approx(calls, abs=1e-12)
        assert got["rejections_per_task"] == pytest.approx(2.0)
    # A correction decodes correction_rho recorded tokens of the replaced step (times the strong
    # step scale); the fused repair's rho is not spent on it.
    sc = Scenario(strong=strong, weak=weak, p=0.0, K=6, protocols=("strong-only", "specagent"),
                  options=(("correction_rate", 1.0), ("correction_rho", 2.0)))
    assert twin.ratios([task], sc)["specagent"]["strong_decode_tokens"] == pytest.approx(2 * (24 + 2.0 * 5))


def test_the_simulator_draws_the_correction_turns_the_twin_weighs():
    strong, weak = deployments()
    tasks = generate(300, seed=4)
    sc = Scenario(strong=strong, weak=weak, p=0.7, K=6, protocols=("strong-only", "specagent"),
                  options=(("correction_rate", 0.4),))
    sim = summarize(simulate(tasks, sc))["specagent"]
    exact = twin.ratios(tasks, sc)["specagent"]
    for m in ("strong_calls_per_task", "strong_decode_tokens"):
        lo, hi = sim[m]["ci95"]
        half = (hi - lo) / 2 * Z999 / 1.96
        assert abs(sim[m]["mean"] - exact[m]) <= half, (m, sim[m], exact[m])

"""AgentCollab, Speculative Actions and tool-call self-speculation: each against a small case
computed by hand, and the paper's qualitative orderings from stated parameters."""

import pytest
from conftest import ideal

from costsim.sim import Latency, Scenario, simulate, summarize
from costsim.traces.schema import Step, Task
from costsim.traces.synthetic import generate


def task(kinds, verdicts=None, d=5, o=3, ctx=2):
    verdicts = verdicts or [None] * len(kinds)
    return Task("t", tuple(Step(kind=k, output_tokens=d, observation_tokens=o, context_tokens=ctx, verdict=v)
                           for k, v in zip(kinds, verdicts)))


def run1(t, protocol, **kw):
    kw.setdefault("strong", ideal(1.0))
    kw.setdefault("weak", ideal(0.1))
    rows = simulate([t], Scenario(protocols=(protocol,), **kw))
    return rows[0]


# --- AgentCollab ------------------------------------------------------------------------------


def test_agentcollab_hand_computed():
    # Five reads; the weak model's second step makes no progress (recorded verdict False).
    # weak: step 0 (+ reflection), step 1 wasted (+ reflection) -> escalation 1, span 2:
    # strong: step 1 (+ reflection), step 2 (+ reflection); weak: steps 3, 4 (+ reflections).
    t = task(["read"] * 5, [True, False, True, True, True])
    r = run1(t, "agentcollab", p_dist="recorded:1")
    assert r["strong_calls"] == 4 and r["weak_calls"] == 8
    assert r["escalations"] == 1 and r["wasted_steps"] == 1 and r["reflection_calls"] == 6
    assert r["committed_steps"] == 5 and r["irreversible_errors"] == 0
    # Times on the ideal devices (0.1 and 1 s per iteration): a reflection prefills the
    # observation and its prompt and decodes 16 (17 iterations); an act right after its own
    # model's reflection has nothing new to prefill (5 iterations), otherwise 1 + 5.
    weak = (1 + 5) + 5 + (1 + 5) + 5 + 4 * 17
    strong = (1 + 5) + 5 + 2 * 17
    assert r["wall_s"] == pytest.approx(0.1 * weak + 1.0 * strong)


def test_agentcollab_escalation_is_cumulative_and_a_wasted_write_is_irreversible():
    # Every weak step stalls: spans 2, 4, 8 ... ; a wasted write reaches the environment and
    # costs one recovery step of the strong model (inline reflection: no extra calls).
    t = task(["write"] + ["read"] * 8)
    r = run1(t, "agentcollab", escalate_p=1.0, options=(("reflection", "inline"),))
    # weak wastes step 0 (a write): recovery (1) + span 2 -> steps 0, 1 by strong; weak wastes
    # step 2: span 4 -> steps 2..5; weak wastes step 6: span 8 -> steps 6..8.
    assert r["escalations"] == 3 and r["wasted_steps"] == 3 and r["irreversible_errors"] == 1
    assert r["strong_calls"] == 1 + 9 and r["weak_calls"] == 3 and r["reflection_calls"] == 0


# --- Speculative Actions ----------------------------------------------------------------------


def test_speculative_actions_all_hits_hand_computed():
    # Three reads, tool latency 2 s, every guess right. Step 0: strong 0-6 s; guess 0-0.6,
    # pre-executed read 0.6-2.6, then strong step 1 starts on the speculated history (it joins
    # the batch at the next iteration boundary, 3 s: prefill 3-4, decode to 9). Step 1 is
    # confirmed at 6 and done at 9 with its read already back; step 2 runs 9-15, its read back
    # at 11.6. Wall 15 s against Strong-only's 3·(6 + 2) = 24 s; every read's latency saved.
    t = task(["read"] * 3)
    r = run1(t, "speculative-actions", spec_hit_rate=1.0, tool_latency=Latency(2.0))
    assert r["wall_s"] == pytest.approx(15.0)
    assert r["strong_calls"] == 3 and r["weak_calls"] == 3 and r["spec_hits"] == 3
    assert r["tool_s_saved"] == pytest.approx(6.0) and r["spec_wasted_strong_calls"] == 0
    so = run1(t, "strong-only", tool_latency=Latency(2.0))
    assert so["wall_s"] == pytest.approx(24.0)


def test_speculative_actions_misses_cost_strong_calls():
    # Every guess wrong: each read's speculative pre-execution is wasted and so is the strong
    # call started on it (two of three steps have a successor): 3 + 2 strong calls.
    t = task(["read"] * 3)
    r = run1(t, "speculative-actions", spec_hit_rate=0.0, tool_latency=Latency(2.0))
    assert r["strong_calls"] == 5 and r["spec_wasted_strong_calls"] == 2
    assert r["spec_hits"] == 0 and r["spec_wasted_tools"] == 3 and r["tool_s_saved"] == 0
    assert r["committed_steps"] == 3


def test_speculative_actions_never_pre_executes_writes():
    t = task(["write", "respond", "write"])
    r = run1(t, "speculative-actions", spec_hit_rate=1.0, tool_latency=Latency(2.0))
    assert r["spec_hits"] == 0 and r["strong_calls"] == 3 and r["weak_calls"] == 3
    assert r["tool_s"] == pytest.approx(4.0)


# --- tool-call self-speculation ---------------------------------------------------------------


def test_self_spec_hand_computed():
    # Two reads, tool 2 s, Hit@1 = 1. Each step's call (1 + 5 iterations) runs with a
    # speculation fork (16-token suffix, 2-token prediction: out after 3 iterations); the read
    # starts then and is back at 5 s, before the step ends at 6 s: its latency is hidden.
    t = task(["read"] * 2)
    r = run1(t, "self-spec", self_spec_hit_rate=1.0, tool_latency=Latency(2.0),
             options=(("spec_call_tokens", 2),))
    assert r["wall_s"] == pytest.approx(12.0)
    assert r["strong_calls"] == 2 and r["spec_calls"] == 2 and r["spec_hits"] == 2
    assert r["tool_s_saved"] == pytest.approx(4.0) and r["tool_s"] == pytest.approx(4.0)
    assert r["strong_decode_tokens"] == 2 * (5 + 2)  # the prediction's extra decode
    miss = run1(t, "self-spec", self_spec_hit_rate=0.0, tool_latency=Latency(2.0),
                options=(("spec_call_tokens", 2),))
    assert miss["wall_s"] == pytest.approx(16.0) and miss["spec_wasted_tools"] == 2


def test_specagent_self_spec_hides_drafted_reads():
    # SpecAgent drafts 3 reads (K = 3, committed without review); the weak drafter's
    # predictions hide each read's latency when they hit.
    t = task(["read"] * 3)
    plain = run1(t, "specagent", K=3, tool_latency=Latency(2.0))
    spec = run1(t, "specagent-self-spec", K=3, tool_latency=Latency(2.0), self_spec_hit_rate=1.0,
                options=(("spec_call_tokens", 2),))
    assert plain["strong_calls"] == spec["strong_calls"] == 0
    # weak step: 0.1·(1 + 5) = 0.6 s; prediction out at 0.3 s, read back at 2.3 s.
    assert plain["wall_s"] == pytest.approx(3 * (0.6 + 2.0))
    assert spec["wall_s"] == pytest.approx(3 * 2.3)
    assert spec["tool_s_saved"] == pytest.approx(3 * 0.3)


# --- the paper's qualitative orderings --------------------------------------------------------


def test_paper_orderings_from_stated_parameters():
    """Stated parameters: tau²-Airline-shaped synthetic tasks; a memory-bound strong replica
    (one weight pass per iteration) and a weak one at kappa = 0.15 of its time per pass;
    p_u = 0.7, K = 6, tool calls 0.5 s; Speculative Actions guesses right half the time."""
    tasks = generate(40, seed=4)
    sc = Scenario(strong=ideal(1.0), weak=ideal(0.15), p=0.7, K=6, tool_latency=Latency(0.5),
                  spec_hit_rate=0.5, seed=1,
                  protocols=("strong-only", "specagent", "agentcollab", "speculative-actions"))
    out = summarize(simulate(tasks, sc))
    so = out["strong-only"]["strong_calls_per_task"]["mean"]
    # SpecAgent: below Strong-only on both HBM reads and wall time.
    assert out["specagent"]["hbm_ratio"]["ci95"][1] < 1.0
    assert out["specagent"]["wall_ratio"]["ci95"][1] < 1.0
    # AgentCollab and Speculative Actions: more strong calls than Strong-only.
    assert out["agentcollab"]["strong_calls_ratio"]["ci95"][0] > 1.0
    assert out["speculative-actions"]["strong_calls_ratio"]["ci95"][0] > 1.0
    assert out["speculative-actions"]["strong_calls_per_task"]["mean"] > so
    # ... and more HBM reads than SpecAgent; Speculative Actions more than Strong-only.
    assert out["agentcollab"]["hbm_ratio"]["mean"] > out["specagent"]["hbm_ratio"]["mean"]
    assert out["speculative-actions"]["hbm_ratio"]["ci95"][0] > 1.0

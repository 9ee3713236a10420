"""AgentCollab, Speculative Actions and tool-call self-speculation: each against a small case
computed by hand, and the paper's qualitative orderings from stated parameters."""

import pytest
from conftest import ideal

from costsim.metrics import summarize

from costsim.scenario import Latency, Scenario

from costsim.sim import simulate
from costsim.traces.schema import Step, Task
from costsim.traces.synthetic import generate


def task(kinds, verdicts=None, d=5, o=3, ctx=2):
    verdicts = verdicts or [None] * len(kinds)
    return Task("t", tuple(Step(kind=k, output_tokens=d, observation_tokens=o, context_tokens=ctx, verdict=v)
                           for k, v in zip(kinds, verdicts)))


IN_TIME = (("speculate", "in-time"),)
EVERY_STEP = (("speculate", "always"),)


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
    r = run1(t, "agentcollab", p_dist="recorded:1", options=(("stall", "acceptance"),))
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


def test_agentcollab_every_escalation_hands_the_strong_model_a_step():
    # Spans shrink with a growth below 1 (2, 1, 0.5 -> 1): each escalation still hands one step.
    t = task(["read"] * 6)
    r = run1(t, "agentcollab", escalate_p=1.0, options=(("reflection", "inline"), ("escalation_growth", 0.5)))
    # weak wastes 0: span 2 (0, 1); wastes 2: span 1 (2); wastes 3: span 1 (3); wastes 4: 1 (4); 5: 1 (5)
    assert r["escalations"] == 5 and r["strong_calls"] == 6 and r["committed_steps"] == 6


# --- Speculative Actions ----------------------------------------------------------------------


def test_speculative_actions_all_hits_hand_computed():
    # Three reads, tool latency 2 s, every guess right. Step 0: strong 0-6 s; guess 0-0.6,
    # pre-executed read 0.6-2.6, then strong step 1 starts on the speculated history (it joins
    # the batch at the next iteration boundary, 3 s: prefill 3-4, decode to 9). Step 1 is
    # confirmed at 6 and done at 9 with its read already back; step 2 runs 9-15, its read back
    # at 11.6. Wall 15 s against Strong-only's 3·(6 + 2) = 24 s; every read's latency saved.
    t = task(["read"] * 3)
    r = run1(t, "speculative-actions", spec_hit_rate=1.0, tool_latency=Latency(2.0), options=IN_TIME)
    assert r["wall_s"] == pytest.approx(15.0)
    assert r["strong_calls"] == 3 and r["weak_calls"] == 3 and r["spec_hits"] == 3
    assert r["tool_s_saved"] == pytest.approx(6.0) and r["spec_wasted_strong_calls"] == 0
    so = run1(t, "strong-only", tool_latency=Latency(2.0))
    assert so["wall_s"] == pytest.approx(24.0)


def test_speculative_actions_misses_cost_strong_calls():
    # Every guess wrong: each read's speculative pre-execution is wasted and so is the strong
    # call started on it (two of three steps have a successor): 3 + 2 strong calls.
    t = task(["read"] * 3)
    r = run1(t, "speculative-actions", spec_hit_rate=0.0, tool_latency=Latency(2.0), options=IN_TIME)
    assert r["strong_calls"] == 5 and r["spec_wasted_strong_calls"] == 2
    assert r["spec_hits"] == 0 and r["spec_wasted_tools"] == 3 and r["tool_s_saved"] == 0
    assert r["committed_steps"] == 3


def test_speculative_actions_never_pre_executes_writes():
    t = task(["write", "respond", "write"])
    for opts in (IN_TIME, EVERY_STEP):
        r = run1(t, "speculative-actions", spec_hit_rate=1.0, tool_latency=Latency(2.0), options=opts)
        assert r["spec_hits"] == 0 and r["strong_calls"] == 3 and r["weak_calls"] == 3
        assert r["tool_s"] == pytest.approx(4.0)


def test_speculative_actions_at_every_step_waste_every_miss():
    # The paper's general framework: the actor is also called on the guessed state after a write
    # (its result predicted, not executed), and the step waits for both. A write then a read:
    # a miss wastes that speculative call (3 strong calls); "in-time" never speculates past a
    # write (2). After a message the next state is the user's: no speculation either way.
    t = task(["write", "read"])
    miss = run1(t, "speculative-actions", spec_hit_rate=0.0, tool_latency=Latency(2.0), options=EVERY_STEP)
    # (a speculative step has its own guess too: 3 weak calls)
    assert miss["strong_calls"] == 3 and miss["spec_wasted_strong_calls"] == 1 and miss["weak_calls"] == 3
    late = run1(t, "speculative-actions", spec_hit_rate=0.0, tool_latency=Latency(2.0), options=IN_TIME)
    assert late["strong_calls"] == 2 and late["spec_wasted_strong_calls"] == 0
    # A hit: step 1's call started on the guessed state when the guess was out (0.6 s) and is
    # adopted; the write's own call ends at 6 s and its tool at 8 s, while step 1 (joining the
    # replica's batch at its next iteration boundary, 1 s) is done long before: wall < 2 steps.
    hit = run1(t, "speculative-actions", spec_hit_rate=1.0, tool_latency=Latency(2.0), options=EVERY_STEP)
    assert hit["strong_calls"] == 2 and hit["spec_wasted_strong_calls"] == 0
    assert hit["wall_s"] < late["wall_s"]
    msg = run1(task(["respond", "read"]), "speculative-actions", spec_hit_rate=0.0, options=EVERY_STEP)
    assert msg["strong_calls"] == 2 and msg["spec_wasted_strong_calls"] == 0


def test_speculative_actions_at_user_turns_hand_computed():
    # The public tau-bench code (the default): after each message to the user the weak model
    # guesses the reply and the actor runs the next tool steps on it, executing them, until it
    # answers with a message, which is discarded. Steps: read, respond, read, write, respond,
    # final (d = 5, o = 3, initial context 2, so H[j] = 2 + 8j before step j).
    t = task(["read", "respond", "read", "write", "respond", "final"])
    r = run1(t, "speculative-actions")
    # After step 1: the actor runs 2 and 3 (kept) and answers 4 (discarded); after step 4 it
    # answers the guessed reply like step 5 (discarded); none after the closing message.
    assert r["strong_calls"] == 6 + 2 and r["spec_wasted_strong_calls"] == 2
    assert r["weak_calls"] == 2 and r["spec_calls"] == 2 and r["committed_steps"] == 6
    # Prefill: steps 0, 1 (2, 3); the background 2, 3, 4 (3 each); step 4 again from the user's
    # reply on, 3 + 2·(5 + 3) = 19 (the cache broke at the guess); the background answer to
    # step 4's reply and step 5 (3 each). The guesser reads its instruction and the conversation
    # only: 117 + step 1's message (5); then step 1's reply and step 4's message (3 + 5).
    assert r["strong_prefill_tokens"] == 2 + 3 + 3 * 3 + 19 + 3 + 3
    assert r["weak_prefill_tokens"] == (117 + 5) + (3 + 5) and r["weak_decode_tokens"] == 3 + 3
    # Time on the ideal devices (1 and 0.1 s per iteration, a call 1 + 5 iterations, a guess
    # 1 + 3): steps 0, 1 to 12 s; guess to 12.4, the background's three calls to 30.4 (the
    # loop waits 18.4 s); step 4 to 36.4; guess and one call to 42.8 (6.4 s); step 5 to 48.8.
    assert r["wall_s"] == pytest.approx(48.8)
    assert r["spec_wait_s"] == pytest.approx(18.4 + 6.4)
    assert run1(t, "strong-only")["wall_s"] == pytest.approx(36.0)
    # The user takes 2 s to reply, to the real messages and to the background's answers too:
    # step 1's reply 12-14 while the background runs to 30.4 and its answer's reply to 32.4;
    # step 4 32.4-38.4, its reply to 40.4, the background's call to 44.8 and its reply to 46.8;
    # step 5 to 52.8. Strong-only: 36 s and two replies.
    slow = run1(t, "speculative-actions", user_latency=Latency(2.0))
    assert slow["wall_s"] == pytest.approx(52.8) and slow["spec_wait_s"] == pytest.approx(18.4 + 6.4)
    assert run1(t, "strong-only", user_latency=Latency(2.0))["wall_s"] == pytest.approx(40.0)


def test_speculative_actions_at_user_turns_options():
    t = task(["read", "respond", "read", "write", "respond", "final"])
    # --guesser-check: kept only on a hit. Every guess wrong: all 4 background calls wasted, the
    # actor reruns steps 2 and 3, and the write executed on the wrong guess is irreversible.
    miss = run1(t, "speculative-actions", spec_hit_rate=0.0, options=(("adopt", "on-hit"),))
    assert miss["strong_calls"] == 6 + 4 and miss["spec_wasted_strong_calls"] == 4
    assert miss["spec_wasted_tools"] == 2 and miss["irreversible_errors"] == 1 and miss["spec_hits"] == 0
    hit = run1(t, "speculative-actions", spec_hit_rate=1.0, options=(("adopt", "on-hit"),))
    assert hit["strong_calls"] == 8 and hit["irreversible_errors"] == 0 and hit["spec_hits"] == 2
    # Kept whatever the guess (the code's default): a wrong guess's write still reaches the world.
    assert run1(t, "speculative-actions", spec_hit_rate=0.0)["irreversible_errors"] == 1
    # At most spec_depth tool steps: with 1, the background runs step 2 only and answers nothing.
    one = run1(t, "speculative-actions", options=(("spec_depth", 1),))
    assert one["strong_calls"] == 6 + 1 and one["spec_wasted_strong_calls"] == 1
    # After the closing message too: one more guess and one more discarded answer, costed, while
    # the task is over for its user when the closing message is out.
    fin = run1(t, "speculative-actions", options=(("final_speculation", True),))
    assert fin["strong_calls"] == 9 and fin["weak_calls"] == 3 and fin["spec_wasted_strong_calls"] == 3
    assert fin["wall_s"] == pytest.approx(run1(t, "speculative-actions")["wall_s"])


@pytest.mark.parametrize("trace", ["tau2-airline", "tau2-retail"])
def test_speculative_actions_extra_calls_are_the_turns_the_actor_answered(trace):
    """On a shipped trace, the default's extra strong calls are, exactly, the messages to the
    user after which the actor answers again within 5 tool-calling turns (counted from the calls)."""
    from costsim.traces import load

    tasks = [t for t in load(trace).tasks if t.steps]
    expected = 0
    for t in tasks:
        kinds = [s.kind for s in t.calls]  # the actor's model calls: max_num_steps counts its turns
        for j, k in enumerate(kinds):
            if k == "respond":
                run = next((n for n, k2 in enumerate(kinds[j + 1:]) if k2 not in ("read", "write")), len(kinds) - j - 1)
                expected += run < 5
    rows = simulate(tasks, Scenario(strong=ideal(1.0), weak=ideal(0.1), p=0.85,
                                    protocols=("strong-only", "speculative-actions")))
    so = sum(r["strong_calls"] for r in rows if r["protocol"] == "strong-only")
    sa = sum(r["strong_calls"] for r in rows if r["protocol"] == "speculative-actions")
    assert sa - so == expected > 0


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


def test_the_default_chunking_is_the_papers_rule_as_written():
    """The default is the paper's text, not a fit: a chunk ends at its first write (held and
    reviewed) or at K reads (committed unreviewed); messages are sent, drafting goes on; the
    final answer is not held. On the shipped traces it commits at least 5 steps (model calls)
    per review, and a review judges more than a lone held step."""
    from costsim.paper import chunking_ratios
    from costsim.protocols.chunking import DEFAULT_CHUNKING, chunk_end

    assert DEFAULT_CHUNKING == "writes-only"
    assert chunk_end("write", 2, 6) == ("write", True, True)     # held, reviewed with the reads before it
    assert chunk_end("read", 6, 6) == ("K", False, False)        # K reads: committed unreviewed
    assert chunk_end("respond", 2, 6, messages=1) == (None, False, False)  # sent; drafting goes on
    assert chunk_end("final", 3, 6, messages=1)[1] is False      # the final answer is not held
    table = chunking_ratios()
    for trace, rules in table.items():
        r = rules[DEFAULT_CHUNKING]
        assert r["steps_per_review"] >= 5 and r["reviewed_chunk_steps"] > 1.5, (trace, r)
    # The rules order as their definitions say: holding every message reviews most, letting
    # messages pass without review fewest beyond messages-end.
    for rules in table.values():
        calls = {k: v["strong_calls_ratio"] for k, v in rules.items()}
        assert calls["messages-end"] < calls["writes-only"] < calls["messages-pass"]
        assert calls["messages-end"] < calls["writes+final"] < calls["hold-messages"]


def test_agentcollab_default_stall_rate_is_the_fit_to_the_paper():
    from costsim.paper import agentcollab_calls_ratio, fit_agentcollab_stall
    from costsim.protocols.agentcollab import STALL_P

    assert fit_agentcollab_stall() == pytest.approx(STALL_P, abs=0.002)
    assert agentcollab_calls_ratio(STALL_P) == pytest.approx(18.5 / 13.8, rel=0.02)
    # More stalls, more strong calls (each escalation hands the strong model a longer span).
    assert agentcollab_calls_ratio(0.1) < agentcollab_calls_ratio(0.3) < agentcollab_calls_ratio(0.6)


def test_paper_orderings_of_strong_calls_on_the_tau2_traces():
    """Speculative Actions > Strong-only > SpecAgent in strong calls (the paper's baselines
    paragraph) at default settings, on both traces, and AgentCollab > Strong-only. AgentCollab >
    Speculative Actions, the paper's too, does not hold, and nothing is tuned to make it: AgentCollab
    is fitted to the paper's ratio (1.34x), while Speculative Actions, fitted to nothing, adds
    within 25% of the paper's extra strong calls per task (17.4 - 13.8 = 3.6 on Airline) to a
    recorded agent that makes fewer calls a task than the paper's (9.34 against 13.8), so its
    ratio is higher (docs/protocols.md)."""
    from costsim.paper import published
    from costsim.sizing import deployments
    from costsim.metrics import summarize
    from costsim.scenario import Scenario
    from costsim.sim import simulate
    from costsim.traces import load

    s, w = deployments()
    names = ("strong-only", "specagent", "agentcollab", "speculative-actions")
    for trace in ("tau2-airline", "tau2-retail"):
        tasks = [t for t in load(trace).tasks if t.steps]
        res = summarize(simulate(tasks, Scenario(strong=s, weak=w, p=0.85, protocols=names)))
        calls = {n: res[n]["strong_calls_ratio"]["mean"] for n in names}
        assert calls["speculative-actions"] > calls["strong-only"] > calls["specagent"], calls
        assert calls["agentcollab"] > calls["strong-only"], calls
        if trace == "tau2-airline":
            b = published()["benchmark"]["Airline"]
            extra = res["speculative-actions"]["strong_calls_per_task"]["mean"] - res["strong-only"]["strong_calls_per_task"]["mean"]
            assert extra == pytest.approx(b["speculative_actions_calls"] - b["strong_only_calls"], rel=0.25)
            assert res["strong-only"]["strong_calls_per_task"]["mean"] == pytest.approx(9.34)
            assert calls["agentcollab"] < calls["speculative-actions"]  # said above: it would fail loudly if it changed
        assert res["specagent"]["hbm_ratio"]["ci95"][1] < 1.0


def test_in_the_papers_regime_every_ordering_holds_including_wall_time():
    """Memory-bound ideal devices with kappa = 0.3 (docs/protocols.md): SpecAgent below
    Strong-only in HBM and wall; AgentCollab and Speculative Actions above Strong-only in strong
    calls (their order: test_paper_orderings_of_strong_calls_on_the_tau2_traces)."""
    from costsim.traces import load

    tasks = [t for t in load("tau2-airline").tasks if t.steps]
    names = ("strong-only", "specagent", "agentcollab", "speculative-actions")
    res = summarize(simulate(tasks, Scenario(strong=ideal(0.1), weak=ideal(0.03), p=0.85, protocols=names)))
    calls = {n: res[n]["strong_calls_ratio"]["mean"] for n in names}
    assert min(calls["agentcollab"], calls["speculative-actions"]) > 1.0 > calls["specagent"]
    for m in ("hbm_ratio", "wall_ratio"):
        assert res["specagent"][m]["ci95"][1] < 0.45
    assert res["speculative-actions"]["hbm_ratio"]["mean"] > 1.0


def test_step_scales_set_each_models_decoded_tokens_per_step_it_authors():
    t = task(["read", "read", "write", "final"], d=10)
    # p = 1: every draft accepted, so SpecAgent's strong model decodes verdicts only.
    rows = simulate([t], Scenario(strong=ideal(1.0), weak=ideal(0.1), p=1.0, strong_step_scale=2.5,
                                  weak_step_scale=0.5, protocols=("strong-only", "weak-only", "specagent",
                                                                  "agentcollab", "speculative-actions"),
                                  escalate_p=0.0, spec_hit_rate=0.0))
    so, wo, sa, ac, spec = rows
    assert so["strong_decode_tokens"] == 4 * 25 and wo["weak_decode_tokens"] == 4 * 5
    # The thinking leaves the history: the next step prefills only the observation.
    assert so["strong_prefill_tokens"] == wo["weak_prefill_tokens"]
    # SpecAgent: reads drafted and executed, the write held and reviewed, the final held too
    # (writes+final): two reviews, 24-token verdicts; the weak drafts decode 5 tokens a step.
    assert sa["weak_decode_tokens"] == 4 * 5 and sa["strong_decode_tokens"] == sa["reviews"] * 24
    # AgentCollab, no stalls: weak acts (5) and reflects (16) every step.
    assert ac["weak_decode_tokens"] == 4 * (5 + 16) and ac["strong_calls"] == 0
    # Speculative Actions: the actor decodes 25 a step, the guesser 5.
    assert spec["strong_decode_tokens"] >= 4 * 25 and spec["weak_decode_tokens"] == spec["spec_calls"] * 5


def test_rho_is_the_repair_in_strong_steps_everywhere():
    # One meaning of --rho (predict's, the paper's): a repair of rho strong steps, each decoding
    # the strong step scale per recorded token, whether rho is given or not. Before, simulate's
    # rho was tokens per recorded token, following the scale only by default: at scale 3,
    # --rho 1 decoded 10 tokens here (a third of a strong step) and the default 30.
    assert Scenario(strong=ideal(1.0), weak=ideal(0.1), strong_step_scale=2.0).rho == 1.0
    t = task(["write"], d=10)  # p = 0: the held write is rejected and repaired (fused)
    assert run1(t, "specagent", p=0.0, strong_step_scale=3.0)["strong_decode_tokens"] == 24 + 30
    assert run1(t, "specagent", p=0.0, strong_step_scale=3.0, rho=1.0)["strong_decode_tokens"] == 24 + 30
    assert run1(t, "specagent", p=0.0, strong_step_scale=3.0, rho=1.5)["strong_decode_tokens"] == 24 + 45
    # predict agrees: its rho is the same at any scale, and its repair costs rho strong steps.
    from costsim.api import predict

    at = {rho: predict(0.8, 6, strong_step_scale=2.47, rho=rho).to_dict() for rho in (None, 1.0, 2.0)}
    assert at[None]["rho"] == at[1.0]["rho"] == 1.0 and at[None]["R"] == at[1.0]["R"] < at[2.0]["R"]
    # and the roofline's rho in time: a repair of one strong step costs about one strong step at
    # any scale (the decode of 2x the tokens against a strong step's 2x), not 2 (scaled twice)
    from costsim import roofline
    from costsim.sizing import deployments

    s, w = deployments()
    for scale in (1.0, 2.0):
        pp = roofline.protocol_parameters(s, w, [6], 340, 175, 24, 1.0, 7720, strong_step_scale=scale)
        assert 0.9 < pp.rho["time"] < 1.0


def test_a_cascade_traces_step_tokens_per_model_become_the_step_scales():
    from costsim.scenario import build_scenario
    from costsim.sizing import deployments

    s, w = deployments()
    steps = tuple(Step(kind="read", output_tokens=o, observation_tokens=3, context_tokens=50, model=m)
                  for o, m in ((100, "Qwen/Qwen3.5-4B"), (100, "Qwen/Qwen3.5-4B"), (100, "Qwen/Qwen3.5-4B"),
                               (300, "Qwen/Qwen3.5-397B-A17B-FP8")))
    tasks = [Task("c", steps)]  # mean 150 tokens a step; the weak model's 100, the strong's 300
    sc = build_scenario({"protocols": "strong-only,weak-only"}, tasks)
    # rho stays one strong step: a repair scales with the strong step (formulas.repair_decode_scale)
    assert (sc.strong_step_scale, sc.weak_step_scale, sc.rho) == pytest.approx((2.0, 2 / 3, 1.0))
    assert "Qwen3.5-4B 100" in sc.step_scale_source and "all 150" in sc.step_scale_source
    so, wo = simulate(tasks, sc)
    # Over the trace each model decodes its own recorded tokens, 4 steps x 300 and 4 x 100,
    # up to rounding each step's tokens (at most half a token a step).
    assert so["strong_decode_tokens"] == pytest.approx(1200, abs=2) and wo["weak_decode_tokens"] == pytest.approx(400, abs=2)
    # Flags win; a trace naming other models, or one model, leaves the recorded tokens.
    assert build_scenario({"strong_step_scale": 1.5}, tasks).weak_step_scale == 1.0
    other = [Task("o", tuple(Step(kind="read", output_tokens=10, model=m) for m in ("gpt-4.1", "gpt-4.1-mini")))]
    assert build_scenario({}, other).strong_step_scale == 1.0
    assert build_scenario({}, [Task("one", steps[:3])]).step_scale_source == ""
    with pytest.raises(ValueError, match="strong-step-scale"):
        build_scenario({"strong_step_scale": 0})


def test_the_papers_wall_implies_a_thinking_strong_model():
    """The strong/weak tokens-per-step ratio at which SpecAgent's wall on Airline is the
    paper's 0.41 under the default deployments: above 1 (at 1 the wall is above the paper's:
    0.62 and 1.6x under the engine profiles of 2026-12-02), and it does hit the target."""
    from costsim.paper import implied_strong_step_scale

    out = implied_strong_step_scale()
    assert out["wall_at_1"] > out["target_wall"] + 0.1 and 1.2 < out["scale"] < 5.0


def test_speculative_actions_books_only_the_latency_it_really_saved():
    # A read whose guessed result comes back after the actor decided: the saving is the head
    # start of the guess, not the whole latency; a miss with nothing run ahead waits for nothing.
    # (a weak step of 0.5 s per iteration: the guess is out at 3 s, its read back at 8 s, the
    # actor decides at 6 s, so 3 of the read's 5 s are saved)
    t, kw = task(["read", "final"]), dict(weak=ideal(0.5), tool_latency=Latency(5.0))
    so = run1(t, "strong-only", **kw)
    hit = run1(t, "speculative-actions", spec_hit_rate=1.0, options=(("lookahead", False), *EVERY_STEP), **kw)
    assert hit["tool_s_saved"] == pytest.approx(so["wall_s"] - hit["wall_s"], abs=1e-9)
    assert hit["tool_s_saved"] == pytest.approx(3.0)
    miss = run1(t, "speculative-actions", spec_hit_rate=0.0, options=(("lookahead", False), *EVERY_STEP), **kw)
    assert miss["wall_s"] == pytest.approx(so["wall_s"])

"""Chunk lengths SpecAgent would see, tokens and context growth, on tiny hand-made traces."""

import pytest

from costsim.traces import Step, Task
from costsim.protocols.chunking import chunks, trace_stats


def S(kind, ctx=-1, out=1, obs=0, model="", dur=None, tool=""):
    return Step(kind=kind, output_tokens=out, observation_tokens=obs, context_tokens=ctx,
                model=model, duration_s=dur, tool=tool)


# read read read | read write | respond | read write | read read final   (K = 3)
TINY = [S("read"), S("read"), S("read"), S("read"), S("write"), S("respond"),
        S("read"), S("write"), S("read"), S("read"), S("final")]


@pytest.mark.parametrize("rule,want", [
    ("messages-end", [(3, False, "K"), (2, True, "write"), (1, False, "response"), (2, True, "write"), (3, False, "response")]),
    ("writes+final", [(3, False, "K"), (2, True, "write"), (1, False, "response"), (2, True, "write"), (3, True, "response")]),
    ("hold-messages", [(3, False, "K"), (2, True, "write"), (1, True, "response"), (2, True, "write"), (3, True, "response")]),
    # A message is sent and drafting goes on: it joins the next write's chunk, which is reviewed.
    ("messages-pass", [(3, False, "K"), (2, True, "write"), (3, True, "write"), (3, True, "response")]),
    ("writes-only", [(3, False, "K"), (2, True, "write"), (3, True, "write"), (3, False, "response")]),
])
def test_chunking_rules(rule, want):
    assert [(c.length, c.reviewed, c.end) for c in chunks(TINY, K=3, chunking=rule)] == want


def test_passing_messages_get_a_chunk_reviewed_only_under_messages_pass():
    steps = [S("respond"), S("read"), S("read"), S("read"), S("respond")]
    assert [(c.length, c.reviewed, c.end) for c in chunks(steps, K=3, chunking="messages-pass")] == [
        (3, True, "K"), (2, True, "end")]
    assert [(c.length, c.reviewed) for c in chunks(steps, K=3, chunking="writes-only")] == [(3, False), (2, False)]
    assert [(c.length, c.reviewed) for c in chunks([S("read")] * 4, K=3, chunking="messages-pass")] == [
        (3, False), (1, False)]


def test_chunk_edge_cases():
    assert [(c.length, c.end) for c in chunks([S("read")] * 5, K=2)] == [(2, "K"), (2, "K"), (1, "end")]
    assert [c.length for c in chunks(TINY, K=1)] == [1] * len(TINY)
    assert chunks([], K=6) == []
    # K-1 reads then a write: a reviewed chunk of length K (lengths never exceed K)
    assert [(c.length, c.reviewed) for c in chunks([S("read")] * 5 + [S("write")], K=6)] == [(6, True)]
    with pytest.raises(ValueError, match="K must be an integer in \\[1, 1024\\]"):
        chunks(TINY, K=0)
    with pytest.raises(ValueError, match="chunking must be one of messages-end, messages-pass"):
        chunks(TINY, chunking="everything")


def test_distribution_and_reviews():
    s = trace_stats([Task("a", tuple(TINY)), Task("b", (S("write"),))], K=3, chunking="messages-end")
    c = s["chunk_lengths"]
    assert c["reviewed"] == [1, 2, 0] and c["unreviewed"] == [1, 0, 2]
    assert c["ends"] == {"write": 3, "response": 2, "K": 1, "end": 0}
    assert c["pmf_reviewed"] == [1 / 6, 2 / 6, 0] and sum(c["pmf_reviewed"] + c["pmf_unreviewed"]) == 1
    assert c["mean_length"] == 12 / 6
    assert [r["reviews"] for r in s["per_task"]] == [2, 1]
    assert s["reviews_per_task"] == {"mean": 1.5, "min": 1, "max": 2}
    assert s["calls_per_review"] == 12 / 3 and s["calls"] == s["steps"] == 12  # one call a step: none share one
    assert s["kinds"] == {"read": 7, "write": 3, "respond": 1, "final": 1}


def test_tokens_context_growth_and_models():
    steps = (S("read", ctx=100, out=10, obs=40, model="w", dur=1.0),
             S("write", ctx=150, out=20, obs=5, model="w", dur=3.0),
             S("final", ctx=300, out=30, obs=2, model="s"))
    s = trace_stats([Task("a", steps), Task("b", (S("final"),))], K=6)
    a = s["per_task"][0]
    assert a["tokens"] == {"prompt": 550, "completion": 60, "observation": 47}
    assert (a["context_first"], a["context_last"], a["context_growth_per_step"]) == (100, 300, 100.0)
    assert s["per_task"][1]["context_growth_per_step"] is None  # context unknown
    assert s["mean_context_growth_per_step"] == 100.0
    assert s["models"]["w"] == {"steps": 2, "output_tokens": 30, "timed_steps": 2, "duration_s": 4.0,
                                "mean_duration_s": 2.0, "output_tokens_per_s": 7.5}
    assert s["models"]["s"]["mean_duration_s"] is None and s["verdict_fit"] is None


def test_verdicts_are_fitted_when_present():
    steps = tuple(Step("read", 1, verdict=v) for v in (True, True, False, True))
    f = trace_stats([Task("a", steps)])["verdict_fit"]["pooled"]
    assert (f["passes"], f["failures"], f["p_hat"]) == (3, 1, 0.75)


def test_tool_latency_median_of_an_even_count_is_the_middle_pair_s_mean():
    from costsim.traces.stats import tool_latency_stats

    steps = [Step("read", 10, tool="a", tool_duration_s=x) for x in (0.5, 0.2, 0.9, 0.4)]
    s = tool_latency_stats(steps)
    assert s["median_s"] == pytest.approx((0.4 + 0.5) / 2) == s["by_tool"]["a"]["median_s"]
    assert s["mean_s"] == pytest.approx(0.5)


def test_steps_that_decode_nothing_have_no_step_shape():
    from costsim.traces.stats import step_shape

    with pytest.raises(ValueError, match="decode no tokens"):
        step_shape([Task("t", (Step("respond", 0), Step("final", 0)))])
    assert step_shape([Task("t", (Step("respond", 0), Step("final", 4)))])[0] == 2.0


def test_the_synthetic_shape_draws_what_its_docstring_says():
    """costsim.traces.synthetic: 13.5 steps a task, 5.8 reads, 1.1 writes, 5.6 messages and the
    final (tolerances: about 3 standard errors of a mean over 5,000 Poisson-like tasks)."""
    from collections import Counter

    from costsim.traces.synthetic import generate

    tasks = generate(5000, seed=1)
    kinds = Counter(s.kind for t in tasks for s in t.steps)
    per = {k: v / 5000 for k, v in kinds.items()}
    assert sum(per.values()) == pytest.approx(13.5, abs=0.15)
    assert per["read"] == pytest.approx(5.8, abs=0.15) and per["write"] == pytest.approx(1.1, abs=0.1)
    assert per["respond"] == pytest.approx(5.6, abs=0.15) and per["final"] == 1.0

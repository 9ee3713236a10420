"""The shipped tau² traces: step counts by kind checked against the raw result files.

The counts are taken here with simple code straight from the raw JSON (not through the
importer), and the totals were verified by hand from the tool-call tallies of each file:
Airline 371 tool calls, of which 61 writes (update_reservation_flights 22,
transfer_to_human_agents 18, cancel 6, book 6, baggages 6, passengers 3), and 300 assistant
text messages, of which 50 scripted greetings and 50 last messages; Retail 873 tool calls, of
which 182 writes (return 42, modify items 41, exchange 30, cancel 24, modify address 22,
transfer 12, modify user address 9, payment 2), and 520 text messages, 114 greetings and 114 last.
"""

import json
from collections import Counter
from pathlib import Path

import pytest

from costsim.cli.main import main as _main
from costsim.traces import load, shipped
from costsim.protocols.chunking import trace_stats

RAW = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau2"
FILES = {
    "tau2-airline": ("airline_claude-sonnet-4-5.json", {"read": 310, "write": 61, "respond": 200, "final": 50}, 50),
    "tau2-retail": ("retail_gpt-5_toolorchestra.json", {"read": 691, "write": 182, "respond": 292, "final": 114}, 114),
}
READ_TOOLS = {  # tau²-Bench's READ declarations plus the pure `calculate`
    "get_reservation_details", "get_user_details", "list_all_airports", "search_direct_flight",
    "search_onestop_flight", "get_flight_status", "find_user_id_by_name_zip",
    "find_user_id_by_email", "get_order_details", "get_product_details", "get_item_details",
    "list_all_product_types", "calculate",
}
needs_raw = pytest.mark.skipif(not RAW.is_dir(), reason="shared/data/tau2 not beside the checkout")


def main(argv):
    try:
        return _main(argv)
    except SystemExit as e:  # typer exits on success
        return e.code


def raw_counts(path):
    """Per simulation: Counter of kinds, counted directly from the raw messages."""
    out = {}
    for sim in json.loads(path.read_text())["simulations"]:
        agent = [m for m in sim["messages"][1:] if m["role"] == "assistant"]  # [0] is the greeting
        c = Counter()
        for pos, m in enumerate(agent):
            if m["tool_calls"]:
                for call in m["tool_calls"]:
                    c["read" if call["name"] in READ_TOOLS else "write"] += 1
            elif pos == len(agent) - 1:
                c["final"] += 1
            else:
                c["respond"] += 1
        out[sim["task_id"]] = c
    return out


def test_shipped_names():
    assert {"tau2-airline", "tau2-retail"} <= set(shipped())


@pytest.mark.parametrize("name", FILES)
def test_shipped_counts_by_kind(name):
    _, expected, n_tasks = FILES[name]
    res = load(name, strict=True)
    s = trace_stats(res.tasks)
    assert s["tasks"] == n_tasks
    assert s["kinds"] == expected
    assert res.header["schema_version"] == 1 and res.header["tools_defaulted_to_write"] == {}


@needs_raw
@pytest.mark.parametrize("name", FILES)
def test_shipped_matches_raw_file_per_task(name):
    raw_name, expected, _ = FILES[name]
    raw = raw_counts(RAW / raw_name)
    assert sum(raw.values(), Counter()) == Counter(expected)
    for t in load(name).tasks:
        assert Counter(s.kind for s in t.steps) == raw[t.task_id], t.task_id


@needs_raw
@pytest.mark.parametrize("name", FILES)
def test_shipped_file_is_what_the_importer_makes(name, tmp_path, capsys):
    raw_name = FILES[name][0]
    out = tmp_path / f"{name}.jsonl"
    assert main(["traces", "import", "tau2", str(RAW / raw_name), "-o", str(out)]) == 0
    shipped_text = (Path(__file__).resolve().parents[1] / "traces" / f"{name}.jsonl").read_text()
    assert out.read_text() == shipped_text


def test_airline_measured_tokens_first_task():
    """Task 13 of Airline, checked by hand against the raw file: the first agent call has
    usage prompt 5730 / completion 157; the user's reply (71 chars) is ceil(71/4) = 18."""
    t = {t.task_id: t for t in load("tau2-airline").tasks}["13"]
    first = t.steps[0]
    assert (first.kind, first.context_tokens, first.output_tokens, first.observation_tokens) == (
        "respond", 5730, 157, 18)
    assert first.model == "claude-sonnet-4-5-20250929"
    assert first.estimated_fields == ("observation_tokens", "duration_s")
    assert first.duration_s == pytest.approx(5.713914)  # 07:35:07.331176 - 07:35:01.617262
    assert [s.kind for s in t.steps] == ["respond", "read", "respond", "write", "final"]
    assert t.steps[3].tool == "transfer_to_human_agents" and t.reward == 1.0


def test_airline_chunk_lengths_K6():
    """The Airline trace's chunks of model calls at K = 6 when messages end the chunk: 250
    messages and 52 calls that issue a write end one each (61 writes in 52 calls: the raw
    file's tallies, test_shipped_calls_are_the_raw_files_agent_calls), three reach K."""
    c = trace_stats(load("tau2-airline").tasks, K=6, chunking="messages-end")["chunk_lengths"]
    assert c["reviewed"] == [50, 0, 0, 1, 1, 0]
    assert c["unreviewed"] == [172, 41, 22, 7, 6, 5]
    assert c["ends"] == {"write": 52, "response": 250, "K": 3, "end": 0}
    assert sum(i * (r + u) for i, (r, u) in enumerate(zip(c["reviewed"], c["unreviewed"]), 1)) == 467


@needs_raw
@pytest.mark.parametrize("name,calls,writing", [("tau2-airline", 467, 52), ("tau2-retail", 1027, 160)])
def test_shipped_calls_are_the_raw_files_agent_calls(name, calls, writing):
    # Counted straight from the raw messages: every agent message but the scripted greeting is one
    # model call; those whose tool calls include a write are held whole.
    sims = json.loads((RAW / FILES[name][0]).read_text())["simulations"]
    agent = [m for s in sims for m in s["messages"][1:] if m["role"] == "assistant"]
    assert len(agent) == calls
    assert sum(any(c["name"] not in READ_TOOLS for c in m["tool_calls"] or ()) for m in agent) == writing
    tasks = load(name).tasks
    assert sum(len(t.calls) for t in tasks) == calls
    assert sum(s.kind == "write" for t in tasks for s in t.calls) == writing


@needs_raw
def test_the_workload_defaults_are_the_recorded_airline_runs_typical_step():
    # config.WORKLOAD_SOURCES says where 418 / 181 / 8,219 come from: the raw run's agent calls,
    # by the typical-step rule every command applies to a trace (traces.stats.step_shape).
    import math

    from costsim.config import WORKLOAD
    from costsim.traces import load
    from costsim.traces.stats import step_shape

    sims = json.loads((RAW / FILES["tau2-airline"][0]).read_text())["simulations"]
    calls = [m["usage"] for s in sims for m in s["messages"] if m["role"] == "assistant" and m.get("usage")]
    tools = [math.ceil(len(m.get("content") or "") / 4) for s in sims for m in s["messages"] if m["role"] == "tool"]
    assert len(calls) == 467 and len(tools) == 371
    # what comes back after an agent call: tool results and the user's replies (not the opening turn)
    obs = 0
    for s in sims:
        called = False
        for m in s["messages"]:
            called = called or (m["role"] == "assistant" and bool(m.get("usage")))
            if called and m["role"] in ("tool", "user"):
                obs += math.ceil(len(m.get("content") or "") / 4)
    n = len(calls)
    assert round(sum(c["completion_tokens"] for c in calls) / n) == WORKLOAD.step_tokens
    assert round(sum(c["prompt_tokens"] for c in calls) / n) == WORKLOAD.context_tokens
    assert round(obs / n) == WORKLOAD.obs_tokens
    # the imported trace gives the same typical step through the one rule
    shape = step_shape(load("tau2-airline").tasks)
    assert [round(x) for x in shape] == [WORKLOAD.step_tokens, WORKLOAD.obs_tokens, WORKLOAD.context_tokens]

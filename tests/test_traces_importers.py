"""Importers: tau²-Bench results (all shapes), OpenAI chat logs, tool-kind tables; fuzzing."""

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costsim.traces import TraceError, dumps_jsonl, parse_jsonl
from costsim.traces.convert import apportion, estimate_tokens
from costsim.traces.openai import import_openai, import_openai_text
from costsim.traces.tau2 import import_tau2
from costsim.traces.tools import load_tool_kinds


def tc(name, args, id_):
    return {"id": id_, "name": name, "arguments": args, "requestor": "assistant"}


def sim(task_id="7", trial=0):
    """A small tau²-shaped simulation; every number below is chosen to check by hand."""
    return {
        "task_id": task_id, "trial": trial, "reward_info": {"reward": 1.0},
        "messages": [
            {"role": "assistant", "content": "Hi! How can I help you today?", "tool_calls": None},
            {"role": "user", "content": "cancel order 12", "timestamp": "2025-01-01T00:00:00"},  # 15 chars
            {"role": "assistant", "content": None, "timestamp": "2025-01-01T00:00:02.5",
             "tool_calls": [tc("get_order_details", {"id": "12"}, "c1"), tc("frobnicate", {}, "c2")],
             "usage": {"prompt_tokens": 1000, "completion_tokens": 10},
             "raw_data": {"model": "m-1"}},
            {"role": "tool", "id": "c2", "content": "x" * 9},  # 3 tokens, answered out of order
            {"role": "tool", "id": "c1", "content": "y" * 40},  # 10 tokens
            {"role": "assistant", "content": "Sure?", "tool_calls": None,
             "usage": {"prompt_tokens": 1030, "completion_tokens": 4}, "generation_time_seconds": 1.5},
            {"role": "user", "content": "yes"},
            {"role": "assistant", "content": None,
             "tool_calls": [tc("cancel_pending_order", {"id": "12"}, "c3")],
             "usage": {"prompt_tokens": 1050, "completion_tokens": 7}},
            {"role": "tool", "id": "c3", "content": "ok"},
            {"role": "assistant", "content": "Done.", "tool_calls": None},
            {"role": "user", "content": "###STOP###"},
        ],
    }


def test_tau2_steps_by_hand():
    r = import_tau2({"info": {"environment_info": {"domain_name": "retail", "policy": "p" * 400}},
                     "simulations": [sim()]}, strict=True)
    (t,) = r.tasks
    assert [(s.kind, s.tool) for s in t.steps] == [
        ("read", "get_order_details"), ("write", "frobnicate"), ("respond", ""),
        ("write", "cancel_pending_order"), ("final", "")]
    assert r.defaulted_tools == {"frobnicate": 1}
    a, b, resp, w, fin = t.steps
    # 10 completion tokens shared by estimated call lengths: get_order_details{"id":"12"} is
    # 28 chars -> 7 tokens, frobnicate{} 12 chars -> 3 tokens: shares 7 and 3.
    assert (a.output_tokens, b.output_tokens) == (7, 3)
    assert (a.context_tokens, b.context_tokens) == (1000, 1007)  # the second call sees the first
    assert (a.observation_tokens, b.observation_tokens) == (10, 3)  # matched by id
    assert a.duration_s == pytest.approx(2.5 * 0.7) and "duration_s" in a.estimated_fields
    assert (a.model, resp.model) == ("m-1", "")
    assert (resp.output_tokens, resp.observation_tokens, resp.context_tokens) == (4, 1, 1030)
    assert resp.duration_s == 1.5 and resp.estimated_fields == ("observation_tokens",)
    assert (w.output_tokens, w.observation_tokens) == (7, 1)
    # the last message has no usage: estimates; context = policy 100 + every earlier message
    assert fin.output_tokens == estimate_tokens("Done.") == 2
    assert fin.observation_tokens == estimate_tokens("###STOP###") == 3
    # greeting 29 chars, user 15, calls 28 + 12, results 9 and 40, "Sure?", "yes",
    # cancel_pending_order{"id":"12"} 31 chars, "ok"
    earlier = [8, 4, 7 + 3, 3, 10, 2, 1, 8, 1]
    assert fin.context_tokens == 100 + sum(earlier)
    assert set(fin.estimated_fields) == {"output_tokens", "observation_tokens", "context_tokens"}
    assert t.reward == 1.0 and t.domain == "retail" and r.notes["scripted_greetings_dropped"] == 1


def test_tau2_bare_list_json_strings_and_trials():
    s1, s2 = sim("7", 0), sim("7", 1)
    s2["messages"] = [json.dumps(m) for m in s2["messages"]]  # messages stored as JSON strings
    s2["messages"][5] = json.dumps({"role": "assistant", "content": json.dumps({"message": "Sure?"})})
    r = import_tau2([s1, s2], strict=True)
    assert [t.task_id for t in r.tasks] == ["7#0", "7#1"]
    assert [s.kind for s in r.tasks[1].steps] == [s.kind for s in r.tasks[0].steps]
    # content as a JSON string, no usage: counted as the JSON the model emitted,
    # '{"message": "Sure?"}' is 20 chars -> 5 tokens
    resp = r.tasks[1].steps[2]
    assert (resp.kind, resp.output_tokens, resp.estimated_fields[0]) == ("respond", 5, "output_tokens")
    assert r.tasks[1].steps[0].output_tokens == 7  # usage read from a JSON-string message


def test_tau2_json_content_with_tool_calls():
    s = sim()
    s["messages"][2] = {"role": "assistant", "content": json.dumps(
        {"content": "", "tool_calls": [{"id": "c1", "name": "get_order_details", "arguments": {"id": "12"}}]})}
    s["messages"][3] = {"role": "tool", "id": "zz", "content": "?"}
    (t,) = import_tau2([s], strict=True).tasks
    assert [(x.kind, x.tool) for x in t.steps][:2] == [("read", "get_order_details"), ("respond", "")]


def test_tau2_tool_mapping_overrides_and_counts(tmp_path):
    toml = tmp_path / "tools.toml"
    toml.write_text('[tools]\nfrobnicate = "read"\ncancel_pending_order = "read"\n')
    r = import_tau2([sim()], tool_kinds=load_tool_kinds(toml))
    assert [s.kind for s in r.tasks[0].steps] == ["read", "read", "respond", "read", "final"]
    assert not r.defaulted_tools


def test_mcp_tools_list(tmp_path):
    p = tmp_path / "tools.json"
    p.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "search", "annotations": {"readOnlyHint": True}},
        {"name": "delete", "annotations": {"readOnlyHint": False, "destructiveHint": True}},
        {"name": "plain"}]}}))
    assert load_tool_kinds(p) == {"search": "read", "delete": "write", "plain": "write"}
    p.write_text(json.dumps({"tools": [{"name": "x", "annotations": {"readOnlyHint": "yes"}}]}))
    with pytest.raises(TraceError, match=r"tools.json: field 'tools\[0\].annotations.readOnlyHint'"):
        load_tool_kinds(p)


def test_tool_toml_errors(tmp_path):
    p = tmp_path / "t.toml"
    p.write_text('a = "read"\nb = "maybe"\n')
    with pytest.raises(TraceError, match=r"t.toml: field 'b': expected \"read\" or \"write\""):
        load_tool_kinds(p)
    p.write_text("a = \n")
    with pytest.raises(TraceError, match=r"t.toml: invalid TOML: .*line 1"):
        load_tool_kinds(p)


def test_tau2_bad_simulation_is_skipped_not_fatal():
    bad = sim("8")
    bad["messages"][3]["role"] = "robot"
    r = import_tau2({"simulations": [sim("7"), bad, sim("9")]}, name="res.json")
    assert [t.task_id for t in r.tasks] == ["7", "9"]
    assert r.warnings == ["res.json: field 'simulations[1].messages[3].role': \"robot\" is not one "
                          "of system, user, assistant, tool; simulation skipped"]
    with pytest.raises(TraceError, match=r"^res.json: field 'simulations\[1\].messages\[3\].role'"):
        import_tau2({"simulations": [sim("7"), bad]}, name="res.json", strict=True)


def test_tau2_file_errors(tmp_path):
    p = tmp_path / "r.json"
    p.write_text('{"simulations": [\n  {"task_id": 1,\n}')
    with pytest.raises(TraceError, match=r"r.json:3: invalid JSON"):
        import_tau2(p)
    p.write_text('{"foo": 1}')
    with pytest.raises(TraceError, match="expected a tau² Results object"):
        import_tau2(p)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([1, 2]), min_size=1, max_size=4))
def test_tau2_import_export_import_lossless(trials):
    r = import_tau2([sim("5", k) for k in range(len(trials))], strict=True)
    again = parse_jsonl(dumps_jsonl(r.tasks), "x", strict=True).tasks
    assert again == r.tasks and [t.meta for t in again] == [t.meta for t in r.tasks]


@given(st.integers(0, 10**6), st.lists(st.integers(0, 1000), min_size=1, max_size=8))
def test_apportion_sums_and_is_proportional(total, weights):
    shares = apportion(total, weights)
    assert sum(shares) == total and len(shares) == len(weights)
    if sum(weights):
        for s, w in zip(shares, weights):
            assert abs(s - total * w / sum(weights)) < 1


# --- fuzzing: arbitrary JSON, and real structures with one node replaced ---------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(
        ["role", "content", "tool_calls", "name", "arguments", "id", "usage", "prompt_tokens",
         "completion_tokens", "messages", "simulations", "task_id", "raw_data", "model", "info",
         "timestamp", "generation_time_seconds", "function", "x"]) | st.text(max_size=4), c, max_size=5),
    max_leaves=20)


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, path + (i,))


def _replace(root, path, value):
    if not path:
        return value
    root = copy.deepcopy(root)
    node = root
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return root


def _never_crashes(fn):
    for strict in (False, True):
        try:
            fn(strict)
        except TraceError as e:
            assert "\n" not in str(e)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_tau2_fuzz_arbitrary_json(value):
    _never_crashes(lambda strict: import_tau2(value, strict=strict))
    _never_crashes(lambda strict: import_tau2({"simulations": [value]}, strict=strict))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_tau2_fuzz_mutated_real_structure(data):
    base = {"info": {"environment_info": {"domain_name": "retail", "policy": "p"}}, "simulations": [sim()]}
    paths = list(_paths(base))
    path = data.draw(st.sampled_from(paths))
    mutated = _replace(base, path, data.draw(json_values))
    _never_crashes(lambda strict: import_tau2(mutated, strict=strict))


# --- OpenAI chat-completions logs -------------------------------------------------------------

SYS = {"role": "system", "content": "You are an agent."}
U1 = {"role": "user", "content": "where is order 5?"}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "k1", "type": "function", "function": {"name": "lookup", "arguments": '{"order": 5}'}}]}
RES = {"role": "tool", "tool_call_id": "k1", "content": "shipped" * 4}  # 28 chars -> 7 tokens
ANS = {"role": "assistant", "content": "It has shipped."}


def resp(msg, prompt, completion, model="gpt-x"):
    return {"model": model, "choices": [{"message": msg}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def openai_log():
    first = {"request": {"messages": [SYS, U1]}, "response": resp(CALL, 50, 12), "duration_s": 0.4}
    # the second call re-sends the call with arguments re-serialised: still the same history
    call_again = copy.deepcopy(CALL)
    call_again["tool_calls"][0]["function"]["arguments"] = '{ "order" : 5 }'
    second = {"request": {"messages": [SYS, U1, call_again, RES]}, "response": resp(ANS, 70, 5)}
    other = {"request": {"messages": [SYS, {"role": "user", "content": "hi"}]}, "response": resp(ANS, 20, 5)}
    return [first, other, second]


def test_openai_groups_calls_by_history(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in openai_log()) + "\n")
    r = import_openai(p, tool_kinds={"lookup": "read"}, strict=True)
    assert [t.task_id for t in r.tasks] == ["line1", "line2"]
    a, b = r.tasks
    assert [(s.kind, s.tool, s.output_tokens, s.context_tokens) for s in a.steps] == [
        ("read", "lookup", 12, 50), ("final", "", 5, 70)]
    assert a.steps[0].observation_tokens == 7 and a.steps[0].duration_s == 0.4
    assert a.steps[0].estimated_fields == ("observation_tokens",)
    assert a.steps[1].observation_tokens == 0  # nothing came back after the last answer
    assert [s.kind for s in b.steps] == ["final"] and a.meta == {"agent_llm": "gpt-x"}


def test_openai_explicit_ids_conversations_and_bad_lines():
    lines = [json.dumps({**x, "task_id": "T"}) for x in openai_log()[::2]]
    lines.append(json.dumps({"task_id": "W", "messages": [SYS, U1, {**CALL, "usage": {"prompt_tokens": 9, "completion_tokens": 3}}, RES, ANS]}))
    lines.append('{"request": {"messages": []}, "response": {"choices": []}}')
    lines.append("not json")
    r = import_openai_text("\n".join(lines), "log.jsonl")
    assert [t.task_id for t in r.tasks] == ["T", "W"]
    assert [s.kind for s in r.tasks[1].steps] == ["write", "final"]  # no mapping: unknown = write
    assert r.tasks[1].steps[0].output_tokens == 3
    assert r.defaulted_tools == {"lookup": 2}
    assert r.warnings == ["log.jsonl:4: field 'response.choices': empty; line skipped",
                          "log.jsonl:5: field '(line)': invalid JSON: Expecting value (column 1); line skipped"]
    with pytest.raises(TraceError, match=r"^log.jsonl:4: field 'response.choices': empty$"):
        import_openai_text("\n".join(lines), "log.jsonl", strict=True)


def test_openai_a_pretty_printed_document_is_one_error_not_a_warning_a_line():
    text = json.dumps(openai_log(), indent=2)
    assert text.count("\n") > 50
    with pytest.raises(TraceError, match=r"^log.json: one JSON document spread over [0-9,]+ lines, not JSON Lines"):
        import_openai_text(text, "log.json")
    # A JSON Lines file whose first line is broken is still read line by line, and warned of.
    lines = ["{broken", *(json.dumps(x) for x in openai_log())]
    r = import_openai_text("\n".join(lines), "log.jsonl")
    assert len(r.tasks) == 2 and len(r.warnings) == 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_values, max_size=3), st.data())
def test_openai_fuzz(values, data):
    base = openai_log()[0]
    path = data.draw(st.sampled_from(list(_paths(base))))
    lines = [json.dumps(v) for v in values] + [json.dumps(_replace(base, path, data.draw(json_values)))]
    _never_crashes(lambda strict: import_openai_text("\n".join(lines), "f.jsonl", strict=strict))


def test_the_openai_importer_is_linear_in_its_conversations():
    """Before 2026-12-02 each call was matched against every conversation so far: 20,000
    one-call conversations took 14 s, 50,000 about 90 s; now 1 s and 3 s. The bound is the
    issue's hang threshold, not a benchmark (benchmarks/ time things)."""
    import json
    import time

    from costsim.traces.openai import import_openai_text

    n = 50_000
    text = "\n".join(json.dumps({"request": {"messages": [{"role": "user", "content": f"task {i}"}]},
                                 "response": {"choices": [{"message": {"role": "assistant", "content": f"ok {i}"}}]}})
                     for i in range(n))
    t = time.perf_counter()
    assert len(import_openai_text(text, "log.jsonl").tasks) == n
    assert time.perf_counter() - t < 60

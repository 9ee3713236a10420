"""Log formats beyond one plain file: the OpenAI Batch API (output joined to its input by
custom_id), the Responses API, and gzip / Zstandard files for every importer."""

import gzip
import json
import sys

import pytest

from costsim.cli.main import main
from costsim.traces import TraceError
from costsim.traces.importers import run
from costsim.traces.openai import import_openai, import_openai_text


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rows(task):
    return [(s.kind, s.tool, s.output_tokens, s.observation_tokens, s.context_tokens) for s in task.steps]


# --- Batch API ----------------------------------------------------------------------------------------

SYS = {"role": "system", "content": "You are a support agent."}
ASK = {"role": "user", "content": "Where is order 7?"}
CALL = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"id\":7}"}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "shipped on 2026-05-02"}  # 21 chars -> 6 tokens
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]


def chat_request(cid, messages):
    return {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "gpt-4o-mini", "messages": messages, "tools": TOOLS}}


def chat_output(cid, message, prompt, completion, cached=0, finish="stop"):
    return {"id": f"batch_req_{cid}", "custom_id": cid, "error": None, "response": {
        "status_code": 200, "request_id": f"req_{cid}", "body": {
            "id": f"chatcmpl-{cid}", "object": "chat.completion", "created": 1780000000,
            "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}}}}


def batch_files(tmp_path):
    """Two batches: the first asks two questions (one answered with a tool call, one through the
    Responses API) and has two failures and a request that never ran; the second sends the tool
    result back."""
    in1 = jsonl(tmp_path / "batch_in1.jsonl", [
        chat_request("r1", [SYS, ASK]),
        {"custom_id": "r2", "method": "POST", "url": "/v1/responses",
         "body": {"model": "gpt-4o-mini", "instructions": "Be brief.", "input": "Hello?"}},
        chat_request("r3", [SYS, {"role": "user", "content": "Refund order 8"}]),
        chat_request("r4", [SYS, {"role": "user", "content": "Refund order 9"}]),
        chat_request("r5", [SYS, {"role": "user", "content": "Refund order 10"}])])
    out1 = jsonl(tmp_path / "batch_out1.jsonl", [
        chat_output("r1", CALL, 82, 17, finish="tool_calls"),
        {"id": "batch_req_r2", "custom_id": "r2", "error": None, "response": {"status_code": 200, "body": {
            "id": "resp_r2", "object": "response", "model": "gpt-4o-mini-2024-07-18", "status": "completed",
            "output": [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "Hi! How can I help?", "annotations": []}]}],
            "usage": {"input_tokens": 21, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 8,
                      "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 29}}}},
        {"id": "batch_req_r3", "custom_id": "r3", "response": None,
         "error": {"code": "batch_expired", "message": "This request could not be executed before the batch expired."}},
        {"id": "batch_req_r4", "custom_id": "r4", "error": None, "response": {
            "status_code": 429, "request_id": "req_r4", "body": {"error": {"message": "Rate limit", "type": "requests"}}}}])
    in2 = jsonl(tmp_path / "batch_in2.jsonl", [chat_request("r1-turn2", [SYS, ASK, CALL, RESULT])])
    out2 = jsonl(tmp_path / "batch_out2.jsonl", [
        chat_output("r1-turn2", {"role": "assistant", "content": "It shipped on May 2."}, 120, 11, cached=64)])
    return out1, in1, out2, in2


def test_batch_output_is_joined_to_its_input_by_custom_id(tmp_path, capsys):
    out1, in1, out2, in2 = batch_files(tmp_path)
    res = import_openai([out1, in1, out2, in2], tool_kinds={"lookup_order": "read"}, strict=True)
    assert res.warnings == [] and res.records == 5  # the output lines
    assert [t.task_id for t in res.tasks] == ["r1", "r2"]
    r1, r2 = res.tasks
    # the second batch's request extends r1's history: the same task
    assert rows(r1) == [("read", "lookup_order", 17, 6, 82), ("final", "", 8 + 3, 0, 120)]
    assert rows(r2) == [("final", "", 8, 0, 21)]
    assert r1.meta == {"agent_llm": "gpt-4o-mini-2024-07-18", "cached_input_tokens": 64, "reasoning_output_tokens": 0}
    assert res.notes == {"failed_batch_requests": 2, "batch_requests_without_output": 1}
    # the command takes the files in any order
    assert main(["traces", "import", "openai", str(in2), str(out1), str(in1), str(out2), "--tools", str(tools_toml(tmp_path)),
                 "-o", str(tmp_path / "t.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "2 tasks of 5 records, 3 steps (read 1, write 0, respond 0, final 2)" in out
    assert "left out: 2 failed batch requests, 1 batch requests without output" in out


def tools_toml(tmp_path):
    p = tmp_path / "tools.toml"
    p.write_text('lookup_order = "read"\n')
    return p


def test_batch_output_without_its_input_is_one_line(tmp_path, capsys):
    out1, in1, out2, in2 = batch_files(tmp_path)
    with pytest.raises(TraceError, match=r"batch_out1.jsonl: Batch API output holds no requests: give the batch's "
                                         r"input file too \(both files on the command line\)"):
        import_openai(out1)
    assert main(["traces", "import", "openai", str(out1), "-o", str(tmp_path / "t.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give the batch's input file too" in err and "Traceback" not in err
    # an output line whose request is in none of the inputs loses only itself
    res = import_openai([out2, in1])
    assert res.tasks == [] and res.warnings == [
        f"{out2}:1: field 'custom_id': 'r1-turn2' is in none of the input files; line skipped"]


# --- Responses API ------------------------------------------------------------------------------------


def response(rid, output, inp, out, cached=0, reasoning=0):
    return {"id": rid, "object": "response", "model": "gpt-5-mini-2025-08-07", "status": "completed",
            "output": output, "usage": {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached},
                                        "output_tokens": out, "output_tokens_details": {"reasoning_tokens": reasoning},
                                        "total_tokens": inp + out}}


REASONING = {"type": "reasoning", "id": "rs_1", "summary": []}
LOOKUP = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup_order",
          "arguments": "{\"id\":7}", "status": "completed"}
CANCEL = {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "cancel_order",
          "arguments": "{\"id\":9}", "status": "completed"}


def answer(text):
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def responses_log():
    """A stateful conversation (previous_response_id: only the new input is sent) and a stateless
    one (store=false: the whole history is sent back, reasoning items included)."""
    stateful = [
        {"request": {"model": "gpt-5-mini", "instructions": "You are a support agent.", "input": "Where is order 7?"},
         "response": response("resp_1", [REASONING, LOOKUP], 120, 70, reasoning=52), "duration_s": 1.2},
        {"request": {"model": "gpt-5-mini", "previous_response_id": "resp_1", "input": [
            {"type": "function_call_output", "call_id": "call_1", "output": "{\"status\":\"shipped\"}"}]},
         "response": response("resp_2", [answer("It has shipped.")], 210, 9, cached=128)}]
    ask = {"role": "user", "content": [{"type": "input_text", "text": "Cancel order 9"}]}
    done = {"type": "function_call_output", "call_id": "call_2", "output": "cancelled"}
    stateless = [
        {"request": {"model": "gpt-5-mini", "store": False, "input": [ask]},
         "response": response("resp_3", [REASONING, CANCEL], 40, 30, reasoning=20)},
        {"request": {"model": "gpt-5-mini", "store": False, "input": [ask, REASONING, CANCEL, done]},
         "response": response("resp_4", [answer("Cancelled.")], 90, 4)}]
    return [stateful[0], stateless[0], stateful[1], stateless[1]]


def test_responses_api_calls_become_steps(tmp_path):
    res = import_openai(jsonl(tmp_path / "responses.jsonl", responses_log()), tool_kinds={"lookup_order": "read"},
                        strict=True)
    assert [t.task_id for t in res.tasks] == ["line1", "line2"]
    a, b = res.tasks
    # output_tokens already holds the reasoning tokens (52 of 70): not added again. Observation:
    # {"status":"shipped"} is 20 chars -> 5 tokens; "cancelled" 9 -> 3.
    assert rows(a) == [("read", "lookup_order", 70, 5, 120), ("final", "", 9, 0, 210)]
    assert rows(b) == [("write", "cancel_order", 30, 3, 40), ("final", "", 4, 0, 90)]
    assert a.steps[0].duration_s == 1.2 and a.steps[0].model == "gpt-5-mini-2025-08-07"
    assert a.meta == {"agent_llm": "gpt-5-mini-2025-08-07", "cached_input_tokens": 128, "reasoning_output_tokens": 52}
    assert b.meta["reasoning_output_tokens"] == 20 and dict(res.defaulted_tools) == {"cancel_order": 1}


def test_a_response_continuing_one_not_in_the_log_is_said(tmp_path):
    log = responses_log()[2:3]  # the second turn alone
    text = "\n".join(json.dumps(x) for x in log)
    res = import_openai_text(text, "r.jsonl")
    assert res.warnings == ["r.jsonl:1: field 'request.previous_response_id': 'resp_1' is not in the log: its earlier "
                            "turns are unknown; a task of its own from here"]
    assert rows(res.tasks[0]) == [("final", "", 9, 0, 210)]
    with pytest.raises(TraceError, match="'resp_1' is not in the log"):
        import_openai_text(text, "r.jsonl", strict=True)
    bad = dict(log[0], response=response("x", [{"type": "message", "role": "user", "content": "hi"}], 1, 1))
    res = import_openai_text(json.dumps(bad), "r.jsonl")
    assert res.warnings[-1] == ("r.jsonl:1: field 'response.output': expected the assistant's items only "
                                "(messages, function calls, reasoning); line skipped")


# --- compressed files, every importer -----------------------------------------------------------------


def sources(tmp_path):
    """A small log of each format (name, file)."""
    tau2 = tmp_path / "tau2.json"
    tau2.write_text(json.dumps([{"task_id": "1", "messages": [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "name": "lookup", "arguments": {}}]},
        {"role": "tool", "id": "a", "content": "done"}, {"role": "assistant", "content": "All set."}]}]))
    openai = jsonl(tmp_path / "openai.jsonl", responses_log())
    otel = tmp_path / "otel.jsonl"
    otel.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "t1", "spanId": "c1", "name": "chat", "startTimeUnixNano": "0", "endTimeUnixNano": "1000000000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "100"}},
                        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "20"}}]}]}]}]}) + "\n")
    return {"tau2": tau2, "openai": openai, "otel": otel}


@pytest.mark.parametrize("fmt", ["tau2", "openai", "otel"])
def test_every_importer_reads_gzip_and_zstandard(tmp_path, fmt):
    zstandard = pytest.importorskip("zstandard", reason="the .zst case needs zstandard (the test extra)")
    plain = sources(tmp_path)[fmt]
    data = plain.read_bytes()
    gz, zst = tmp_path / f"{fmt}.gz", tmp_path / f"{fmt}.zst"
    gz.write_bytes(gzip.compress(data))
    zst.write_bytes(zstandard.ZstdCompressor().compress(data))
    want = run(fmt, [plain])
    assert want.tasks and want.warnings == []
    for f in (gz, zst):
        got = run(fmt, [f])
        assert [(t.task_id, t.steps) for t in got.tasks] == [(t.task_id, t.steps) for t in want.tasks], f


def test_zstandard_missing_and_a_broken_file_are_one_line(tmp_path, monkeypatch, capsys):
    zst = tmp_path / "log.jsonl.zst"
    zst.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 8)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # as if not installed
    assert main(["traces", "import", "openai", str(zst), "-o", str(tmp_path / "t.jsonl")]) == 2
    assert capsys.readouterr().err == (f"costsim: error: {zst}: cannot read: a Zstandard (.zst) file: "
                                       "pip install zstandard to read it\n")
    gz = tmp_path / "log.jsonl.gz"
    gz.write_bytes(gzip.compress(b"{}\n" * 100)[:-9])  # cut short: no end-of-stream marker
    with pytest.raises(TraceError, match=r"log.jsonl.gz: cannot read: not a valid gzip file \(Compressed file ended"):
        run("openai", [gz])


def test_a_file_that_inflates_past_the_bound_is_refused(tmp_path, monkeypatch, capsys):
    """A zip bomb: 4 MiB of blanks in a 4 KiB file, against a bound lowered to 1 MiB (the real one,
    1 GiB, would take seconds to inflate; the code path is the same)."""
    import costsim.files

    monkeypatch.setattr(costsim.files, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b" " * (4 << 20)))
    assert bomb.stat().st_size < 8 << 10
    assert main(["traces", "import", "otel", str(bomb), "-o", str(tmp_path / "t.jsonl")]) == 2
    assert capsys.readouterr().err == f"costsim: error: {bomb}: cannot read: decompresses to more than 1 MiB\n"
    assert costsim.files.read_text_decompressed.__module__ == "costsim.files"
    ok = tmp_path / "ok.jsonl.gz"
    ok.write_bytes(gzip.compress(b" " * (1 << 20)))  # exactly the bound: read
    assert costsim.files.read_text_decompressed(ok) == " " * (1 << 20)

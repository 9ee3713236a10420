"""OpenTelemetry from the one-line set-up (`OpenAIInstrumentor().instrument()`: chat spans only,
each its own trace): traces/README.md's example agent run as written against a fake
OpenAI-compatible server on 127.0.0.1, then imported; and the grouping rules on spans written by
the real SDK and its OTLP JSON file exporter."""

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.json.file")

from opentelemetry.exporter.otlp.json.file import FileSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from costsim.cli.main import main  # noqa: E402
from costsim.traces import TraceError  # noqa: E402
from costsim.traces.otel import import_otel  # noqa: E402

README = Path(__file__).resolve().parents[1] / "traces" / "README.md"

# What the fake model does for each task of the README's agent: tool calls (name, city), then an answer.
SCRIPT = {
    "Weather in Paris?": [[("get_weather", "Paris")], "Sunny in Paris."],
    "Weather in Oslo and Rome?": [[("get_weather", "Oslo"), ("get_weather", "Rome")], "Both sunny."],
    "Book the sunnier of Paris and Oslo.": [[("get_weather", "Paris")], [("get_weather", "Oslo")],
                                            [("book_trip", "Paris")], "Booked Paris."],
}


def usage(messages: list, reply) -> dict:
    """The fake server's usage: 100 + 10 a message in, 12 a tool call or 9 for an answer out. The
    details are what OpenAI sends; this instrumentation does not record them."""
    completion = 12 * len(reply) if isinstance(reply, list) else 9
    return {"prompt_tokens": 100 + 10 * len(messages), "completion_tokens": completion,
            "total_tokens": 100 + 10 * len(messages) + completion,
            "prompt_tokens_details": {"cached_tokens": 64}, "completion_tokens_details": {"reasoning_tokens": 4}}


class FakeOpenAI(BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msgs = body["messages"]
        task = next(m["content"] for m in msgs if m["role"] == "user")
        turn = sum(m["role"] == "assistant" for m in msgs)
        reply = SCRIPT[task][turn]
        self.requests.append(body)
        msg = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
        if isinstance(reply, list):
            msg["tool_calls"] = [{"id": f"call_{turn}_{j}", "type": "function",
                                  "function": {"name": name, "arguments": json.dumps({"city": city})}}
                                 for j, (name, city) in enumerate(reply)]
        out = json.dumps({"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                          "model": body["model"], "usage": usage(msgs, reply),
                          "choices": [{"index": 0, "message": msg,
                                       "finish_reason": "tool_calls" if isinstance(reply, list) else "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    FakeOpenAI.requests = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def readme_example() -> str:
    """The first Python block of the README's "Instrument your agent" section, as written."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Instrument your agent"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_example(tmp_path, server, **env) -> Path:
    pytest.importorskip("openai", reason="the README example needs the openai client (the test extra)")
    pytest.importorskip("opentelemetry.instrumentation.openai_v2",
                        reason="the README example needs opentelemetry-instrumentation-openai-v2 (the test extra)")
    (tmp_path / "agent.py").write_text(readme_example())
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_"))}
    clean.update(OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_port}/v1", OPENAI_API_KEY="test",
                 NO_PROXY="127.0.0.1", **env)
    r = subprocess.run([sys.executable, "agent.py"], cwd=tmp_path, env=clean, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(FakeOpenAI.requests) == 8
    return tmp_path / "spans.jsonl"


def rows(task):
    return [(s.kind, s.tool, s.output_tokens, s.observation_tokens, s.context_tokens) for s in task.steps]


def test_the_readme_example_imports_as_its_three_tasks(tmp_path, server, capsys):
    spans = run_example(tmp_path, server)
    assert len(spans.read_text().splitlines()) == 8  # one chat span a line, each its own trace
    res = import_otel(spans, tool_kinds={"get_weather": "read"})
    assert res.warnings == []
    assert [len(t.steps) for t in res.tasks] == [2, 3, 4]
    paris, two, book = res.tasks
    # (kind, tool, output, observation, context). Context: the call's prompt tokens (100 + 10 a
    # message), plus the first call's output for the second of two tool calls. Output: 12 a tool
    # call, two calls sharing 24 by their estimated lengths (get_weather{"city":"Oslo"} and
    # ...Rome: 26 chars, 7 tokens each). Observation: ceil(chars/4) of the tool result
    # ("Paris: sunny, 21 C" 18 chars -> 5; "booked Paris" 12 -> 3).
    assert rows(paris) == [("read", "get_weather", 12, 5, 120), ("final", "", 9, 0, 140)]
    assert rows(two) == [("read", "get_weather", 12, 5, 120), ("read", "get_weather", 12, 5, 132),
                         ("final", "", 9, 0, 150)]
    assert rows(book) == [("read", "get_weather", 12, 5, 120), ("read", "get_weather", 12, 5, 140),
                          ("write", "book_trip", 12, 3, 160), ("final", "", 9, 0, 180)]
    assert [s.call for s in two.steps] == [0, 0, 1]
    assert all(s.model == "gpt-4o-mini" and s.duration_s > 0 and s.tool_duration_s is None
               for t in res.tasks for s in t.steps)
    assert all(s.estimated_fields == (("observation_tokens",) if s.tool else ()) for s in book.steps)
    # Usage details are not on the spans of this instrumentation: nothing to keep in meta.
    assert [t.meta for t in res.tasks] == [{"agent_llm": "gpt-4o-mini"}] * 3
    assert dict(res.defaulted_tools) == {"book_trip": 1}
    assert res.notes == {"task_grouping": "one per trace; a trace of one chat call continues the conversation "
                                          "whose messages its input extends"}
    tools = tmp_path / "tools.toml"
    tools.write_text('get_weather = "read"\n')
    assert main(["traces", "import", "otel", str(spans), "--tools", str(tools), "-o", str(tmp_path / "t.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "3 tasks of 8 records, 9 steps (read 5, write 1, respond 0, final 3)" in out
    assert "  tasks: one per trace; a trace of one chat call continues the conversation" in out


def test_without_recorded_messages_each_call_is_a_task_and_the_import_says_so(tmp_path, server, capsys):
    spans = run_example(tmp_path, server, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="no_content")
    res = import_otel(spans)
    # finish_reasons ["tool_calls"] still says a call made tool calls: one write step each
    assert [rows(t) for t in res.tasks] == [
        [("write", "(unrecorded)", 12, 0, 120)], [("final", "", 9, 0, 140)],
        [("write", "(unrecorded)", 24, 0, 120)], [("final", "", 9, 0, 150)],
        [("write", "(unrecorded)", 12, 0, 120)], [("write", "(unrecorded)", 12, 0, 140)],
        [("write", "(unrecorded)", 12, 0, 160)], [("final", "", 9, 0, 180)]]
    assert res.warnings == [
        "8 traces of one chat call each, no gen_ai.conversation.id and no recorded messages: each chat call became "
        "its own task; pass --group-by ATTRIBUTE (a span attribute naming the conversation), or record messages "
        "(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only) so that calls join by their history"]
    assert main(["traces", "import", "otel", str(spans), "-o", str(tmp_path / "t.jsonl")]) == 0
    cap = capsys.readouterr()
    assert cap.err.count("\n") == 1 and "each chat call became its own task; pass --group-by ATTRIBUTE" in cap.err
    assert "8 tasks of 8 records" in cap.out and "  tasks: one per trace\n" in cap.out


# --- spans written by the SDK in the instrumentation's shape ---------------------------------------

T0 = 1_780_000_000_000_000_000  # ns
MS = 1_000_000


def export(path, calls):
    """One chat span a trace, as the instrumentation writes them: (start ms, input tokens, output
    tokens, finish reason, extra attributes)."""
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    tracer = tp.get_tracer("opentelemetry.util.genai.handler")
    for start, inp, out, finish, extra in calls:
        span = tracer.start_span("chat gpt-4o", start_time=T0 + start * MS, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": out,
            "gen_ai.response.finish_reasons": [finish], **extra})
        span.end(end_time=T0 + (start + 100) * MS)
    tp.shutdown()
    return path


def test_calls_group_by_conversation_id_or_the_attribute_given(tmp_path, capsys):
    # Two sessions interleaved, no content recorded: a's calls at 0, 200, 400 ms; b's at 100, 300.
    calls = [(0, 1000, 40, "tool_calls", {"session.id": "a"}), (100, 500, 10, "tool_calls", {"session.id": "b"}),
             (200, 1100, 30, "tool_calls", {"session.id": "a"}), (300, 560, 5, "stop", {"session.id": "b"}),
             (400, 1200, 20, "stop", {"session.id": "a"})]
    path = export(tmp_path / "s.jsonl", calls)
    res = import_otel(path, group_by="session.id")
    assert res.warnings == [] and [t.task_id for t in res.tasks] == ["a", "b"]
    a, b = res.tasks
    # observation: what the next call's input grew by beyond this call's input and output
    assert rows(a) == [("write", "(unrecorded)", 40, 1100 - 1000 - 40, 1000),
                       ("write", "(unrecorded)", 30, 1200 - 1100 - 30, 1100), ("final", "", 20, 0, 1200)]
    assert rows(b) == [("write", "(unrecorded)", 10, 560 - 500 - 10, 500), ("final", "", 5, 0, 560)]
    assert a.steps[0].estimated_fields == ("observation_tokens",) and a.steps[2].estimated_fields == ()
    assert res.notes["task_grouping"] == "one per session.id value (spans without one: one per trace)"
    # gen_ai.conversation.id is the default attribute
    conv = [(t, i, o, f, {"gen_ai.conversation.id": e["session.id"]}) for t, i, o, f, e in calls]
    assert [rows(t) for t in import_otel(export(tmp_path / "c.jsonl", conv)).tasks] == [rows(a), rows(b)]
    # an attribute no span carries groups nothing, and says so
    res = import_otel(path, group_by="user.id")
    assert len(res.tasks) == 5 and res.warnings[0] == ("--group-by user.id: no span carries this attribute; "
                                                       "tasks are grouped by trace")
    assert main(["traces", "import", "otel", str(path), "--group-by", "session.id", "-o", str(tmp_path / "t.jsonl")]) == 0
    assert "2 tasks of 5 records, 5 steps (read 0, write 3, respond 0, final 2)" in capsys.readouterr().out


def parts_message(role, *parts, finish=None):
    m = {"role": role, "parts": list(parts)}
    return m | ({"finish_reason": finish} if finish else {})


def test_tool_definitions_hints_reasoning_and_cached_tokens(tmp_path):
    """The recorded tools=[...] with MCP readOnlyHint decide kinds before --tools; reasoning and
    cached tokens are inside output and input tokens: kept in meta, not added."""
    user = parts_message("user", {"type": "text", "content": "go"})
    calls = parts_message("assistant", {"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"q": 1}},
                          {"type": "tool_call", "id": "c2", "name": "delete", "arguments": {"q": 1}}, finish="tool_calls")
    results = [parts_message("tool", {"type": "tool_call_response", "id": "c1", "response": "x" * 40}),
               parts_message("tool", {"type": "tool_call_response", "id": "c2", "response": {"ok": True}})]
    done = parts_message("assistant", {"type": "text", "content": "Done."}, finish="stop")
    defs = json.dumps([{"type": "function", "name": "lookup", "annotations": {"readOnlyHint": True}},
                       {"type": "function", "name": "delete", "annotations": {"readOnlyHint": False}}])
    first = {"gen_ai.input.messages": json.dumps([user]), "gen_ai.output.messages": json.dumps([calls]),
             "gen_ai.tool.definitions": defs, "gen_ai.usage.reasoning.output_tokens": 30,
             "gen_ai.usage.cache_read.input_tokens": 0}
    second = {"gen_ai.input.messages": json.dumps([user, calls, *results]), "gen_ai.output.messages": json.dumps([done]),
              "gen_ai.usage.cache_read.input_tokens": 256}
    path = export(tmp_path / "s.jsonl", [(0, 300, 50, "tool_calls", first), (200, 400, 6, "stop", second)])
    res = import_otel(path, tool_kinds={"delete": "read"})  # the recorded hint wins over the mapping
    (task,) = res.tasks
    # 50 output tokens shared by estimated length (lookup{"q":1} and delete{"q":1}: 13 chars, 4 tokens each)
    assert rows(task) == [("read", "lookup", 25, 10, 300), ("write", "delete", 25, 3, 325), ("final", "", 6, 0, 400)]
    assert task.meta == {"agent_llm": "gpt-4o", "cached_input_tokens": 256, "reasoning_output_tokens": 30}
    assert dict(res.defaulted_tools) == {}


def test_recorded_messages_that_do_not_parse_are_left_out_with_a_warning(tmp_path):
    path = export(tmp_path / "s.jsonl", [(0, 300, 50, "tool_calls", {"gen_ai.output.messages": "[{not json"}),
                                         (200, 400, 6, "stop", {"gen_ai.input.messages": json.dumps([{"role": "bot"}])})])
    res = import_otel(path)
    assert len(res.warnings) == 2 and len(res.tasks) == 2
    assert res.warnings[0].startswith(f"{path}:1: span 'chat gpt-4o' (")
    assert res.warnings[1].startswith(f"{path}:2: span 'chat gpt-4o' (")
    assert res.warnings[0].endswith("field 'attributes.gen_ai.output.messages': expected JSON (a list of messages or "
                                    "definitions); its output messages left out")
    assert res.warnings[1].endswith("field 'attributes.gen_ai.input.messages[0].role': \"bot\" is not one of system, "
                                    "user, assistant, tool; its input messages left out")
    with pytest.raises(TraceError, match=r"field 'attributes.gen_ai.output.messages': expected JSON"):
        import_otel(path, strict=True)

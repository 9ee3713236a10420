"""OpenTelemetry GenAI import: fixtures written by the real SDK and its OTLP JSON file exporter,
checked step by step against counts computed here from the fixture's own definition."""

import json
import subprocess

import pytest

pytest.importorskip("opentelemetry.sdk.trace")
pytest.importorskip("opentelemetry.exporter.otlp.json.file")

from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.json.file import FileSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

from costsim.traces import TraceError  # noqa: E402
from costsim.traces.otel import import_otel  # noqa: E402

from conftest import costsim_argv  # noqa: E402

T0 = 1_780_000_000_000_000_000  # ns
MS = 1_000_000

# One agent run: (model call input tokens, output tokens, duration ms, [(tool, duration ms, hint)]).
RUN = [
    (1000, 40, 300, [("get_user", 200, True), ("search_flights", 500, None)]),
    (1200, 30, 250, [("book_flight", 800, None)]),
    (1400, 50, 400, []),  # a message to the user
    (1600, 20, 150, []),  # the last message
]
NAMES = {
    "current": dict(inp="gen_ai.usage.input_tokens", out="gen_ai.usage.output_tokens", prov="gen_ai.provider.name"),
    "pre-1.27": dict(inp="gen_ai.usage.prompt_tokens", out="gen_ai.usage.completion_tokens", prov="gen_ai.system"),
}


def write_trace(path, names="current", runs=1, skew=False, model="claude-sonnet-4-5"):
    """Export agent runs with the real SDK through the OTLP JSON file exporter."""
    n = NAMES[names]
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    tracer = tp.get_tracer("agent")
    t = T0
    for r in range(runs):
        agent = tracer.start_span("invoke_agent travel", start_time=t,
                                  attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"})
        ctx = trace.set_span_in_context(agent)
        for inp, out, dur, tools in RUN:
            chat = tracer.start_span(f"chat {model}", context=ctx, start_time=t, attributes={
                "gen_ai.operation.name": "chat", n["prov"]: "anthropic", "gen_ai.request.model": model,
                n["inp"]: inp, n["out"]: out})
            t += dur * MS
            chat.end(end_time=t)
            for name, tdur, hint in tools:
                attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
                if hint is not None:
                    attrs["mcp.tool.annotations.readOnlyHint"] = hint
                tool = tracer.start_span(f"execute_tool {name}", context=ctx, start_time=t, attributes=attrs)
                end = t - MS if skew and name == "book_flight" else t + tdur * MS
                t += tdur * MS
                tool.end(end_time=end)
        agent.end(end_time=t)
        t += 1000 * MS
    tp.shutdown()
    return path


def expected_steps():
    """The import rules applied by hand to RUN."""
    out = []
    for i, (inp, tok, dur, tools) in enumerate(RUN):
        grew = RUN[i + 1][0] - inp - tok if i + 1 < len(RUN) else None
        if not tools:
            out.append(dict(kind="final" if i == len(RUN) - 1 else "respond", tool="", output_tokens=tok,
                            observation_tokens=grew or 0, context_tokens=inp, duration_s=dur / 1e3,
                            tool_duration_s=None))
            continue
        n = len(tools)
        outs = [tok // n + (1 if j < tok % n else 0) for j in range(n)]
        obs = [grew // n + (1 if j < grew % n else 0) for j in range(n)]
        before = 0
        for j, (name, tdur, hint) in enumerate(tools):
            kind = ("read" if hint else "write") if hint is not None else ("read" if name == "search_flights" else "write")
            out.append(dict(kind=kind, tool=name, output_tokens=outs[j], observation_tokens=obs[j],
                            context_tokens=inp + before, duration_s=dur / 1e3 * outs[j] / tok,
                            tool_duration_s=tdur / 1e3))
            before += outs[j]
    return out


MAPPING = {"search_flights": "read"}  # book_flight is in no mapping: a write, counted


@pytest.mark.parametrize("names", list(NAMES))
def test_import_is_exact_against_the_fixture(tmp_path, names):
    path = write_trace(tmp_path / "spans.jsonl", names)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + sum(1 + len(t) for *_, t in RUN)  # one ExportTraceServiceRequest a span
    res = import_otel(path, tool_kinds=MAPPING)
    assert res.warnings == [] and len(res.tasks) == 1
    task = res.tasks[0]
    want = expected_steps()
    assert len(task.steps) == len(want)
    for got, w in zip(task.steps, want):
        for k, v in w.items():
            if isinstance(v, float):
                assert getattr(got, k) == pytest.approx(v, abs=1e-9), (k, got)
            else:
                assert getattr(got, k) == v, (k, got)
        assert got.model == "claude-sonnet-4-5"
    assert dict(res.defaulted_tools) == {"book_flight": 1}
    assert res.steps_by_kind() == {"read": 2, "write": 1, "respond": 1, "final": 1}
    # The growth of the next call's input is an estimate of the observation; counts from usage are not.
    assert all(("observation_tokens" in s.estimated_fields) == (s.kind != "final") for s in task.steps)


def test_runs_traces_and_a_trace_split_across_files(tmp_path):
    path = write_trace(tmp_path / "spans.jsonl", runs=3)
    whole = import_otel(path, tool_kinds=MAPPING)
    assert len(whole.tasks) == 3 and all(len(t.steps) == 5 for t in whole.tasks)
    lines = path.read_text().splitlines()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("\n".join(lines[::2]) + "\n")
    b.write_text("\n".join(lines[1::2]) + "\n")
    with pytest.raises(TraceError, match="parent .* is in none of the files"):
        import_otel(a, strict=True)
    alone = import_otel(a)
    assert any("is in none of the files; taken as a root" in w for w in alone.warnings)
    both = import_otel([a, b], tool_kinds=MAPPING)
    assert both.warnings == []
    assert [t.steps for t in both.tasks] == [t.steps for t in whole.tasks]


def test_bad_input_names_file_line_and_field(tmp_path):
    good = write_trace(tmp_path / "spans.jsonl").read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    broken = json.loads(good[0])
    broken["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = "soon"
    bad.write_text("\n".join([good[1], "{not json", json.dumps(broken), *good[2:]]) + "\n")
    res = import_otel(bad)
    assert len(res.warnings) == 2
    assert res.warnings[0].startswith(f"{bad}:2: field '(line)': invalid JSON")
    assert res.warnings[1].startswith(f"{bad}:3: field 'resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano'")
    with pytest.raises(TraceError, match=":2: field '\\(line\\)'"):
        import_otel(bad, strict=True)
    tokens = json.loads(good[0])
    for kv in tokens["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]:
        if kv["key"] == "gen_ai.usage.output_tokens":
            kv["value"] = {"intValue": "-5"}
    bad.write_text(json.dumps(tokens) + "\n")
    with pytest.raises(TraceError, match=r"gen_ai.usage.output_tokens': expected a token count in \[0, 1e\+09\]"):
        import_otel(bad, strict=True)


def test_clock_skew_is_a_bad_span(tmp_path):
    path = write_trace(tmp_path / "skew.jsonl", skew=True)
    res = import_otel(path)
    assert any("ends 0.001 s before it starts (clock skew)" in w for w in res.warnings)
    with pytest.raises(TraceError, match="clock skew"):
        import_otel(path, strict=True)


def test_single_json_document_and_no_agent_span(tmp_path):
    lines = write_trace(tmp_path / "spans.jsonl").read_text().splitlines()
    docs = [json.loads(x) for x in lines]
    spans = [s for d in docs for s in d["resourceSpans"][0]["scopeSpans"][0]["spans"]
             if not s["name"].startswith("invoke_agent")]
    for s in spans:
        s.pop("parentSpanId", None)  # no agent span: the trace is the task
    one = dict(docs[0])
    one["resourceSpans"] = [dict(docs[0]["resourceSpans"][0], scopeSpans=[{"scope": {"name": "agent"}, "spans": spans}])]
    p = tmp_path / "one.json"
    p.write_text(json.dumps(one, indent=2))
    res = import_otel(p, tool_kinds=MAPPING)
    assert res.warnings == [] and len(res.tasks) == 1 and len(res.tasks[0].steps) == 5


def test_cli_import_stats_and_replay_with_recorded_tool_latency(tmp_path):
    src = write_trace(tmp_path / "spans.jsonl", runs=2)
    tools = tmp_path / "tools.toml"
    tools.write_text('search_flights = "read"\n')
    out = tmp_path / "otel.jsonl"
    r = subprocess.run([*costsim_argv(), "traces", "import", "otel", str(src), "--tools", str(tools), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "2 tasks" in r.stdout and "book_flight (2)" in r.stdout
    r = subprocess.run([*costsim_argv(), "traces", "stats", str(out), "--json"], capture_output=True, text=True, check=True)
    tl = json.loads(r.stdout)["files"][0]["tool_latency"] if "files" in json.loads(r.stdout) else json.loads(r.stdout)["tool_latency"]
    assert tl["timed_tool_steps"] == tl["tool_steps"] == 6
    assert tl["mean_s"] == pytest.approx((0.2 + 0.5 + 0.8) / 3)
    r = subprocess.run([*costsim_argv(), "replay", str(out), "--protocols", "strong-only", "--tool-latency", "recorded",
                        "--json", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    tool_s = res["protocols"]["strong-only"]["tool_s"]["mean"]
    # Per task the recorded tool times, nothing else; the first call's two tools run together,
    # so it waits for the longer (docs: a model call's tool calls run in parallel).
    assert tool_s == pytest.approx(max(0.2, 0.5) + 0.8)


def _export(path, build):
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    build(tp.get_tracer("agent"))
    tp.shutdown()
    return path


def test_a_nested_mcp_span_a_failed_attempt_and_a_tool_dispatched_while_streaming(tmp_path):
    """One tool call (a framework execute_tool span with the MCP client's tools/call below it),
    dispatched 250 ms into a 300 ms streamed answer; a rate-limited attempt (status ERROR, no
    usage) retried by the closing call: two steps."""
    from opentelemetry.trace import Status, StatusCode

    def build(tr):
        agent = tr.start_span("invoke_agent a", start_time=T0, attributes={"gen_ai.operation.name": "invoke_agent"})
        ctx = trace.set_span_in_context(agent)
        chat = tr.start_span("chat m", context=ctx, start_time=T0, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 40})
        tool = tr.start_span("execute_tool get_user", context=ctx, start_time=T0 + 250 * MS, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_user",
            "mcp.tool.annotations.readOnlyHint": True})
        mcp = tr.start_span("tools/call get_user", context=trace.set_span_in_context(tool), start_time=T0 + 251 * MS,
                            attributes={"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool"})
        chat.end(end_time=T0 + 300 * MS)
        mcp.end(end_time=T0 + 440 * MS)
        tool.end(end_time=T0 + 450 * MS)
        failed = tr.start_span("chat m", context=ctx, start_time=T0 + 500 * MS, attributes={
            "gen_ai.operation.name": "chat", "error.type": "RateLimitError"})
        failed.set_status(Status(StatusCode.ERROR))
        failed.end(end_time=T0 + 510 * MS)
        last = tr.start_span("chat m", context=ctx, start_time=T0 + 600 * MS, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 1300, "gen_ai.usage.output_tokens": 20})
        last.end(end_time=T0 + 700 * MS)
        agent.end(end_time=T0 + 700 * MS)

    res = import_otel(_export(tmp_path / "s.jsonl", build))
    steps = res.tasks[0].steps
    assert [(s.kind, s.tool) for s in steps] == [("read", "get_user"), ("final", "")]
    assert steps[0].observation_tokens == 1300 - 1000 - 40 and steps[0].tool_duration_s == pytest.approx(0.2)
    assert res.notes == {"failed_model_calls_left_out": 1, "tool_spans_inside_a_tool_span": 1}


def test_openllmetry_spans_are_read(tmp_path):
    """OpenLLMetry writes no gen_ai.operation.name on spans: llm.request.type and
    traceloop.span.kind say what a span is (traceloop/openllmetry's chat wrappers)."""
    def build(tr):
        agent = tr.start_span("travel.workflow", start_time=T0, attributes={"traceloop.span.kind": "agent"})
        ctx = trace.set_span_in_context(agent)
        t = T0
        for inp, out, tool in ((1000, 40, "get_user"), (1300, 20, None)):
            chat = tr.start_span("openai.chat", context=ctx, start_time=t, attributes={
                "llm.request.type": "chat", "gen_ai.usage.prompt_tokens": inp, "gen_ai.usage.completion_tokens": out,
                "gen_ai.request.model": "gpt-4o"})
            t += 100 * MS
            chat.end(end_time=t)
            if tool:
                span = tr.start_span(f"{tool}.tool", context=ctx, start_time=t, attributes={
                    "traceloop.span.kind": "tool", "traceloop.entity.name": tool})
                t += 50 * MS
                span.end(end_time=t)
        agent.end(end_time=t)

    res = import_otel(_export(tmp_path / "oll.jsonl", build), tool_kinds={"get_user": "read"})
    steps = res.tasks[0].steps
    assert [(s.kind, s.tool, s.output_tokens, s.context_tokens) for s in steps] == [
        ("read", "get_user", 40, 1000), ("final", "", 20, 1300)]
    assert steps[0].model == "gpt-4o"


def test_an_error_in_a_pretty_printed_document_names_its_line(tmp_path):
    doc = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}, indent=2).splitlines()
    doc.insert(4, '      "oops": ,')
    p = tmp_path / "pretty.json"
    p.write_text("\n".join(doc) + "\n")
    with pytest.raises(TraceError, match=r"pretty.json:5: field '\(line\)': invalid JSON"):
        import_otel(p, strict=True)

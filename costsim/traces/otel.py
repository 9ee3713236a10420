"""Importer for OpenTelemetry traces in the GenAI semantic conventions (OTLP/JSON).

Input: the OpenTelemetry Collector's file exporter or the SDK's OTLP JSON file exporter (one
``ExportTraceServiceRequest`` per line), or a single JSON document holding one (or a list of
them). Several files may be given: a trace split across them is joined by trace id.

- **Tasks.** Each top-level ``invoke_agent`` span (one with no ``invoke_agent`` ancestor) is a
  task, with every span below it; a trace with no ``invoke_agent`` span is one task. Where spans
  carry ``gen_ai.conversation.id`` (or the attribute ``group_by`` names; a span without it takes
  its nearest ancestor's), each value is a task instead, across traces. A trace that is one model
  call alone (``OpenAIInstrumentor().instrument()`` and nothing else: each call its own trace)
  continues the conversation whose recorded messages its input messages extend; without
  recorded messages each such call is a task and the import warns, naming the fix.
- **Steps.** A model call (``gen_ai.operation.name`` ``chat``, ``text_completion`` or
  ``generate_content``) and the tool calls (``execute_tool``) that start after it starts (a tool
  may be dispatched while the answer streams) and before the next model call starts are its
  steps: one step per tool call, in start order; a call without tool calls is a ``respond``
  step, the task's last call ``final``. Left out, and counted in the header: a tool span inside
  another tool span (an MCP client's ``tools/call`` below the framework's ``execute_tool``), a
  model call whose status is an error and that has no output usage (a failed attempt, retried),
  a tool span before any model call. A task without tool spans takes its tool calls from the
  calls' recorded messages (``gen_ai.output.messages``; the results from the next call's
  ``gen_ai.input.messages``) by the rules of :mod:`.convert`; where none were recorded, a call
  whose ``gen_ai.response.finish_reasons`` says ``tool_calls`` made one tool call of unknown
  name (:data:`UNRECORDED_TOOL`).
- **Other instrumentations.** OpenLLMetry's spans (``llm.request.type`` chat or completion,
  ``traceloop.span.kind`` tool or agent, tool name ``traceloop.entity.name``) and
  OpenInference's (``openinference.span.kind`` LLM, TOOL, AGENT; ``llm.token_count.prompt`` /
  ``completion``, ``llm.model_name``, ``tool.name``) are read as the same operations.
- **Kinds.** A tool call is a read when the span says so (``mcp.tool.annotations.readOnlyHint``
  or ``gen_ai.tool.annotations.readOnlyHint`` true; false is a write), else when the call's
  recorded tool definitions (``gen_ai.tool.definitions``, the agent's own ``tools=[...]``) give
  the tool MCP's ``annotations.readOnlyHint``, else by the ``--tools`` mapping, else a write
  (counted, as every importer does).
- **Tokens.** ``output_tokens``: the call's output tokens (``gen_ai.usage.output_tokens``;
  before semantic conventions 1.27 ``gen_ai.usage.completion_tokens``, as OpenLLMetry still
  writes it; OpenInference's ``llm.token_count.completion``), shared equally among its tool spans
  (largest remainder), or by estimated length among the tool calls of its messages;
  ``context_tokens``: its input tokens (``gen_ai.usage.input_tokens`` / ``prompt_tokens``);
  ``observation_tokens``: the recorded tool result (or user message), ceil(chars / 4); else what
  the next call's input grew by beyond this call's input and output, shared equally
  (estimated). Where usage is missing: ceil(chars / 4) of ``gen_ai.output.messages`` /
  ``gen_ai.input.messages`` when recorded, else 0, marked estimated. Reasoning tokens
  (``gen_ai.usage.reasoning.output_tokens``) are inside the output tokens (the conventions copy
  OpenAI's ``completion_tokens``, which counts them) and cached ones
  (``gen_ai.usage.cache_read.input_tokens``) inside the input tokens: nothing is added; a task's
  ``meta`` keeps their sums where recorded (no step field holds them).
- **Times.** ``duration_s``: the model call's span (end - start), shared like its output
  tokens; ``tool_duration_s``: each tool span's own (end - start). A span that ends before it
  starts (clock skew) is a bad span.

The model is ``gen_ai.response.model``, else ``gen_ai.request.model``; the provider
``gen_ai.provider.name`` (1.37 and later), else ``gen_ai.system`` (before).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..config import MAX_TOKENS
from . import _check as c
from .convert import (ROLES, Call, ImportResult, Msg, apportion, arguments_text, bounded, estimate_tokens,
                      parse_message, steps_from_messages)
from .jsonl import TraceError, read_text
from .openai import _Continuable, _key
from .schema import ESTIMABLE_FIELDS, Step, Task
from .tools import ToolKinds

MODEL_OPS = ("chat", "text_completion", "generate_content")
TOOL_OP, AGENT_OP = "execute_tool", "invoke_agent"
#: Attribute names by meaning, newest first: the current GenAI conventions, then the older.
INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
CACHED_TOKENS = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
                 "gen_ai.usage.input_tokens.cached")
REASONING_TOKENS = ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.output_tokens.reasoning")
MODEL = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
TOOL_NAME = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
READ_ONLY = ("mcp.tool.annotations.readOnlyHint", "gen_ai.tool.annotations.readOnlyHint")
#: A model call's recorded content (GenAI conventions 1.37 and later: JSON strings on the span, as
#: opentelemetry-util-genai writes them when content capture is on for spans).
INPUT_MESSAGES, OUTPUT_MESSAGES = "gen_ai.input.messages", "gen_ai.output.messages"
TOOL_DEFINITIONS, FINISH_REASONS = "gen_ai.tool.definitions", "gen_ai.response.finish_reasons"
CONVERSATION_ID = "gen_ai.conversation.id"
#: Finish reasons that mean "the model called tools" (OpenAI, the conventions, OpenAI's
#: deprecated functions, Anthropic).
TOOL_FINISH = ("tool_calls", "tool_call", "function_call", "tool_use")
#: The tool of a call a finish reason says was made where the content (its name) was not recorded.
UNRECORDED_TOOL = "(unrecorded)"


@dataclass
class Span:
    trace: str
    id: str
    parent: str
    name: str
    start: int  # unix ns
    end: int
    attrs: dict
    where: str  # file:line for messages

    error: bool = False  # the span's status is ERROR

    @property
    def op(self) -> str:
        a = self.attrs
        op = a.get("gen_ai.operation.name")
        if isinstance(op, str) and op:
            return op
        if a.get("mcp.method.name") == "tools/call":
            return TOOL_OP
        # OpenLLMetry puts the operation on metrics only; its spans say llm.request.type and
        # traceloop.span.kind. OpenInference says openinference.span.kind.
        if a.get("llm.request.type") in ("chat", "completion"):
            return "chat"
        return _KINDS.get(str(a.get("traceloop.span.kind") or a.get("openinference.span.kind") or "").lower(), "")

    def first(self, keys):
        for k in keys:
            if self.attrs.get(k) is not None:
                return self.attrs[k]
        return None


_KINDS = {"tool": TOOL_OP, "agent": AGENT_OP, "llm": "chat"}  # traceloop / openinference span kinds

_NUMBERS = {"intValue": (int, (int, str), "an integer"), "doubleValue": (float, (int, float, str), "a number")}


def _value(v, at: str):
    """An OTLP AnyValue as a Python value."""
    v = c.obj(v, at)
    if not v:
        return None
    (kind, x), = list(v.items())[:1]
    if kind == "stringValue":
        if not isinstance(x, str):
            raise c.Bad(at, f"stringValue must be a string, got {c.show(x)}")
        return x
    if kind == "boolValue":
        if not isinstance(x, bool):
            raise c.Bad(at, f"boolValue must be true or false, got {c.show(x)}")
        return x
    if kind in _NUMBERS:  # int64 travels as a JSON string (or number)
        make, types, what = _NUMBERS[kind]
        try:
            if isinstance(x, bool) or not isinstance(x, types) or (isinstance(x, str) and len(x) > 24):
                raise ValueError
            return make(x)
        except ValueError:
            raise c.Bad(at, f"{kind} must be {what}, got {c.show(x)}") from None
    if kind == "arrayValue":
        vals = c.obj(x, at + ".arrayValue").get("values", [])
        return [_value(e, f"{at}.arrayValue.values[{i}]") for i, e in enumerate(c.lst(vals, at + ".arrayValue.values"))]
    return None  # kvlistValue, bytesValue: not needed here


def _attrs(raw, at: str) -> dict:
    out = {}
    for i, kv in enumerate(c.lst(raw if raw is not None else [], at)):
        kv = c.obj(kv, f"{at}[{i}]")
        key = kv.get("key")
        if not isinstance(key, str):
            raise c.Bad(f"{at}[{i}].key", f"expected a string, got {c.show(key)}")
        out[key] = _value(kv.get("value", {}), f"{at}[{i}].value")
    return out


def _ns(span: dict, key: str, at: str) -> int:
    """Unix nanoseconds: OTLP/JSON writes them as a decimal string (a JSON number is taken
    too); at most 20 digits, past any clock."""
    v = span.get(key)
    if isinstance(v, str) and re.fullmatch(r"[0-9]{1,20}", v):
        return int(v)
    if type(v) is int and 0 <= v < 10**20:
        return v
    raise c.Bad(f"{at}.{key}", f"expected unix nanoseconds, got {c.show(v)}")


def _spans(doc, where: str):
    """The spans of one ExportTraceServiceRequest (or a list of them)."""
    docs = doc if isinstance(doc, list) else [doc]
    for d, req in enumerate(docs):
        pre = f"[{d}]." if isinstance(doc, list) else ""
        req = c.obj(req, pre + "(document)")
        for i, rs in enumerate(c.lst(req.get("resourceSpans"), pre + "resourceSpans")):
            rs = c.obj(rs, f"{pre}resourceSpans[{i}]")
            for j, ss in enumerate(c.lst(rs.get("scopeSpans", []), f"{pre}resourceSpans[{i}].scopeSpans")):
                ss = c.obj(ss, f"{pre}resourceSpans[{i}].scopeSpans[{j}]")
                for k, sp in enumerate(c.lst(ss.get("spans", []), f"{pre}resourceSpans[{i}].scopeSpans[{j}].spans")):
                    at = f"{pre}resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                    sp = c.obj(sp, at)
                    ids = []
                    for key in ("traceId", "spanId"):
                        v = sp.get(key)
                        if not isinstance(v, str) or not v:
                            raise c.Bad(f"{at}.{key}", f"expected an id string, got {c.show(v)}")
                        ids.append(v)
                    parent = sp.get("parentSpanId") or ""
                    if not isinstance(parent, str):
                        raise c.Bad(f"{at}.parentSpanId", f"expected an id string, got {c.show(parent)}")
                    start, end = _ns(sp, "startTimeUnixNano", at), _ns(sp, "endTimeUnixNano", at)
                    if end < start:
                        raise c.Bad(f"{at}.endTimeUnixNano", f"ends {(start - end) / 1e9:.3g} s before it starts (clock skew)")
                    name = sp.get("name", "")
                    attrs = _attrs(sp.get("attributes"), f"{at}.attributes")
                    for key in (*INPUT_TOKENS, *OUTPUT_TOKENS, *CACHED_TOKENS, *REASONING_TOKENS):
                        v = attrs.get(key)
                        f = c.finite(v)
                        if v is not None and (f is None or not 0 <= f <= MAX_TOKENS or f != int(f)):
                            raise c.Bad(f"{at}.attributes.{key}", f"expected a token count in [0, {MAX_TOKENS:.0e}], "
                                                                 f"got {c.show(v)}")
                    status = sp.get("status") if isinstance(sp.get("status"), dict) else {}
                    error = status.get("code") in (2, "2", "STATUS_CODE_ERROR") or attrs.get("error.type") is not None
                    yield Span(ids[0], ids[1], parent, name if isinstance(name, str) else "", start, end, attrs, where,
                               error)


@dataclass
class _Run:
    key: str
    spans: list = field(default_factory=list)
    keyed: bool = False  # grouped by a span attribute (gen_ai.conversation.id, --group-by)


def import_otel(paths, *, tool_kinds: dict[str, str] | None = None, strict: bool = False,
                group_by: str | None = None) -> ImportResult:
    """Import OTLP/JSON trace files (one or several: spans are joined by trace id). A malformed
    line (or document) is skipped with a warning naming file, line and field; with ``strict``
    it is fatal, and so is a span whose parent is in none of the files. ``group_by``: the span
    attribute whose values are the tasks (default :data:`CONVERSATION_ID`)."""
    paths = [Path(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
    warnings: list[str] = []
    spans: dict[tuple, Span] = {}
    records = 0
    for path in paths:
        text = read_text(path)
        chunks = _documents(text)
        for lineno, chunk in chunks:
            records += 1
            where = f"{path}:{lineno}"
            try:
                got = list(_spans(c.json_line(chunk), where))
            except c.Bad as e:
                msg = f"{path}:{lineno + e.line - 1}: field '{e.field}': {e.what}"
                if strict:
                    raise TraceError(msg) from None
                warnings.append(msg + "; skipped")
                continue
            for s in got:
                spans[(s.trace, s.id)] = s
    runs, orphans = _runs(spans)
    kept = {id(s) for r in runs for s in r.spans}
    for s in orphans:
        msg = f"{s.where}: span {s.name!r} ({s.id}): its parent {s.parent} is in none of the files"
        if strict:
            raise TraceError(msg + " (a trace split across files: give them all)")
        warnings.append(msg + ("; taken as a root of its trace" if id(s) in kept
                               else "; left out: taken as a root, it is outside every agent run of its trace"))
    kinds = ToolKinds(tool_kinds)
    attr = group_by or CONVERSATION_ID
    runs, keyed = _by_attribute(runs, attr)
    if group_by and not keyed:
        warnings.append(f"--group-by {group_by}: no span carries this attribute; tasks are grouped by trace")
    names = ",".join(p.name for p in paths)
    tasks, left_out, lone = [], defaultdict(int), []

    def complain(s: Span, e: c.Bad, what: str):  # recorded content that does not parse: left out
        msg = f"{s.where}: span {s.name!r} ({s.id}): field 'attributes.{e.field}': {e.what}"
        if strict:
            raise TraceError(msg)
        warnings.append(f"{msg}; {what} left out")

    def add(key: str, steps, calls: list[Span]):
        if steps:
            model = next((s.model for s in steps if s.model), "")
            meta = ({"agent_llm": model} if model else {}) | _usage_meta(calls)
            tasks.append((calls[0].start, Task(task_id=key, steps=bounded(steps, key, names, warnings),
                                               source="otel:" + names, meta=meta)))

    for run in runs:
        calls, tools, notes = _split(run.spans)
        for k, v in notes.items():
            left_out[k] += v
        hinted = _Hinted(kinds, _tool_hints(calls, complain))
        if tools or not calls:  # the spans say which tools ran
            steps, lost = _span_steps(calls, tools, hinted)
            left_out["tool_spans_before_any_model_call"] += lost
            add(run.key, steps, calls)
        elif not run.keyed and len(calls) == 1 and not any(s.op == AGENT_OP for s in run.spans):
            lone.append((calls[0], hinted))  # a chat call alone in its trace: the one-line set-up
        else:
            add(run.key, _message_steps([_turn(s, complain) for s in calls], hinted), calls)
    recorded = any(s.attrs.get(INPUT_MESSAGES) is not None for s, _ in lone)
    for conv in _chain([(_turn(s, complain), h) for s, h in lone]):
        add(conv[0][0][0].trace, _message_steps([t for t, _ in conv], conv[0][1]), [t[0] for t, _ in conv])
    notes = {k: v for k, v in left_out.items() if v}
    if keyed:
        notes["task_grouping"] = f"one per {attr} value (spans without one: one per trace)"
    elif lone:
        notes["task_grouping"] = ("one per trace; a trace of one chat call continues the conversation whose "
                                  "messages its input extends" if recorded else "one per trace")
    if len(lone) > 1 and not keyed and not recorded:
        warnings.append(f"{len(lone)} traces of one chat call each, no {CONVERSATION_ID} and no recorded messages: "
                        "each chat call became its own task; pass --group-by ATTRIBUTE (a span attribute naming "
                        "the conversation), or record messages (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="
                        "span_only) so that calls join by their history")
    tasks = [t for _, t in sorted(tasks, key=lambda x: x[0])]
    return ImportResult(tasks=tasks, warnings=warnings, records=records, defaulted_tools=kinds.defaulted, notes=notes)


def _documents(text: str) -> list[tuple[int, str]]:
    """One document per non-empty line (JSON Lines), or the whole text when it is one document
    spread over lines (it parses whole, or none of its lines is an object of its own: then its
    one error is said once, not once a line)."""
    lines = [(i, ln) for i, ln in enumerate(text.split("\n"), start=1) if ln.strip()]
    if len(lines) > 1 and (_parses(text) is not None or not any(isinstance(_parses(ln), dict) for _, ln in lines)):
        return [(1, text)]
    return lines


def _parses(text: str):
    """The JSON value of ``text``, or None where it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # ValueError: also a number past 4,300 digits
        return None


def _runs(spans: dict) -> tuple[list[_Run], list[Span]]:
    """Group spans into agent runs; return the runs (in start order) and the orphans."""
    by_trace = defaultdict(list)
    for s in spans.values():
        by_trace[s.trace].append(s)
    runs, orphans = [], []
    for trace, group in by_trace.items():
        ids = {s.id: s for s in group}
        orphans += [s for s in group if s.parent and s.parent not in ids]

        def top_agent(s):  # the outermost invoke_agent span at or above s
            found, cur, seen = None, s, set()
            while cur is not None and cur.id not in seen:
                seen.add(cur.id)
                if cur.op == AGENT_OP:
                    found = cur
                cur = ids.get(cur.parent)
            return found

        by_agent = defaultdict(list)
        for s in group:
            a = top_agent(s)
            by_agent[a.id if a else ""].append(s)
        agents = sorted((k for k in by_agent if k), key=lambda k: ids[k].start)
        if not agents:
            runs.append(_Run(trace, by_agent[""]))
            continue
        for n, k in enumerate(agents):
            runs.append(_Run(trace if len(agents) == 1 else f"{trace}/{n + 1}", by_agent[k]))
        # Spans outside every agent run in a trace that has runs belong to none of them.
    runs.sort(key=lambda r: min(s.start for s in r.spans))
    return runs, orphans


def _split(spans: list[Span]) -> tuple[list[Span], list[Span], dict]:
    """A run's model calls and tool calls (each in start order), and counts of the spans left
    out (``notes``)."""
    ids = {s.id: s for s in spans}

    def inside_a_tool(s):  # an MCP client span below the framework's execute_tool span, say
        cur, seen = ids.get(s.parent), set()
        while cur is not None and cur.id not in seen:
            if cur.op == TOOL_OP:
                return True
            seen.add(cur.id)
            cur = ids.get(cur.parent)
        return False

    calls = sorted((s for s in spans if s.op in MODEL_OPS), key=lambda s: (s.start, s.end))
    # A failed call with no output (a rate limit, retried) made no step: the retry does.
    failed = [s for s in calls if s.error and _count(s, OUTPUT_TOKENS) is None]
    calls = [s for s in calls if s not in failed]
    tools = sorted((s for s in spans if s.op == TOOL_OP), key=lambda s: (s.start, s.end))
    nested = [t for t in tools if inside_a_tool(t)]
    tools = [t for t in tools if t not in nested]
    return calls, tools, {"failed_model_calls_left_out": len(failed), "tool_spans_inside_a_tool_span": len(nested)}


def _span_steps(calls: list[Span], tools: list[Span], kinds) -> tuple[list[Step], int]:
    """The steps of model calls whose tool calls are spans of their own, and how many tool spans
    came before any model call (left out)."""
    issued = [[] for _ in calls]
    lost = 0
    for t in tools:  # each tool call belongs to the last model call that started before it (it
        # may start before that call's span ends: a tool dispatched while the answer streams)
        k = max((i for i, m in enumerate(calls) if m.start <= t.start), default=None)
        if k is None:
            lost += 1
        else:
            issued[k].append(t)
    steps = []
    for i, m in enumerate(calls):
        nxt = calls[i + 1] if i + 1 < len(calls) else None
        steps.extend(replace(s, call=i) for s in _call_steps(m, issued[i], nxt, i == len(calls) - 1, kinds))
    return steps, lost


# --- model calls without tool spans: steps from their recorded messages ----------------------------


def _by_attribute(runs: list[_Run], attr: str) -> tuple[list[_Run], bool]:
    """``runs`` regrouped by the span attribute ``attr``: one run per value, across traces (a
    span without the attribute takes its nearest ancestor's); spans with none stay in their run.
    Also whether any span had a value."""
    out, by_value = [], {}
    for run in runs:
        ids = {s.id: s for s in run.spans}
        rest = []
        for s in run.spans:
            cur, seen, value = s, set(), None
            while cur is not None and cur.id not in seen and value is None:
                v = cur.attrs.get(attr)
                value = None if v in (None, "", []) else str(v)
                seen.add(cur.id)
                cur = ids.get(cur.parent)
            (rest if value is None else by_value.setdefault(value, [])).append(s)
        if rest:
            out.append(_Run(run.key, rest))
    out += [_Run(v, spans, keyed=True) for v, spans in by_value.items()]
    out.sort(key=lambda r: min(s.start for s in r.spans))
    return out, bool(by_value)


def _json_attr(s: Span, key: str):
    """A content attribute's JSON value (a JSON string, or an array of JSON strings), or None."""
    v = s.attrs.get(key)
    try:
        if isinstance(v, str):
            return json.loads(v)
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return [json.loads(x) for x in v]
    except (ValueError, RecursionError):
        raise c.Bad(key, "expected JSON (a list of messages or definitions)") from None
    return v


def _recorded(s: Span, key: str) -> list[Msg] | None:
    """The messages recorded in ``key`` (``[{"role", "parts": [...]}]``, the conventions' form;
    OpenAI-shaped messages are read too), or None where the span has none."""
    raw = _json_attr(s, key)
    if raw is None:
        return None
    out = []
    for i, m in enumerate(c.lst(raw, key)):
        at = f"{key}[{i}]"
        m = c.obj(m, at)
        role = m.get("role")
        role = {"developer": "system"}.get(role, role) if isinstance(role, str) else role
        if role not in ROLES:
            raise c.Bad(f"{at}.role", f"{c.show(role)} is not one of {', '.join(ROLES)}")
        if "parts" not in m:  # OpenAI's shape: {"role", "content", "tool_calls"}
            out.append(parse_message(m, at)[0])
            continue
        text, calls, results = [], [], []
        for j, part in enumerate(c.lst(m["parts"], f"{at}.parts")):
            pat = f"{at}.parts[{j}]"
            part = c.obj(part, pat)
            kind = part.get("type")
            if kind == "text":
                text.append(c.opt_str(part, "content", pat))
            elif kind == "tool_call":
                name = part.get("name")
                if not isinstance(name, str) or not name:
                    raise c.Bad(f"{pat}.name", f"expected a tool name, got {c.show(name)}")
                calls.append(Call(name=name, arguments=arguments_text(part.get("arguments")),
                                  id=c.opt_str(part, "id", pat)))
            elif kind == "tool_call_response":
                results.append(Msg(role="tool", text=arguments_text(part.get("response")),
                                   tool_call_id=c.opt_str(part, "id", pat)))
            # other parts (reasoning, media) are not sent back as text
        if results:  # one tool message a result (a message may carry several)
            out += results
        else:
            out.append(Msg(role=role, text="".join(text), calls=calls if role == "assistant" else []))
    return out


def _turn(s: Span, complain) -> tuple[Span, list[Msg] | None, Msg]:
    """A model call as (its span, its recorded input messages or None, its output message with
    usage): the output's tool calls where recorded, else one unnamed call where a finish reason
    says the model called tools."""
    inp, out = None, []
    try:
        inp = _recorded(s, INPUT_MESSAGES)
    except c.Bad as e:
        complain(s, e, "its input messages")
    try:
        out = [m for m in _recorded(s, OUTPUT_MESSAGES) or [] if m.role == "assistant"]
    except c.Bad as e:
        complain(s, e, "its output messages")
    msg = out[0] if out else Msg(role="assistant")  # of several choices, the first
    reasons = s.attrs.get(FINISH_REASONS)
    if not out and any(r in TOOL_FINISH for r in (reasons if isinstance(reasons, list) else [reasons])):
        msg.calls = [Call(name=UNRECORDED_TOOL)]
    msg.prompt_tokens, msg.completion_tokens = _count(s, INPUT_TOKENS), _count(s, OUTPUT_TOKENS)
    msg.cached_tokens, msg.reasoning_tokens = _count(s, CACHED_TOKENS), _count(s, REASONING_TOKENS)
    model = s.first(MODEL)
    msg.model = model if isinstance(model, str) else ""
    msg.duration_s = (s.end - s.start) / 1e9
    return s, inp, msg


def _chain(turns: list) -> list[list]:
    """Calls alone in their traces, (turn, kinds) in start order, joined into conversations: a
    call whose input messages extend a conversation's messages so far (the last call's input and
    output) continues the longest such conversation; any other call starts one."""
    convs, index = [], _Continuable()
    for item in sorted(turns, key=lambda x: x[0][0].start):
        (_, inp, out), _ = item
        g = index.longest(inp) if inp else None
        if g is None:
            g = _Conv()
            convs.append(g)
        old = g.keys
        g.items.append(item)
        g.keys = [_key(m) for m in inp + [out]] if inp is not None else None
        index.put(g, old)
    return [g.items for g in convs]


class _Conv:
    def __init__(self):
        self.items, self.keys = [], None


def _message_steps(turns: list, kinds) -> list[Step]:
    """Steps of one conversation's model calls (:func:`_turn`) by the shared rules of
    :mod:`.convert`: each call's input adds what is new to the transcript (its messages past the
    transcript so far where they extend it, else those after its last assistant message; all of
    the first call's, whose assistant messages are history), then its output. Where no input
    was recorded, a call's observation is what the next call's input grew by, as with tool spans."""
    msgs: list[Msg] = []
    for i, (_, inp, out) in enumerate(turns):
        if inp is not None:
            if i == 0:
                new = [replace(m, skip=True) if m.role == "assistant" else m for m in inp]
            elif [_key(m) for m in msgs] == [_key(m) for m in inp[:len(msgs)]]:
                new = inp[len(msgs):]
            else:
                last = max((j for j, m in enumerate(inp) if m.role == "assistant"), default=-1)
                new = inp[last + 1:]
            msgs += new
        msgs.append(out)
    steps = steps_from_messages(msgs, kinds)
    if any(inp is not None for _, inp, _ in turns):
        return steps
    for i, (_, _, out) in enumerate(turns[:-1]):  # no content recorded: the growth of the input
        nxt = turns[i + 1][2].prompt_tokens
        if nxt is None or out.prompt_tokens is None or out.completion_tokens is None:
            continue
        mine = [j for j, st in enumerate(steps) if st.call == i]
        for j, obs in zip(mine, apportion(max(nxt - out.prompt_tokens - out.completion_tokens, 0), [1] * len(mine))):
            fields = tuple(f for f in ESTIMABLE_FIELDS if f in steps[j].estimated_fields or f == "observation_tokens")
            steps[j] = replace(steps[j], observation_tokens=obs, estimated=True, estimated_fields=fields)
    return steps


def _tool_hints(calls: list[Span], complain) -> dict[str, str]:
    """Tool kinds from the tool definitions the calls recorded (``gen_ai.tool.definitions``: the
    agent's own ``tools=[...]``), where one carries MCP's ``annotations.readOnlyHint``."""
    hints = {}
    for s in calls:
        try:
            defs = _json_attr(s, TOOL_DEFINITIONS)
            for i, d in enumerate(c.lst(defs, TOOL_DEFINITIONS) if defs is not None else []):
                d = c.obj(d, f"{TOOL_DEFINITIONS}[{i}]")
                fn = d.get("function") if isinstance(d.get("function"), dict) else d  # OpenAI's shape
                notes = fn.get("annotations", d.get("annotations"))
                hint = notes.get("readOnlyHint") if isinstance(notes, dict) else None
                if isinstance(fn.get("name"), str) and isinstance(hint, bool):
                    hints[fn["name"]] = "read" if hint else "write"
        except c.Bad as e:
            complain(s, e, "its tool definitions")
    return hints


class _Hinted:
    """Tool kinds: the recorded definitions' hints, else the mapping given (which counts defaults)."""

    def __init__(self, kinds: ToolKinds, hints: dict[str, str]):
        self.kinds, self.hints = kinds, hints

    def kind(self, name: str) -> str:
        return self.hints.get(name) or self.kinds.kind(name)


def _usage_meta(calls: list[Span]) -> dict:
    """Sums of the calls' cached prompt tokens and reasoning tokens (parts of their input and
    output tokens: no step field holds them), where recorded."""
    out = {}
    for key, attrs in (("cached_input_tokens", CACHED_TOKENS), ("reasoning_output_tokens", REASONING_TOKENS)):
        vals = [_count(s, attrs) for s in calls if _count(s, attrs) is not None]
        if vals:
            out[key] = sum(vals)
    return out


def _count(s: Span, keys) -> int | None:
    v = s.first(keys)  # validated when the span was read
    return None if v is None else int(v)


def _chars(s: Span, key: str) -> int | None:
    v = s.attrs.get(key)
    return estimate_tokens(v if isinstance(v, str) else json.dumps(v)) if v is not None else None


def _call_steps(m: Span, tools: list[Span], nxt: Span | None, last: bool, kinds: ToolKinds) -> list[Step]:
    est = set()
    out = _count(m, OUTPUT_TOKENS)
    if out is None:
        out, _ = _chars(m, "gen_ai.output.messages") or 0, est.add("output_tokens")
    ctx = _count(m, INPUT_TOKENS)
    if ctx is None:
        ctx, _ = _chars(m, "gen_ai.input.messages") or -1, est.add("context_tokens")
    grew = None
    if nxt is not None:
        nin = _count(nxt, INPUT_TOKENS)
        if nin is not None and ctx >= 0:
            grew = max(nin - ctx - out, 0)
    model = m.first(MODEL)
    model = model if isinstance(model, str) else ""
    dur = (m.end - m.start) / 1e9
    n = max(len(tools), 1)
    outs = apportion(out, [1] * n)
    obs = apportion(grew, [1] * n) if grew is not None else [0] * n
    obs_est = {"observation_tokens"} if grew is not None else set()
    if not tools:
        kind = "final" if last else "respond"
        return [_step(kind, "", outs[0], obs[0], ctx, model, dur, None, est | obs_est)]
    steps, before = [], 0
    for j, t in enumerate(tools):
        name = t.first(TOOL_NAME)
        name = name if isinstance(name, str) and name else t.name.removeprefix("execute_tool ").strip()
        hint = t.first(READ_ONLY)
        kind = ("read" if hint else "write") if isinstance(hint, bool) else kinds.kind(name)
        share = outs[j] / out if out else 1 / n
        e = est | obs_est | ({"duration_s"} if n > 1 else set())
        steps.append(_step(kind, name, outs[j], obs[j], ctx + before if ctx >= 0 else -1, model, dur * share,
                           (t.end - t.start) / 1e9, e))
        before += outs[j]
    return steps


def _step(kind, tool, out, obs, ctx, model, dur, tool_dur, est) -> Step:
    fields = tuple(f for f in ("output_tokens", "observation_tokens", "context_tokens", "duration_s") if f in est)
    return Step(kind=kind, output_tokens=int(out), observation_tokens=int(obs), tool=tool, context_tokens=int(ctx),
                model=model, duration_s=dur, tool_duration_s=tool_dur, estimated=bool(fields),
                estimated_fields=fields)

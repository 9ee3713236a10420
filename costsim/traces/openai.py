"""Importer for OpenAI-style logs (JSONL): chat-completions and Responses API calls, e.g. a
proxy's or vLLM's request log, and the Batch API's output joined to its input.

Each line is one of:

- a chat-completions call: ``{"request": {"messages": [...], ...}, "response": {"choices":
  [{"message": ...}], "usage": {...}, "model": ...}}`` (``request.body`` / ``response.body``
  wrappers are unwrapped); optional ``duration_s`` (or ``latency_s``) at the top level;
- a Responses API call: ``{"request": {"input": ..., "instructions": ...}, "response":
  {"output": [...], "usage": {...}}}``. ``instructions`` is the system message; ``input`` a
  string (the user's message) or items: ``message`` items are messages, a ``function_call`` is a
  tool call of the assistant message it follows (``call_id`` its id), a ``function_call_output``
  that call's result; ``reasoning`` items add no text (their tokens are in ``output_tokens``);
  other items (built-in tools' calls, item references) are left out. A request with
  ``previous_response_id`` continues the task of that response (its input holds only what is new);
- a whole conversation: ``{"messages": [...]}``, whose assistant messages may carry ``usage``,
  ``model`` and ``generation_time_seconds``;
- a Batch API output line: ``{"custom_id", "response": {"status_code", "body": ...}, "error"}``.
  It holds no request: the Batch input file (``{"custom_id", "method", "url", "body"}`` lines)
  must be given too (both files on the command line, in any order; an input file is told by its
  lines), and each output line is joined to its request by ``custom_id``. A request that failed
  (an ``error``, a status other than 200) made no step: it is counted, and left out.

Usage: ``prompt_tokens`` / ``completion_tokens`` (Responses: ``input_tokens`` / ``output_tokens``).
Their cached and reasoning parts (``prompt_tokens_details.cached_tokens`` /
``input_tokens_details.cached_tokens``, ``completion_tokens_details.reasoning_tokens`` /
``output_tokens_details.reasoning_tokens``) are already inside those counts, so nothing is
added; their sums go to the task's ``meta`` (``cached_input_tokens``, ``reasoning_output_tokens``).

Any line may carry ``task_id`` (or ``session_id`` / ``conversation_id``). Calls with the same id
are one task; calls without an id are grouped by their history: a call continues the task
whose transcript so far (earlier request + its response) is a prefix of its own messages.
Assistant messages that were already in the first request of a task are history, not steps;
one that appears later without a logged call (a skipped line, an unlogged call) is a step with
estimated tokens. A task without an id is named by its first line (``lineN``) or, from a
batch, by its first request's ``custom_id``. Steps then follow :mod:`costsim.traces.convert`.
Tool kinds come only from the mapping given (no built-in table); unknown tools are writes and
counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import _check as c
from .convert import (ImportResult, Msg, arguments_text, bounded, parse_message, steps_from_messages, tool_call,
                      usage_meta)
from .jsonl import TraceError, read_text
from .schema import Task
from .tools import ToolKinds

_ID_KEYS = ("task_id", "session_id", "conversation_id")
#: Where each API puts its usage: prompt, completion, and the objects that break them down.
_USAGE = {"chat": ("prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"),
          "responses": ("input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details")}


def _key(m: Msg) -> tuple:
    """A message's identity for history matching (argument JSON compared canonically)."""
    def canon(a: str) -> str:
        try:
            return json.dumps(json.loads(a), sort_keys=True, separators=(",", ":"))
        except (ValueError, RecursionError):  # ValueError: also a number past 4,300 digits
            return a
    return (m.role, m.text, tuple((x.name, canon(x.arguments)) for x in m.calls), m.tool_call_id)


def _messages(v, at: str) -> list[Msg]:
    return [parse_message(raw, f"{at}[{k}]")[0] for k, raw in enumerate(c.lst(v, at))]


def _unwrap(v, at: str, keys) -> tuple[dict, str]:
    """A request or response object, out of a ``body`` wrapper (the Batch API's, a proxy's)."""
    v = c.obj(v, at)
    if not any(k in v for k in keys) and isinstance(v.get("body"), dict):
        return v["body"], f"{at}.body"
    return v, at


def _read_usage(msg: Msg, usage, at: str, api: str) -> None:
    prompt, completion, prompt_parts, completion_parts = _USAGE[api]
    usage = c.obj(usage, at)
    msg.prompt_tokens = c.opt_count(usage, prompt, at)
    msg.completion_tokens = c.opt_count(usage, completion, at)
    for parts, key, attr in ((prompt_parts, "cached_tokens", "cached_tokens"),
                             (completion_parts, "reasoning_tokens", "reasoning_tokens")):
        if usage.get(parts) is not None:
            setattr(msg, attr, c.opt_count(c.obj(usage[parts], f"{at}.{parts}"), key, f"{at}.{parts}"))


def _call(line: dict) -> tuple[list[Msg], Msg, str, str]:
    """A logged call: its history, its response message, and (Responses API) the response it
    continues and its own id."""
    req, at = _unwrap(line["request"], "request", ("messages", "input"))
    resp, rat = _unwrap(line.get("response"), "response", ("choices", "output"))
    if "messages" not in req and "choices" not in resp and ("input" in req or "output" in resp):
        history, msg, prev, rid = _responses_call(req, at, resp, rat)
    else:
        (history, msg), prev, rid = _chat_call(req, at, resp, rat), "", ""
    msg.model = c.opt_str(resp, "model", rat) or msg.model
    for k in ("duration_s", "latency_s"):
        if line.get(k) is not None:
            msg.duration_s = c.opt_seconds(line, k, "")
    return history, msg, prev, rid


def _chat_call(req: dict, at: str, resp: dict, rat: str) -> tuple[list[Msg], Msg]:
    history = _messages(req.get("messages"), f"{at}.messages")
    choices = c.lst(resp.get("choices"), f"{rat}.choices")
    if not choices:
        raise c.Bad(f"{rat}.choices", "empty")
    raw = c.obj(choices[0], f"{rat}.choices[0]").get("message")
    msg = parse_message(raw, f"{rat}.choices[0].message")[0]
    if msg.role != "assistant":
        raise c.Bad(f"{rat}.choices[0].message.role", f"expected \"assistant\", got {c.show(msg.role)}")
    if resp.get("usage") is not None:
        _read_usage(msg, resp["usage"], f"{rat}.usage", "chat")
    return history, msg


def _responses_call(req: dict, at: str, resp: dict, rat: str) -> tuple[list[Msg], Msg, str, str]:
    prev = c.opt_str(req, "previous_response_id", at)
    history = []
    instructions = c.opt_str(req, "instructions", at)
    if instructions and not prev:  # a continued response's system message is in its task already
        history.append(Msg(role="system", text=instructions))
    history += _items(req.get("input", []), f"{at}.input")
    out = _items(c.lst(resp.get("output"), f"{rat}.output"), f"{rat}.output")
    if any(m.role != "assistant" for m in out):
        raise c.Bad(f"{rat}.output", "expected the assistant's items only (messages, function calls, reasoning)")
    msg = out[0] if out else Msg(role="assistant")
    if resp.get("usage") is not None:
        _read_usage(msg, resp["usage"], f"{rat}.usage", "responses")
    return history, msg, prev, c.opt_str(resp, "id", rat)


def _items(v, at: str) -> list[Msg]:
    """Responses API items as messages; an assistant's message and the function calls after it
    (one response's output) are one assistant message."""
    if isinstance(v, str):
        return [Msg(role="user", text=v)]
    out: list[Msg] = []

    def assistant() -> Msg:  # the assistant message an item belongs to
        if not out or out[-1].role != "assistant":
            out.append(Msg(role="assistant"))
        return out[-1]

    for k, it in enumerate(c.lst(v, at)):
        a = f"{at}[{k}]"
        it = c.obj(it, a)
        kind = it.get("type", "message")
        if kind == "message":
            role = it.get("role")
            role = "system" if role == "developer" else role
            if role not in ("system", "user", "assistant"):
                raise c.Bad(f"{a}.role", f"{c.show(role)} is not one of system, developer, user, assistant")
            text = c.content_text(it.get("content"), f"{a}.content")
            if role == "assistant":
                assistant().text += text
            else:
                out.append(Msg(role=role, text=text))
        elif kind == "function_call":
            assistant().calls.append(tool_call(it.get("name"), it.get("arguments"),
                                               c.opt_str(it, "call_id", a) or c.opt_str(it, "id", a), a))
        elif kind == "function_call_output":
            result = it.get("output")
            text = c.content_text(result, f"{a}.output") if isinstance(result, list) else arguments_text(result)
            out.append(Msg(role="tool", text=text, tool_call_id=c.opt_str(it, "call_id", a)))
        elif kind == "reasoning":
            assistant()  # starts the assistant's turn; its text is not sent back as context
    return out


def _line_id(line: dict, lineno: int) -> str | None:
    for k in _ID_KEYS:
        v = line.get(k)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (str, int)) or v == "":
                raise c.Bad(k, f"expected a string id, got {c.show(v)}")
            return str(v)
    return None


class _Group:
    def __init__(self, tid: str | None, history: list[Msg]):
        self.tid = tid
        self.history_len = len(history)  # messages before the first logged call: not steps
        self.transcript: list[Msg] = list(history)
        self.keys = [_key(m) for m in history]
        self.logged: dict[int, Msg] = {}  # transcript position -> logged response

    def add(self, history: list[Msg], msg: Msg):
        self.transcript = list(history) + [msg]
        self.keys = [_key(m) for m in self.transcript]
        self.logged[len(history)] = msg

    def messages(self) -> list[Msg]:
        out = []
        for i, m in enumerate(self.transcript):
            m = self.logged.get(i, m)
            if m.role == "assistant" and i < self.history_len:
                m.skip = True
            out.append(m)
        return out


def import_openai(paths, *, tool_kinds: dict[str, str] | None = None, strict: bool = False,
                  name: str | None = None) -> ImportResult:
    """Import OpenAI-style JSONL logs (a path, or several: a Batch API output file and its input
    file, or parts of one log). A malformed line is skipped with a warning naming file, line and
    field (fatal with ``strict``); it never changes the other tasks."""
    paths = [Path(p) for p in (paths if isinstance(paths, (list, tuple)) else [paths])]
    files = [(name if name and len(paths) == 1 else str(p), read_text(p)) for p in paths]
    return _import(files, tool_kinds, strict)


def import_openai_text(text: str, name: str, *, tool_kinds=None, strict: bool = False) -> ImportResult:
    """:func:`import_openai` on the log's text (``name`` is used in messages)."""
    return _import([(name, text)], tool_kinds, strict)


def _refuse_a_spread_document(text: str, name: str) -> None:
    """TraceError (one line) for a JSON document spread over lines (pretty-printed), which is
    not JSON Lines: else each of its lines would be warned of, thousands of them."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if len(lines) < 2 or lines[0].lstrip()[:1] not in "[{":
        return
    try:
        json.loads(lines[0])
        return  # its first line is a record of its own: JSON Lines
    except (ValueError, RecursionError):
        pass
    if any(_is_object(ln) for ln in lines[1:50]):
        return  # a broken first line in a JSON Lines file: warned of as such
    raise TraceError(f"{name}: one JSON document spread over {len(lines):,} lines, not JSON Lines "
                     "(one call or conversation an object a line): write it with one object a line")


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def _lines(text: str) -> list[tuple[int, str]]:
    # Lines end at "\n" only: str.splitlines() would also split inside strings at U+0085, U+2028.
    return [(n, ln) for n, ln in enumerate(text.split("\n"), start=1) if ln.strip()]


def _first_object(lines) -> dict:
    for _, ln in lines[:50]:
        try:
            v = json.loads(ln)
        except (ValueError, RecursionError):
            continue
        if isinstance(v, dict):
            return v
    return {}


def _batch_requests(files, strict: bool, warnings: list) -> tuple[dict, list]:
    """The Batch API input files' requests by ``custom_id`` (``{"custom_id", "method", "url",
    "body"}`` lines), and the other files (logs)."""
    requests, logs = {}, []
    for name, text in files:
        lines = _lines(text)
        first = _first_object(lines)
        if not ("custom_id" in first and "body" in first and "response" not in first):
            logs.append((name, lines))
            continue
        for lineno, line in lines:
            try:
                obj = c.obj(c.json_line(line), "(line)")
                cid = c.opt_str(obj, "custom_id", "")
                if not cid:
                    raise c.Bad("custom_id", "missing")
                if cid in requests:
                    raise c.Bad("custom_id", f"{cid!r} already used by {requests[cid][1]}")
                requests[cid] = (c.obj(obj.get("body"), "body"), f"{name}:{lineno}")
            except c.Bad as e:
                msg = f"{name}:{lineno}: field '{e.field}': {e.what}"
                if strict:
                    raise TraceError(msg) from None
                warnings.append(msg + "; line skipped")
    return requests, logs


def _batch_output(obj: dict, requests: dict, name: str) -> dict | None:
    """A Batch API output line as a logged call (its request from the input file), or None for
    a request that failed."""
    cid = c.opt_str(obj, "custom_id", "")
    resp = obj.get("response")
    if obj.get("error") is not None or not isinstance(resp, dict) or resp.get("status_code") != 200:
        return None
    if not requests:
        raise TraceError(f"{name}: Batch API output holds no requests: give the batch's input file too "
                         "(both files on the command line), its lines are joined by custom_id")
    if cid not in requests:
        raise c.Bad("custom_id", f"{cid!r} is in none of the input files")
    return {"request": requests[cid][0], "response": resp}


def _import(files, tool_kinds, strict: bool) -> ImportResult:
    """Import ``files`` (name, text): Batch API input files first, then every other line."""
    warnings: list[str] = []
    groups: list[_Group] = []
    by_id: dict[str, _Group] = {}
    by_response: dict[str, _Group] = {}  # a Responses API response id -> its task
    open_ = _Continuable()
    label: dict[int, str] = {}  # a task without an id: its first line, or its first custom_id
    where: dict[int, str] = {}
    records = failed = 0
    for name, text in files:
        _refuse_a_spread_document(text, name)
    requests, logs = _batch_requests(files, strict, warnings)
    answered = set()
    for name, lines in logs:
        for lineno, line in lines:
            records += 1
            try:
                obj = c.obj(c.json_line(line), "(line)")
                tid = _line_id(obj, lineno)
                first = f"line{lineno}"
                if "custom_id" in obj and "request" not in obj and ("response" in obj or "error" in obj):
                    first = c.opt_str(obj, "custom_id", "")
                    answered.add(first)
                    obj = _batch_output(obj, requests, name)
                    if obj is None:
                        failed += 1
                        continue
                if "request" in obj:
                    history, msg, prev, rid = _call(obj)
                    g = by_id.get(tid) if tid is not None else None
                    if prev:  # the Responses API keeps the earlier turns: the input holds what is new
                        before = by_response.get(prev)
                        if before is None:
                            note = (f"{name}:{lineno}: field 'request.previous_response_id': {prev!r} is not in the "
                                    "log: its earlier turns are unknown")
                            if strict:
                                raise TraceError(note)
                            warnings.append(note + "; a task of its own from here")
                        else:
                            history = before.transcript + history
                            g = g or before
                    if g is None and tid is None:
                        g = open_.longest(history)
                    if g is not None and g.keys is None:  # a whole conversation: nothing continues it
                        raise c.Bad("task_id", f"{tid!r} already used by {where[id(g)]} (a whole conversation)")
                    if g is None:
                        g = _Group(tid, history)
                        groups.append(g)
                        label[id(g)], where[id(g)] = first, f"line {lineno}"
                        if tid is not None:
                            by_id[tid] = g
                    old = g.keys
                    g.add(history, msg)
                    if rid:
                        by_response[rid] = g
                    if g.tid is None:
                        open_.put(g, old)
                elif "messages" in obj:
                    msgs = _messages(obj["messages"], "messages")
                    if tid is not None and tid in by_id:
                        raise c.Bad("task_id", f"{tid!r} already used by {where[id(by_id[tid])]}")
                    g = _Group(tid, [])
                    g.transcript = msgs
                    groups.append(g)
                    label[id(g)], where[id(g)] = first, f"line {lineno}"
                    if tid is not None:
                        by_id[tid] = g
                    g.keys = None  # a whole conversation: never continued by prefix
                else:
                    raise c.Bad("request", "missing (expected a call with request/response, or messages)")
            except c.Bad as e:
                msg = f"{name}:{lineno}: field '{e.field}': {e.what}"
                if strict:
                    raise TraceError(msg) from None
                warnings.append(msg + "; line skipped")
    kinds = ToolKinds(tool_kinds)
    tasks, used = [], set()
    source = "openai:" + ",".join(Path(n).name for n, _ in files)
    for g in groups:
        tid = g.tid if g.tid is not None else label[id(g)]
        while tid in used:
            tid += "'"
        used.add(tid)
        msgs = g.messages()
        model = next((m.model for m in msgs if m.model), "")
        meta = ({"agent_llm": model} if model else {}) | usage_meta(msgs)
        tasks.append(Task(task_id=tid, steps=bounded(steps_from_messages(msgs, kinds), tid, files[0][0], warnings),
                          source=source, meta=meta))
    notes = {"failed_batch_requests": failed, "batch_requests_without_output": len(set(requests) - answered)}
    return ImportResult(tasks=tasks, warnings=warnings, records=records, defaulted_tools=kinds.defaulted,
                        notes={k: v for k, v in notes.items() if v})


class _Continuable:
    """The conversations a call without an id may continue (no id, not whole, a call logged),
    each under its transcript: its length and a chained hash of its messages' keys. Finding the
    longest one that a history starts with looks up each prefix of the history once, so the
    import is linear in the log, not in (lines x conversations): 50,000 lines took minutes."""

    def __init__(self):
        self._by: dict = {}

    @staticmethod
    def _hashes(keys) -> list[int]:
        out, h = [], 0
        for k in keys:
            h = hash((h, k))
            out.append(h)
        return out

    def put(self, g: _Group, old_keys=None):
        """(Re-)index ``g`` after a call was added to it (``old_keys``: where it was)."""
        if old_keys:
            entry = self._by.get((len(old_keys), self._hashes(old_keys)[-1]), [])
            if g in entry:
                entry.remove(g)
        if g.keys:
            self._by.setdefault((len(g.keys), self._hashes(g.keys)[-1]), []).append(g)

    def longest(self, history: list[Msg]) -> _Group | None:
        keys = [_key(m) for m in history]
        hashes = self._hashes(keys)
        for n in range(len(keys), 0, -1):
            for g in self._by.get((n, hashes[n - 1]), ()):
                if g.keys == keys[:n]:  # not a hash collision
                    return g
        return None

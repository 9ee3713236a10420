"""Importer for OpenAI-style chat-completions logs (JSONL), e.g. a proxy's or vLLM's request log.

Each line is one of:

- a call: ``{"request": {"messages": [...], ...}, "response": {"choices": [{"message": ...}],
  "usage": {...}, "model": ...}}`` (``request.body`` / ``response.body`` wrappers, as in the
  Batch API, are unwrapped); optional ``duration_s`` (or ``latency_s``) at the top level;
- a whole conversation: ``{"messages": [...]}``, whose assistant messages may carry ``usage``,
  ``model`` and ``generation_time_seconds``.

Either may carry ``task_id`` (or ``session_id`` / ``conversation_id``). Calls with the same id
are one task; calls without an id are grouped by their history: a call continues the task
whose transcript so far (earlier request + its response) is a prefix of its own messages.
Assistant messages that were already in the first request of a task are history, not steps;
one that appears later without a logged call (a skipped line, an unlogged call) is a step with
estimated tokens. Steps then follow :mod:`costsim.traces.convert`. Tool kinds come only from the
mapping given (no built-in table); unknown tools are writes and counted.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import _check as c
from .convert import ImportResult, Msg, bounded, parse_message, steps_from_messages
from .jsonl import TraceError, read_text
from .schema import Task
from .tools import ToolKinds

_ID_KEYS = ("task_id", "session_id", "conversation_id")


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


def _call(line: dict) -> tuple[list[Msg], Msg]:
    req = c.obj(line["request"], "request")
    at = "request"
    if "messages" not in req and isinstance(req.get("body"), dict):
        req, at = req["body"], "request.body"
    history = _messages(req.get("messages"), f"{at}.messages")
    resp = c.obj(line.get("response"), "response")
    rat = "response"
    if "choices" not in resp and isinstance(resp.get("body"), dict):
        resp, rat = resp["body"], "response.body"
    choices = c.lst(resp.get("choices"), f"{rat}.choices")
    if not choices:
        raise c.Bad(f"{rat}.choices", "empty")
    raw = c.obj(choices[0], f"{rat}.choices[0]").get("message")
    msg = parse_message(raw, f"{rat}.choices[0].message")[0]
    if msg.role != "assistant":
        raise c.Bad(f"{rat}.choices[0].message.role", f"expected \"assistant\", got {c.show(msg.role)}")
    usage = resp.get("usage")
    if usage is not None:
        usage = c.obj(usage, f"{rat}.usage")
        msg.prompt_tokens = c.opt_count(usage, "prompt_tokens", f"{rat}.usage")
        msg.completion_tokens = c.opt_count(usage, "completion_tokens", f"{rat}.usage")
    msg.model = c.opt_str(resp, "model", rat) or msg.model
    for k in ("duration_s", "latency_s"):
        if line.get(k) is not None:
            msg.duration_s = c.opt_seconds(line, k, "")
    return history, msg


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


def import_openai(path, *, tool_kinds: dict[str, str] | None = None, strict: bool = False,
                  name: str | None = None) -> ImportResult:
    """Import a chat-completions JSONL log. A malformed line is skipped with a warning naming
    file, line and field (fatal with ``strict``); it never changes the other tasks."""
    path = Path(path)
    name = name or str(path)
    text = read_text(path)
    return import_openai_text(text, name, tool_kinds=tool_kinds, strict=strict)


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


def import_openai_text(text: str, name: str, *, tool_kinds=None, strict: bool = False) -> ImportResult:
    """:func:`import_openai` on the log's text (``name`` is used in messages)."""
    warnings: list[str] = []
    groups: list[_Group] = []
    by_id: dict[str, _Group] = {}
    open_ = _Continuable()
    first_line: dict[int, int] = {}
    records = 0
    _refuse_a_spread_document(text, name)
    # Lines end at "\n" only: str.splitlines() would also split inside strings at U+0085, U+2028.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        records += 1
        try:
            obj = c.obj(c.json_line(line), "(line)")
            tid = _line_id(obj, lineno)
            if "request" in obj:
                history, msg = _call(obj)
                g = by_id.get(tid) if tid is not None else open_.longest(history)
                if g is not None and g.keys is None:  # a whole conversation: nothing continues it
                    raise c.Bad("task_id", f"{tid!r} already used by line {first_line[id(g)]} (a whole conversation)")
                if g is None:
                    g = _Group(tid, history)
                    groups.append(g)
                    first_line[id(g)] = lineno
                    if tid is not None:
                        by_id[tid] = g
                old = g.keys
                g.add(history, msg)
                if g.tid is None:
                    open_.put(g, old)
            elif "messages" in obj:
                msgs = _messages(obj["messages"], "messages")
                if tid is not None and tid in by_id:
                    raise c.Bad("task_id", f"{tid!r} already used by line {first_line[id(by_id[tid])]}")
                g = _Group(tid, [])
                g.transcript = msgs
                groups.append(g)
                first_line[id(g)] = lineno
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
    for g in groups:
        tid = g.tid if g.tid is not None else f"line{first_line[id(g)]}"
        while tid in used:
            tid += "'"
        used.add(tid)
        msgs = g.messages()
        model = next((m.model for m in msgs if m.model), "")
        tasks.append(Task(task_id=tid, steps=bounded(steps_from_messages(msgs, kinds), tid, name, warnings),
                          source=f"openai:{Path(name).name}",
                          meta={"agent_llm": model} if model else {}))
    return ImportResult(tasks=tasks, warnings=warnings, records=records,
                        defaulted_tools=kinds.defaulted)


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

"""Measuring p_u on recorded conversations: `costsim acceptance` (docs/live.md, "Measuring p_u").

The weak endpoint drafts teacher-forced on a recorded conversation and the strong endpoint
reviews each drafted chunk in one call, as SpecAgent would; no tool is ever executed.

- **Drafting.** A chunk starts at a model call of the recorded agent (a *position*). The weak
  model drafts the next step from the recorded history up to there, as one chat-completions
  call with the recorded tools; drafting goes on, one call per step, until the chunking rule
  (:func:`costsim.protocols.chunking.chunk_end`) ends the chunk: a state-changing call (held),
  K steps, or what the rule says of a message. A read-only call that the recorded agent made
  too (same tool, same arguments) gets the recorded result as its observation; a message where
  the recorded agent wrote a message gets the user's recorded reply (costsim's choice: the
  user answered the recorded wording). Anything else that the chunk would need to go on past —
  another read, a call where the agent wrote, a message where it called a tool — has no known
  observation: the chunk stops there and the step counts as a *divergence* (it is still
  reviewed; a divergence is not a rejection).
- **Verification.** One strong call per chunk: the recorded history and the drafted chunk,
  answered in a structured output (a JSON schema ``response_format``, or a forced tool call),
  ``{"j", "reason", "alternative"}``: the paper's verdict (j, r, ã). An answer that cannot be
  read is asked for once more; a second unreadable answer is a rejection of the chunk's first
  step, with a warning: never an acceptance. ``exact``: no strong call, a step is accepted only
  when it is the recorded step itself (the paper's exact-match ablation, with the recorded step
  standing for the strong model's own).
- **Positions.** After a chunk whose first j steps are accepted, the next chunk starts at the
  step after the rejected one (the recorded step there stands for the strong model's repair),
  or after the chunk. As in SpecAgent, each recorded position is judged exactly once, so the
  per-position verdicts are a trace that `costsim replay --verdicts recorded` reads.

Pure parts (loading a conversation, chunk stepping, prompts, verdict parsing, statistics) are
separate from the I/O (:func:`chat`, :class:`ProbeLog`, :func:`run_acceptance`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..metrics import ratio_ci
from ..protocols.chunking import check_chunking, chunk_end
from ..traces import _check as ck
from ..traces import tau2 as _tau2
from ..traces.convert import arguments_text, estimate_tokens
from ..traces.importers import header as _import_header
from ..traces.jsonl import TraceError, dumps_jsonl, read_text
from ..traces.schema import Task
from ..traces.tools import TAU2_TOOL_KINDS, ToolKinds, load_tool_kinds
from ..traces.verdicts import wilson
from .client import EndpointError, _loads, _Retryable

PROBES_VERSION = 1
#: Tokens a draft or a verdict may decode (ours: a step of a tau² agent is under 300 tokens, a
#: verdict with its alternative under 500; a thinking model needs more: --max-tokens).
DEFAULT_MAX_TOKENS = 1024
MAX_MAX_TOKENS = 100_000
STRUCTURED = ("json-schema", "tool-call")
#: The bounds of a Beta fit's concentration a + b: past the upper one the tasks show no spread
#: beyond chance, and Beta(a, b) is as good as one p_u; below the lower one, all-or-nothing tasks.
BETA_BOUNDS = (1e-3, 1e4)

# --- conversations -------------------------------------------------------------------------------


@dataclass
class Conversation:
    """A recorded conversation: the task as `costsim traces import tau2` makes it, the messages
    it was made from (:class:`costsim.traces.convert.Msg`), the agent's instructions (the file's
    policy) and where the agent's model calls are (indexes in ``msgs``)."""

    task: Task
    msgs: list
    system: str
    calls: list
    source: str = ""
    _openai: list = field(default_factory=list, repr=False)

    def __post_init__(self):
        self._openai = _transcript(self.msgs)

    @property
    def n_calls(self) -> int:
        return len(self.calls)

    def history(self, p: int) -> list:
        """The chat messages before the agent's p-th model call (the system prompt first)."""
        head = [{"role": "system", "content": self.system}] if self.system and not any(
            m.role == "system" for m in self.msgs) else []
        return head + [dict(m) for m in self._openai[: self.calls[p]]]

    def recorded(self, p: int) -> "Drafted":
        m = self.msgs[self.calls[p]]
        return Drafted(m.text, tuple((c.name, c.arguments, self._openai[self.calls[p]]["tool_calls"][k]["id"])
                                     for k, c in enumerate(m.calls)))

    def following(self, p: int) -> list:
        """The recorded messages (tool results, the user's replies) after the p-th model call,
        up to the next one, with their indexes."""
        end = self.calls[p + 1] if p + 1 < len(self.calls) else len(self.msgs)
        return [(k, self.msgs[k]) for k in range(self.calls[p] + 1, end)]

    def result_of(self, p: int) -> dict:
        """tool_call_id -> the recorded result's text, for the p-th call's tool calls."""
        return {self._openai[k]["tool_call_id"]: m.text for k, m in self.following(p) if m.role == "tool"}


def _transcript(msgs) -> list:
    """``msgs`` as OpenAI chat messages, one each: tool calls without an id get one
    (``call_<message>_<k>``), and a tool result without an id takes the id of the call it answers
    in order."""
    out, pending = [], []
    for i, m in enumerate(msgs):
        if m.role == "assistant":
            calls = [{"id": c.id or f"call_{i}_{k}", "type": "function",
                      "function": {"name": c.name, "arguments": c.arguments or "{}"}} for k, c in enumerate(m.calls)]
            d = {"role": "assistant", "content": m.text or (None if calls else "")}
            if calls:
                d["tool_calls"] = calls
            pending = [c["id"] for c in calls]
            out.append(d)
        elif m.role == "tool":
            tid = m.tool_call_id or (pending[0] if pending else f"call_{i}")
            if tid in pending:
                pending.remove(tid)
            out.append({"role": "tool", "tool_call_id": tid, "content": m.text})
        else:
            out.append({"role": m.role, "content": m.text})
    return out


def load_conversations(paths, tool_kinds: dict | None = None, max_tasks: int | None = None):
    """The conversations of tau² results files ``paths``, read as `traces import tau2` reads
    them (its own functions: the same tasks, steps and warnings), and the trace header of the
    first file. ``tool_kinds``: name -> read|write over the built-in table. Returns
    ``(conversations, warnings, header)``; TraceError (one line) for a file that is not one."""
    convs, warnings, header, seen = [], [], None, {}
    for path in paths:
        data, name = _tau2._load_json(Path(path), None)
        imported = _tau2.import_tau2(data, tool_kinds=tool_kinds, name=name)
        warnings.extend(imported.warnings)
        if header is None:
            header = _import_header(imported, "tau2", path)
        sims = data["simulations"] if isinstance(data, dict) else data
        system = _tau2._info(data if isinstance(data, dict) else {}, [], name)["policy"]
        transcripts = []
        for i, sim in enumerate(sims):
            try:
                transcripts.append(_tau2._simulation(sim, f"simulations[{i}]")[3])
            except ck.Bad:  # skipped by the import too, with its warning
                continue
        if len(transcripts) != len(imported.tasks):  # the importer's own rule changed under us
            raise TraceError(f"{name}: its conversations and its imported tasks do not line up")
        for task, msgs in zip(imported.tasks, transcripts):
            calls = [k for k, m in enumerate(msgs) if m.role == "assistant" and not m.skip]
            if len(calls) != len(task.calls):
                raise TraceError(f"{name}: task {task.task_id!r}: its model calls and its steps do not line up")
            if task.task_id in seen:
                raise TraceError(f"{name}: task {task.task_id!r} is also in {seen[task.task_id]}: give each file once, "
                                 "with task ids of its own")
            seen[task.task_id] = name
            if not calls:
                warnings.append(f"{name}: task {task.task_id!r} has no model call of the agent; left out")
                continue
            convs.append(Conversation(task, msgs, system, calls, name))
            if max_tasks is not None and len(convs) >= max_tasks:
                break
        if max_tasks is not None and len(convs) >= max_tasks:
            break
    return convs, warnings, header or {}


def tool_schemas(convs, files=()) -> list:
    """The tools the weak model is offered, in chat-completions form: each tool of an MCP
    ``tools/list`` JSON among ``files`` with its own ``inputSchema``; every other tool the
    recorded agent called, with a schema inferred from its recorded arguments (their names, the
    JSON types of their values; required: those present in every call). tau² result files hold
    no tool schemas, so a tool the agent never called is unknown to the weak model."""
    declared = {}
    for f in files or ():
        for t in _mcp_tools(f):
            declared[t["name"]] = t
    seen: dict = {}
    for conv in convs:
        for k in conv.calls:
            for c in conv.msgs[k].calls:
                try:
                    args = json.loads(c.arguments) if c.arguments else {}
                except (ValueError, RecursionError):
                    args = None
                seen.setdefault(c.name, []).append(args if isinstance(args, dict) else None)
    out = []
    for name in sorted(set(seen) | set(declared)):
        if name in declared:
            t = declared[name]
            out.append({"type": "function", "function": {"name": name, "description": t.get("description") or "",
                                                         "parameters": t.get("inputSchema") or {"type": "object"}}})
            continue
        calls = [a for a in seen[name] if a is not None]
        props, required = {}, None
        for a in calls:
            for key, v in a.items():
                props.setdefault(key, set()).add(_json_type(v))
            required = set(a) if required is None else required & set(a)
        schema = {"type": "object", "properties": {
            key: ({"type": next(iter(ts))} if len(ts) == 1 and None not in ts else {}) for key, ts in sorted(props.items())}}
        if required:
            schema["required"] = sorted(required)
        out.append({"type": "function", "function": {
            "name": name, "description": "(schema inferred by costsim from the recorded calls of this tool)",
            "parameters": schema}})
    return out


def _json_type(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v))


def _mcp_tools(path) -> list:
    """The tools of an MCP ``tools/list`` JSON (``{"tools": [...]}``, ``{"result": {"tools":
    [...]}}`` or the list); [] for a TOML tool-kinds file (kinds only, no schemas)."""
    text = read_text(Path(path))
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return []
    if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
        doc = doc["result"]
    if isinstance(doc, dict):
        doc = doc.get("tools")
    if not isinstance(doc, list):
        return []
    return [t for t in doc if isinstance(t, dict) and isinstance(t.get("name"), str)
            and isinstance(t.get("inputSchema", {}), dict)]


def tool_kinds_of(files) -> dict:
    out = {}
    for f in files or ():
        out.update(load_tool_kinds(f))
    return out


# --- steps -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drafted:
    """One step: a message's text and its tool calls ``(name, arguments text, id)``."""

    text: str
    calls: tuple = ()

    @classmethod
    def from_answer(cls, answer: dict, p: int) -> "Drafted":
        calls = tuple((c["name"], c["arguments"], c.get("id") or f"draft_{p}_{k}")
                      for k, c in enumerate(answer.get("tool_calls") or ()))
        ids = [c[2] for c in calls]
        if len(set(ids)) != len(ids):  # ids a server repeats: made unique, results are matched by them
            calls = tuple((n, a, f"draft_{p}_{k}") for k, (n, a, _) in enumerate(calls))
        return cls(answer.get("content") or "", calls)

    def as_answer(self) -> dict:
        """The answer that drafts this step (what a dry run's weak endpoint answers)."""
        return {"content": self.text, "tool_calls": [{"id": i, "name": n, "arguments": a} for n, a, i in self.calls],
                "prompt_tokens": None, "completion_tokens": None, "finish_reason": "stop"}

    def message(self) -> dict:
        """This step as an assistant chat message."""
        d = {"role": "assistant", "content": self.text or (None if self.calls else "")}
        if self.calls:
            d["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a or "{}"}}
                               for n, a, i in self.calls]
        return d

    def canonical(self) -> list:
        return sorted((n, canonical_arguments(a)) for n, a, _ in self.calls)

    @property
    def tools(self) -> str:
        return ",".join(n for n, _, _ in self.calls)


def canonical_arguments(text: str) -> str:
    """Arguments compared as JSON (key order and spacing aside), else as stripped text."""
    try:
        return json.dumps(json.loads(text or "{}"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return (text or "").strip()


def step_kind(d: Drafted, kinds: ToolKinds, last: bool) -> str:
    """read | write (a call that holds a write is one) | respond | final (a message at the
    conversation's last model call)."""
    if d.calls:
        return "write" if any(kinds.kind(n) == "write" for n, _, _ in d.calls) else "read"
    return "final" if last else "respond"


def same_step(d: Drafted, rec: Drafted) -> bool:
    """Is ``d`` the recorded step itself: the same tool calls (names, arguments as JSON, in any
    order; text beside them aside), or, for a message, the same text up to spacing?"""
    if d.calls or rec.calls:
        return bool(d.calls) == bool(rec.calls) and d.canonical() == rec.canonical()
    return " ".join(d.text.split()) == " ".join(rec.text.split())


def observation(conv: Conversation, p: int, d: Drafted) -> list | None:
    """The chat messages that follow drafted step ``d`` at position ``p``, from the recording:
    the recorded results of the same read-only calls (as results of ``d``'s calls), or the
    user's recorded reply to a message where the agent wrote one. None where the recording does
    not say (a divergence)."""
    rec = conv.recorded(p)
    after = conv.following(p)
    users = [{"role": "user", "content": m.text} for _, m in after if m.role == "user"]
    if not d.calls:
        return None if rec.calls else users
    if not rec.calls or d.canonical() != rec.canonical():
        return None
    results = conv.result_of(p)
    todo = [(n, canonical_arguments(a), i) for n, a, i in rec.calls]
    out = []
    for n, a, i in d.calls:
        key = (n, canonical_arguments(a))
        k = next(k for k, r in enumerate(todo) if r[:2] == key)
        rid = todo.pop(k)[2]
        out.append({"role": "tool", "tool_call_id": i, "content": results.get(rid, "")})
    return out + users


# --- requests ---------------------------------------------------------------------------------------

DRAFT_NOTE = "the recorded conversation up to the step, the agent's policy as system prompt, the recorded tools"

VERIFIER_SYSTEM = """You review steps that a draft model proposed for a tool-using agent, before they are committed.

The agent serves a user under the instructions below: it calls tools and writes messages to the user. You see the conversation so far and the drafted steps that would come next, numbered from 1. The results of drafted read-only tool calls are shown; a state-changing call is held and has not been executed.

Judge the drafted steps in order. A step is acceptable if it is a valid move toward completing the user's request under the agent's instructions: the right tool with the right arguments, statements that are true to what the conversation shows, nothing the instructions forbid (such as acting without a confirmation they require). It need not be the step you would have written: a different but valid step is acceptable. Stop at the first step that is not acceptable: the steps after it depend on it and are not judged.

Answer with one JSON object:
- "j": how many of the drafted steps, from the first, you accept (0 to N; N accepts them all);
- "reason": why step j+1 is not acceptable ("" when j = N);
- "alternative": the step to commit in place of step j+1, as {"message": text or null, "tool_calls": [{"name": tool, "arguments": arguments as a JSON string}]}, or null when j = N or no single step fixes it."""

RETRY_NOTE = ("Your answer could not be read ({why}). Answer again with only the JSON object: "
              "\"j\" (a whole number from 0 to {n}), \"reason\", \"alternative\".")


def verdict_schema(n: int) -> dict:
    """The verdict's JSON schema for a chunk of ``n`` steps (strict: every field required, no
    other field; an alternative's arguments are a JSON string, as chat-completions sends them)."""
    call = {"type": "object", "properties": {"name": {"type": "string"}, "arguments": {"type": "string"}},
            "required": ["name", "arguments"], "additionalProperties": False}
    step = {"type": "object",
            "properties": {"message": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                           "tool_calls": {"type": "array", "items": call}},
            "required": ["message", "tool_calls"], "additionalProperties": False}
    return {"type": "object",
            "properties": {"j": {"type": "integer", "minimum": 0, "maximum": n},
                           "reason": {"type": "string"},
                           "alternative": {"anyOf": [step, {"type": "null"}]}},
            "required": ["j", "reason", "alternative"], "additionalProperties": False}


def draft_request(conv: Conversation, start: int, continuation: list, tools: list, max_tokens: int) -> dict:
    """The weak model's next step: the recorded history up to position ``start``, then the
    chunk drafted so far (``continuation``: its steps and their recorded observations)."""
    body = {"messages": conv.history(start) + continuation, "max_tokens": max_tokens, "temperature": 0.0}
    if tools:
        body["tools"] = tools
    return body


def _line(role: str, text: str) -> str:
    return f"[{role}] {text}"


def render_history(conv: Conversation, upto: int) -> str:
    """The recorded conversation before position ``upto`` as the reviewer reads it."""
    out = []
    for m in conv.msgs[: conv.calls[upto]]:
        if m.role == "assistant":
            if m.text:
                out.append(_line("agent", m.text))
            out += [_line("agent calls", f"{c.name} {c.arguments or '{}'}") for c in m.calls]
        elif m.role == "tool":
            out.append(_line("tool result", m.text))
        else:
            out.append(_line(m.role, m.text))
    return "\n".join(out) or "(nothing yet)"


def render_chunk(steps) -> str:
    out = []
    for k, s in enumerate(steps, 1):
        d = s.draft
        if d.calls:
            what = "state-changing tool call" if s.kind == "write" else "read-only tool call"
            out.append(f"Step {k} ({what}): " + "; ".join(f"{n} {a or '{}'}" for n, a, _ in d.calls))
            if d.text:
                out.append(f"  with the text: {d.text}")
        else:
            out.append(f"Step {k} (message to the user): {d.text}")
        if s.kind == "write":
            out.append("  (held: not executed)")
        elif s.observation is None:
            if d.calls:
                out.append("  (not executed)")
        else:
            for o in s.observation:
                out.append(f"  {'result' if o['role'] == 'tool' else 'the user replies'}: {o['content']}")
    return "\n".join(out)


def render_tools(tools: list) -> str:
    lines = []
    for t in tools:
        f = t["function"]
        params = f.get("parameters") or {}
        args = ", ".join(params.get("properties") or {}) if isinstance(params, dict) else ""
        desc = f.get("description") or ""
        lines.append(f"- {f['name']}({args})" + (f": {desc}" if desc and not desc.startswith("(schema inferred") else ""))
    return "\n".join(lines) or "(none recorded)"


def verdict_prompt(conv: Conversation, start: int, steps, tools: list) -> str:
    n = len(steps)
    return (f"# The agent's instructions\n{conv.system or '(not in the recording)'}\n\n"
            f"# The agent's tools\n{render_tools(tools)}\n\n"
            f"# The conversation so far\n{render_history(conv, start)}\n\n"
            f"# Drafted steps (N = {n})\n{render_chunk(steps)}\n\n"
            f"Answer with the JSON object: j (0 to {n}), reason, alternative.")


def verdict_request(conv: Conversation, start: int, steps, tools: list, structured: str, max_tokens: int) -> dict:
    """One strong call that reviews the chunk ``steps`` drafted from position ``start``."""
    n = len(steps)
    body = {"messages": [{"role": "system", "content": VERIFIER_SYSTEM},
                         {"role": "user", "content": verdict_prompt(conv, start, steps, tools)}],
            "max_tokens": max_tokens, "temperature": 0.0}
    if structured == "tool-call":
        body["tools"] = [{"type": "function", "function": {
            "name": "verdict", "description": "The verdict on the drafted steps.", "parameters": verdict_schema(n),
            "strict": True}}]
        body["tool_choice"] = {"type": "function", "function": {"name": "verdict"}}
    else:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "verdict", "strict": True, "schema": verdict_schema(n)}}
    return body


def retry_request(body: dict, why: str, n: int) -> dict:
    """The same review asked again after an unreadable answer, saying what was wrong."""
    note = RETRY_NOTE.format(why=why, n=n)
    return {**body, "messages": [*body["messages"], {"role": "user", "content": note}]}


def verdict_text(answer: dict, structured: str) -> str:
    """The verdict's JSON text in an answer: a forced tool call's arguments, else the content."""
    if structured == "tool-call":
        for c in answer.get("tool_calls") or ():
            if c.get("name") == "verdict":
                return c.get("arguments") or ""
    return answer.get("content") or ""


def accept_all(n: int, structured: str) -> dict:
    """The answer of a reviewer that accepts all ``n`` steps (a dry run's strong endpoint)."""
    text = json.dumps({"j": n, "reason": "", "alternative": None})
    calls = [{"id": "verdict", "name": "verdict", "arguments": text}] if structured == "tool-call" else []
    return {"content": "" if calls else text, "tool_calls": calls, "prompt_tokens": None, "completion_tokens": None,
            "finish_reason": "stop"}


# --- verdicts ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The reviewer's answer: the longest acceptable prefix ``j``, the reason for the first
    rejection, and the alternative step (None: none offered, or nothing was rejected)."""

    j: int
    reason: str = ""
    alternative: dict | None = None


@dataclass(frozen=True)
class Unreadable:
    """An answer that is not a verdict; ``why`` in a few words."""

    why: str


def parse_verdict(text, n: int) -> Verdict | Unreadable:
    """The verdict in ``text`` for a chunk of ``n`` steps, or why there is none; never raises.
    Accepted: the JSON object alone, in a Markdown code fence, or the first '{' to the last '}'
    of the text. ``j`` must be a whole number in [0, n] (a bool or a float is not); a missing or
    malformed ``reason`` is empty and a malformed ``alternative`` is none (they do not decide
    acceptance)."""
    try:
        return _parse_verdict(text, n)
    except Exception as e:  # noqa: BLE001 - a parser of a server's words never raises
        return Unreadable(f"unreadable ({type(e).__name__})")


def _parse_verdict(text, n: int) -> Verdict | Unreadable:
    if not isinstance(text, str) or not text.strip():
        return Unreadable("an empty answer")
    s = text.strip()
    if s.startswith("```"):
        s = s.split("\n", 1)[1] if "\n" in s else ""
        s = s.rsplit("```", 1)[0].strip()
    missing = object()
    obj = missing
    try:
        obj = json.loads(s)
    except (ValueError, RecursionError):
        a, b = s.find("{"), s.rfind("}")
        if 0 <= a < b:
            try:
                obj = json.loads(s[a: b + 1])
            except (ValueError, RecursionError):
                pass
    if obj is missing:
        return Unreadable("not JSON")
    if not isinstance(obj, dict):
        return Unreadable("not a JSON object")
    if "j" not in obj:
        return Unreadable("no \"j\"")
    j = obj["j"]
    if isinstance(j, bool) or not isinstance(j, int):
        return Unreadable("\"j\" is not a whole number")
    if not 0 <= j <= n:
        return Unreadable(f"\"j\" is outside 0..{n}")
    reason = obj.get("reason")
    alt = obj.get("alternative")
    return Verdict(j, reason if isinstance(reason, str) else "", alt if isinstance(alt, dict) and j < n else None)


# --- one task ---------------------------------------------------------------------------------------


@dataclass
class ChunkStep:
    position: int
    draft: Drafted
    kind: str
    observation: list | None  # the chat messages after it (None: held, or not known)
    note: str | None = None   # "held", "diverged"


@dataclass
class Chunk:
    start: int
    steps: list
    end: str                   # write | K | response | end | diverged | mismatch
    j: int
    verdict: Verdict | None = None
    unreadable: str | None = None   # why the reviewer's answers could not be read (then j = 0)
    answers: list = field(default_factory=list)  # the strong answers used (with a retry: two)
    repair_tokens: int | None = None  # the alternative's share of the verdict's tokens (estimated)


@dataclass
class TaskResult:
    conv: Conversation
    positions: int
    chunks: list
    verdicts: list


@dataclass(frozen=True)
class Options:
    K: int
    chunking: str
    exact: bool
    structured: str
    max_tokens: int
    max_steps: int | None
    tools: tuple


def measure_task(conv: Conversation, call, o: Options, kinds: ToolKinds, progress=None,
                 on_warning=None) -> TaskResult:
    """Draft and review a conversation chunk by chunk (module docstring). ``call(role, body,
    dry_answer)`` answers a request; ``kinds`` tells a drafted tool's kind."""
    P = conv.n_calls if o.max_steps is None else min(conv.n_calls, o.max_steps)
    verdicts: list = [None] * P
    chunks = []
    tools = list(o.tools)
    i = 0
    while i < P:
        steps, continuation, messages, end, mismatch = [], [], 0, "end", False
        for n in range(1, o.K + 1):
            p = i + n - 1
            if p >= P:
                break
            answer = call("weak", draft_request(conv, i, continuation, tools, o.max_tokens), conv.recorded(p).as_answer())
            d = Drafted.from_answer(answer, p)
            kind = step_kind(d, kinds, last=p == conv.n_calls - 1)
            messages += kind in ("respond", "final")
            e, held, _ = chunk_end(kind, n, o.K, o.chunking, messages)
            obs = None if held else observation(conv, p, d)
            if o.exact and not same_step(d, conv.recorded(p)):
                steps.append(ChunkStep(p, d, kind, obs, "held" if held else None))
                end, mismatch = "mismatch", True
                break
            if e is None and obs is None:
                steps.append(ChunkStep(p, d, kind, None, "diverged"))
                end = "diverged"
                break
            if e is not None and kind in ("respond", "final"):
                obs = None  # the recorded reply answered the recorded wording; nothing drafts after it here
            steps.append(ChunkStep(p, d, kind, obs, "held" if held else None))
            if e is not None:
                end = e
                break
            continuation += [d.message(), *obs]
        n = len(steps)
        if o.exact:
            chunk = Chunk(i, steps, end, n - 1 if mismatch else n)
        else:
            chunk = _review(conv, i, steps, end, call, o, tools)
            if chunk.unreadable and on_warning:
                on_warning(f"task {conv.task.task_id}, chunk at step {i}: the strong model's verdict could not be read "
                           f"twice ({chunk.unreadable}): counted as a rejection of the chunk's first step")
        for q in range(chunk.j):
            verdicts[steps[q].position] = True
        if chunk.j < n:
            verdicts[steps[chunk.j].position] = False
        nxt = i + (chunk.j + 1 if chunk.j < n else n)
        chunks.append(chunk)
        if progress:
            progress(nxt - i)
        i = nxt
    return TaskResult(conv, P, chunks, verdicts)


def _review(conv, start, steps, end, call, o: Options, tools) -> Chunk:
    n = len(steps)
    body = verdict_request(conv, start, steps, tools, o.structured, o.max_tokens)
    answers = [call("strong", body, accept_all(n, o.structured))]
    v = parse_verdict(verdict_text(answers[0], o.structured), n)
    if isinstance(v, Unreadable):
        answers.append(call("strong", retry_request(body, v.why, n), accept_all(n, o.structured)))
        again = parse_verdict(verdict_text(answers[1], o.structured), n)
        if isinstance(again, Unreadable):
            return Chunk(start, steps, end, 0, None, f"{v.why}; then {again.why}", answers)
        v = again
    repair = None
    if v.alternative is not None:
        text = verdict_text(answers[-1], o.structured)
        ct = answers[-1].get("completion_tokens")
        share = len(json.dumps(v.alternative, ensure_ascii=False)) / max(1, len(text))
        repair = round(ct * min(1.0, share)) if isinstance(ct, int) else None
    return Chunk(start, steps, end, v.j, v, None, answers, repair)


# --- statistics --------------------------------------------------------------------------------------

def rate(S: int, F: int) -> dict:
    """``{"mean": S/(S+F), "ci95": Wilson 95%}``; nulls with nothing judged."""
    n = S + F
    return {"mean": S / n if n else None, "ci95": list(wilson(S, F)) if n else None}


def clustered_interval(per_task) -> dict:
    """The pooled rate with a cluster-robust 95% interval over tasks (``per_task``: (S, F)
    each): the ratio estimator's variance T/(T-1) Σ (S_t - p N_t)² / (Σ N_t)², a normal
    interval cut to [0, 1]. No interval with fewer than two tasks that have a judged step, or
    where every judged step went one way (it would have no width there)."""
    rows = [(S, S + F) for S, F in per_task if S + F]
    total = sum(n for _, n in rows)
    p = sum(s for s, _ in rows) / total if total else None
    if len(rows) < 2 or p in (None, 0.0, 1.0):
        return {"mean": p, "ci95": None}
    # the paired ratio Σ S_t / Σ N_t and its delta-method interval: the simulator's (metrics.ratio_ci)
    lo, hi = ratio_ci([s for s, _ in rows], [n for _, n in rows])["ci95"]
    return {"mean": p, "ci95": [max(0.0, lo), min(1.0, hi)]}


def _lbeta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def beta_loglik(a: float, b: float, per_task) -> float:
    """log Π_t B(a + S_t, b + F_t) / B(a, b): the tasks' verdicts under p_t ~ Beta(a, b), each
    task's likelihood p^S (1-p)^F (censored chunks included, up to a constant)."""
    return sum(_lbeta(a + S, b + F) - _lbeta(a, b) for S, F in per_task if S + F)


def beta_fit(per_task) -> dict:
    """Beta(a, b) of p_u across tasks by maximum marginal likelihood (:func:`beta_loglik`),
    as ``--p-dist beta:a,b`` takes it; ``p_dist`` null, with a note, where no fit exists.
    Optimised over the mean m = a/(a+b) and the concentration c = a+b, c within
    :data:`BETA_BOUNDS`: where the tasks spread no more than chance allows, the likelihood grows
    toward one common p_u (c to infinity) and the fit is c at its upper bound, m the pooled p_u."""
    rows = [(S, F) for S, F in per_task if S + F]
    out = {"p_dist": None, "mean_accept_rate": None, "tasks": len(rows),
           "method": "maximum marginal likelihood: tasks' p_u ~ Beta(a, b), steps Bernoulli(p_u) (beta-binomial)",
           "note": None}
    if len(rows) < 2:
        out["note"] = "needs at least 2 tasks with a judged step"
        return out
    if all(F == 0 for _, F in rows) or all(S == 0 for S, _ in rows):
        which = "accepted" if all(F == 0 for _, F in rows) else "rejected"
        out["note"] = f"every judged step was {which}: the likelihood has no maximum inside (a, b > 0); no fit"
        return out
    import numpy as np
    from scipy.optimize import minimize

    lo, hi = (math.log(x) for x in BETA_BOUNDS)
    pooled = sum(S for S, _ in rows) / sum(S + F for S, F in rows)
    ps = [S / (S + F) for S, F in rows]
    v = sum((x - pooled) ** 2 for x in ps) / len(ps)
    c0 = pooled * (1 - pooled) / v - 1 if 0 < v < pooled * (1 - pooled) else 10.0

    def ab(x):
        m = 1 / (1 + math.exp(-x[0]))
        return m * math.exp(x[1]), (1 - m) * math.exp(x[1])

    res = minimize(lambda x: -beta_loglik(*ab(x), rows), np.array([math.log(pooled / (1 - pooled)),
                                                                   min(max(math.log(max(c0, 1e-3)), lo), hi)]),
                   method="L-BFGS-B", bounds=[(-30.0, 30.0), (lo, hi)])
    a, b = ab(res.x)
    common = sum(S * math.log(pooled) + F * math.log1p(-pooled) for S, F in rows)  # the limit c -> infinity
    if common >= beta_loglik(a, b, rows) - 1e-6 or a + b >= BETA_BOUNDS[1] * 0.99:
        a, b = pooled * BETA_BOUNDS[1], (1 - pooled) * BETA_BOUNDS[1]
        out["note"] = (f"no spread between tasks beyond chance: the likelihood grows toward one common p_u; "
                       f"a + b set at costsim's bound {BETA_BOUNDS[1]:g} (about --p-accept {pooled:.4g} for every task)")
    elif a + b <= BETA_BOUNDS[0] * 1.01:
        out["note"] = f"a + b at costsim's bound {BETA_BOUNDS[0]:g}: tasks are all-accepted or all-rejected"
    out["p_dist"] = f"beta:{a:.4g},{b:.4g}"
    out["mean_accept_rate"] = a / (a + b)
    return out


def _tally(results):
    """Per task (S, F, diverged, drafted, unjudged), and judged steps by kind and by tool."""
    per_task, kinds, tools = [], {}, {}
    for r in results:
        S = F = div = drafted = unjudged = unread = 0
        for ch in r.chunks:
            for q, s in enumerate(ch.steps):
                drafted += 1
                div += s.note == "diverged"
                if q > ch.j:  # after the rejected step: never judged (drafted again in a later chunk)
                    unjudged += 1
                    continue
                ok = q < ch.j
                S, F = S + ok, F + (not ok)
                unread += (not ok) and ch.unreadable is not None
                for table, key in ((kinds, s.kind), (tools, s.draft.tools)):
                    if key:
                        c = table.setdefault(key, [0, 0])
                        c[0 if ok else 1] += 1
        per_task.append({"S": S, "F": F, "diverged": div, "drafted": drafted, "unjudged": unjudged, "unread": unread})
    return per_task, kinds, tools


def summarize(results, *, exact: bool, cost: dict) -> dict:
    """What `costsim acceptance` prints: p_u pooled and per task with 95% intervals, the Beta
    fit, p_u by step kind and by tool, counts, the verdict and repair tokens, the cost."""
    per_task, kinds, tools = _tally(results)
    S, F = sum(t["S"] for t in per_task), sum(t["F"] for t in per_task)
    pairs = [(t["S"], t["F"]) for t in per_task]
    chunks = [ch for r in results for ch in r.chunks]
    reviews = [ch for ch in chunks if ch.answers]
    vtok = [sum(a.get("completion_tokens") or 0 for a in ch.answers) for ch in reviews]
    vknown = all(isinstance(a.get("completion_tokens"), int) for ch in reviews for a in ch.answers)
    repairs = [ch.repair_tokens for ch in reviews if ch.verdict is not None and ch.verdict.alternative is not None]
    rknown = [x for x in repairs if x is not None]
    order = ("read", "write", "respond", "final")
    return {
        "tasks": len(results),
        "recorded_calls": sum(r.positions for r in results),
        "accept_rate": rate(S, F),
        "clustered_accept_rate": clustered_interval(pairs),
        "interval": ("accept_rate: Wilson score 95% over the judged steps pooled (steps independent); "
                     "clustered_accept_rate: cluster-robust 95% over tasks (normal approximation)"),
        "judged_steps": S + F, "accepted_steps": S, "rejected_steps": F,
        "drafted_steps": sum(t["drafted"] for t in per_task),
        "unjudged_steps": sum(t["unjudged"] for t in per_task),
        "diverged_steps": sum(t["diverged"] for t in per_task),
        "rejected_unreadable_steps": sum(t["unread"] for t in per_task),
        "chunks": len(chunks),
        "reviews": len(reviews) if not exact else len(chunks),
        "per_task": [{"task_id": r.conv.task.task_id, "accept_rate": rate(t["S"], t["F"]), "judged_steps": t["S"] + t["F"],
                      "accepted_steps": t["S"], "rejected_steps": t["F"], "diverged_steps": t["diverged"],
                      "recorded_calls": r.positions, "chunks": len(r.chunks)} for r, t in zip(results, per_task)],
        "beta_fit": beta_fit(pairs),
        "by_kind": {k: {"accept_rate": rate(*kinds[k]), "judged_steps": sum(kinds[k]), "rejected_steps": kinds[k][1]}
                    for k in order if k in kinds},
        "by_tool": {k: {"accept_rate": rate(*v), "judged_steps": sum(v), "rejected_steps": v[1]}
                    for k, v in sorted(tools.items())},
        "verdicts": {
            "reviews": len(reviews),
            "reasked_calls": sum(len(ch.answers) - 1 for ch in reviews),
            "verdict_tokens": sum(vtok) if reviews and vknown else None,
            "mean_verdict_tokens": sum(vtok) / len(vtok) if reviews and vknown else None,
            "alternative_steps": len(repairs),
            "repair_tokens": sum(rknown) if rknown else None,
            "mean_repair_tokens": sum(rknown) / len(rknown) if rknown else None,
            "repair_estimate": "an alternative's tokens: its share of the verdict answer's characters times the "
                               "answer's completion tokens",
        },
        "cost": cost,
    }


def verdict_trace(results, header: dict) -> str:
    """The conversations' tasks as a costsim trace (JSONL), each step carrying its position's
    verdict (True accepted, False rejected) and cut after the last position measured."""
    tasks = []
    for r in results:
        steps = tuple(replace(s, verdict=r.verdicts[s.call]) for s in r.conv.task.steps
                      if s.call is not None and s.call < r.positions)
        t = r.conv.task
        tasks.append(Task(task_id=t.task_id, steps=steps, domain=t.domain, source=t.source, reward=t.reward,
                          meta=dict(t.meta)))
    return dumps_jsonl(tasks, **header)


# --- I/O: the endpoints, the probe file --------------------------------------------------------------


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _count(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def answer_of(d) -> dict:
    """The parts of a chat-completions answer this measurement uses; a malformed answer is
    retryable (:class:`costsim.live.client._Retryable`)."""
    if not isinstance(d, dict):
        raise _Retryable("malformed answer: not an object")
    choices = d.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Retryable("malformed answer: no choices")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise _Retryable("malformed answer: no message")
    calls = []
    for tc in msg.get("tool_calls") if isinstance(msg.get("tool_calls"), list) else ():
        if not isinstance(tc, dict):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else {}
        name = fn.get("name") if isinstance(fn.get("name"), str) and fn.get("name") else "(unnamed)"
        args = fn.get("arguments")
        calls.append({"id": tc.get("id") if isinstance(tc.get("id"), str) else "", "name": name,
                      "arguments": arguments_text(args) if isinstance(args, (str, dict, list)) else ""})
    usage = d.get("usage") if isinstance(d.get("usage"), dict) else {}
    finish = choices[0].get("finish_reason")
    return {"content": _text(msg.get("content")), "tool_calls": calls,
            "prompt_tokens": _count(usage.get("prompt_tokens")), "completion_tokens": _count(usage.get("completion_tokens")),
            "finish_reason": finish if isinstance(finish, str) else None}


def chat(ep, body: dict) -> tuple[dict, int]:
    """One ``/v1/chat/completions`` call (not streamed) with the endpoint's deadline, caps,
    retries and redaction; ``(answer, attempts)``."""
    ep.discover()
    body = {"model": ep.model, **body}
    what = "POST /v1/chat/completions"

    def once():
        return ep._attempt("POST", "/v1/chat/completions", what,
                           lambda r, t0, deadline: answer_of(_loads(ep._read(r, deadline), "answer is not JSON (truncated?)")),
                           body)

    return ep._with_retries(once, what)


def request_key(role: str, body: dict) -> str:
    return hashlib.sha256(json.dumps([role, body], sort_keys=True).encode()).hexdigest()


class AcceptanceRunError(RuntimeError):
    """A run that could not finish; one line, the answers so far kept in the probe file."""


class ProbeLog:
    """The answers a run got, one JSON line each after a header line, appended (and flushed) as
    they come: ``resume`` reads them back and a request already answered is not sent again. The
    header names the endpoints (public URLs, or models for local servers) and their models; a
    file for others is refused. A last line cut short (the run killed mid-write) is dropped."""

    def __init__(self, path, header: dict, resume: bool):
        self.path, self.header, self.answers, self.dropped = Path(path) if path else None, header, {}, 0
        self._f = None
        if self.path is not None and resume and self.path.exists():
            self._read()
            self._f = open(self.path, "a", encoding="utf-8")
        elif self.path is not None:
            self._f = open(self.path, "w", encoding="utf-8")
            self._write({"header": header})

    def _refuse(self, why):
        return AcceptanceRunError(f"{self.path}: not a probe file of costsim acceptance ({why}); remove it or run "
                                  "without --resume")

    def _read(self):
        try:
            lines = self.path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError) as e:
            raise AcceptanceRunError(f"{self.path}: cannot resume from it ({getattr(e, 'strerror', None) or type(e).__name__})") from None
        if lines and lines[-1] == "":
            lines.pop()
        rows = []
        for k, line in enumerate(lines):
            try:
                rows.append(json.loads(line))
            except (ValueError, RecursionError):
                if k == len(lines) - 1 and k > 0:  # cut short by a kill: the answer is asked again
                    self.dropped = 1
                    break
                raise self._refuse(f"line {k + 1} is not JSON") from None
        if not rows or not isinstance(rows[0], dict) or not isinstance(rows[0].get("header"), dict):
            raise self._refuse("no header line")
        if rows[0]["header"] != self.header:
            raise AcceptanceRunError(f"{self.path}: saved answers are for other endpoints or models; run without "
                                     "--resume to start over")
        for k, row in enumerate(rows[1:], 2):
            ok = (isinstance(row, dict) and isinstance(row.get("key"), str) and row.get("role") in ("weak", "strong")
                  and isinstance(row.get("answer"), dict))
            if not ok:
                raise self._refuse(f"line {k} is not a saved answer")
            try:
                a = row["answer"]
                answer = {"content": a.get("content") if isinstance(a.get("content"), str) else "",
                          "tool_calls": [{"id": str(c.get("id", "")), "name": str(c["name"]), "arguments": str(c["arguments"])}
                                         for c in a.get("tool_calls") or ()],
                          "prompt_tokens": _count(a.get("prompt_tokens")),
                          "completion_tokens": _count(a.get("completion_tokens")),
                          "finish_reason": a.get("finish_reason") if isinstance(a.get("finish_reason"), str) else None}
            except (AttributeError, KeyError, TypeError):
                raise self._refuse(f"line {k} is not a saved answer") from None
            self.answers[row["key"]] = answer
        if self.dropped:  # rewrite without the cut line, so that appends start on a line of their own
            from ..files import write_atomic

            write_atomic(self.path, "".join(line + "\n" for line in lines[: len(rows)]))

    def _write(self, obj):
        self._f.write(json.dumps(obj) + "\n")
        self._f.flush()

    def put(self, key: str, role: str, answer: dict, attempts: int):
        self.answers[key] = answer
        if self._f is not None:
            self._write({"key": key, "role": role, "answer": answer, "attempts": attempts})
            os.fsync(self._f.fileno())

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None


class Caller:
    """Answers the measurement's requests: from the probe file or an identical earlier request
    where it has the answer (temperature 0: the same request, the same answer), else from the
    endpoint, keeping the answer. ``dry``: print each request (``dry(role, body)``) and answer
    as the recorded path would (nothing sent)."""

    def __init__(self, endpoints: dict, log: ProbeLog | None = None, dry=None, send=chat):
        self.endpoints, self.log, self.dry, self.send = endpoints, log or ProbeLog(None, {}, False), dry, send
        self.calls = Counter()
        self.tokens = Counter()
        self.retried = self.reused = self.truncated = 0
        self.usage_missing = set()

    def __call__(self, role: str, body: dict, dry_answer: dict) -> dict:
        if self.dry is not None:
            self.calls[role] += 1
            self.tokens[f"{role}_prompt_tokens"] += estimate_tokens(json.dumps(
                [body["messages"], body.get("tools"), body.get("response_format")], ensure_ascii=False))
            self.dry(role, body)
            return dry_answer
        key = request_key(role, body)
        saved = self.log.answers.get(key)
        if saved is not None:
            self.reused += 1
            return saved
        answer, attempts = self.send(self.endpoints[role], body)
        self.calls[role] += 1
        self.retried += attempts - 1
        for k in ("prompt_tokens", "completion_tokens"):
            if answer[k] is None:
                self.usage_missing.add(role)
            self.tokens[f"{role}_{k}"] += answer[k] or 0
        self.truncated += role == "weak" and answer["finish_reason"] == "length"
        self.log.put(key, role, answer, attempts)
        return answer

    def cost(self) -> dict:
        out = {f"{r}_calls": self.calls[r] for r in ("weak", "strong")}
        out.update(retried_calls=self.retried, reused_calls=self.reused)
        out.update({f"{r}_{k}": self.tokens[f"{r}_{k}"] for r in ("weak", "strong") for k in ("prompt_tokens", "completion_tokens")})
        return out


def run_acceptance(convs, endpoints: dict, o: Options, *, kinds: dict | None = None, probes=None, resume=False,
                   local: bool = False, dry=None, progress=None, on_warning=None) -> dict:
    """Measure every conversation in turn; the result of :func:`summarize` with ``results``
    (the per-task outcomes, for the trace) and ``warnings``. ``endpoints``: role ->
    :class:`~costsim.live.client.Endpoint` (discovered here unless ``dry``); ``probes``: the
    probe file (``resume``: go on from it); ``local``: the endpoints are local servers started
    for this run, known by their models (their ports change from run to run); ``dry(role,
    body)``: a dry run, nothing sent."""
    t0 = time.perf_counter()
    warnings = []

    def warn(line):
        warnings.append(line)
        if on_warning:
            on_warning(line)

    roles = ("weak",) if o.exact else ("weak", "strong")
    log = None
    if dry is None:
        try:
            for r in roles:
                endpoints[r].discover()
        except EndpointError as e:
            raise AcceptanceRunError(str(e)) from None
        log = ProbeLog(probes, {"version": PROBES_VERSION, **{r: {"url": None if local else endpoints[r].url,
                                                                   "model": endpoints[r].model} for r in roles}}, resume)
        if log.dropped:
            warn(f"{probes}: its last line was cut short (the run was killed while writing it); that answer is asked again")
    caller = Caller(endpoints, log, dry)
    tk = ToolKinds({**TAU2_TOOL_KINDS, **(kinds or {})})
    total = sum(c.n_calls if o.max_steps is None else min(c.n_calls, o.max_steps) for c in convs)
    done = [0]

    def advance(k):
        done[0] += k
        if progress:
            progress(done[0], total)

    results = []
    try:
        if progress:
            progress(0, total)
        for conv in convs:
            results.append(measure_task(conv, caller, o, tk, advance, warn))
    except EndpointError as e:
        saved = len(log.answers) if log is not None else 0
        hint = (" (a server that does not take response_format json_schema may take --structured tool-call)"
                if e.status in (400, 422) and e.url == endpoints.get("strong", endpoints["weak"]).url
                and o.structured == "json-schema" and not o.exact else "")
        where = (f"; {saved} answers saved to {probes}, rerun with --resume" if saved and probes else "")
        raise AcceptanceRunError(f"{e}{hint}{where}") from None
    finally:
        if log is not None:
            log.close()
    if tk.defaulted:
        names = ", ".join(sorted(tk.defaulted))
        warn(f"the weak model called tools that no mapping names, held as writes: {names}")
    if caller.truncated:
        warn(f"{caller.truncated} draft(s) stopped at --max-tokens (finish_reason 'length'): taken as drafted")
    for r in sorted(caller.usage_missing):
        warn(f"the {r} endpoint reported no token usage for some calls: their tokens are counted as 0")
    out = summarize(results, exact=o.exact, cost=caller.cost())
    out["elapsed_s"] = time.perf_counter() - t0
    out["results"] = results
    out["warnings"] = warnings
    return out


def check_options(K, chunking, structured, max_tokens, max_tasks, max_steps) -> None:
    """ValueError (one line) for an option out of its range."""
    from ..formulas import check_K

    check_K(K, "--K")
    check_chunking(chunking)
    if structured not in STRUCTURED:
        raise ValueError(f"--structured must be one of {', '.join(STRUCTURED)}, got {structured!r}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= MAX_MAX_TOKENS:
        raise ValueError(f"--max-tokens must be an integer in [1, {MAX_MAX_TOKENS}], got {max_tokens!r}")
    for flag, v in (("--max-tasks", max_tasks), ("--max-steps", max_steps)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{flag} must be an integer >= 1, got {v!r}")

"""From a chat transcript (neutral form) to committed steps; shared by the importers.

Rules (also in ``traces/README.md``):

- each assistant tool call is one step (a message with n tool calls is n steps, in order), its
  kind from the tool table (read | write; unknown names are writes and are counted); every
  step keeps which model call issued it (``Step.call``: the assistant messages numbered from 0),
  so a protocol pays one call for a message's tool calls and runs them together;
- an assistant message without tool calls is a ``respond`` step, and the last assistant
  message of the transcript is ``final`` (if that message makes tool calls, its steps keep
  their tool kinds and the task has no ``final`` step);
- text that accompanies tool calls is part of the first call's output, not a response;
- ``output_tokens``: the call's ``completion_tokens`` (reasoning included: it is decoded, and
  OpenAI's ``completion_tokens`` / Responses ``output_tokens`` / OTel ``gen_ai.usage.output_tokens``
  already count it, ``reasoning_tokens`` being a breakdown, so it is never added again),
  shared among its tool calls in proportion to their estimated lengths (largest remainder, so
  the shares sum to the measured total); without usage, the estimate of the step's own text;
- ``observation_tokens``: of a tool step, the tool result's tokens; of a respond/final step,
  the user's reply (all user messages before the next assistant message);
- ``context_tokens``: the call's ``prompt_tokens``, plus the outputs of the earlier calls of the
  same message; without usage, the estimated system prompt plus every earlier message. Cached
  prompt tokens (``cached_tokens``) are part of ``prompt_tokens``; a step has no field for them
  (the simulator prefills by its own rules), so a task's ``meta`` keeps their sum, and the sum of
  its reasoning tokens, where the log has them (:func:`usage_meta`);
- ``duration_s``: the call's generation time, shared like the output tokens.

Token estimate when the log has no count: ``ceil(chars / 4)`` (Unicode code points; a tool
call's text is its name plus its arguments as compact JSON). Estimated values are flagged in
``Step.estimated_fields``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace

from ..config import MAX_SECONDS
from . import _check as ck
from .schema import STEP_KINDS, Step, Task
from .tools import ToolKinds

CHARS_PER_TOKEN = 4
#: The roles of a chat message (OpenAI's "developer" is read as system, "function" as tool).
ROLES = ("system", "user", "assistant", "tool")


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by the stated rule ceil(chars / 4)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def arguments_text(arguments) -> str:
    """Tool-call arguments as the model wrote them: a string as is, anything else compact JSON."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


@dataclass
class Call:
    name: str
    arguments: str = ""
    id: str = ""


@dataclass
class Msg:
    """One message, already validated by an importer. Tokens/duration are None when unknown."""

    role: str  # system | user | assistant | tool
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    tool_call_id: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str = ""
    duration_s: float | None = None
    duration_estimated: bool = False
    skip: bool = False  # in the context, but not a step (e.g. a scripted greeting)
    cached_tokens: int | None = None  # of prompt_tokens, read from a prompt cache
    reasoning_tokens: int | None = None  # of completion_tokens, reasoning (already counted in them)

    def estimated_tokens(self) -> int:
        return estimate_tokens(self.text) + sum(
            estimate_tokens(c.name + c.arguments) for c in self.calls)


def usage_meta(msgs) -> dict:
    """A task's ``meta`` entries for the usage that steps have no field for: the sums of its model
    calls' cached prompt tokens and reasoning tokens, each only where some call recorded it."""
    calls = [m for m in msgs if m.role == "assistant" and not m.skip]
    out = {}
    for key, attr in (("cached_input_tokens", "cached_tokens"), ("reasoning_output_tokens", "reasoning_tokens")):
        vals = [getattr(m, attr) for m in calls if getattr(m, attr) is not None]
        if vals:
            out[key] = sum(vals)
    return out


def apportion(total: int, weights: list[int]) -> list[int]:
    """Split the integer ``total`` in proportion to ``weights`` (largest remainder; equal split
    when all weights are 0). The shares are integers that sum to ``total``."""
    n = len(weights)
    wsum = sum(weights)
    if wsum <= 0:
        weights, wsum = [1] * n, n
    exact = [total * w / wsum for w in weights]
    shares = [int(x) for x in exact]
    order = sorted(range(n), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _mk(kind, tool, out, obs, ctx, msg, dur, est_fields) -> Step:
    est = tuple(f for f in ("output_tokens", "observation_tokens", "context_tokens", "duration_s")
                if f in est_fields)
    return Step(kind=kind, output_tokens=out, observation_tokens=obs, tool=tool,
                context_tokens=ctx, model=msg.model, duration_s=dur,
                estimated=bool(est), estimated_fields=est)


def steps_from_messages(msgs: list[Msg], kinds: ToolKinds, system_tokens: int = 0) -> list[Step]:
    """Turn a transcript into steps by the module's rules; ``system_tokens`` is the estimated
    system prompt (not in ``msgs``) used only when context tokens must be estimated."""
    asst = [i for i, m in enumerate(msgs) if m.role == "assistant" and not m.skip]
    last = asst[-1] if asst else -1
    steps: list[Step] = []
    est_ctx = system_tokens
    for i, m in enumerate(msgs):
        if m.role == "assistant" and not m.skip:
            following = []
            for f in msgs[i + 1:]:
                if f.role == "assistant":
                    break
                following.append(f)
            call = len({s.call for s in steps})  # the model calls before this one
            steps.extend(replace(s, call=call) for s in _message_steps(m, i == last, following, kinds, est_ctx))
        est_ctx += m.estimated_tokens()
    return steps


def _message_steps(m: Msg, is_last: bool, following: list[Msg], kinds: ToolKinds, est_ctx: int):
    ctx_known = m.prompt_tokens is not None
    if not m.calls:
        est = set()
        if m.completion_tokens is not None:
            out = m.completion_tokens
        else:
            out, _ = estimate_tokens(m.text), est.add("output_tokens")
        obs = sum(estimate_tokens(f.text) for f in following if f.role == "user")
        if any(f.role == "user" for f in following):
            est.add("observation_tokens")
        if not ctx_known:
            est.add("context_tokens")
        if m.duration_estimated:
            est.add("duration_s")
        ctx = m.prompt_tokens if ctx_known else est_ctx
        kind = "final" if is_last else "respond"
        return [_mk(kind, "", out, obs, ctx, m, m.duration_s, est)]
    weights = [estimate_tokens(c.name + c.arguments) for c in m.calls]
    weights[0] += estimate_tokens(m.text)
    outs = apportion(m.completion_tokens, weights) if m.completion_tokens is not None else weights
    total_out = sum(outs)
    tool_msgs = [f for f in following if f.role == "tool"]
    by_id = {f.tool_call_id: f for f in tool_msgs if f.tool_call_id}
    steps = []
    before = 0
    for j, c in enumerate(m.calls):
        est = set()
        if m.completion_tokens is None:
            est.add("output_tokens")
        result = by_id.get(c.id) if c.id else None
        if result is None and j < len(tool_msgs) and not (c.id and tool_msgs[j].tool_call_id):
            result = tool_msgs[j]  # no ids to match: results come in call order
        obs = estimate_tokens(result.text) if result is not None else 0
        if result is not None:
            est.add("observation_tokens")
        ctx = (m.prompt_tokens if ctx_known else est_ctx) + before
        if not ctx_known:
            est.add("context_tokens")
        dur = None
        if m.duration_s is not None:
            share = outs[j] / total_out if total_out else 1 / len(m.calls)
            dur = m.duration_s * share
            if m.duration_estimated or len(m.calls) > 1:
                est.add("duration_s")
        steps.append(_mk(kinds.kind(c.name), c.name, outs[j], obs, ctx, m, dur, est))
        before += outs[j]
    return steps


def bounded(steps, task_id: str, where: str, warnings: list) -> tuple:
    """The steps with every duration past ``MAX_SECONDS`` (a conversation resumed days later, a
    span with a zero start) dropped to unrecorded, each said in ``warnings``: the trace reader
    refuses such durations, so an import must not write them."""
    out = []
    for i, s in enumerate(steps):
        for key in ("duration_s", "tool_duration_s"):
            v = getattr(s, key)
            if v is not None and v > MAX_SECONDS:
                warnings.append(f"{where}: task {task_id!r}, step {i}: {key} {v:.3g} s is past {MAX_SECONDS:g} s; "
                                "left unrecorded")
                s = replace(s, **{key: None})
        out.append(s)
    return tuple(out)


# --- what every importer returns, and the chat message they share -------------------------------


@dataclass
class ImportResult:
    """What an importer made: tasks, one warning per skipped record, and a report."""

    tasks: list[Task]
    warnings: list[str] = field(default_factory=list)
    records: int = 0  # simulations (tau²) or log lines (OpenAI) read
    defaulted_tools: Counter = field(default_factory=Counter)  # unknown tool -> steps
    notes: dict = field(default_factory=dict)

    def steps_by_kind(self) -> dict[str, int]:
        n = Counter(s.kind for t in self.tasks for s in t.steps)
        return {k: n.get(k, 0) for k in STEP_KINDS}

    def estimated_share(self) -> dict[str, float]:
        """Fraction of steps whose field was estimated, per estimable field."""
        steps = [s for t in self.tasks for s in t.steps]
        n = Counter(f for s in steps for f in s.estimated_fields)
        total = len(steps) or 1
        return {f: n[f] / total for f in sorted(n)}


def parse_message(raw, at: str) -> tuple[Msg, object]:
    """An OpenAI-style chat message (an object, or its JSON string) in the neutral form, and its
    ``timestamp`` (None without one); :class:`costsim.traces._check.Bad` names what is wrong at ``at``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raise ck.Bad(at, "expected a message object (or its JSON string)") from None
    m = ck.obj(raw, at)
    role = m.get("role")
    role = {"developer": "system", "function": "tool"}.get(role, role) if isinstance(role, str) else role
    if role not in ROLES:
        raise ck.Bad(f"{at}.role", f"{ck.show(role)} is not one of {', '.join(ROLES)}")
    text = ck.content_text(m.get("content"), f"{at}.content")
    calls = _calls(m.get("tool_calls"), f"{at}.tool_calls")
    if role == "assistant" and not calls and text.lstrip().startswith("{"):
        try:
            j = json.loads(text)
        except (ValueError, RecursionError):
            j = None
        if isinstance(j, dict) and j.get("tool_calls"):
            calls = _calls(j["tool_calls"], f"{at}.content.tool_calls")
            inner = j.get("content", j.get("message"))
            text = inner if isinstance(inner, str) else ""
    usage = m.get("usage")
    prompt = completion = None
    if usage is not None:
        usage = ck.obj(usage, f"{at}.usage")
        prompt = ck.opt_count(usage, "prompt_tokens", f"{at}.usage")
        completion = ck.opt_count(usage, "completion_tokens", f"{at}.usage")
    msg = Msg(role=role, text=text, calls=calls if role == "assistant" else [],
              tool_call_id=ck.opt_str(m, "id", at) if role == "tool" else "",
              prompt_tokens=prompt, completion_tokens=completion,
              model=_raw_model(m.get("raw_data"), at),
              duration_s=ck.opt_seconds(m, "generation_time_seconds", at))
    if role == "tool" and not msg.tool_call_id:
        msg.tool_call_id = ck.opt_str(m, "tool_call_id", at)
    return msg, ck.opt_time(m, "timestamp", at)


def _raw_model(raw, at: str) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return ""
    if isinstance(raw, dict):
        m = raw.get("model")
        if m is None:
            return ""
        if not isinstance(m, str):
            raise ck.Bad(f"{at}.raw_data.model", f"expected a string, got {ck.show(m)}")
        return m
    return ""


def _calls(v, at: str) -> list[Call]:
    if v is None:
        return []
    out = []
    for k, tc in enumerate(ck.lst(v, at)):
        a = f"{at}[{k}]"
        tc = ck.obj(tc, a)
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc  # OpenAI shape
        out.append(tool_call(fn.get("name"), fn.get("arguments"), ck.opt_str(tc, "id", a), a))
    return out


def tool_call(name, args, call_id, at: str) -> Call:
    """A tool call from its recorded name and arguments (an object, or its JSON text), checked
    (Bad, naming the field under ``at``): Chat Completions' tool_calls and the Responses API's
    function_call items alike."""
    if not isinstance(name, str) or not name:
        raise ck.Bad(f"{at}.name", f"expected a tool name, got {ck.show(name)}")
    if args is not None and not isinstance(args, (str, dict, list)):
        raise ck.Bad(f"{at}.arguments", f"expected an object or a JSON string, got {ck.show(args)}")
    return Call(name=name, arguments=arguments_text(args), id=call_id)

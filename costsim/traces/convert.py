"""From a chat transcript (neutral form) to committed steps; shared by the importers.

Rules (also in ``traces/README.md``):

- each assistant tool call is one step (a message with n tool calls is n steps, in order), its
  kind from the tool table (read | write; unknown names are writes and are counted);
- an assistant message without tool calls is a ``respond`` step, and the last assistant
  message of the transcript is ``final`` (if that message makes tool calls, its steps keep
  their tool kinds and the task has no ``final`` step);
- text that accompanies tool calls is part of the first call's output, not a response;
- ``output_tokens``: the call's ``completion_tokens`` (reasoning included: it is decoded),
  shared among its tool calls in proportion to their estimated lengths (largest remainder, so
  the shares sum to the measured total); without usage, the estimate of the step's own text;
- ``observation_tokens``: of a tool step, the tool result's tokens; of a respond/final step,
  the user's reply (all user messages before the next assistant message);
- ``context_tokens``: the call's ``prompt_tokens``, plus the outputs of the earlier calls of the
  same message; without usage, the estimated system prompt plus every earlier message;
- ``duration_s``: the call's generation time, shared like the output tokens.

Token estimate when the log has no count: ``ceil(chars / 4)`` (Unicode code points; a tool
call's text is its name plus its arguments as compact JSON). Estimated values are flagged in
``Step.estimated_fields``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from ..config import MAX_SECONDS
from .schema import Step
from .tools import ToolKinds

CHARS_PER_TOKEN = 4


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

    def estimated_tokens(self) -> int:
        return estimate_tokens(self.text) + sum(
            estimate_tokens(c.name + c.arguments) for c in self.calls)


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
            steps.extend(_message_steps(m, i == last, following, kinds, est_ctx))
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

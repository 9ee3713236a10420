"""The trajectory schema: a task is an ordered list of steps the agent commits.

Token counts are in tokens of the agent model. A step's ``kind`` decides how SpecAgent treats
it: ``read`` (read-only tool call: executed while drafting), ``write`` (state-changing tool
call: held for review), ``respond`` (a message to the user), ``final`` (the last message).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA_VERSION = 1
STEP_KINDS = ("read", "write", "respond", "final")
#: Fields of :class:`Step` that an importer may have to estimate rather than read from the log.
ESTIMABLE_FIELDS = ("output_tokens", "observation_tokens", "context_tokens", "duration_s")


@dataclass(frozen=True, slots=True)
class Step:
    """One committed agent step.

    ``output_tokens``: tokens the agent decodes for the step (arguments or message);
    ``observation_tokens``: tokens that come back into the context after it (tool result or the
    user's reply); ``context_tokens``: context length before the step, when known (-1 if not).
    ``duration_s``: the model call's own time for the step; ``tool_duration_s``: the tool's (or
    the user's, for a message) time after it, when the log records it apart (OpenTelemetry).
    ``verdict``: a recorded review outcome (True accepted, False rejected, None unknown).
    ``estimated``: some token count or timing of the step was not in the log but estimated
    (see ``traces/README.md`` for the rule); ``estimated_fields`` names which, when known
    (a subset of :data:`ESTIMABLE_FIELDS`).
    ``call``: the agent's model call that issued the step, numbered from 0 within its task:
    consecutive steps with the same number are tool calls one model call issued together (run in
    parallel); None, a call of its own. ``tool_calls``: how many tool calls the step stands for
    (more than 1 only in a task's :attr:`Task.calls`, a model call's tool calls merged).
    """

    kind: str
    output_tokens: int
    observation_tokens: int = 0
    tool: str = ""
    context_tokens: int = -1
    model: str = ""
    duration_s: float | None = None
    tool_duration_s: float | None = None
    verdict: bool | None = None
    estimated: bool = False
    estimated_fields: tuple[str, ...] = ()
    call: int | None = None
    tool_calls: int = 1


@dataclass(frozen=True, slots=True)
class Task:
    """One trajectory: a task id, its domain and source, and its committed steps in order.

    ``calls``: the same trajectory one model call a step (:func:`by_call`): what every
    protocol runs, since a model call is what a protocol pays for, whatever number of tool
    calls it issues."""

    task_id: str
    steps: tuple[Step, ...]
    domain: str = ""
    source: str = ""
    reward: float | None = None
    meta: dict = field(default_factory=dict, compare=False)
    calls: tuple[Step, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "calls", by_call(self.steps))

    @property
    def initial_context(self) -> int:
        """Tokens before the first step (system prompt, tools, the user's first message); 0
        where the trace does not say (a first step's context of -1)."""
        return max(self.steps[0].context_tokens, 0) if self.steps else 0


def by_call(steps) -> tuple[Step, ...]:
    """``steps`` one model call each: consecutive steps of the same :attr:`Step.call` merged
    (:func:`merge_call`); the steps themselves where no two share a call."""
    steps = tuple(steps)
    if not any(a.call is not None and a.call == b.call for a, b in zip(steps, steps[1:])):
        return steps
    out, group = [], [steps[0]]
    for s in steps[1:]:
        if s.call is not None and s.call == group[-1].call:
            group.append(s)
        else:
            out.append(merge_call(group))
            group = [s]
    out.append(merge_call(group))
    return tuple(out)


def merge_call(group) -> Step:
    """The step of one model call that issued the tool calls ``group`` together: it decodes
    all of their output and prefills all of their results after it; it is a write if any of them
    is (the call is held whole), its tools run in parallel (its tool time is the longest), its
    generation time is theirs together, and a recorded review accepted it only if it accepted
    every one."""
    if len(group) == 1:
        return group[0]
    first = group[0]
    tools = [s.tool_duration_s for s in group if s.tool_duration_s is not None]
    durations = [s.duration_s for s in group if s.duration_s is not None]
    verdicts = [s.verdict for s in group]
    fields = [f for f in ESTIMABLE_FIELDS if any(f in s.estimated_fields for s in group)]
    return Step(
        kind="write" if any(s.kind == "write" for s in group) else first.kind,
        output_tokens=sum(s.output_tokens for s in group),
        observation_tokens=sum(s.observation_tokens for s in group),
        tool=",".join(s.tool for s in group),
        context_tokens=first.context_tokens, model=first.model,
        duration_s=sum(durations) if durations else None,
        tool_duration_s=max(tools) if tools else None,
        verdict=False if False in verdicts else None if None in verdicts else True,
        estimated=any(s.estimated for s in group), estimated_fields=tuple(fields),
        call=first.call, tool_calls=sum(s.tool_calls for s in group),
    )

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


@dataclass(frozen=True, slots=True)
class Task:
    """One trajectory: a task id, its domain and source, and its committed steps in order."""

    task_id: str
    steps: tuple[Step, ...]
    domain: str = ""
    source: str = ""
    reward: float | None = None
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def initial_context(self) -> int:
        """Tokens before the first step (system prompt, tools, the user's first message); 0
        where the trace does not say (a first step's context of -1)."""
        return max(self.steps[0].context_tokens, 0) if self.steps else 0

"""AgentCollab-style escalation: the weak model acts; on "no progress" the strong model takes over.

A model of the self-evaluation-driven collaboration of AgentCollab (arXiv 2603.26034), as the
SpecAgent paper runs it as a baseline: the small model acts and judges its own progress; "no
progress" escalates to the large model for a span that grows with the task's failures;
reflection is a call of its own. Assumptions, each a knob:

- **Acting.** The weak model authors and executes each step; nothing is held or reviewed, so a
  wrong state-changing call reaches the environment (counted in ``irreversible_errors``).
- **Self-reflection.** After every step the acting model judges whether the step made
  progress. The judgement reads the step's tool result, which exists only after execution, so
  with ``reflection="separate"`` (default) it is a call of its own: prefill what is new plus a
  reflection prompt of ``reflect_prompt_tokens``, decode ``reflect_tokens``; prompt and verdict
  are dropped from the history. ``reflection="inline"`` folds the judgement into the next
  step's call (``reflect_tokens`` more decoded, no extra call). Strong steps reflect too.
- **No-progress signal.** A weak step makes no progress with probability ``escalate_p``, a rate
  of its own (:data:`STALL_P` by default: fitted to the paper's strong calls on Airline, since
  AgentCollab publishes none), or with ``stall="acceptance"`` when the task's acceptance process
  rejects it (rate 1 - p_u, or a recorded verdict of False). Such a step has been executed but commits nothing:
  its output and observation stay in the context (``wasted_steps``). Strong steps progress.
- **Escalation.** The strong model takes over: first ``recovery_steps`` steps to clean up after a
  wasted message or write (a correction or compensating call, shaped like the wasted step;
  none after a wasted read), then the span of the k-th escalation in the task,
  ``escalation_span · escalation_growth^(k-1)`` committed steps (capped by ``max_span``): difficulty-aware cumulative
  escalation — each failure in the task buys the strong model a longer turn. Then the weak model
  acts again.

Why AgentCollab can cost *more* strong calls than Strong-only (the paper: 18.5 vs 13.8 on tau²):
cumulative spans hand most of a hard task to the strong model anyway, every strong step also
pays a reflection call, and the wasted weak steps add recovery steps and context that both
models must prefill. The per-task columns ``escalations``, ``wasted_steps`` and
``reflection_calls`` decompose it.
"""

from __future__ import annotations

import math

from ..config import AgentCollabOptions as O, StepScales as S, check_scale
from .schedule import Call, Count, Execute, process, Stall, step_decode


#: The default no-progress rate per weak step, fitted to the paper (its source: costsim.config).
STALL_P = O.escalate_p


def schedule(task, escalate_p: float = O.escalate_p, stall: str = O.stall, escalation_span: int = O.escalation_span,
             escalation_growth: float = O.escalation_growth, max_span: int | None = O.max_span,
             reflection: str = O.reflection, reflect_prompt_tokens: int = O.reflect_prompt_tokens,
             reflect_tokens: int = O.reflect_tokens, recovery_steps: int = O.recovery_steps,
             strong_step_scale: float = S.strong_step_scale, weak_step_scale: float = S.weak_step_scale):
    """``stall``: "rate" (no progress with probability ``escalate_p`` per weak step) or
    "acceptance" (when the task's acceptance process rejects the step: 1 - p_u, or recorded
    verdicts)."""
    if reflection not in ("separate", "inline"):
        raise ValueError(f"reflection must be 'separate' or 'inline', got {reflection!r}")
    if stall not in ("rate", "acceptance"):
        raise ValueError(f"stall must be 'rate' or 'acceptance', got {stall!r}")
    stall_p = None if stall == "acceptance" else escalate_p
    scale = {"strong": check_scale(strong_step_scale), "weak": check_scale(weak_step_scale)}
    steps, N = task.calls, len(task.calls)
    history = task.initial_context                             # shared history, tokens
    cached = {"strong": 0, "weak": 0}                         # what each model's cache holds
    i, escalations, strong_left, todo = 0, 0, 0, []             # todo: strong recovery steps

    def act(who, st, committed):
        nonlocal history
        extra = reflect_tokens if reflection == "inline" else 0
        yield Call(who, history - cached[who], cached[who], step_decode(st, scale[who]) + extra)
        history += st.output_tokens
        cached[who] = history
        yield Execute(st)
        history += st.observation_tokens
        if reflection == "separate":
            yield Call(who, history - cached[who] + reflect_prompt_tokens, cached[who], reflect_tokens)
            cached[who] = history  # the reflection prompt and verdict leave the history
            yield Count("reflection_calls")
        if committed:
            yield Count("committed_steps")

    while i < N:
        if todo:
            yield from act("strong", todo.pop(), committed=False)
            continue
        st = steps[i]
        if strong_left > 0:
            yield from act("strong", st, committed=True)
            strong_left -= 1
            i += 1
            continue
        stalled = yield Stall(st, stall_p)
        yield from act("weak", st, committed=not stalled)
        if not stalled:
            i += 1
            continue
        yield Count("wasted_steps")
        if st.kind == "write":
            yield Count("irreversible_errors")
        escalations += 1
        yield Count("escalations")
        turn = escalation_span * escalation_growth ** (escalations - 1)
        # An escalation hands the strong model one step at least (a growth below 1 shrinks spans).
        strong_left = max(1, int(min(turn, max_span if max_span else math.inf, N)))
        if st.kind != "read":
            todo = [st] * int(recovery_steps)


run = process(schedule)  # the simulator's process function

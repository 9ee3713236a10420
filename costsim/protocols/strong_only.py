"""Strong-only (and Weak-only): one model authors every step of the trajectory."""

from __future__ import annotations

from ..config import StepScales as S, check_scale
from .schedule import Call, Count, Execute, process, step_decode

_ONE_STEP = Count("committed_steps")  # made once: this loop runs once per simulated step


def schedule(task, strong_step_scale: float = S.strong_step_scale, *, _model: str = "strong"):
    """Each step: prefill what is new since the model's last call (the initial context, then the
    previous step's observation), decode the step, execute it. Prefix caching keeps the rest.

    ``strong_step_scale``: tokens the model decodes for a step it authors, per recorded token of
    the step (:func:`step_decode`); Weak-only passes the weak model's."""
    model = _model  # "weak" for Weak-only; not a user option
    scale = check_scale(strong_step_scale)
    ctx, pending = 0, task.initial_context
    for st in task.calls:
        yield Call(model, pending, ctx, step_decode(st, scale))
        ctx += pending + st.output_tokens
        yield Execute(st)
        pending = st.observation_tokens
        yield _ONE_STEP


run = process(schedule)  # the simulator's process function

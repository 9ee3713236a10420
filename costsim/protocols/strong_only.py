"""Strong-only (and Weak-only): one model authors every step of the trajectory."""

from __future__ import annotations

from .schedule import Call, Count, Execute, process

_ONE_STEP = Count("committed_steps")  # made once: this loop runs once per simulated step


def schedule(task, strong_step_scale: float = 1.0, *, _model: str = "strong"):
    """Each step: prefill what is new since the model's last call (the initial context, then the
    previous step's observation), decode the step, execute it. Prefix caching keeps the rest.

    ``strong_step_scale``: tokens the strong model decodes for a step it authors, per token of
    the recorded step (a thinking strong model: > 1); the thinking does not stay in the history.
    The weak model decodes the recorded tokens. It scales Strong-only's steps only (with rho
    set to the same value SpecAgent's repairs follow); other protocols' strong steps keep the
    recorded lengths."""
    if not strong_step_scale > 0:
        raise ValueError(f"strong_step_scale must be > 0 (a step decodes something), got {strong_step_scale!r}")
    model = _model  # "weak" for Weak-only; not a user option
    scale = strong_step_scale if model == "strong" else 1.0
    ctx, pending = 0, task.initial_context
    for st in task.steps:
        yield Call(model, pending, ctx, st.output_tokens if scale == 1.0 else int(round(scale * st.output_tokens)))
        ctx += pending + st.output_tokens
        yield Execute(st)
        pending = st.observation_tokens
        yield _ONE_STEP


run = process(schedule)  # the simulator's process function

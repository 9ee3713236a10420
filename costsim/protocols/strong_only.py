"""Strong-only (and Weak-only): one model authors every step of the trajectory."""

from .schedule import Call, Count, Execute, process

_ONE_STEP = Count("committed_steps")  # made once: this loop runs once per simulated step


def schedule(task, model: str = "strong"):
    """Each step: prefill what is new since the model's last call (the initial context, then the
    previous step's observation), decode the step, execute it. Prefix caching keeps the rest."""
    ctx, pending = 0, task.initial_context
    for st in task.steps:
        yield Call(model, pending, ctx, st.output_tokens)
        ctx += pending + st.output_tokens
        yield Execute(st)
        pending = st.observation_tokens
        yield _ONE_STEP


run = process(schedule)  # the simulator's process function

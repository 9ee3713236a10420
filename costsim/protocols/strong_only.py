"""Strong-only (and Weak-only): one model authors every step of the trajectory."""


def run(tr, task, model: str = "strong"):
    """Each step: prefill what is new since the model's last call (the initial context, then the
    previous step's observation), decode the step, execute it. Prefix caching keeps the rest."""
    steps = task.steps
    ctx, pending = 0, max(steps[0].context_tokens, 0) if steps else 0
    for st in steps:
        yield from tr.call(model, pending, ctx, st.output_tokens)
        ctx += pending + st.output_tokens
        yield from tr.execute(st)
        pending = st.observation_tokens
        tr.row["committed_steps"] += 1

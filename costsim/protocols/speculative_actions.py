"""Speculative Actions: the strong model acts every step; a weak speculator runs ahead.

A model of the "Speculative Actions" baseline (lossless speculation for agents), as the SpecAgent
paper runs it. Assumptions, each a knob:

- **Actor.** The strong model authors every step, as in Strong-only; the committed trajectory is
  the same.
- **Speculator.** When the strong model starts step j, the weak model guesses step j in
  parallel (one weak call: prefill what is new, decode a step of the same length, or of
  ``spec_guess_tokens`` when it guesses only the action). The guess
  matches the actor's step with probability ``spec_hit_rate`` (drawn once per step).
- **Pre-execution.** When step j is a read-only call, the guessed call is executed as soon as
  the guess is out (a miss calls the same tool with other arguments: a wasted tool call); a
  guessed state-changing call or message is never pre-executed. A hit whose guess was out before
  the actor finished saves the tool latency up to the time the guess was early
  (``tool_s_saved``); if the guess was still decoding, the actor's call runs as usual.
- **Running ahead** (``lookahead=True``). When a pre-executed result arrives while the actor is
  still deciding step j, the strong model's call for step j+1 is started at once on the
  speculated history (its guess too). If step j was a hit, that call *is* step j+1, already
  under way; on a miss it is discarded: an extra strong call (``spec_wasted_strong_calls``).
  Only one level ahead: a call started speculatively does not start further ones until its
  step is confirmed.

Costs the paper counts (17.4 vs 13.8 strong calls on Airline): one extra weak call per step and
one wasted strong call per missed read that ran ahead; extra strong traffic and batch, while the
saving is tool latency and, on hits, overlapping two strong calls.
"""

from __future__ import annotations

from ._rng import side_rng
from .schedule import check_scale, step_decode

#: When the speculative actor call for step j+1 starts: ``always`` on the guessed state, the
#: step waiting for both (the public implementation, github.com/naimengye/speculative-action);
#: ``in-time`` only when the guessed read's result is back before the actor has decided.
SPECULATE = ("always", "in-time")


class _Frame:
    """Step ``j`` in flight: the actor's call, the speculator's guess, its pre-executed result."""

    __slots__ = ("j", "strong", "guess", "hit", "guessed_at", "lat", "next", "speculative", "adopted")

    def __init__(self, j, speculative):
        self.j, self.speculative, self.adopted = j, speculative, not speculative
        self.strong = self.guess = self.next = None
        self.hit, self.guessed_at, self.lat = False, None, None


def run(tr, task, spec_hit_rate: float = 0.5, lookahead: bool = True, spec_guess_tokens: int | None = None,
        speculate: str = "always", strong_step_scale: float = 1.0, weak_step_scale: float = 1.0):
    check_scale(strong_step_scale), check_scale(weak_step_scale)
    if speculate not in SPECULATE:
        raise ValueError(f"speculate must be one of {', '.join(SPECULATE)}, got {speculate!r}")
    always = speculate == "always"
    env, rng, row, steps = tr.env, tr.rng, tr.row, task.steps
    hits = side_rng(rng, 3)
    N = len(steps)
    if not N:
        return
    H = [max(steps[0].context_tokens, 0)]  # H[j]: history tokens before step j
    for s in steps:
        H.append(H[-1] + s.output_tokens + s.observation_tokens)
    procs = []

    def guess(f, prefill, context):
        st = steps[f.j]
        guess_tokens = step_decode(st, weak_step_scale) if spec_guess_tokens is None else min(spec_guess_tokens, st.output_tokens)
        yield from tr.call("weak", prefill, context, guess_tokens)
        f.guessed_at = env.now
        if st.kind == "read":
            f.lat = tr.tool_seconds(st)
            if f.lat:
                yield env.timeout(f.lat)
        elif not (always and st.kind == "write"):  # a message's next state is the user's
            return
        # Run ahead on the guessed state: always (the public implementation; a guessed write's
        # result is predicted, not executed), or only while the actor has not decided yet.
        if lookahead and f.adopted and f.j + 1 < N and (always or not f.strong.triggered):
            j = f.j
            f.next = launch(j + 1, steps[j].output_tokens + st.observation_tokens, H[j],
                            steps[j].output_tokens + st.observation_tokens, H[j], speculative=True)

    def launch(j, s_prefill, s_context, w_prefill, w_context, speculative=False):
        f = _Frame(j, speculative)
        f.strong = env.process(tr.call("strong", s_prefill, s_context, step_decode(steps[j], strong_step_scale)))
        f.hit = spec_hit_rate >= 1.0 or (spec_hit_rate > 0.0 and hits.random() < spec_hit_rate)
        f.guess = env.process(guess(f, w_prefill, w_context))
        row["spec_calls"] += 1
        procs.extend((f.strong, f.guess))
        return f

    f = launch(0, H[0], 0, H[0], 0)
    for j, st in enumerate(steps):
        yield f.strong
        t0 = env.now  # the actor has decided
        if st.kind == "read" and f.guessed_at is not None and f.hit:
            # The guess was out in time and is the actor's call: wait for its result, if not back.
            if not f.guess.triggered:
                yield f.guess
            row["spec_hits"] += 1
            row["tool_s"] += f.lat
            row["tool_s_saved"] += f.lat - (env.now - t0)
        else:
            if always and lookahead and not f.guess.triggered:  # the loop waits for both
                yield f.guess
                row["spec_wait_s"] += env.now - t0
            if st.kind == "read":
                row["spec_wasted_tools"] += 1
            yield from tr.execute(st)
        row["committed_steps"] += 1
        if j + 1 == N:
            break
        out = st.output_tokens
        if f.next is not None and f.hit:
            f.next.adopted = True
            f = f.next
        else:
            if f.next is not None:
                row["spec_wasted_strong_calls"] += 1
            # Strong: its own step j is cached, the observation is new; the speculator has
            # history up to H[j] and reads the actor's step and its observation.
            f = launch(j + 1, H[j + 1] - H[j] - out, H[j] + out, H[j + 1] - H[j], H[j])
    for p in procs:  # wasted speculation still in flight: its cost belongs to this task
        if not p.triggered:
            yield p

"""Speculative Actions: the strong model acts every step; a weak guesser lets it run ahead.

A model of the "Speculative Actions" baseline (arXiv 2510.04371) as the SpecAgent paper runs
it: its public code. The actor (the strong model) authors every step, as in Strong-only; the
committed trajectory is the recorded one. Two places to speculate (``speculate``):

- **At the user's turns** (``user-turns``, the default): what the public tau-bench agent does
  (github.com/naimengye/speculative-action, ``e-commerce/tau-bench/tau_bench/agents/
  tool_calling_agent_reduce.py``, ``ToolCallingReduceAgent``, commit dc938b9). When the actor
  sends the user a message, a background task starts: the weak model guesses the user's reply,
  then the actor runs on the guessed state, executing each tool call, until it answers with a
  message or has made ``spec_depth`` (5, the code's ``max_num_steps``) tool calls. The loop
  waits for the task before its next call. The code appends the background tool steps to the
  history whatever the guess (``--guesser-check`` off), and sends the answer to the user but
  drops it, calling the actor again for it: so the extra strong calls are one per message after
  which the actor answers within 5 tool steps, and a write run on a wrong guess reaches the
  environment (``irreversible_errors``; the paper's low quality, 72.0 / 48.5).
  ``adopt="on-hit"`` is what ``--guesser-check`` means to do (as shipped it does not run): kept
  only when the guess is right (``spec_hit_rate``), else every background call and tool call is
  wasted and the actor runs the steps itself.
- **At every step** (``always``, the paper's general framework): when the strong model starts
  step j, the weak model guesses step j in parallel (one weak call: prefill what is new, decode
  a step of the same length, or ``spec_guess_tokens``); the guess matches with probability
  ``spec_hit_rate``. A guessed read is executed as soon as the guess is out (a miss: a wasted
  tool call); a guessed write's result is predicted, not executed; a message is never
  speculated. A hit whose guess was out before the actor finished saves the tool latency up to
  the time the guess was early (``tool_s_saved``). With ``lookahead`` the actor is also called
  for step j+1 on the guessed state, and the step waits for both: on a hit that call *is* step
  j+1, on a miss it is wasted (``spec_wasted_strong_calls``). One level ahead only.
  ``in-time`` runs ahead only when the guessed read's result is back before the actor decided.
"""

from __future__ import annotations

from ..config import OPTIONS, check_scale, SpeculativeActionsOptions as O, StepScales as S
from ._rng import side_rng
from .schedule import step_decode

#: Where speculation happens (the module docstring), and which background steps are kept.
SPECULATE, ADOPT = OPTIONS["speculate"][1].metadata["choices"], OPTIONS["adopt"][1].metadata["choices"]
#: The user-turn guesser's instruction, in tokens by costsim's ceil(chars / 4) rule: the code's
#: ``user_query_prompt`` without the conversation is 466 characters.
GUESS_PROMPT_TOKENS = 117


class _Frame:
    """Step ``j`` in flight: the actor's call, the speculator's guess, its pre-executed result."""

    __slots__ = ("j", "strong", "guess", "hit", "guessed_at", "lat", "next", "speculative", "adopted")

    def __init__(self, j, speculative):
        self.j, self.speculative, self.adopted = j, speculative, not speculative
        self.strong = self.guess = self.next = None
        self.hit, self.guessed_at, self.lat = False, None, None


def run(tr, task, spec_hit_rate: float = O.spec_hit_rate, lookahead: bool = O.lookahead,
        spec_guess_tokens: int | None = O.spec_guess_tokens, speculate: str = O.speculate, adopt: str = O.adopt,
        spec_depth: int = O.spec_depth, final_speculation: bool = O.final_speculation,
        strong_step_scale: float = S.strong_step_scale, weak_step_scale: float = S.weak_step_scale):
    check_scale(strong_step_scale), check_scale(weak_step_scale)
    if speculate not in SPECULATE:
        raise ValueError(f"speculate must be one of {', '.join(SPECULATE)}, got {speculate!r}")
    if adopt not in ADOPT:
        raise ValueError(f"adopt must be one of {', '.join(ADOPT)}, got {adopt!r}")
    if isinstance(spec_depth, bool) or not isinstance(spec_depth, int) or spec_depth < 1:
        raise ValueError(f"spec_depth must be a whole number >= 1 (tool steps per speculation), got {spec_depth!r}")
    if speculate == "user-turns":
        yield from _user_turns(tr, task, spec_hit_rate, spec_guess_tokens, adopt == "always", spec_depth,
                               final_speculation, strong_step_scale, weak_step_scale)
        return
    always = speculate == "always"
    env, rng, row, steps = tr.env, tr.rng, tr.row, task.calls
    hits = side_rng(rng, 3)
    N = len(steps)
    if not N:
        return
    H = _history(task)
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


def _history(task) -> list:
    """``H[j]``: the history's tokens before step j (the initial context, then each step and its
    observation), ``H[N]`` after the last."""
    H = [task.initial_context]
    for s in task.calls:
        H.append(H[-1] + s.output_tokens + s.observation_tokens)
    return H


def _user_turns(tr, task, hit_rate, guess_tokens, adopt_all, depth, final, s_scale, w_scale):
    """Speculation at the user's turns, as the public tau-bench code runs it.

    When the actor's step j is a message to the user, a background task starts: the weak model
    guesses the user's reply (one weak call, decoding a reply of the recorded reply's length or
    ``spec_guess_tokens``); then the actor is called on the guessed state for the steps after
    it, each tool call executed, until it answers with a message or has made ``depth`` tool
    calls. That answer is sent to the (simulated) user, then discarded: the loop calls the actor
    for it again. The loop sends message j, then waits for the background task before its next
    call (``spec_wait_s``: the wait beyond the user's reply). The background tool steps are then
    kept (``adopt_all``, or on a hit) and the actor resumes after them; its prefix cache breaks
    at the user's reply (the background calls saw the guess), so that call prefills from the
    reply on. Not kept: each background strong call and tool call was wasted, and the actor runs
    the steps itself. A guess is right with probability ``hit_rate``; a write executed on a
    wrong guess counts in ``irreversible_errors``.

    The guesser reads its instruction (:data:`GUESS_PROMPT_TOKENS`) and the conversation's text
    only: the messages to the user and the user's replies, no system prompt, tool calls or tool
    results (the first user message, which a trace keeps inside its initial context, is left
    out); a prefix cache keeps what it read at the last guess. ``final``: also speculate after
    the closing message, as the code does; its calls are costed, but the task has ended for its
    user (the code does not wait for it)."""
    env, row, steps = tr.env, tr.row, task.calls
    hits = side_rng(tr.rng, 3)
    N = len(steps)
    H = _history(task)
    talk = [0]  # talk[j]: the conversation's text before step j (messages and replies)
    for s in steps:
        talk.append(talk[-1] + (s.output_tokens + s.observation_tokens if s.kind in ("respond", "final") else 0))

    def speculation(j, cache, out):
        """The background task after message j; fills ``out``: (steps run, kept)."""
        st = steps[j]
        prompt = GUESS_PROMPT_TOKENS + talk[j] + st.output_tokens
        yield from tr.call("weak", prompt - cache[1], cache[1],
                           max(st.observation_tokens, 1) if guess_tokens is None else guess_tokens)
        cache[1] = prompt
        hit = hit_rate >= 1.0 or (hit_rate > 0.0 and hits.random() < hit_rate)
        keep = adopt_all or hit
        ctx, pre, ran = H[j] + st.output_tokens, st.observation_tokens, 0
        # After the closing message the actor answers the guessed reply with a message like it.
        for nxt in steps[j + 1:j + 1 + depth] or (st,):
            yield from tr.call("strong", pre, ctx, step_decode(nxt, s_scale))
            if nxt.kind != "read" and nxt.kind != "write":  # an answer to the user: sent, then discarded
                row["spec_wasted_strong_calls"] += 1
                lat = tr.user_latency.sample(hits)
                if lat:
                    yield env.timeout(lat)
                break
            if nxt.kind == "write" and not hit:  # executed on a wrong guess of the user's reply
                row["irreversible_errors"] += 1
            if keep:
                yield from tr.execute(nxt)
            else:
                row["spec_wasted_strong_calls"] += 1
                row["spec_wasted_tools"] += 1
                lat = tr.tool_seconds(nxt)
                if lat:
                    yield env.timeout(lat)
            ctx, pre, ran = ctx + pre + nxt.output_tokens, nxt.observation_tokens, ran + 1
        row["spec_hits"] += hit
        out.append((ran, keep))

    cache = [0, 0]  # tokens the strong model's and the guesser's prefix caches hold
    j = 0
    while j < N:
        st = steps[j]
        yield from tr.call("strong", H[j] - cache[0], cache[0], step_decode(st, s_scale))
        cache[0] = H[j] + st.output_tokens
        spec = None
        if st.kind == "respond" or (final and st.kind == "final"):
            out = []
            spec = env.process(speculation(j, cache, out))
            row["spec_calls"] += 1
        yield from tr.execute(st)
        row["committed_steps"] += 1
        j += 1
        if spec is None:
            continue
        if j == N:  # the closing message's: the task is over for its user, its cost still counts
            tr.answered_at = env.now
            yield spec
            break
        if not spec.triggered:
            t0 = env.now
            yield spec
            row["spec_wait_s"] += env.now - t0
        ran, kept = out[0]
        if kept and ran:
            row["committed_steps"] += ran  # the actor's steps, made in the background
            j += ran

"""SpecAgent: the weak model drafts chunks, the strong model reviews them.

Draft: the weak model drafts up to K steps; read-only calls are executed at once so later
steps see real observations. Chunking is :func:`costsim.protocols.chunking.chunk_end`, a named rule
(``chunking``): a state-changing call ends the chunk and is held (not executed) for review; K
steps end it; what a message to the user does is what the rules differ in — it ends the chunk
unreviewed (``messages-end``), is sent while drafting goes on and gets the chunk reviewed
(``messages-pass``), or is sent and reviewed never (``writes-only``); ``writes+final`` also
holds the final answer, ``hold-messages`` (the paper's ablation) holds every message. A chunk
that is neither held nor marked for review is committed without review. ``review="all"`` (the
other ablation) reviews every chunk.

Verify: the strong model prefills everything new since its last call (history + chunk) and
decodes a verdict of ``verdict_tokens``: the accepted prefix j. After a rejection the strong
model authors step j+1 itself — fused into the verdict (``repair="fused"``: rho strong steps,
rho·s·d extra decoded tokens at strong step scale s) or in a correction turn of its own
(another call of ``correction_rho`` strong steps): every
time with ``repair="separate"``, with probability ``correction_rate`` with the fused repair (the
paper: a correction turn "only when the fix spans several calls, or ã fails the adapter's
validation"). The rejected suffix is discarded; both models' caches roll back to the committed
history.

Trajectory positions are the committed steps of the task: a rejected draft of position i is
replaced by the strong model's repair of position i.
"""

from __future__ import annotations

from ..config import SpecAgentOptions as O, StepScales, check_scale
from ..formulas import repair_decode_scale
from .chunking import check_chunking, chunk_end
from .schedule import Boundary, Call, Chance, Count, Execute, process, Redraw, Review, step_decode

# Made once: the schedule runs once per simulated chunk.
_AUTO_COMMIT, _REVIEW, _REJECTION = Count("auto_commits"), Count("reviews"), Count("rejections")


def schedule(task, K: int = O.K, chunking: str = O.chunking, review: str = O.review, repair: str = O.repair,
             rho: float = O.rho, verdict_tokens: int = O.verdict_tokens, correction_tokens: int = O.correction_tokens,
             correction_rate: float = O.correction_rate, correction_rho: float = O.correction_rho,
             strong_step_scale: float = StepScales.strong_step_scale,
             weak_step_scale: float = StepScales.weak_step_scale, start: tuple | None = None):
    """SpecAgent on ``task``; ``start``: a :class:`~.schedule.Boundary` state to resume from —
    (committed position, strong cached, strong unseen, weak cached, weak unseen) tokens.
    ``rho``: the fused repair, in strong steps (``rho`` times ``strong_step_scale`` decoded per
    recorded token of the replaced step, :func:`costsim.formulas.repair_decode_scale`); a
    correction turn (every rejection's with ``repair="separate"``, at ``correction_rate`` with
    ``"fused"``) decodes ``correction_rho`` strong steps; ``weak_step_scale``: drafted
    tokens per recorded token (:func:`~.schedule.step_decode`)."""
    check_chunking(chunking)
    check_scale(weak_step_scale)
    for name, value, allowed in (("review", review, ("held", "all")), ("repair", repair, ("fused", "separate"))):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    steps, N = task.calls, len(task.calls)
    i, s_ctx, s_pending, w_ctx, w_pending = start or (0, 0, task.initial_context, 0, task.initial_context)
    while i < N:
        yield Boundary(i, (i, s_ctx, s_pending, w_ctx, w_pending))
        # --- draft ---------------------------------------------------------------------------
        # chunk: tokens of the chunk as the strong model sees them — every step, and the
        # observations of those executed (a held step has none yet).
        drafted, held, reviewed, chunk, messages = [], False, False, 0, 0
        w_base = w_ctx + w_pending  # weak context at the start of the chunk (committed history)
        for j in range(i, N):
            st = steps[j]
            yield Call("weak", w_pending, w_ctx, step_decode(st, weak_step_scale))
            w_ctx += w_pending + st.output_tokens
            w_pending = 0
            drafted.append(st)
            chunk += st.output_tokens
            messages += st.kind == "respond" or st.kind == "final"
            end, held, reviewed = chunk_end(st.kind, len(drafted), K, chunking, messages)
            if held:
                break
            yield Execute(st)
            w_pending = st.observation_tokens
            chunk += w_pending
            if end:
                break
        n = len(drafted)
        if not reviewed and review != "all":
            yield _AUTO_COMMIT
            yield Count("committed_steps", n)
            s_pending += chunk
            i += n
            continue

        # --- verify (and repair) -------------------------------------------------------------
        yield Count("reviewed_steps", n)
        a = yield Review(tuple(drafted))
        reject = a < n
        corrected = reject and (repair == "separate" or (correction_rate > 0 and (yield Chance(correction_rate))))
        decode = verdict_tokens + (step_decode(drafted[a], repair_decode_scale(rho, strong_step_scale))
                                   if reject and not corrected else 0)
        yield Call("strong", s_pending + chunk, s_ctx, decode)
        yield _REVIEW
        if corrected:
            yield Call("strong", correction_tokens, s_ctx + s_pending + chunk + decode,
                       step_decode(drafted[a], repair_decode_scale(correction_rho, strong_step_scale)))
        committed = drafted[: a + 1] if reject else drafted
        if reject:
            yield _REJECTION
        last = committed[-1]
        prefix = sum(s.output_tokens + s.observation_tokens for s in committed[:-1])
        # Both caches roll back to the committed history, up to the last committed output.
        s_ctx += s_pending + prefix + last.output_tokens
        s_pending = 0
        if reject:  # the weak model has not seen the strong model's repair
            w_ctx, w_pending = w_base + prefix, last.output_tokens
        else:
            w_ctx, w_pending = w_base + prefix + last.output_tokens, 0
        if reject or held:  # the repaired step, or the held step, runs now
            yield Execute(last)
            s_pending += last.observation_tokens
            w_pending += last.observation_tokens
        else:  # a review of an executed chunk: the strong saw its last observation
            s_ctx += last.observation_tokens
            w_pending = last.observation_tokens
        yield Count("committed_steps", len(committed))
        i += len(committed)
        if reject and task.meta.get("redraw") and i < N:  # a generative task: the path after a repair changes
            seen = n - len(committed)
            steps = steps[:i] + (yield Redraw(i, seen)) + steps[i + seen:]


run = process(schedule)  # the simulator's process function

"""SpecAgent's chunking rule, and what a trace looks like to it: chunks, reviews, and the
per-task and per-file statistics of `costsim traces stats`.

Chunking (the recorded trajectory taken as the committed one, every draft accepted) runs over
a task's model calls (:attr:`costsim.traces.Task.calls`: a call's tool calls are one step,
issued together, held together if one of them writes) and follows a named rule, :data:`CHUNKINGS`. In all of them a ``read`` joins the current chunk and the K-th
step ends it (end ``"K"``); a ``write`` ends the chunk and is held, so the chunk is reviewed
(end ``"write"``); steps left at the end of a task form a last chunk (end ``"end"``). They
differ in what a message to the user (``respond``, and the task's ``final`` answer) does:

- ``messages-end``: the message ends the chunk (the agent waits for the user) and is sent
  unreviewed, so the chunk is committed without review (end ``"response"``);
- ``messages-pass``: the message is sent at once and drafting goes on; a chunk that contains
  a message is reviewed wherever it ends (it was not held: it is judged after the fact);
- ``writes-only``: the message is sent and drafting goes on; only chunks that end in a held
  write are reviewed;
- ``writes+final``: as ``messages-end``, but the final answer is held and reviewed;
- ``hold-messages``: every message ends the chunk and is held and reviewed (the paper's
  ablation "holding also at user-facing responses").

Lengths run 1..K. "Implied reviews" count reviewed chunks with every draft accepted: a lower
bound, since each rejection starts one more chunk. Token sums are in the trace's tokens;
``prompt`` is the sum of the steps' context tokens, i.e. the prefill a step-at-a-time agent
reads (several tool calls of one logged call share that call's prompt).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..config import CHUNKINGS, WORKLOAD, SpecAgentOptions
from ..formulas import check_K
from ..traces.schema import STEP_KINDS, Task
from ..traces.stats import model_stats, tool_latency_stats
from ..traces.verdicts import fit_tasks

#: SpecAgent's default chunking rule (its declaration and source: costsim.config).
DEFAULT_CHUNKING = SpecAgentOptions.chunking
#: Each rule in a few words, as outputs say it.
RULE_WORDS = {
    "messages-end": "a message to the user ends the chunk, sent unreviewed",
    "messages-pass": "messages sent as drafting goes on; a chunk with a message reviewed",
    "writes-only": "the paper's rule: a chunk ends at its first write, held and reviewed, or at K reads, "
                   "committed unreviewed; messages sent as drafting goes on",
    "writes+final": "a message ends the chunk, sent unreviewed; writes and the final answer held and reviewed",
    "hold-messages": "writes and every message held and reviewed (the paper's ablation)",
}
ENDS = ("write", "response", "K", "end")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One drafted chunk: its length in steps, whether it is reviewed, and what ended it."""

    length: int
    reviewed: bool
    end: str


def _check(K: int, chunking: str):
    check_K(K, "K")
    check_chunking(chunking)


def check_chunking(chunking: str) -> None:
    if chunking not in CHUNKINGS:
        raise ValueError(f"chunking must be one of {', '.join(CHUNKINGS)}, got {chunking!r}")


def chunk_end(kind: str, n: int, K: int, chunking: str = DEFAULT_CHUNKING, messages: int = 0):
    """Does a step of ``kind``, the n-th of its chunk, end the chunk; is it held; is the chunk
    reviewed? ``messages``: messages to the user in the chunk so far, this step included.

    Returns ``(end, held, reviewed)``: ``end`` is None (the chunk goes on) or the reason
    ("write", "response", "K"); a held step is not executed before the chunk is reviewed;
    ``reviewed`` also answers for a chunk the task's end cuts short here. This is the one
    definition of chunking: the SpecAgent schedule and these statistics both call it.
    """
    if kind == "write":
        return "write", True, True
    passing = chunking in ("messages-pass", "writes-only")
    review_sent = chunking == "messages-pass" and messages > 0  # a sent message, judged later
    if kind == "respond" or kind == "final":
        if not passing:
            held = chunking == "hold-messages" or (kind == "final" and chunking == "writes+final")
            return "response", held, held
        if kind == "final":
            return "response", False, review_sent
    return ("K" if n >= K else None), False, review_sent


def chunks(steps, K: int = WORKLOAD.K, chunking: str = DEFAULT_CHUNKING) -> list[Chunk]:
    """The chunks SpecAgent drafts over ``steps`` (see the module docstring)."""
    _check(K, chunking)
    out: list[Chunk] = []
    n = messages = 0
    reviewed = False
    for s in steps:
        n += 1
        messages += s.kind in ("respond", "final")
        end, held, reviewed = chunk_end(s.kind, n, K, chunking, messages)
        if end:
            out.append(Chunk(n, reviewed, end))
            n = messages = 0
    if n:
        out.append(Chunk(n, reviewed, "end"))
    return out


def chunk_distribution(all_chunks: list[Chunk], K: int) -> dict:
    """Counts by length 1..K, reviewed and not, by end reason, and the two pmfs (fractions of
    all chunks) in the layout of :func:`costsim.formulas.renewal_ratios`."""
    total = len(all_chunks)
    rev = [0] * K
    unrev = [0] * K
    ends = Counter(c.end for c in all_chunks)
    for c in all_chunks:
        (rev if c.reviewed else unrev)[c.length - 1] += 1
    return {
        "K": K, "chunks": total, "reviewed": rev, "unreviewed": unrev,
        "ends": {e: ends.get(e, 0) for e in ENDS},
        "pmf_reviewed": [x / total if total else 0.0 for x in rev],
        "pmf_unreviewed": [x / total if total else 0.0 for x in unrev],
        "mean_length": sum(c.length for c in all_chunks) / total if total else None,
    }


def _kinds(steps) -> dict[str, int]:
    n = Counter(s.kind for s in steps)
    return {k: n.get(k, 0) for k in STEP_KINDS}


def task_stats(task: Task, K: int = WORKLOAD.K, chunking: str = DEFAULT_CHUNKING) -> dict:
    """Per-task figures: steps by kind, model calls, tokens, context growth, chunks (of calls:
    what SpecAgent drafts), implied reviews."""
    steps = task.steps
    ctx = [s.context_tokens for s in steps if s.context_tokens >= 0]
    ch = chunks(task.calls, K, chunking)
    return {
        "task_id": task.task_id,
        "steps": len(steps),
        "calls": len(task.calls),
        "kinds": _kinds(steps),
        "tokens": {
            "prompt": sum(ctx),
            "completion": sum(s.output_tokens for s in steps),
            "observation": sum(s.observation_tokens for s in steps),
        },
        "context_first": ctx[0] if ctx else None,
        "context_last": ctx[-1] if ctx else None,
        "context_growth_per_step": (ctx[-1] - ctx[0]) / (len(ctx) - 1) if len(ctx) > 1 else None,
        "chunks": len(ch),
        "reviews": sum(c.reviewed for c in ch),
        "estimated_steps": sum(s.estimated for s in steps),
        "duration_s": sum(s.duration_s for s in steps if s.duration_s is not None)
        if any(s.duration_s is not None for s in steps) else None,
    }


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def trace_stats(tasks: list[Task], K: int = WORKLOAD.K, chunking: str = DEFAULT_CHUNKING) -> dict:
    """Per-file summary plus the per-task rows (``"tasks"``)."""
    _check(K, chunking)
    rows = [task_stats(t, K, chunking) for t in tasks]
    steps = [s for t in tasks for s in t.steps]
    calls = sum(len(t.calls) for t in tasks)
    all_chunks = [c for t in tasks for c in chunks(t.calls, K, chunking)]
    reviews = [r["reviews"] for r in rows]
    n_est = Counter(f for s in steps for f in s.estimated_fields)
    fit = fit_tasks(tasks) if any(s.verdict is not None for s in steps) else None
    return {
        "K": K, "chunking": chunking,
        "tasks": len(tasks),
        "steps": len(steps),
        "kinds": _kinds(steps),
        "tokens": {k: sum(r["tokens"][k] for r in rows) for k in ("prompt", "completion", "observation")},
        "estimated_fraction": {f: n_est[f] / len(steps) for f in sorted(n_est)} if steps else {},
        "calls": calls,
        "mean_steps_per_task": len(steps) / len(tasks) if tasks else None,
        "mean_calls_per_task": calls / len(tasks) if tasks else None,
        "mean_context_first": _mean(r["context_first"] for r in rows),
        "mean_context_last": _mean(r["context_last"] for r in rows),
        "mean_context_growth_per_step": _mean(r["context_growth_per_step"] for r in rows),
        "chunk_lengths": chunk_distribution(all_chunks, K),
        "reviews_per_task": {
            "mean": _mean(reviews), "min": min(reviews) if reviews else None,
            "max": max(reviews) if reviews else None,
        },
        "calls_per_review": calls / sum(reviews) if sum(reviews) else None,
        "models": model_stats(steps),
        "tool_latency": tool_latency_stats(steps),
        "verdict_fit": fit,
        "per_task": rows,
    }

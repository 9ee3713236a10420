"""What a trace looks like to SpecAgent: steps, tokens, context growth, chunks, reviews.

Chunking (the recorded trajectory taken as the committed one, every draft accepted):

- a ``read`` joins the current chunk; the K-th consecutive read ends it, committed **without
  review** (end ``"K"``);
- a ``write`` ends the chunk and is held: the chunk is **reviewed** (end ``"write"``);
- a ``respond``/``final`` step ends the chunk too, because the agent must wait for the user
  (end ``"response"``). With ``hold="writes"`` (the paper's protocol, the default) the response
  is sent unreviewed, so the chunk is committed without review; with
  ``hold="writes+responses"`` (the paper's ablation) it is held and reviewed;
- steps left at the end of a task form a last unreviewed chunk (end ``"end"``).

Lengths run 1..K. "Implied reviews" count reviewed chunks with every draft accepted: a lower
bound, since each rejection starts one more chunk. Token sums are in the trace's tokens;
``prompt`` is the sum of the steps' context tokens, i.e. the prefill a step-at-a-time agent
reads (several tool calls of one logged call share that call's prompt).
"""

from __future__ import annotations

import math

from collections import Counter
from dataclasses import dataclass

from .schema import STEP_KINDS, Step, Task

HOLDS = ("writes", "writes+responses")
ENDS = ("write", "response", "K", "end")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One drafted chunk: its length in steps, whether it is reviewed, and what ended it."""

    length: int
    reviewed: bool
    end: str


def _check(K: int, hold: str):
    from ..formulas import MAX_K

    if isinstance(K, bool) or not isinstance(K, int) or not 1 <= K <= MAX_K:
        raise ValueError(f"K must be an integer in [1, {MAX_K}], got {K!r}")
    if hold not in HOLDS:
        raise ValueError(f"hold must be one of {', '.join(HOLDS)}, got {hold!r}")


def chunk_end(kind: str, n: int, K: int, hold: str = "writes"):
    """Does a step of ``kind``, the n-th of its chunk, end the chunk — and is it held?

    Returns ``(end, held)``: ``end`` is None (the chunk goes on) or the reason ("write",
    "response", "K"); a held step is not executed before the chunk is reviewed. This is the one
    definition of chunking: the SpecAgent protocol and these statistics both call it.
    """
    if kind == "write":
        return "write", True
    if kind in ("respond", "final"):
        return "response", hold == "writes+responses"
    return ("K" if n >= K else None), False


def chunks(steps, K: int = 6, hold: str = "writes") -> list[Chunk]:
    """The chunks SpecAgent drafts over ``steps`` (see the module docstring)."""
    _check(K, hold)
    out: list[Chunk] = []
    n = 0
    for s in steps:
        n += 1
        end, held = chunk_end(s.kind, n, K, hold)
        if end:
            out.append(Chunk(n, held, end))
            n = 0
    if n:
        out.append(Chunk(n, False, "end"))
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


def task_stats(task: Task, K: int = 6, hold: str = "writes") -> dict:
    """Per-task figures: steps by kind, tokens, context growth, chunks, implied reviews."""
    steps = task.steps
    ctx = [s.context_tokens for s in steps if s.context_tokens >= 0]
    ch = chunks(steps, K, hold)
    return {
        "task_id": task.task_id,
        "steps": len(steps),
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


def model_stats(steps: list[Step]) -> dict:
    """Per model name (steps without one are skipped): steps, output tokens, timings."""
    out: dict = {}
    for s in steps:
        if not s.model:
            continue
        m = out.setdefault(s.model, {"steps": 0, "output_tokens": 0, "timed_steps": 0,
                                     "duration_s": 0.0, "timed_output_tokens": 0})
        m["steps"] += 1
        m["output_tokens"] += s.output_tokens
        if s.duration_s is not None:
            m["timed_steps"] += 1
            m["duration_s"] += s.duration_s
            m["timed_output_tokens"] += s.output_tokens
    for m in out.values():
        t = m["duration_s"]
        m["mean_duration_s"] = t / m["timed_steps"] if m["timed_steps"] else None
        m["output_tokens_per_s"] = m.pop("timed_output_tokens") / t if t > 0 else None
    return out


def tool_latency_stats(steps: list[Step]) -> dict | None:
    """Recorded tool times (``Step.tool_duration_s``) of the tool steps, when the trace has
    them: how many, their mean, median and 95th percentile in seconds, per tool and overall."""
    timed = [s for s in steps if s.kind in ("read", "write") and s.tool_duration_s is not None]
    if not timed:
        return None

    def summary(xs):
        xs = sorted(xs)
        return {"steps": len(xs), "mean_s": sum(xs) / len(xs), "median_s": xs[(len(xs) - 1) // 2],
                "p95_s": xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)]}

    by_tool: dict[str, list] = {}
    for s in timed:
        by_tool.setdefault(s.tool, []).append(s.tool_duration_s)
    tools = sum(s.kind in ("read", "write") for s in steps)
    return {"timed_tool_steps": len(timed), "tool_steps": tools, **summary([s.tool_duration_s for s in timed]),
            "by_tool": {t: summary(v) for t, v in sorted(by_tool.items())}}


def trace_stats(tasks: list[Task], K: int = 6, hold: str = "writes") -> dict:
    """Per-file summary plus the per-task rows (``"tasks"``)."""
    _check(K, hold)
    rows = [task_stats(t, K, hold) for t in tasks]
    steps = [s for t in tasks for s in t.steps]
    all_chunks = [c for t in tasks for c in chunks(t.steps, K, hold)]
    reviews = [r["reviews"] for r in rows]
    n_est = Counter(f for s in steps for f in s.estimated_fields)
    from .fit import fit_tasks  # verdicts, when the trace has them

    fit = fit_tasks(tasks) if any(s.verdict is not None for s in steps) else None
    return {
        "K": K, "hold": hold,
        "tasks": len(tasks),
        "steps": len(steps),
        "kinds": _kinds(steps),
        "tokens": {k: sum(r["tokens"][k] for r in rows) for k in ("prompt", "completion", "observation")},
        "estimated_fraction": {f: n_est[f] / len(steps) for f in sorted(n_est)} if steps else {},
        "mean_steps_per_task": len(steps) / len(tasks) if tasks else None,
        "mean_context_first": _mean(r["context_first"] for r in rows),
        "mean_context_last": _mean(r["context_last"] for r in rows),
        "mean_context_growth_per_step": _mean(r["context_growth_per_step"] for r in rows),
        "chunk_lengths": chunk_distribution(all_chunks, K),
        "reviews_per_task": {
            "mean": _mean(reviews), "min": min(reviews) if reviews else None,
            "max": max(reviews) if reviews else None,
        },
        "steps_per_review": len(steps) / sum(reviews) if sum(reviews) else None,
        "models": model_stats(steps),
        "tool_latency": tool_latency_stats(steps),
        "verdict_fit": fit,
        "per_task": rows,
    }

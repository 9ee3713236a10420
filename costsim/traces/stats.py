"""What a trace looks like to SpecAgent: steps, tokens, context growth, chunks, reviews.

Chunking (the recorded trajectory taken as the committed one, every draft accepted) follows a
named rule, :data:`CHUNKINGS`. In all of them a ``read`` joins the current chunk and the K-th
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

import math
import statistics

from collections import Counter
from dataclasses import dataclass

from ..config import CHUNKINGS, WORKLOAD, SpecAgentOptions
from .schema import STEP_KINDS, Step, Task

#: SpecAgent's default chunking rule (its declaration and source: costsim.config).
DEFAULT_CHUNKING = SpecAgentOptions.chunking
ENDS = ("write", "response", "K", "end")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One drafted chunk: its length in steps, whether it is reviewed, and what ended it."""

    length: int
    reviewed: bool
    end: str


def _check(K: int, chunking: str):
    from ..formulas import check_K

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
    """Per-task figures: steps by kind, tokens, context growth, chunks, implied reviews."""
    steps = task.steps
    ctx = [s.context_tokens for s in steps if s.context_tokens >= 0]
    ch = chunks(steps, K, chunking)
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


def step_shape(tasks) -> tuple[float, float, float]:
    """``(mean output tokens, mean observation tokens, median context)`` over the tasks' steps
    (a context of -1, unknown, counts as 0): the typical step the closed forms and the
    balance point are quoted at."""
    steps = [s for t in tasks for s in t.steps]
    if not steps:
        return 0.0, 0.0, 0.0
    out = sorted(s.output_tokens for s in steps)
    ctx = sorted(max(s.context_tokens, 0) for s in steps)
    n = len(steps)
    if not out[-1]:  # every ratio is per decoded step token
        raise ValueError(f"the tasks' {n:,} steps decode no tokens (every output_tokens is 0): a step's cost "
                         "and the ratios to Strong-only are undefined")
    median = (ctx[(n - 1) // 2] + ctx[n // 2]) / 2.0
    return sum(out) / n, sum(s.observation_tokens for s in steps) / n, float(median)


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


def _model_key(name: str) -> str:
    """A model name for matching: lower case, no organisation prefix, letters and digits only
    ("Qwen/Qwen3.5-4B" and "qwen3.5-4b" are both "qwen354b")."""
    return "".join(ch for ch in name.rsplit("/", 1)[-1].lower() if ch.isalnum())


def step_scales(tasks, strong_names, weak_names) -> dict | None:
    """Per-model step tokens of a trace whose steps name the serving model (a weak/strong
    cascade log): ``{"strong_step_scale", "weak_step_scale", "source"}``, each scale the mean
    output tokens of that model's steps over the mean of all steps (so a protocol's decoded
    tokens over the trace are the recorded models' own), or None unless the steps name a model
    matching each of ``strong_names`` and ``weak_names`` (profile names or Hugging Face ids)."""
    stats = model_stats([s for t in tasks for s in t.steps])
    if len(stats) < 2:
        return None

    def find(names):
        keys = [_model_key(n) for n in names if n]
        hits = [m for m in stats if any(k and (_model_key(m).startswith(k) or k.startswith(_model_key(m)))
                                        for k in keys if _model_key(m))]
        return hits[0] if len(hits) == 1 else None

    strong, weak = find(strong_names), find(weak_names)
    if strong is None or weak is None or strong == weak:
        return None
    mean = {m: v["output_tokens"] / v["steps"] for m, v in stats.items()}
    d = sum(v["output_tokens"] for v in stats.values()) / sum(v["steps"] for v in stats.values())
    return {"strong_step_scale": mean[strong] / d, "weak_step_scale": mean[weak] / d,
            "source": f"the trace's steps: {strong} {mean[strong]:.0f}, {weak} {mean[weak]:.0f}, all {d:.0f} "
                      "output tokens per step (mean)"}


def tool_latency_stats(steps: list[Step]) -> dict | None:
    """Recorded tool times (``Step.tool_duration_s``) of the tool steps, when the trace has
    them: how many, their mean, median and 95th percentile in seconds, per tool and overall."""
    timed = [s for s in steps if s.kind in ("read", "write") and s.tool_duration_s is not None]
    if not timed:
        return None

    def summary(xs):
        xs = sorted(xs)
        return {"steps": len(xs), "mean_s": sum(xs) / len(xs), "median_s": statistics.median(xs),
                "p95_s": xs[min(len(xs) - 1, math.ceil(0.95 * len(xs)) - 1)]}

    by_tool: dict[str, list] = {}
    for s in timed:
        by_tool.setdefault(s.tool, []).append(s.tool_duration_s)
    tools = sum(s.kind in ("read", "write") for s in steps)
    return {"timed_tool_steps": len(timed), "tool_steps": tools, **summary([s.tool_duration_s for s in timed]),
            "by_tool": {t: summary(v) for t, v in sorted(by_tool.items())}}


def trace_stats(tasks: list[Task], K: int = WORKLOAD.K, chunking: str = DEFAULT_CHUNKING) -> dict:
    """Per-file summary plus the per-task rows (``"tasks"``)."""
    _check(K, chunking)
    rows = [task_stats(t, K, chunking) for t in tasks]
    steps = [s for t in tasks for s in t.steps]
    all_chunks = [c for t in tasks for c in chunks(t.steps, K, chunking)]
    reviews = [r["reviews"] for r in rows]
    n_est = Counter(f for s in steps for f in s.estimated_fields)
    from .verdicts import fit_tasks  # verdicts, when the trace has them

    fit = fit_tasks(tasks) if any(s.verdict is not None for s in steps) else None
    return {
        "K": K, "chunking": chunking,
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

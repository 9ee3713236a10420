"""What a trace's steps say about its workload: the typical step (:func:`step_shape`), each
serving model's steps, tokens and timings (:func:`model_stats`, :func:`step_scales`) and the
recorded tool times (:func:`tool_latency_stats`). SpecAgent's chunks of a trace are
:mod:`costsim.protocols.chunking`'s.
"""

from __future__ import annotations

import math
import statistics

from .schema import Step


def step_shape(tasks) -> tuple[float, float, float]:
    """The typical step of a trace, in tokens: ``(output, observation, context)``, each the
    mean over the tasks' model calls (:attr:`costsim.traces.Task.calls`: what a protocol's step
    is; a context of -1, unknown, counts as 0). The one rule for it in every command: the
    closed forms, the balance point, plan's verdict and the live mode's probe shapes are all
    quoted at it. The mean, because the paper's d is "≈ mean step length d̄", and because a
    cost linear in tokens summed over calls is the count times the mean (a median would put
    the Airline run's step at 340 tokens against its mean of 418)."""
    steps = [s for t in tasks for s in t.calls]
    if not steps:
        return 0.0, 0.0, 0.0
    n = len(steps)
    out = sum(s.output_tokens for s in steps)
    if not out:  # every ratio is per decoded step token
        raise ValueError(f"the tasks' {n:,} steps decode no tokens (every output_tokens is 0): a step's cost "
                         "and the ratios to Strong-only are undefined")
    return (out / n, sum(s.observation_tokens for s in steps) / n,
            sum(max(s.context_tokens, 0) for s in steps) / n)


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

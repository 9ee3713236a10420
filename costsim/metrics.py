"""The per-task row every driver fills (its schema), and its summaries: per-task means and
paired ratios, with 95% intervals.

A row has, for each model ("strong", "weak"), the :data:`COUNTERS` of its calls, the task's
commits, reviews and tool time, and the :data:`EXTRA_COUNTERS` of the protocols beyond the
paper's; :data:`EMPTY_ROW` is a task's row before it starts.

Per-task metrics are means over tasks (normal interval, sd/√n). Ratios to the baseline
protocol are ratios of sums over the same tasks (per committed step, since both commit the
same steps), with the delta-method interval of a paired ratio estimator:
se(r) = sqrt(Σ (x_i - r y_i)² / (n (n - 1))) / ȳ. With many sessions sharing replicas the
tasks are not independent; the intervals are then indicative.
"""

from __future__ import annotations

import math

import numpy as np

from .protocols import PROTOCOLS

COUNTERS = ("calls", "prefill_tokens", "decode_tokens", "hbm_bytes", "flops", "busy_s")
#: Per-task counters of the protocols beyond the paper's (zero where a protocol has no such
#: event): remote API use, escalations, speculation, verifier errors. See docs/protocols.md.
EXTRA_COUNTERS = (
    "api_cost_usd", "remote_calls", "remote_input_tokens", "remote_cached_tokens", "remote_output_tokens",
    "escalations", "wasted_steps", "reflection_calls",
    "spec_calls", "spec_hits", "spec_wasted_tools", "spec_wasted_strong_calls", "tool_s_saved", "spec_wait_s",
    "false_accepts", "false_rejects", "irreversible_errors",
)

MODEL_KEYS = {who: tuple(f"{who}_{c}" for c in COUNTERS) for who in ("strong", "weak")}
EMPTY_ROW = {k: 0.0 for keys in MODEL_KEYS.values() for k in keys}
EMPTY_ROW.update(committed_steps=0, reviews=0, reviewed_steps=0, rejections=0, auto_commits=0, tool_s=0.0)
EMPTY_ROW.update(dict.fromkeys(EXTRA_COUNTERS, 0.0))

Z95 = 1.959963984540054

PER_TASK = {
    "strong_calls_per_task": "strong_calls",
    "weak_calls_per_task": "weak_calls",
    "strong_decode_tokens": "strong_decode_tokens",
    "strong_prefill_tokens": "strong_prefill_tokens",
    "weak_decode_tokens": "weak_decode_tokens",
    "strong_hbm_bytes": "strong_hbm_bytes",
    "weak_hbm_bytes": "weak_hbm_bytes",
    "hbm_bytes": "hbm_bytes",
    "strong_flops": "strong_flops",
    "weak_flops": "weak_flops",
    "flops": "flops",
    "strong_busy_s": "strong_busy_s",
    "weak_busy_s": "weak_busy_s",
    "wall_s": "wall_s",
    "reviews_per_task": "reviews",
    "rejections_per_task": "rejections",
    "committed_steps": "committed_steps",
}
#: Per-task columns of the protocols beyond the paper's (docs/protocols.md); reported where the
#: rows have them. ``wrong_writes_per_1000_tasks`` is 1000 x the mean of ``irreversible_errors``.
PER_TASK_EXTRA = {
    "api_cost_usd": "api_cost_usd",
    "remote_calls_per_task": "remote_calls",
    "remote_input_tokens": "remote_input_tokens",
    "remote_cached_tokens": "remote_cached_tokens",
    "remote_output_tokens": "remote_output_tokens",
    "escalations_per_task": "escalations",
    "wasted_steps_per_task": "wasted_steps",
    "reflection_calls_per_task": "reflection_calls",
    "spec_calls_per_task": "spec_calls",
    "spec_hits_per_task": "spec_hits",
    "spec_wasted_strong_calls": "spec_wasted_strong_calls",
    "tool_s": "tool_s",
    "tool_s_saved": "tool_s_saved",
    "spec_wait_s": "spec_wait_s",
    "false_accepts_per_task": "false_accepts",
    "false_rejects_per_task": "false_rejects",
}
#: Ratios of a protocol on the API backend to its API baseline (its record's ``api_baseline``), paired.
API_RATIOS = {
    "api_cost_ratio": "api_cost_usd",
    "remote_output_tokens_ratio": "remote_output_tokens",
    "remote_input_tokens_ratio": "remote_input_tokens",
    "remote_calls_ratio": "remote_calls",
    "wall_ratio_api": "wall_s",
}
#: Ratio name -> column, each SpecAgent-like protocol against the baseline.
RATIOS = {
    "R": "strong_hbm_bytes",            # the paper's R: strong weight traffic
    "R_time": "strong_busy_s",          # strong replica time
    "L": "wall_s",                      # the paper's L: wall time
    "hbm_ratio": "hbm_bytes",
    "flops_ratio": "flops",
    "wall_ratio": "wall_s",
    "strong_calls_ratio": "strong_calls",
    "strong_decode_tokens_ratio": "strong_decode_tokens",
}


def mean_ci(x) -> dict:
    x = np.asarray(x, float)
    m = float(x.mean()) if x.size else float("nan")
    h = Z95 * float(x.std(ddof=1)) / math.sqrt(x.size) if x.size > 1 else float("nan")
    lo = m - h
    if x.size and x.min() >= 0 and lo < 0:  # a count or a time cannot be negative
        lo = 0.0
    return {"mean": m, "ci95": [lo, m + h]}


def ratio_ci(x, y) -> dict:
    """Σx/Σy over paired samples, with its delta-method 95% interval."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    sy = y.sum()
    if sy == 0:
        return {"mean": float("nan"), "ci95": [float("nan")] * 2}
    r = float(x.sum() / sy)
    n = x.size
    if n < 2:
        return {"mean": r, "ci95": [float("nan")] * 2}
    se = math.sqrt(float(((x - r * y) ** 2).sum()) / (n * (n - 1))) / (sy / n)
    return {"mean": r, "ci95": [r - Z95 * se, r + Z95 * se]}


def summarize(rows) -> dict:
    """``{protocol: {metric: {"mean": x, "ci95": [lo, hi]}}}`` from simulated rows.

    Each protocol's :data:`RATIOS` are against its record's ``baseline`` (Strong-only), and a
    protocol on the API backend also gets :data:`API_RATIOS` against its ``api_baseline``
    (Strong-only over the same API), where the rows have them; a protocol not registered (a
    test's) is taken against Strong-only."""
    by = {}
    for r in rows:
        by.setdefault(r["protocol"], []).append(r)
    for rs in by.values():
        rs.sort(key=lambda r: r["task_index"])
    out = {}
    for name, rs in by.items():
        rec = PROTOCOLS.get(name)
        base = by.get(rec.baseline if rec else "strong-only")
        api_base = by.get(rec.api_baseline) if rec and rec.api_baseline else None
        col = {k: np.array([r[k] for r in rs], float) for k in rs[0] if isinstance(rs[0][k], (int, float))}
        m = {metric: mean_ci(col[c]) for metric, c in PER_TASK.items()}
        steps = col["committed_steps"]
        for c in ("hbm_bytes", "flops", "wall_s", "strong_hbm_bytes"):
            m[f"{c}_per_step"] = ratio_ci(col[c], steps)
        if col["reviews"].sum() > 0:
            m["steps_per_review"] = ratio_ci(steps, col["reviews"])
            m["reviewed_chunk_steps"] = ratio_ci(col["reviewed_steps"], col["reviews"])
        if col["hbm_bytes"].sum() > 0:
            m["strong_hbm_share"] = ratio_ci(col["strong_hbm_bytes"], col["hbm_bytes"])
        if base is not None and [r["task_index"] for r in base] == [r["task_index"] for r in rs]:
            bcol = {c: np.array([r[c] for r in base], float) for c in RATIOS.values()}
            for metric, c in RATIOS.items():
                m[metric] = ratio_ci(col[c], bcol[c])
        for metric, c in PER_TASK_EXTRA.items():
            if c in col:
                m[metric] = mean_ci(col[c])
        if "irreversible_errors" in col:
            m["wrong_writes_per_1000_tasks"] = mean_ci(1000.0 * col["irreversible_errors"])
        if (api_base is not None and col.get("remote_calls") is not None and col["remote_calls"].sum() > 0
                and [r["task_index"] for r in api_base] == [r["task_index"] for r in rs]):
            bcol = {c: np.array([r[c] for r in api_base], float) for c in API_RATIOS.values()}
            for metric, c in API_RATIOS.items():
                m[metric] = ratio_ci(col[c], bcol[c])
        m["strong_mean_batch"] = {"mean": float(rs[0]["strong_mean_batch"]), "ci95": [None, None]}
        m["strong_utilisation"] = {"mean": float(rs[0]["strong_utilisation"]), "ci95": [None, None]}
        out[name] = m
    return out

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
#: Per model, the context tokens its calls prefilled again because their prefix cache did not
#: hold them (evicted, or no cache: ``Scenario.prefix_cache``); ``{who}_prefill_tokens`` counts
#: the new tokens the protocol sent, so a model prefilled the sum of the two.
RECOMPUTED_KEYS = {who: f"{who}_prefill_recomputed_tokens" for who in ("strong", "weak")}
EMPTY_ROW = {k: 0.0 for keys in MODEL_KEYS.values() for k in keys}
EMPTY_ROW.update(dict.fromkeys(RECOMPUTED_KEYS.values(), 0.0))
EMPTY_ROW.update(committed_steps=0, reviews=0, reviewed_steps=0, rejections=0, auto_commits=0, tool_s=0.0)
EMPTY_ROW.update(dict.fromkeys(EXTRA_COUNTERS, 0.0))

Z95 = 1.959963984540054


class Rows:
    """Per-task rows stored by column: what a large run keeps (~0.4 KB a task, against ~2 KB
    as dicts). A sequence of rows in blocks of rows with the same keys (a protocol's); a row is
    read as the dict it was stored from, with the same values, types and bits (a column of
    all-float or all-int values is a numpy array, any other a list)."""

    __slots__ = ("blocks",)

    def __init__(self, blocks=()):
        self.blocks = list(blocks)  # [(n rows, {key: column})]

    @classmethod
    def of(cls, rows) -> "Rows":
        """The rows (dicts) by column, consecutive rows with the same keys in one block."""
        blocks, run = [], []
        for r in rows:
            if run and r.keys() != run[0].keys():
                blocks.append(_block(run))
                run = []
            run.append(r)
        if run:
            blocks.append(_block(run))
        return cls(blocks)

    def __len__(self) -> int:
        return sum(n for n, _ in self.blocks)

    def __iter__(self):
        for n, cols in self.blocks:
            keys = list(cols)
            for lo in range(0, n, 4096):  # a slice at a time: Python values for 4,096 rows at most
                vals = [c[lo:lo + 4096] for c in cols.values()]
                vals = [v.tolist() if isinstance(v, np.ndarray) else v for v in vals]
                for row in zip(*vals):
                    yield dict(zip(keys, row))

    def __getitem__(self, i: int) -> dict:
        i = range(len(self))[i]  # negative indices; IndexError past the end
        for n, cols in self.blocks:
            if i < n:
                return {k: c[i].item() if isinstance(c, np.ndarray) else c[i] for k, c in cols.items()}
            i -= n
        raise IndexError(i)  # pragma: no cover - range() raised already

    def __eq__(self, other) -> bool:
        return isinstance(other, (Rows, list)) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __add__(self, other: "Rows") -> "Rows":
        return Rows(self.blocks + other.blocks)

    @classmethod
    def interleaved(cls, parts: list, n: int) -> "Rows":
        """The ``n`` rows of which ``parts[c]`` holds rows ``c, c + g, ...`` (``g = len(parts)``),
        each part one block of the same keys (a fleet's cells, :mod:`costsim.sim.run`)."""
        g, full = len(parts), [p.blocks[0][1] for p in parts if len(p)]
        if any(len(p.blocks) > 1 for p in parts) or any(c.keys() != full[0].keys() for c in full):
            rows = [None] * n
            for c, p in enumerate(parts):
                rows[c::g] = list(p)
            return cls.of(rows)
        cols = {}
        for k in (full[0] if full else ()):
            vals = [p.blocks[0][1][k] if len(p) else None for p in parts]
            kinds = {v.dtype for v in vals if isinstance(v, np.ndarray)}
            if len(kinds) == 1 and all(v is None or isinstance(v, np.ndarray) for v in vals):
                out = np.empty(n, kinds.pop())
            else:
                out, vals = [None] * n, [v.tolist() if isinstance(v, np.ndarray) else v for v in vals]
            for c, v in enumerate(vals):
                if v is not None:
                    out[c::g] = v
            cols[k] = out
        return cls([(n, cols)] if n else [])

    def with_columns(self, values: dict) -> "Rows":
        """These rows with ``values`` (``{key: value}``) in every row: what each row's
        ``update(values)`` gives."""
        return Rows([(n, {**cols, **{k: _column([v] * n) for k, v in values.items()}})
                     for n, cols in self.blocks])

    def by_protocol(self) -> dict:
        """``{protocol: {key: column}}``, each protocol's rows in one block's columns (numbers
        as float arrays where the column is numeric), in task order."""
        out = {}
        for n, cols in self.blocks:
            names = cols["protocol"]
            for name in dict.fromkeys(names):
                part = out.setdefault(name, [])
                part.append((np.array([p == name for p in names]) if len(set(names)) > 1 else None, cols))
        merged = {}
        for name, parts in out.items():
            keys = [k for k in parts[0][1] if all(k in c for _, c in parts)]
            merged[name] = {k: _concat([c[k] if m is None else _take(c[k], m) for m, c in parts]) for k in keys}
            order = np.argsort(np.asarray(merged[name]["task_index"]), kind="stable")
            merged[name] = {k: _take(v, order) for k, v in merged[name].items()}
        return merged

    def to_frame(self):
        """A pandas DataFrame: the blocks one under the other (a key a block lacks is NaN there)."""
        import pandas as pd

        return pd.concat([pd.DataFrame(cols) for _, cols in self.blocks], ignore_index=True) if self.blocks \
            else pd.DataFrame()

    #: Rows a table is written by at a time (:meth:`write`): a frame of 65,536 rows of ~54
    #: columns is ~30 MB, where a whole hour of a large fleet's would be gigabytes.
    WRITE_ROWS = 1 << 16

    def write(self, f, fmt: str) -> None:
        """Write :meth:`to_frame`'s table to the binary file ``f`` as ``csv`` (the same text as
        ``to_frame().to_csv(index=False)``) or ``parquet`` (the same frame read back), by
        :data:`WRITE_ROWS` rows at a time, never the whole frame at once: each slice takes the
        columns and dtypes of the whole (a concatenation of every block's first row, each in its
        whole column's dtype)."""
        import pandas as pd

        if fmt not in ("csv", "parquet"):
            raise ValueError(f"a per-task table is parquet or csv, not {fmt!r}")
        dtypes = [{k: _dtype(c) for k, c in cols.items()} for _, cols in self.blocks]

        def frame(cols, dts, lo, hi):
            return pd.DataFrame({k: pd.Series(c[lo:hi], dtype=dts[k]) for k, c in cols.items()})

        heads = pd.concat([frame(cols, dts, 0, 1) for (_, cols), dts in zip(self.blocks, dtypes)],
                          ignore_index=True) if self.blocks else pd.DataFrame()
        parts = (frame(cols, dts, lo, lo + self.WRITE_ROWS).reindex(columns=heads.columns).astype(heads.dtypes.to_dict())
                 for (n, cols), dts in zip(self.blocks, dtypes) for lo in range(0, n, self.WRITE_ROWS))
        if fmt == "csv":
            for i, part in enumerate(parts):
                f.write(part.to_csv(index=False, header=i == 0).encode())
            if not self.blocks:
                f.write(heads.to_csv(index=False).encode())
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        with pq.ParquetWriter(f, pa.Schema.from_pandas(heads, preserve_index=False)) as writer:
            for part in parts:
                writer.write_table(pa.Table.from_pandas(part, schema=writer.schema, preserve_index=False))


def _dtype(col):
    """The dtype pandas gives the whole column ``col`` (a list is read whole to tell)."""
    import pandas as pd

    return col.dtype if isinstance(col, np.ndarray) else pd.Series(col).dtype


def _numeric(col) -> bool:
    """Whether a column holds numbers only (as a row's numbers are summarised)."""
    return isinstance(col, np.ndarray) or all(isinstance(v, (int, float)) for v in col)


def _block(rows: list) -> tuple:
    return len(rows), {k: _column([r[k] for r in rows]) for k in rows[0]}


def _column(vals: list):
    """A column: a numpy array where every value is a float (or every one an int64), else the list."""
    kinds = set(map(type, vals))
    if kinds == {float}:
        return np.array(vals, float)
    if kinds == {int} and all(-2**63 <= v < 2**63 for v in vals):
        return np.array(vals, np.int64)
    return vals


def _take(col, idx):
    return col[idx] if isinstance(col, np.ndarray) else [col[i] for i in (np.flatnonzero(idx) if idx.dtype == bool else idx)]


def _concat(cols: list):
    if len(cols) == 1:
        return cols[0]
    if all(isinstance(c, np.ndarray) for c in cols):
        return np.concatenate(cols)
    return [v for c in cols for v in (c.tolist() if isinstance(c, np.ndarray) else c)]

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
    "strong_prefill_recomputed_tokens": "strong_prefill_recomputed_tokens",
    "weak_prefill_recomputed_tokens": "weak_prefill_recomputed_tokens",
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
    by = (rows if isinstance(rows, Rows) else Rows.of(rows)).by_protocol()
    by = {name: {k: np.asarray(v, float) for k, v in cols.items() if _numeric(v)} for name, cols in by.items()}
    out = {}
    for name, col in by.items():
        rec = PROTOCOLS.get(name)
        base = by.get(rec.baseline if rec else "strong-only")
        api_base = by.get(rec.api_baseline) if rec and rec.api_baseline else None
        m = {metric: mean_ci(col[c]) for metric, c in PER_TASK.items()}
        steps = col["committed_steps"]
        for c in ("hbm_bytes", "flops", "wall_s", "strong_hbm_bytes"):
            m[f"{c}_per_step"] = ratio_ci(col[c], steps)
        if col["reviews"].sum() > 0:
            m["steps_per_review"] = ratio_ci(steps, col["reviews"])
            m["reviewed_chunk_steps"] = ratio_ci(col["reviewed_steps"], col["reviews"])
        if col["hbm_bytes"].sum() > 0:
            m["strong_hbm_share"] = ratio_ci(col["strong_hbm_bytes"], col["hbm_bytes"])
        if base is not None and np.array_equal(base["task_index"], col["task_index"]):
            for metric, c in RATIOS.items():
                m[metric] = ratio_ci(col[c], base[c])
        for metric, c in PER_TASK_EXTRA.items():
            if c in col:
                m[metric] = mean_ci(col[c])
        if "irreversible_errors" in col:
            m["wrong_writes_per_1000_tasks"] = mean_ci(1000.0 * col["irreversible_errors"])
        if (api_base is not None and col.get("remote_calls") is not None and col["remote_calls"].sum() > 0
                and np.array_equal(api_base["task_index"], col["task_index"])):
            for metric, c in API_RATIOS.items():
                m[metric] = ratio_ci(col[c], api_base[c])
        m["strong_mean_batch"] = {"mean": float(col["strong_mean_batch"][0]), "ci95": [None, None]}
        for k in ("strong_prefix_cache_hit_rate", "weak_prefix_cache_hit_rate"):  # run-wide, in tokens
            if k in col:
                m[k] = {"mean": float(col[k][0]), "ci95": [None, None]}
        m["strong_utilisation"] = {"mean": float(col["strong_utilisation"][0]), "ci95": [None, None]}
        out[name] = m
    return out

"""The roofline against measured serving: the validation set, predictions per case, errors,
and the fit of an engine's few parameters.

A case is one public measured number (``benchmarks/measured/serving.toml``): an engine, a
deployment, a workload (offline ``decode`` batch, online ``serving`` concurrency, or a
``prefill``) and a metric. Each is marked ``split = "fit"`` or ``"holdout"``: engine parameters
are fitted on the fit part only and the errors reported on both. A result JSON saved by
``vllm bench serve --save-result`` is read as cases too.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from . import serving
from .profiles import DTYPE_BYTES, Deployment, Engine, ProfileError, load_device, load_engine, load_model
from .files import data_dir, read_text

METRICS = {  # metric -> (unit, value of a ServingPoint in that unit)
    "tpot_ms": ("ms", lambda p: p.itl_s * 1e3),
    "itl_ms": ("ms", lambda p: p.itl_s * 1e3),
    "ttft_ms": ("ms", lambda p: p.ttft_s * 1e3),
    "output_tok_s": ("tokens/s", lambda p: p.output_tok_s),
    "total_tok_s": ("tokens/s", lambda p: p.total_tok_s),
    "e2e_latency_s": ("s", lambda p: p.e2e_s),
}
SCENARIOS = ("decode", "serving", "prefill")
GROUPS = ("dense-1gpu", "dense-tp", "moe-1gpu", "moe-multi")
#: The engine parameters a fit may move: (prior, low, high). The prior is where a fit starts and
#: what it is pulled toward: the mechanisms' orders of magnitude before any measurement (vLLM's
#: V1 notes put CPU overhead per step near a millisecond; a CUDA-graph layer is a dozen kernels
#: of a few µs; bandwidth- and GEMM-bound kernels reach 60-90% of peak); the range is physical.
FIT_PARAMETERS = {
    "iteration_overhead_ms": (1.0, 0.0, 20.0),
    "layer_latency_us": (20.0, 0.0, 300.0),
    "moe_layer_latency_us": (40.0, 0.0, 600.0),
    "request_overhead_ms": (5.0, 0.0, 100.0),
    "bandwidth_fraction": (0.8, 0.3, 1.0),
    "flops_fraction": (0.6, 0.1, 1.0),
}


@dataclass(frozen=True)
class Case:
    """One measured figure. ``model`` is a model profile, or a config.json beside the set."""

    id: str
    group: str
    split: str
    engine: str
    device: str
    gpus: int
    model: str
    weight_dtype: str
    scenario: str
    concurrency: float
    input_len: float
    output_len: float
    metric: str
    value: float
    source: str
    harness: str = ""
    engine_version: str = ""
    kv_dtype: str = "bf16"
    expert_dtype: str = ""
    expert_parallel: bool = False
    quote: str = ""
    note: str = ""
    base: str = ""  # the folder config paths are relative to


def measured_path() -> Path:
    """The shipped validation set."""
    return Path(str(data_dir("measured") / "serving.toml"))


def load_cases(path: str | Path | None = None, **context) -> list[Case]:
    """The cases of a validation TOML, or of a ``vllm bench serve`` result JSON (which needs
    ``context``: model, device, gpus, engine and weight_dtype, as the JSON does not say them)."""
    path = Path(path) if path else measured_path()
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"{path}: cannot read ({e})") from None
    if path.suffix == ".json":
        return _bench_serve_cases(path, text, context)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{path}: {e}") from None
    rows = data.get("case")
    if not isinstance(rows, list) or not rows:
        raise ProfileError(f"{path}: no [[case]] tables")
    names = {f.name for f in fields(Case)}
    out, seen = [], set()
    for i, row in enumerate(rows, 1):
        where = f"{path}: case {i} ({row.get('id', '?')})"
        unknown = set(row) - names
        if unknown:
            raise ProfileError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            case = Case(**{**row, "base": str(path.parent)})
        except TypeError as e:
            raise ProfileError(f"{where}: {e}") from None
        _check(case, where)
        if case.id in seen:
            raise ProfileError(f"{where}: duplicate id")
        seen.add(case.id)
        out.append(case)
    return out


def _check(c: Case, where: str) -> None:
    if c.group not in GROUPS:
        raise ProfileError(f"{where}: group must be one of {', '.join(GROUPS)}")
    if c.split not in ("fit", "holdout"):
        raise ProfileError(f"{where}: split must be 'fit' or 'holdout'")
    if c.scenario not in SCENARIOS:
        raise ProfileError(f"{where}: scenario must be one of {', '.join(SCENARIOS)}")
    if c.metric not in METRICS:
        raise ProfileError(f"{where}: metric must be one of {', '.join(METRICS)}")
    for k in ("weight_dtype", "kv_dtype", "expert_dtype"):
        if getattr(c, k) and getattr(c, k) not in DTYPE_BYTES:
            raise ProfileError(f"{where}: {k} must be one of {', '.join(DTYPE_BYTES)}")
    nums = dict(gpus=c.gpus, concurrency=c.concurrency, input_len=c.input_len, output_len=c.output_len, value=c.value)
    for k, v in nums.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < (0 if k == "input_len" else 1e-12):
            raise ProfileError(f"{where}: {k} must be a finite number > 0, got {v!r}")


def _bench_serve_cases(path: Path, text: str, ctx: dict) -> list[Case]:
    try:
        r = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ProfileError(f"{path}: not a JSON result ({type(e).__name__})") from None
    if not isinstance(r, dict) or not r.get("completed"):
        raise ProfileError(f"{path}: not a `vllm bench serve` result (no 'completed' requests)")
    missing = [k for k in ("model", "device") if not ctx.get(k)]
    if missing:
        raise ProfileError(f"{path}: a vllm bench serve result does not name its deployment: give "
                           + " and ".join(f"--{k}" for k in missing))
    n = float(r["completed"])
    conc = r.get("max_concurrency") or n
    base = dict(group="dense-1gpu", split="holdout", engine=ctx.get("engine") or "vllm", device=ctx["device"],
                gpus=int(ctx.get("gpus") or 1), model=ctx["model"], weight_dtype=ctx.get("weight_dtype") or "bf16",
                scenario="serving", concurrency=float(conc), input_len=float(r.get("total_input_tokens", 0)) / n,
                output_len=max(float(r.get("total_output_tokens", n)) / n, 1.0), harness=f"vllm bench serve {path.name}",
                source=f"{path} ({r.get('date', 'undated')}, model_id {r.get('model_id', '?')})")
    out = []
    for key, metric in (("median_ttft_ms", "ttft_ms"), ("median_tpot_ms", "tpot_ms"), ("median_itl_ms", "itl_ms"),
                        ("output_throughput", "output_tok_s")):
        v = r.get(key)
        if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            out.append(Case(id=f"{path.stem}:{metric}", metric=metric, value=float(v), **base))
    if not out:
        raise ProfileError(f"{path}: no median_ttft_ms, median_tpot_ms, median_itl_ms or output_throughput in it")
    return out


def _model_path(case: Case) -> str:
    m = case.model
    return str(Path(case.base) / m) if m.endswith(".json") and not Path(m).is_absolute() else m


def deployment(case: Case, engine: Engine | None = None) -> Deployment:
    """The deployment a case measured, under ``engine`` (default: the case's own)."""
    return Deployment(load_model(_model_path(case)), load_device(case.device), int(case.gpus), case.weight_dtype, case.kv_dtype,
                      engine or load_engine(case.engine), case.expert_parallel, case.expert_dtype)


def predict(case: Case, engine: Engine | None = None) -> float:
    """The roofline's value of the case's metric, in the metric's unit."""
    dep = deployment(case, engine)
    if case.scenario == "serving":
        pt = serving.serving_point(dep, case.concurrency, case.input_len, case.output_len)
    elif case.scenario == "decode":
        pt = serving.decode_point(dep, case.concurrency, case.input_len, case.output_len)
    else:
        t = dep.engine.request_overhead_ms * 1e-3 + serving.prefill_time(dep, case.input_len, batch=case.concurrency)
        pt = serving.ServingPoint(case.concurrency, case.input_len, 1.0, t, 0.0, case.concurrency / t, 0.0, 1.0, t)
    return float(METRICS[case.metric][1](pt))


def fits_memory(case: Case, engine=None) -> bool:
    """Whether the memory model agrees the measured run could happen: its batch of sequences at
    their full length beside the weights (:func:`costsim.memory.require_fits`)."""
    from .memory import DoesNotFit, require_fits

    try:
        require_fits(deployment(case, engine), case.concurrency, case.input_len + case.output_len)
        return True
    except DoesNotFit:
        return False


def evaluate(cases: list[Case], engines: dict | None = None) -> list[dict]:
    """One row per case: predicted against measured, error and factor. ``engines`` maps an
    engine name to the profile to use for it (default: the shipped one)."""
    rows = []
    for c in cases:
        eng = (engines or {}).get(c.engine)
        pred = predict(c, eng)
        ratio = pred / c.value
        fits = fits_memory(c, eng)
        rows.append(dict(id=c.id, group=c.group, split=c.split, engine=c.engine, device=c.device, gpus=c.gpus,
                         model=Path(c.model).stem if c.model.endswith(".json") else c.model, params_b=load_model(_model_path(c)).total_params_b, scenario=c.scenario, concurrency=c.concurrency,
                         input_len=c.input_len, output_len=c.output_len, metric=c.metric,
                         unit=METRICS[c.metric][0], measured=c.value, predicted=pred, error=ratio - 1.0,
                         factor=max(ratio, 1.0 / ratio), harness=c.harness, fits_memory=fits))
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per split and group: cases, median |error|, worst factor."""
    out = []
    for split in ("fit", "holdout"):
        for g in GROUPS:
            sel = [r for r in rows if r["split"] == split and r["group"] == g]
            if sel:
                out.append(dict(split=split, group=g, cases=len(sel),
                                median_abs_error=float(np.median([abs(r["error"]) for r in sel])),
                                worst_factor=float(max(r["factor"] for r in sel))))
    return out


def harness_pairs(rows: list[dict]) -> list[dict]:
    """Weak/strong pairs: cases of one harness at the same metric, concurrency and lengths on
    the same device type, each smaller model against the largest. The measured and predicted
    ratio of their step times (a throughput is inverted) is the check that a kappa comes out
    right even where each figure alone carries a harness's bias."""
    by = {}
    for r in rows:
        if r["harness"]:
            key = (r["harness"], r["metric"], r["concurrency"], r["input_len"], r["output_len"], r["device"])
            by.setdefault(key, []).append(r)
    out = []
    for key, sel in by.items():
        big = max(sel, key=lambda r: (r["params_b"], r["gpus"]))
        for small in sel:
            if small["model"] == big["model"]:
                continue
            inv = -1.0 if METRICS[key[1]][0] == "tokens/s" else 1.0
            m = (small["measured"] / big["measured"]) ** inv
            p = (small["predicted"] / big["predicted"]) ** inv
            out.append(dict(harness=key[0], metric=key[1], concurrency=key[2], weak=small["id"], strong=big["id"],
                            measured_ratio=m, predicted_ratio=p, error=p / m - 1.0))
    return out


#: The parameters one fit shares across engines (kernel latencies and GEMM efficiency: the
#: engines run alike CUDA-graph decode steps and the same families of fused kernels) and those
#: each engine has of its own (its scheduler, its HTTP front end, its memory-bound kernels).
SHARED = ("layer_latency_us", "moe_layer_latency_us", "flops_fraction", "request_overhead_ms",
          "bandwidth_fraction@h20")
#: A name "kind@device" is that device's own value of ``kind`` (the engine's ``families`` entry):
#: the H20's, whose measured decode is far slower than its 4.0 TB/s datasheet figure.
PER_ENGINE = ("iteration_overhead_ms", "bandwidth_fraction")


def fit_engines(cases: list[Case], engines: tuple[str, ...] | None = None, shared: tuple[str, ...] = SHARED,
                per_engine: tuple[str, ...] = PER_ENGINE, prior_weight: float = 0.05, loss: str = "soft_l1",
                f_scale: float = 0.25) -> tuple[dict, dict]:
    """Fit the engines' parameters together on their ``split = "fit"`` cases: ``shared`` ones
    once for all engines, ``per_engine`` ones per engine. Robust least squares (``loss``, soft
    L1 by default: a residual past ``f_scale`` in log counts linearly, so that a case the model
    cannot describe, such as an old engine version's slow kernel, does not drag every
    parameter) on log(predicted / measured), bounded to the physical ranges of
    :data:`FIT_PARAMETERS`, with a weak pull (``prior_weight`` per parameter, in units of its
    range) toward their priors, where it also starts, so that a parameter no case constrains stays at
    its prior and the result does not depend on the values shipped.
    A case the memory model says cannot run as recorded (:func:`fits_memory`) is kept: left out,
    the hold-out errors grow (docs/cost-model.md, "How far from measurement").
    Returns ``{engine name: fitted Engine}`` and a report."""
    from scipy.optimize import least_squares

    sel = [c for c in cases if c.split == "fit" and (engines is None or c.engine in engines)]
    names = sorted({c.engine for c in sel})
    if not sel:
        raise ValueError("no fit cases" + (f" for {', '.join(engines)}" if engines else ""))
    base = {n: load_engine(n) for n in names}
    slots = [(None, k) for k in shared] + [(n, k) for n in names for k in per_engine]
    kind = [k.partition("@")[0] for _, k in slots]
    x0, lo, hi = np.array([FIT_PARAMETERS[k] for k in kind], float).reshape(-1, 3).T
    span = hi - lo

    def make(x):
        out = {}
        for n in names:
            own = {k: float(v) for (m, k), v in zip(slots, x) if m in (None, n)}
            fams = {key: dict(val) for key, val in base[n].families.items()}
            for k in [k for k in own if "@" in k]:
                what, _, dev = k.partition("@")
                fams.setdefault(dev, {})[what] = own.pop(k)
            out[n] = replace(base[n], families=fams, **own)
        return out

    def residuals(x):
        engs = make(x)
        r = [math.log(predict(c, engs[c.engine]) / c.value) for c in sel]
        return np.concatenate([r, prior_weight * (x - x0) / span])

    before = residuals(x0)[: len(sel)]
    res = least_squares(residuals, x0, bounds=(lo, hi), x_scale=span, diff_step=1e-3, loss=loss, f_scale=f_scale)
    fitted = make(res.x)
    after = res.fun[: len(sel)]
    return fitted, dict(
        cases={n: [c.id for c in sel if c.engine == n] for n in names},
        shared={k: float(v) for (n, k), v in zip(slots, res.x) if n is None},
        per_engine={n: {k: float(v) for (m, k), v in zip(slots, res.x) if m == n} for n in names},
        rms_log_before=float(np.sqrt(np.mean(before ** 2))), rms_log_after=float(np.sqrt(np.mean(after ** 2))),
        median_abs_log_after=float(np.median(np.abs(after))))

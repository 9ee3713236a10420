"""The roofline against measured serving: the validation set, predictions per case, errors,
and the fit of an engine's few parameters.

A case is one public measured number (``benchmarks/measured/serving.toml``): an engine, a
deployment, a workload and a metric. The workload is an offline ``decode`` batch or a
``prefill`` (costed by the closed forms of :mod:`costsim.serving`), or a serving benchmark under
load: ``serving``, a closed loop of ``concurrency`` clients, or ``rate``, an open loop at
``request_rate`` requests per second, both simulated request by request as the benchmark ran
them (:mod:`costsim.bench`) and read at the case's ``statistic`` (mean, median, p99). Each is
marked ``split = "fit"`` or ``"holdout"``: engine parameters are fitted on the fit part only and
the errors reported on both. Results saved by ``vllm bench serve --save-result`` (one JSON, or
``--append-result`` lines) are read as cases too.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import bench, loadgen, serving
from .profiles import DTYPE_BYTES, Deployment, Engine, ProfileError, load_device, load_engine, load_model
from .files import data_dir, read_text

METRICS = {  # metric -> (unit, value of a ServingPoint in that unit, the benchmark result's key and scale)
    "tpot_ms": ("ms", lambda p: p.itl_s * 1e3, "tpot_ms", 1.0),
    "itl_ms": ("ms", lambda p: p.itl_s * 1e3, "itl_ms", 1.0),
    "ttft_ms": ("ms", lambda p: p.ttft_s * 1e3, "ttft_ms", 1.0),
    "e2el_ms": ("ms", lambda p: p.e2e_s * 1e3, "e2el_ms", 1.0),
    "output_tok_s": ("tokens/s", lambda p: p.output_tok_s, "output_throughput", 1.0),
    "total_tok_s": ("tokens/s", lambda p: p.total_tok_s, "total_token_throughput", 1.0),
    "e2e_latency_s": ("s", lambda p: p.e2e_s, "e2el_ms", 1e-3),
}
#: Latency metrics: read under load at a statistic of the requests' (or tokens') values.
LATENCY_METRICS = ("tpot_ms", "itl_ms", "ttft_ms", "e2el_ms", "e2e_latency_s")
STATISTICS = ("mean", "median", "p99")
SCENARIOS = ("decode", "serving", "rate", "prefill")
#: Scenarios simulated request by request (:mod:`costsim.bench`).
UNDER_LOAD = ("serving", "rate")
GROUPS = ("dense-1gpu", "dense-tp", "moe-1gpu", "moe-multi")
#: What a case measures, for the per-metric errors: the p99 of anything, else its kind.
METRIC_GROUPS = ("ttft", "tpot-itl", "e2e", "throughput", "p99")
#: A closed-loop case whose source does not state how many requests it sent is simulated with
#: this many per client (InferenceX's and most sweep scripts' num-prompts = 10 x concurrency),
#: and never fewer than MIN_PROMPTS.
PROMPTS_PER_CLIENT, MIN_PROMPTS = 10, 100
#: The engine parameters a fit may move: (prior, low, high). The prior is where a fit starts and
#: what it is pulled toward: the mechanisms' orders of magnitude before any measurement (vLLM's
#: V1 notes put CPU overhead per step near a millisecond; a CUDA-graph layer is a dozen kernels
#: of a few µs; bandwidth- and GEMM-bound kernels reach 60-90% of peak); the range is physical.
FIT_PARAMETERS = {
    "iteration_overhead_ms": (1.0, 0.0, 20.0),
    "layer_latency_us": (20.0, 0.0, 300.0),
    "moe_layer_latency_us": (40.0, 0.0, 600.0),
    "moe_tp_layer_latency_us": (40.0, 0.0, 600.0),
    "moe_ep_layer_latency_us": (40.0, 0.0, 600.0),
    "int4_bandwidth_fraction": (0.6, 0.1, 1.0),
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
    concurrency: float        # clients of a closed loop; of an open one, the client's cap (0: none)
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
    statistic: str = ""       # of a latency under load: mean, median or p99
    request_rate: float = 0.0  # requests/s of an open loop (scenario "rate")
    burstiness: float = 1.0   # its gaps' gamma shape (1: Poisson)
    num_prompts: int = 0      # requests the benchmark sent (0: not stated)
    dataset: str = "random"   # random | sharegpt (costsim.loadgen)
    range_ratio: float = 0.0  # random lengths drawn from [len·(1-r), len·(1+r)]
    quote: str = ""
    note: str = ""
    base: str = ""  # the folder config paths are relative to


def measured_path() -> Path:
    """The shipped validation set."""
    return Path(str(data_dir("measured") / "serving.toml"))


def load_cases(path: str | Path | None = None, **context) -> list[Case]:
    """The cases of a validation TOML, or of ``vllm bench serve`` results (a ``.json`` result,
    ``--append-result`` lines, a sweep's ``summary.json`` or ``summary.csv``), whose deployment
    ``context`` gives (model, device, gpus, engine, weight_dtype, expert_parallel) where their
    metadata does not."""
    path = Path(path) if path else measured_path()
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"{path}: cannot read ({e})") from None
    if path.suffix in (".json", ".jsonl", ".csv"):
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
        if not isinstance(row, dict):
            raise ProfileError(f"{path}: case {i} is not a table ([[case]]), got {row!r:.40}")
        where = f"{path}: case {i} ({str(row.get('id', '?'))[:40]})"
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
    nums = dict(gpus=c.gpus, input_len=c.input_len, output_len=c.output_len, value=c.value)
    if c.scenario == "rate":
        nums["request_rate"] = c.request_rate
    else:
        nums["concurrency"] = c.concurrency
    for k, v in nums.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < (0 if k == "input_len" else 1e-12):
            raise ProfileError(f"{where}: {k} must be a finite number > 0, got {v!r}")
    if c.value > MAX_FIGURE:
        raise ProfileError(f"{where}: value must be at most {MAX_FIGURE:g} (ms, tokens/s or requests/s), got {c.value!r}")
    if c.scenario in UNDER_LOAD:
        if (c.metric in LATENCY_METRICS) != (c.statistic in STATISTICS):
            raise ProfileError(f"{where}: a latency under load needs a statistic ({', '.join(STATISTICS)}); "
                               "a throughput has none")
        if isinstance(c.num_prompts, bool) or not isinstance(c.num_prompts, int) or c.num_prompts < 0:
            raise ProfileError(f"{where}: num_prompts must be a whole number >= 0 (0: not stated)")
        if c.scenario == "rate" and not c.num_prompts:
            raise ProfileError(f"{where}: an open-loop case needs num_prompts (its queue depends on it)")
        if c.scenario == "rate" and not (isinstance(c.concurrency, (int, float)) and c.concurrency >= 0):
            raise ProfileError(f"{where}: an open-loop case's concurrency is the client's cap, >= 0 (0: none)")
        try:
            load_of(c)
        except ValueError as e:
            raise ProfileError(f"{where}: {e}") from None
    elif c.statistic or c.request_rate or c.num_prompts:
        raise ProfileError(f"{where}: statistic, request_rate and num_prompts are for cases under load "
                           f"(scenario {' or '.join(UNDER_LOAD)})")


def run_of(case: Case) -> tuple:
    """What identifies the run a figure was measured in: its source and everything it ran."""
    return (case.source, case.engine, case.device, case.gpus, case.model, case.weight_dtype, case.scenario,
            case.concurrency, case.request_rate, case.burstiness, case.input_len, case.output_len, case.num_prompts,
            case.dataset)


def load_of(case: Case) -> loadgen.Load:
    """The benchmark load a case under load ran (:class:`costsim.loadgen.Load`); costsim's
    draws with seed 0."""
    closed = case.scenario == "serving"
    n = case.num_prompts or max(MIN_PROMPTS, PROMPTS_PER_CLIENT * round(case.concurrency))
    return loadgen.Load(num_prompts=n, dataset=case.dataset, input_len=case.input_len, output_len=case.output_len,
                        range_ratio=case.range_ratio, request_rate=math.inf if closed else case.request_rate,
                        burstiness=case.burstiness,
                        max_concurrency=round(case.concurrency) if closed or case.concurrency else None)


#: Benchmark-result keys read as cases: (key, metric, statistic); vLLM's names.
RESULT_KEYS = tuple((f"{stat}_{name}_ms", f"{name}_ms", stat) for name in ("ttft", "tpot", "itl", "e2el")
                    for stat in STATISTICS) + (("output_throughput", "output_tok_s", ""),)
#: Metadata a result may carry (``vllm bench serve --metadata KEY=VALUE``, or a sweep's
#: parameters), by what it tells: the names people use for each.
METADATA = {"gpus": ("tp", "tensor_parallel_size", "tp_size", "gpus", "num_gpus"),
            "expert_parallel": ("ep", "enable_expert_parallel", "expert_parallel", "ep_size"),
            "device": ("device", "gpu", "gpu_type", "hardware"),
            "model": ("costsim_model", "model_profile", "model"),
            "engine": ("engine", "backend_engine"),
            "weight_dtype": ("dtype", "weight_dtype", "quantization")}


#: The largest figure a case may hold, in its unit (ms, tokens/s, requests/s): a day in ms is
#: 8.6e7, and no server streams 10^9 tokens/s; past it a figure is a corrupt file.
MAX_FIGURE = 1e9


def _bench_serve_cases(path: Path, text: str, ctx: dict) -> list[Case]:
    """The cases of the benchmark results in a file: one ``vllm bench serve --save-result``
    JSON, ``--append-result`` lines (one JSON object a line), a ``vllm bench sweep`` summary
    (``summary.json``: a list of results; ``summary.csv``: a row a run). A result's deployment
    comes from ``ctx`` (the command's flags) first, then from its metadata."""
    results = _results(path, text)
    out = []
    for n, r in enumerate(results, 1):
        where = f"{path}" + (f": result {n}" if len(results) > 1 else "")
        if not isinstance(r, dict) or not _num(r.get("completed")):
            raise ProfileError(f"{where}: not a `vllm bench serve` result (no 'completed' requests)")
        done = _num(r["completed"])  # a count: not inf, not a fraction (it sized a list)
        if not (math.isfinite(done) and done == int(done) and 1 <= done <= loadgen.MAX_PROMPTS):
            raise ProfileError(f"{where}: completed must be a whole number of requests in [1, {loadgen.MAX_PROMPTS:,}], "
                               f"got {r['completed']!r:.40}")
        out.extend(_result_cases(path, where, n if len(results) > 1 else 0, r, ctx))
    if not out:
        raise ProfileError(f"{path}: no {', '.join(k for k, _, _ in RESULT_KEYS[:3])}, ... or output_throughput in it")
    return out


def _results(path: Path, text: str) -> list:
    if path.suffix == ".csv":
        import csv
        import io

        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows:
            raise ProfileError(f"{path}: an empty CSV")
        return [{k: _parse_cell(v) for k, v in row.items() if k} for row in rows]
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:  # --append-result: one object a line
            data = [json.loads(ln) for ln in lines]
        except (ValueError, RecursionError) as e:
            raise ProfileError(f"{path}: not a JSON result, nor one a line ({type(e).__name__})") from None
    return data if isinstance(data, list) else [data]


def _parse_cell(v):
    """A CSV cell as a number where it is one ("inf" included), else as it is."""
    if not isinstance(v, str):
        return v
    try:
        return float(v) if v.strip().lower() not in ("inf", "infinity") else math.inf
    except ValueError:
        return v


def _num(v) -> float | None:
    """A finite or infinite number from a result field (vLLM writes an unlimited rate as "inf")."""
    if isinstance(v, str):
        v = _parse_cell(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def _meta(r: dict, what: str):
    for k in METADATA[what]:
        if r.get(k) not in (None, ""):
            return r[k]
    return None


def _result_cases(path: Path, where: str, n: int, r: dict, ctx: dict) -> list[Case]:
    dep = {}
    for what in METADATA:
        v = ctx.get(what) if ctx.get(what) not in (None, "") else _meta(r, what)
        dep[what] = v
    if what_missing := [k for k in ("model", "device") if not dep[k]]:
        raise ProfileError(f"{where}: a vllm bench serve result does not name its deployment: give "
                           + " and ".join(f"--{k}" for k in what_missing) + " (or record them with --metadata)")
    gpus = _num(dep["gpus"]) or 1.0
    ep = str(dep["expert_parallel"]).lower() in ("1", "true", "yes") or (_num(dep["expert_parallel"]) or 0) > 1
    model = str(dep["model"])
    try:
        spec = load_model(model)
    except ProfileError:
        raise ProfileError(f"{where}: model {model!r} is not a costsim model profile: give --model") from None
    done = float(_num(r["completed"]))
    rate = _num(r.get("request_rate"))
    conc = _num(r.get("max_concurrency"))
    closed = rate is None or math.isinf(rate)
    base = dict(group=("moe" if spec.is_moe else "dense") + ("-1gpu" if gpus == 1 else ("-multi" if spec.is_moe else "-tp")),
                split="holdout", engine=str(dep["engine"] or "vllm"), device=str(dep["device"]), gpus=int(gpus),
                model=model, weight_dtype=str(dep["weight_dtype"] or "bf16"), expert_parallel=ep,
                scenario="serving" if closed else "rate", concurrency=float(conc or (done if closed else 0.0)),
                request_rate=0.0 if closed else rate, burstiness=_num(r.get("burstiness")) or 1.0, num_prompts=int(done),
                input_len=float(_num(r.get("total_input_tokens")) or 0.0) / done,
                output_len=max(float(_num(r.get("total_output_tokens")) or done) / done, 1.0),
                harness=f"{path.name}" + (f" {r['label']}" if r.get("label") else ""),
                source=f"{path}{f' (result {n})' if n else ''} ({r.get('date', 'undated')}, model_id {r.get('model_id', '?')})",
                note="lengths: the run's means (a result keeps no distribution)")
    out = []
    for key, metric, stat in RESULT_KEYS:
        v = _num(r.get(key))
        if v is not None and math.isfinite(v) and v > 0:
            out.append(Case(id=f"{path.stem}{f'#{n}' if n else ''}:{stat + '_' if stat else ''}{metric}",
                            metric=metric, statistic=stat, value=v, **base))
    for c in out:
        _check(c, where)
    return out


def describe_run(c: Case) -> str:
    """A case's run in words: what a result file was read as."""
    load = (f"closed loop of {c.concurrency:g} clients" if c.scenario == "serving"
            else f"open loop at {c.request_rate:g} requests/s" if c.scenario == "rate" else c.scenario)
    return (f"{c.engine}, {c.gpus}x {c.device}, {c.model} {c.weight_dtype}{', expert-parallel' if c.expert_parallel else ''}; "
            f"{load}, {c.num_prompts} prompts of {c.input_len:.0f} in / {c.output_len:.0f} out tokens (the run's means)")


def _model_path(case: Case) -> str:
    m = case.model
    return str(Path(case.base) / m) if m.endswith(".json") and not Path(m).is_absolute() else m


def deployment(case: Case, engine: Engine | None = None) -> Deployment:
    """The deployment a case measured, under ``engine`` (default: the case's own)."""
    return Deployment(load_model(_model_path(case)), load_device(case.device), int(case.gpus), case.weight_dtype, case.kv_dtype,
                      engine or load_engine(case.engine), case.expert_parallel, case.expert_dtype)


def predict(case: Case, engine: Engine | None = None) -> float:
    """The model's value of the case's metric, in the metric's unit: the closed forms for a
    decode batch or a prefill, the simulated benchmark for a case under load."""
    dep = deployment(case, engine)
    if case.scenario in UNDER_LOAD:
        return _from_bench(case, simulated(dep, load_of(case)))
    if case.scenario == "decode":
        pt = serving.decode_point(dep, case.concurrency, case.input_len, case.output_len)
    else:
        t = dep.engine.request_overhead_ms * 1e-3 + serving.prefill_time(dep, case.input_len, batch=case.concurrency)
        pt = serving.ServingPoint(case.concurrency, case.input_len, 1.0, t, 0.0, case.concurrency / t, 0.0, 1.0, t)
    return float(METRICS[case.metric][1](pt))


@lru_cache(maxsize=512)
def simulated(dep: Deployment, load: loadgen.Load) -> bench.BenchResult:
    """``costsim bench`` of ``load`` on ``dep`` (cached: a case's metrics share one run)."""
    return bench.run(dep, load)


def _from_bench(case: Case, res: bench.BenchResult) -> float:
    _, _, key, scale = METRICS[case.metric]
    return float(res.metrics[f"{case.statistic}_{key}" if case.statistic else key]) * scale


def _closed_form(case: Case, engine: Engine, concurrency: float) -> float:
    """The serving view's value of a case under load at ``concurrency`` requests in flight,
    at the load's mean lengths: the fit's cheap stand-in for the simulation (:func:`fit_engines`)."""
    I, O = load_of(case).lengths
    pt = serving.serving_point(deployment(case, engine), max(concurrency, 1.0), I, max(O, 1.0))
    return float(METRICS[case.metric][1](pt))


def in_flight(case: Case, res: bench.BenchResult) -> float:
    """Mean requests in flight of a simulated case: its concurrency in a closed loop, the
    request rate times the mean latency (Little's law) in an open one."""
    if case.scenario == "serving":
        return case.concurrency
    return res.metrics["request_throughput"] * res.metrics["mean_e2el_ms"] * 1e-3


def fits_memory(case: Case, engine=None) -> bool:
    """Whether the memory model agrees the measured run could happen: its batch of sequences at
    their full length beside the weights (:func:`costsim.memory.require_fits`). An open-loop
    case has no batch of its own: its simulation admits what fits, so it is not asked."""
    from .memory import DoesNotFit, require_fits

    if case.scenario == "rate":
        return True
    try:
        require_fits(deployment(case, engine), case.concurrency, case.input_len + case.output_len)
        return True
    except DoesNotFit:
        return False


def metric_group(case: Case) -> str:
    """What the case measures, for the per-metric errors (:data:`METRIC_GROUPS`)."""
    if case.statistic == "p99":
        return "p99"
    return {"ttft_ms": "ttft", "tpot_ms": "tpot-itl", "itl_ms": "tpot-itl", "e2el_ms": "e2e",
            "e2e_latency_s": "e2e"}.get(case.metric, "throughput")


def evaluate(cases: list[Case], engines: dict | None = None) -> list[dict]:
    """One row per case: predicted against measured, error and factor. ``engines`` maps an
    engine name to the profile to use for it (default: the shipped one)."""
    rows = []
    for c in cases:
        eng = (engines or {}).get(c.engine)
        pred = predict(c, eng)
        ratio = pred / c.value
        fits = fits_memory(c, eng)
        spec = load_model(_model_path(c))
        rows.append(dict(id=c.id, group=c.group, split=c.split, engine=c.engine, device=c.device, gpus=c.gpus,
                         model=spec.name, params_b=spec.total_params_b, scenario=c.scenario,
                         concurrency=c.concurrency, request_rate=c.request_rate, input_len=c.input_len,
                         output_len=c.output_len, metric=c.metric, statistic=c.statistic, metric_group=metric_group(c),
                         unit=METRICS[c.metric][0], measured=c.value, predicted=pred, error=ratio - 1.0,
                         factor=max(ratio, 1.0 / ratio), harness=c.harness, fits_memory=fits))
    return rows


def summary(rows: list[dict], by: str = "group") -> list[dict]:
    """Per split and ``by`` ('group': the deployment's kind, :data:`GROUPS`; 'metric_group':
    what is measured, :data:`METRIC_GROUPS`): cases, median |error|, worst factor."""
    out = []
    for split in ("fit", "holdout"):
        for g in GROUPS if by == "group" else METRIC_GROUPS:
            sel = [r for r in rows if r["split"] == split and r[by] == g]
            if sel:
                out.append(dict(split=split, **{by: g}, cases=len(sel),
                                median_abs_error=float(np.median([abs(r["error"]) for r in sel])),
                                worst_factor=float(max(r["factor"] for r in sel))))
    return out


@lru_cache(maxsize=1)
def latency_under_load() -> str:
    """How far the simulator's latency under load is from measurement, in one sentence: the
    hold-out runs of the shipped set measured under load (what ``capacity`` and ``plan`` size
    fleets with, said in their assumptions)."""
    cases = [c for c in load_cases() if c.scenario in UNDER_LOAD and c.split == "holdout"]
    summ = {s["metric_group"]: s for s in summary(evaluate(cases), "metric_group") if s["split"] == "holdout"}
    words = {"ttft": "TTFT", "tpot-itl": "TPOT/ITL", "e2e": "end-to-end latency", "p99": "99th percentiles"}
    return (f"latency under load: the replica simulated against {len({run_of(c) for c in cases})} serving runs measured under "
            "load and held out of the engines' fit (benchmarks/measured, `costsim roofline validate`): median |error| "
            + ", ".join(f"{summ[g]['median_abs_error']:.0%} for {w}" for g, w in words.items() if g in summ))


def harness_pairs(rows: list[dict]) -> list[dict]:
    """Weak/strong pairs: cases of one harness at the same metric, concurrency and lengths on
    the same device type, each smaller model against the largest. The measured and predicted
    ratio of their step times (a throughput is inverted) is the check that a kappa comes out
    right even where each figure alone carries a harness's bias."""
    by = {}
    for r in rows:
        if r["harness"]:
            key = (r["harness"], r["metric"], r["concurrency"], r["input_len"], r["output_len"], r["device"],
                   r["statistic"], r["request_rate"])
            by.setdefault(key, []).append(r)
    out = []
    for key, sel in by.items():
        big = max(sel, key=lambda r: (r["params_b"], r["gpus"]))
        for small in sel:
            # the same model in two checkpoints or layouts is no weak/strong pair: the 10% covers a
            # config.json's estimated count against a profile's published one (DeepSeek-R1-AWQ's)
            if small["params_b"] > 0.9 * big["params_b"]:
                continue
            inv = -1.0 if METRICS[key[1]][0] == "tokens/s" else 1.0
            m = (small["measured"] / big["measured"]) ** inv
            p = (small["predicted"] / big["predicted"]) ** inv
            out.append(dict(harness=key[0], metric=key[1], concurrency=key[2], weak=small["id"], strong=big["id"],
                            measured_ratio=m, predicted_ratio=p, error=p / m - 1.0))
    return out


#: The parameters one fit shares across engines (a dense layer's kernel latency and GEMM
#: efficiency: the engines run alike CUDA-graph decode steps and the same families of fused
#: kernels) and those each engine has of its own: its scheduler, its memory-bound kernels, its
#: HTTP front end and tokeniser (the time to first token of one short prompt is 60 ms on vLLM,
#: 27 on SGLang on the same H100 in GPUStack's runs), and its MoE kernels, which differ by how
#: the experts are laid out (whole on one GPU, tensor-sharded, expert-parallel).
SHARED = ("layer_latency_us", "flops_fraction", "bandwidth_fraction@h20", "bandwidth_fraction@ada")
#: A name "kind@device" is that device's or device family's own value of ``kind`` (the engines'
#: ``families`` entry), where measurements on it show the datacenter fit does not carry over:
#: the H20, whose measured decode is far slower than its 4.0 TB/s datasheet figure, and the Ada
#: cards (RTX 4090, L40S), whose GDDR decode reaches more of theirs.
PER_ENGINE = ("iteration_overhead_ms", "bandwidth_fraction", "request_overhead_ms", "moe_layer_latency_us",
              "moe_tp_layer_latency_us", "moe_ep_layer_latency_us", "int4_bandwidth_fraction")
def _device_has_own(kind: str, c: Case) -> bool:
    d = load_device(c.device)
    return any(f"{kind}@{key}" in SHARED for key in (d.name, d.family))


#: The fit cases a per-engine parameter acts on, where not all (:func:`costsim.roofline.bandwidth_fraction`):
#: its bandwidth fraction and its 4-bit kernels' off the devices that have their own, its MoE
#: latency by how the experts are laid out.
ACTS_ON = {"bandwidth_fraction": lambda c: not _device_has_own("bandwidth_fraction", c)
                                         and not c.weight_dtype.startswith("int4"),
           "moe_layer_latency_us": lambda c: c.group == "moe-1gpu",
           "moe_tp_layer_latency_us": lambda c: c.group == "moe-multi" and not c.expert_parallel,
           "moe_ep_layer_latency_us": lambda c: c.group == "moe-multi" and c.expert_parallel,
           "int4_bandwidth_fraction": lambda c: c.weight_dtype.startswith("int4")
                                              and not _device_has_own("bandwidth_fraction", c)}
#: Runs an engine needs of its own, among the fit cases a parameter acts on, to have that
#: parameter of its own: with fewer, one run (often one figure) would set it alone. An MoE
#: latency it lacks is then one shared by the engines that lack it, fitted on their runs of that
#: layout (at its prior where they have none); a bandwidth fraction or a 4-bit one it lacks
#: keeps its profile's value (a 4-bit fraction of 0: its bandwidth fraction is used).
MIN_RUNS = 3
SHARED_FALLBACK = ("moe_layer_latency_us", "moe_tp_layer_latency_us", "moe_ep_layer_latency_us")


def own_parameters(cases: list[Case], engine: str) -> tuple[str, ...]:
    """The :data:`PER_ENGINE` parameters ``engine`` is fitted its own value of on ``cases``."""
    def runs(k):
        return len({run_of(c) for c in cases if c.engine == engine and c.split == "fit" and ACTS_ON[k](c)})
    return tuple(k for k in PER_ENGINE if k not in ACTS_ON or runs(k) >= MIN_RUNS)


def fit_parameters(cases: list[Case], shared: tuple[str, ...] = SHARED,
                   per_engine: tuple[str, ...] = PER_ENGINE) -> list[tuple[str | None, str]]:
    """What :func:`fit_engines` fits on ``cases``' fit split, as ``(engine, parameter)``, engine
    None for a parameter shared by all engines (or by those without their own)."""
    names = sorted({c.engine for c in cases if c.split == "fit"})
    own = {n: [k for k in own_parameters(cases, n) if k in per_engine] for n in names}
    # a layout's MoE latency is fitted once for the engines with too few runs of their own on it
    fallback = [k for k in SHARED_FALLBACK if k in per_engine and any(k not in own[n] for n in names)]
    return [(None, k) for k in (*shared, *fallback)] + [(n, k) for n in names for k in own[n]]


def fit_engines(cases: list[Case], engines: tuple[str, ...] | None = None, shared: tuple[str, ...] = SHARED,
                per_engine: tuple[str, ...] = PER_ENGINE, prior_weight: float = 0.05, loss: str = "soft_l1",
                f_scale: float = 0.25, max_rounds: int = 12, settled: float = 0.02) -> tuple[dict, dict]:
    """Fit the engines' parameters together on their ``split = "fit"`` cases: ``shared`` ones
    once for all engines, ``per_engine`` ones per engine where it has runs of its own to fit
    them on (:func:`fit_parameters`). Robust least squares (``loss``, soft L1 by default: a
    residual past ``f_scale`` in log counts linearly, so that a case the model cannot describe,
    such as an old engine version's slow kernel, does not drag every parameter) on
    log(predicted / measured), bounded to the physical ranges of
    :data:`FIT_PARAMETERS`, with a weak pull (``prior_weight`` per parameter, in units of its
    range) toward their priors, where it also starts, so that a parameter no case constrains stays at
    its prior and the result does not depend on the values shipped.
    A case the memory model says cannot run as recorded (:func:`fits_memory`) is kept: left out,
    the hold-out errors grow (docs/cost-model.md, "How far from measurement").

    A case under load is predicted by simulating its benchmark, too slow to run at every step
    of the search, and not smooth in the parameters. So the search sees the serving view's
    closed form at the simulation's requests in flight, plus the simulation's difference from
    it (a difference, not a ratio: a per-request overhead adds to both alike); after each
    search both are taken again at the parameters found, until no difference moves by more
    than ``settled`` of the measured value or ``max_rounds`` searches have run. Where it stops,
    every residual the search saw is the simulated one, and the report's are computed from the
    simulations. Returns ``{engine name: fitted Engine}`` and a report."""
    from scipy.optimize import least_squares

    sel = [c for c in cases if c.split == "fit" and (engines is None or c.engine in engines)]
    names = sorted({c.engine for c in sel})
    if not sel:
        raise ValueError("no fit cases" + (f" for {', '.join(engines)}" if engines else ""))
    base = {n: load_engine(n) for n in names}
    slots = fit_parameters(sel, shared, per_engine)
    kind = [k.partition("@")[0] for _, k in slots]
    x0, lo, hi = np.array([FIT_PARAMETERS[k] for k in kind], float).reshape(-1, 3).T
    span = hi - lo
    loaded = [i for i, c in enumerate(sel) if c.scenario in UNDER_LOAD]
    # The figures of one run (its mean, median and p99 TTFT, its TPOT...) are not independent
    # evidence: each run weighs as much as one figure, its k figures 1/sqrt(k) each.
    per_run = {}
    for c in sel:
        per_run[run_of(c)] = per_run.get(run_of(c), 0) + 1
    weight = np.array([1.0 / math.sqrt(per_run[run_of(c)]) for c in sel])

    def make(x):
        out = {}
        for n in names:
            # shared slots first: an engine's own value of a parameter replaces the shared one
            vals = {k: float(v) for (m, k), v in zip(slots, x) if m in (None, n)}
            fams = {key: dict(val) for key, val in base[n].families.items()}
            for k in [k for k in vals if "@" in k]:
                what, _, dev = k.partition("@")
                fams.setdefault(dev, {})[what] = vals.pop(k)
            out[n] = replace(base[n], families=fams, **vals)
        return out

    def stand_ins(x):
        """Per case under load at ``x``: (requests in flight, simulated - closed form), or
        (None, simulated) for a run the simulation finds overloaded, whose queue no closed form
        stands in for; and every case's log residual simulated."""
        engs, out = make(x), {}
        logs = np.array([math.log(predict(c, engs[c.engine]) / c.value) for c in sel])
        for i in loaded:
            c = sel[i]
            res = simulated(deployment(c, engs[c.engine]), load_of(c))
            if res.overload:
                out[i] = (None, _from_bench(c, res))
            else:
                conc = in_flight(c, res)
                out[i] = (conc, _from_bench(c, res) - _closed_form(c, engs[c.engine], conc))
        return out, logs

    def residuals(x, stand):
        engs = make(x)
        r = []
        for i, c in enumerate(sel):
            if i not in stand:
                r.append(math.log(predict(c, engs[c.engine]) / c.value))
            elif stand[i][0] is None:  # held at its simulated value this round
                r.append(math.log(stand[i][1] / c.value))
            else:
                r.append(math.log(max(_closed_form(c, engs[c.engine], stand[i][0]) + stand[i][1], 1e-3 * c.value)
                                  / c.value))
        return np.concatenate([np.array(r) * weight, prior_weight * (x - x0) / span])

    stand, before = stand_ins(x0)
    x, rounds = x0, 0
    while True:
        rounds += 1
        res = least_squares(residuals, x, args=(stand,), bounds=(lo, hi), x_scale=span, diff_step=1e-3, loss=loss,
                            f_scale=f_scale)
        x = res.x
        new, after = stand_ins(x)
        both = [i for i in loaded if stand[i][0] is not None and new[i][0] is not None]
        moved = max((abs(new[i][1] - stand[i][1]) / sel[i].value for i in both), default=0.0)
        if any((stand[i][0] is None) != (new[i][0] is None) for i in loaded):
            moved = math.inf  # a run crossed into or out of overload: search again
        if moved <= settled or rounds >= max_rounds:
            break
        # half a step toward the new differences: a closed loop's arrivals land on iteration
        # boundaries, so its simulated TTFT is a sawtooth in the per-request overhead, which a full
        # step chases back and forth
        stand = {i: new[i] if i not in both else (new[i][0], (stand[i][1] + new[i][1]) / 2.0) for i in loaded}
    return make(x), dict(
        cases={n: [c.id for c in sel if c.engine == n] for n in names},
        shared={k: float(v) for (n, k), v in zip(slots, x) if n is None},
        per_engine={n: {k: float(v) for (m, k), v in zip(slots, x) if m == n} for n in names},
        rounds=rounds, stand_in_moved_last=moved,
        rms_log_before=float(np.sqrt(np.mean(before ** 2))), rms_log_after=float(np.sqrt(np.mean(after ** 2))),
        median_abs_log_after=float(np.median(np.abs(after))))

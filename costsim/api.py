"""costsim's Python API: every command of the CLI as a function.

Each function takes the command's options as keyword arguments, named as the flags are
(``--p-accept`` is ``p_accept``, ``--K`` is ``K``), with the same defaults and the same
one-line errors (``ValueError``); each returns a result whose values read by name
(``result["L"]``), whose :meth:`Result.to_dict` is what ``--json`` prints, and whose
:meth:`Result.to_frame` is the command's table as a pandas DataFrame where it has one::

    from costsim import predict, simulate
    predict(p_accept=0.8, K=6)["L"]
    simulate(tasks=200, p_accept=0.8, sessions=8).to_frame()

The CLI parses, calls these, and renders; a notebook gets the same numbers. ``docs/api.md``
lists every function and result. Heavy libraries (numpy, SimPy, pandas, matplotlib) load
when a function first needs them, not when this module is imported.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from pathlib import Path

from .config import COMMANDS, LIVE, check_price
from .distributed import check_workers
from .files import refuse_overwriting_input, write_atomic
from .memory import DoesNotFit
from .profiles import ProfileError
from .traces.importers import IMPORTERS, Importer

#: The kinds of one-line error (ValueErrors all) that any function here may raise on bad input
#: besides a plain ValueError: a profile that is not there or not valid, a deployment that does
#: not fit. ``write_atomic`` is the one atomic writer, for the CLI's outputs;
#: ``refuse_overwriting_input`` the one check that an output is none of a command's inputs.
INPUT_ERRORS = (ProfileError, DoesNotFit)
__all__ = ["INPUT_ERRORS", "refuse_overwriting_input", "write_atomic"]


def to_jsonable(obj):
    """``obj`` as JSON takes it: numpy scalars and arrays as Python values, tuples as lists,
    non-finite floats as None (JSON has no inf or nan), a date or time (TOML has them, and a
    user's file may hold one anywhere) as its ISO text, keys as text."""
    if hasattr(obj, "tolist"):
        obj = obj.tolist()
    if isinstance(obj, dict):
        return {k if isinstance(k, str) else str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (_dt.date, _dt.time)):  # datetime is a date
        return obj.isoformat()
    return obj


class Result(Mapping):
    """A command's answer: its values by name, :meth:`to_dict` (what ``--json`` prints) and,
    where the command has a table, :meth:`to_frame`. ``warnings``: what the command would say
    on stderr (skipped input, assumptions it had to make), in order."""

    def __init__(self, data: dict, warnings=()):
        self.data, self.warnings = data, list(warnings)

    def __getitem__(self, key):
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"<{type(self).__name__}: {', '.join(list(self.data)[:8])}{', ...' if len(self.data) > 8 else ''}>"

    def to_dict(self) -> dict:
        """What the command's ``--json`` prints, as Python values."""
        return to_jsonable(self.data)

    def to_frame(self):
        """The command's table as a pandas DataFrame."""
        raise TypeError(f"{type(self).__name__} has no table")


class Warnings(list):
    """The warnings of a command as they come: kept in order, and each said at once to
    ``on_warning`` where one is given (so that a later error does not hide them)."""

    def __init__(self, on_warning=None):
        super().__init__()
        self.on_warning = on_warning

    def append(self, line: str) -> None:
        super().append(line)
        if self.on_warning:
            self.on_warning(line)

    def extend(self, lines) -> None:
        for line in lines:
            self.append(line)


# --- traces ---------------------------------------------------------------------------------------


def _steps_frame(tasks):
    """One row per step of ``tasks``: the task's id, the step's index, then the step's fields."""
    from dataclasses import asdict

    import pandas as pd

    return pd.DataFrame([{"task_id": t.task_id, "step": i, **asdict(s)} for t in tasks for i, s in enumerate(t.steps)])


class TraceResult(Result):
    """Tasks read from a trace: ``tasks`` (:class:`costsim.traces.Task`) and the file's ``header``."""

    def __init__(self, read):
        self.tasks, self.header = read.tasks, read.header
        super().__init__({"header": read.header, "tasks": read.tasks}, read.warnings)

    def to_dict(self) -> dict:
        from .traces.jsonl import task_to_dict

        return to_jsonable({"header": self.header, "tasks": [task_to_dict(t) for t in self.tasks]})

    def to_frame(self):
        return _steps_frame(self.tasks)


def load_trace(trace: str, strict: bool = False) -> TraceResult:
    """A trace file (JSONL) or a shipped trace by name (``tau2-airline``); ``strict``: any
    malformed line is an error, not a warning."""
    from .traces import load

    return TraceResult(load(trace, strict=strict))


class ImportedTrace(Result):
    """What an importer made of a log: ``result`` (its tasks, warnings and notes), ``importer``
    (its record) and :meth:`jsonl`, the trace as costsim's JSONL with its header."""

    def __init__(self, fmt: str, files, tools, result):
        self.fmt, self.files, self.tools, self.result = fmt, list(files), list(tools or ()), result
        self.importer: Importer = IMPORTERS[fmt]
        super().__init__({"importer": fmt, "tasks": len(result.tasks), "records": result.records,
                          "steps_by_kind": result.steps_by_kind(),
                          "tools_defaulted_to_write": dict(sorted(result.defaulted_tools.items())),
                          "estimated_share": result.estimated_share(), "notes": dict(result.notes)},
                         result.warnings)

    def jsonl(self) -> str:
        """The imported trace as costsim's JSONL (what ``traces import -o`` writes)."""
        from .traces.importers import to_jsonl

        return to_jsonl(self.result, self.fmt, self.files[0], self.tools)

    def to_frame(self):
        return _steps_frame(self.result.tasks)


def import_trace(fmt: str, files, *, tools=(), strict: bool = False, **options) -> ImportedTrace:
    """Import agent logs (``fmt``: tau2, otel or openai; ``files``: a path, or several where
    the format joins them) into costsim's trajectories; ``tools``: tool-kind files (TOML or
    MCP ``tools/list`` JSON); ``options``: the format's own (:func:`import_options`; otel:
    ``group_by``)."""
    from .traces.importers import importer, run

    imp = importer(fmt)
    unknown = sorted(set(options) - set(imp.options))
    if unknown:
        raise TypeError(f"import_trace({fmt!r}) got an unexpected keyword argument {unknown[0]!r}")
    files = [files] if isinstance(files, (str, bytes)) or hasattr(files, "__fspath__") else list(files)
    if not files:
        raise ValueError("no file to import")
    return ImportedTrace(fmt, files, tools, run(fmt, files, tools, strict, **options))


# --- the closed form --------------------------------------------------------------------------------


class PredictResult(Result):
    """`costsim predict`: R_u, L_u and every figure beside them, each input with its source."""


def predict(p_accept: float, K: int | None = None, *, steps=None, v_over_d=None, rho=None, kappa=None,
            write_rate=None, batch=None, strong_dtype=None, weak_dtype=None, step_tokens=None, obs_tokens=None,
            context_tokens=None, verdict_tokens=None, calibration=None, strong=None, weak=None, strong_device=None,
            weak_device=None, strong_gpus=None, engine=None, weak_engine=None, expert_parallel: bool = False,
            strong_step_scale=None, weak_step_scale=None, correction_rate=None, correction_rho=None,
            gpu_memory_utilization=None, p_dist=None) -> PredictResult:
    """The closed-form SpecAgent cost per committed step, relative to Strong-only (``K``:
    SpecAgent's default chunk size where not given); ``p_dist`` 'beta:a,b' adds the ratios
    averaged over tasks' p_u (``["over_p_dist"]``). See :func:`costsim.prediction.predict`."""
    from .config import SpecAgentOptions
    from .prediction import predict as run

    return PredictResult(run(p_accept, SpecAgentOptions.K if K is None else K, v_over_d=v_over_d, rho=rho,
                             kappa=kappa, write_rate=write_rate, batch=batch, steps=steps, calibration=calibration,
                             step_tokens=step_tokens, obs_tokens=obs_tokens, context_tokens=context_tokens,
                             verdict_tokens=verdict_tokens, strong_dtype=strong_dtype, weak_dtype=weak_dtype,
                             strong=strong, weak=weak, strong_device=strong_device, weak_device=weak_device,
                             strong_gpus=strong_gpus, engine=engine, weak_engine=weak_engine,
                             gpu_memory_utilization=gpu_memory_utilization,
                             expert_parallel=expert_parallel, strong_step_scale=strong_step_scale,
                             weak_step_scale=weak_step_scale, correction_rate=correction_rate,
                             correction_rho=correction_rho, p_dist=p_dist))


def deployments(*, strong=None, weak=None, strong_device=None, weak_device=None, strong_gpus=None, strong_dtype=None,
                weak_dtype=None, engine=None, weak_engine=None, expert_parallel: bool = False,
                gpu_memory_utilization=None) -> Result:
    """The strong and weak deployments (``["strong"]``, ``["weak"]``: a model on devices under an
    engine, :class:`costsim.profiles.Deployment`) that simulate, replay and capacity run on for
    these options: each on as many devices as hold its weights (the strong one on
    ``strong_gpus`` where given)."""
    from .sizing import deployments as sized

    s, w = sized(strong=strong, weak=weak, strong_device=strong_device, weak_device=weak_device,
                 strong_dtype=strong_dtype, weak_dtype=weak_dtype, strong_gpus=strong_gpus, engine=engine,
                 weak_engine=weak_engine, expert_parallel=expert_parallel,
                 gpu_memory_utilization=gpu_memory_utilization)
    return DeploymentsResult({"strong": s, "weak": w})


class DeploymentsResult(Result):
    """A strong and a weak deployment; :meth:`to_dict` describes each in words."""

    def to_dict(self) -> dict:
        return {k: d.describe() for k, d in self.data.items()}


# --- simulations --------------------------------------------------------------------------------------

#: The scenario options of simulate and replay (capacity and plan take most of them), as the
#: flags name them; None or absent: the scenario's default (:class:`costsim.scenario.Scenario`).
SCENARIO_OPTIONS = ("p_accept", "K", "p_dist", "protocols", "sessions", "arrival_rate", "seed", "strong", "weak",
                    "strong_device", "weak_device", "strong_gpus", "strong_dtype", "weak_dtype", "engine", "weak_engine", "expert_parallel",
                    "gpu_memory_utilization", "strong_replicas", "weak_replicas", "rho", "strong_step_scale", "weak_step_scale",
                    "verdict_tokens", "tool_latency", "network_rtt", "calibration", "false_accept", "false_reject",
                    "escalate_p", "escalation_span", "spec_hit", "self_spec_hit", "api", "api_ttft", "api_tps",
                    "edge_device", "prefix_cache", "routing", "option")


def _options(command: str, options: dict, allowed=SCENARIO_OPTIONS) -> dict:
    """``options`` if ``command`` takes each (TypeError naming the first it does not, as Python's own)."""
    for k in options:
        if k not in allowed:
            raise TypeError(f"{command}() got an unexpected keyword argument {k!r}")
    return options


def _scenario(options: dict, tasks=None):
    """The validated scenario of a command's options; ``tasks``: a trace's, whose per-model step
    tokens set the step scales where none is given."""
    from .scenario import build_scenario, settings_of

    return build_scenario(settings_of(options), tasks)


class SimulationResult(Result):
    """`costsim simulate` and `replay`: per protocol, per-task means and paired ratios to
    Strong-only with 95% intervals (``["protocols"]``), the closed forms beside them
    (``["closed_form"]``), the scenario and plain-word notes; ``rows``: one row (a dict) per
    task per protocol, stored by column (:class:`costsim.metrics.Rows`), the table
    :meth:`to_frame` gives and ``--out`` writes."""

    def __init__(self, rows, result, warnings=()):
        super().__init__(result, warnings)
        self.rows = rows

    def to_frame(self):
        return self.rows.to_frame()

    def write_table(self, path) -> None:
        """Write the per-task table to ``path`` (``.parquet``, else CSV) atomically and by parts
        (:meth:`costsim.metrics.Rows.write`): the whole table is never in memory as one frame."""
        from .files import atomic_file

        with atomic_file(path) as f:
            self.rows.write(f, "parquet" if str(path).endswith(".parquet") else "csv")


def _simulated(tasks, options: dict, traced: bool, progress, warnings=(), workers=None) -> SimulationResult:
    from .distributed import check_workers
    from .report import report

    check_workers(workers)
    sc = _scenario(options, tasks if traced else None)
    if progress:
        progress(0, len(tasks) * len(sc.protocols))
    rows, result = report(tasks, sc, progress, workers)
    return SimulationResult(rows, result, warnings)


def simulate(tasks=COMMANDS.simulate_tasks, *, progress=None, workers: int | None = None, **options) -> SimulationResult:
    """Every protocol of the scenario on the same tasks: ``tasks`` synthetic ones (tau² Airline
    shape, drawn with ``seed``), or a list of :class:`costsim.traces.Task`. ``options``: the
    scenario options of `costsim simulate` (:data:`SCENARIO_OPTIONS`). ``progress(k, total)``
    is called as tasks finish. The independent runs (the protocols; an open-loop fleet's
    cells) go on up to ``workers`` processes (default: the CPUs, for runs large enough to pay
    for them); the rows are the same with 1."""
    _options("simulate", options)
    if isinstance(tasks, int) and not isinstance(tasks, bool):
        if not 1 <= tasks <= 1_000_000:
            raise ValueError(f"--tasks must be in [1, 1,000,000], got {tasks}")
        from .traces.synthetic import SyntheticTasks

        # Past the closed forms' sample a run draws each task as it is read (a task is ~3.6 KB;
        # read once a protocol, ~80 us): the same tasks, none kept.
        made = SyntheticTasks(tasks, seed=options.get("seed") or 0)
        return _simulated(made if tasks > COMMANDS.closed_form_tasks else list(made), options, False, progress,
                          workers=workers)
    return _simulated(list(tasks), options, True, progress, workers=workers)


def _read_traces(traces, warnings: Warnings) -> list:
    """The tasks of ``traces`` (files or shipped names) in order, each trace once (the same one
    twice is refused: its tasks would count double); what their files skip goes to ``warnings``."""

    from .traces import load

    traces = [traces] if isinstance(traces, str) else list(traces)
    seen = {}
    for t in traces:
        key = str(Path(t).resolve()) if Path(t).exists() else t.removesuffix(".jsonl").lower()
        if key in seen:
            raise ValueError(f"{t}: the same trace as {seen[key]}, given twice")
        seen[key] = t
    tasks = []
    for t in traces:
        read = load(t)
        tasks.extend(read.tasks)
        warnings.extend(read.warnings)
    return tasks


def replay(traces, *, verdicts: str | None = None, progress=None, on_warning=None, workers: int | None = None,
           **options) -> SimulationResult:
    """Recorded trajectories (trace files or shipped names) through every protocol of the
    scenario; ``verdicts="recorded"``: the traces' own review outcomes (p_u where a step has
    none). ``options`` and ``workers``: as :func:`simulate`'s. ``on_warning(line)`` as each
    warning comes."""
    _options("replay", options)
    if verdicts not in (None, "recorded"):
        raise ValueError(f"--verdicts must be 'recorded', got {verdicts!r}")
    if verdicts and options.get("p_dist"):
        raise ValueError("--verdicts recorded and --p-dist are exclusive")
    p = options.get("p_accept")
    p = COMMANDS.p_accept if p is None else p
    if verdicts:
        options = {**options, "p_dist": f"recorded:{p}"}
    names = [traces] if isinstance(traces, str) else list(traces)
    warnings = Warnings(on_warning)
    tasks = _read_traces(names, warnings)
    if verdicts and not any(s.verdict is not None for t in tasks for s in t.steps):
        warnings.append(f"no step of {', '.join(names)} records a verdict: --verdicts recorded draws every review "
                        f"at p_u = {p:g}")
    empty = [t.task_id for t in tasks if not t.steps]
    if empty:  # no committed step to divide by: left out, and said so
        warnings.append(f"{len(empty)} task(s) without steps left out: {', '.join(empty[:5])}"
                        + (" ..." if len(empty) > 5 else ""))
        tasks = [t for t in tasks if t.steps]
    if not tasks:
        raise ValueError("no tasks with steps in " + ", ".join(names))
    return _simulated(tasks, options, True, progress, warnings, workers)


def _tasks(trace, tasks: int, seed, warnings: Warnings) -> list:
    """The tasks a capacity search or a plan runs on: a trace's (at least 20), or ``tasks``
    synthetic ones."""
    if not trace:
        from .traces.synthetic import generate

        return generate(tasks, seed=seed or 0)
    out = _read_traces(trace, warnings)
    names = [trace] if isinstance(trace, str) else list(trace)
    if len(out) < 20:
        raise ValueError(f"{len(out)} tasks in {', '.join(names)}: the search needs at least 20")
    return out


# --- capacity and plan ---------------------------------------------------------------------------------

#: The scenario options capacity takes (the rest of simulate's are its own to set).
CAPACITY_OPTIONS = ("p_accept", "K", "strong", "weak", "strong_device", "weak_device", "strong_gpus", "strong_dtype",
                    "weak_dtype", "engine",
                    "weak_engine", "expert_parallel", "gpu_memory_utilization", "p_dist", "rho", "strong_step_scale", "weak_step_scale",
                    "verdict_tokens", "tool_latency", "api", "edge_device", "api_ttft", "api_tps", "seed",
                    "calibration", "prefix_cache", "routing")


class CapacityResult(Result):
    """`costsim capacity`: per protocol, replicas, sessions, batch against the balance point,
    latency and cost for the task rate; ``cells``: the searched cells (protocol ->
    :class:`costsim.capacity_search.Cell`), which do not depend on the rate."""

    def __init__(self, res: dict, warnings=()):
        self.cells = res.pop("cells")
        super().__init__(res, warnings)

    def to_frame(self):
        """One row per protocol: its scalar answers (the cell and the GPUs flattened)."""
        import pandas as pd

        rows = {}
        for name, r in self.data["protocols"].items():
            flat = {k: v for k, v in r.items() if not isinstance(v, (dict, list))}
            flat.update({f"cell_{k}": v for k, v in r["cell"].items() if not isinstance(v, (dict, list))})
            rows[name] = flat
        return pd.DataFrame(rows).T


def capacity(task_rate, *, latency_p95=COMMANDS.latency_p95_s, protocols=COMMANDS.capacity_protocols, strong_price=None,
             weak_price=None, trace=None, tasks: int = COMMANDS.capacity_tasks, tolerance: float = COMMANDS.capacity_tolerance, cells=None, on_warning=None,
             progress=None, workers: int | None = None, **options) -> CapacityResult:
    """Replicas, sessions, batch against the balance point, latency and cost per 1,000 tasks for
    ``task_rate`` tasks/s (a number, or '2/s', '120/min') under a p95 target (seconds, or '60s',
    '2min'), per protocol, searched with the simulator. ``trace``: plan for recorded tasks
    instead of ``tasks`` synthetic ones; ``cells``: cells already searched (they do not depend
    on the rate). ``options``: :data:`CAPACITY_OPTIONS`. ``progress(k, total)`` is called as
    each protocol is sized; ``workers``: processes for a cell's independent searches (default:
    the CPUs; the answer is the same with 1)."""
    from . import capacity_search as cap
    from .units import parse_rate, parse_seconds

    _options("capacity", options, CAPACITY_OPTIONS)
    rate, target = parse_rate(task_rate), parse_seconds(latency_p95)
    if tasks < 20:
        raise ValueError(f"--tasks must be >= 20, got {tasks}")
    if not 0 < tolerance < 1:
        raise ValueError(f"--tolerance must be in (0, 1), got {tolerance}")
    for name, v in (("--strong-price", strong_price), ("--weak-price", weak_price)):
        if v is not None:
            check_price(name, v)
    names = _names(protocols, "--protocols")
    warnings = Warnings(on_warning)
    work = _tasks(trace, tasks, options.get("seed"), warnings)
    sc = _scenario({**options, "protocols": names}, work if trace else None)
    check_workers(workers)
    res = cap.size_for_rate(work, sc, rate, names, cap.Search(latency_p95_s=target, rel_tol=tolerance),
                            cells=cells, strong_price=strong_price, weak_price=weak_price, progress=progress,
                            workers=workers)
    return CapacityResult(res, warnings)


def _names(text, flag: str) -> tuple[str, ...]:
    """A comma-separated list (or a list) of names, refused when it names nothing."""
    names = tuple(x.strip() for x in (text.split(",") if isinstance(text, str) else text) if x.strip())
    if not names:
        raise ValueError(f"{flag} is empty")
    return names


#: The scenario options plan takes (no --p-dist: the screen's expected calls are at one
#: per-step acceptance rate).
PLAN_OPTIONS = ("p_accept", "strong", "weak", "strong_dtype", "weak_dtype", "engine", "gpu_memory_utilization",
                "verdict_tokens", "tool_latency", "seed",
                "api", "api_ttft", "api_tps", "prefix_cache", "routing", "p_dist")


class PlanResult(Result):
    """`costsim plan`: every configuration screened (``["screened"]``, cheapest first), the
    Pareto front, the confirmations by simulation, the recommendation and why, and the dated
    prices; ``configs``: every configuration searched, in the order generated; :meth:`to_dict`
    is plan's JSON, :meth:`to_frame` the front."""

    def __init__(self, res: dict, warnings=(), configs=()):
        super().__init__(res, warnings)
        self.configs = list(configs)

    def to_dict(self) -> dict:
        from .planner.recommendation import to_json

        return to_jsonable(to_json(self.data))

    def to_frame(self):
        import pandas as pd

        from .planner.recommendation import point

        return pd.DataFrame([point(s) for s in self.data["front"]])

    def figure(self, path) -> None:
        """Draw the front as a PNG at ``path``."""
        from .figures.draw import plan_front, save

        save(plan_front(self.data), path)

    #: The files :meth:`save_deployment` writes into its folder.
    DEPLOYMENT_FILES = ("front.csv", "launch.sh", "router.json", "README.md")

    def save_deployment(self, folder, inputs=(), p_accept: float | None = None) -> list:
        """Write the plan into ``folder`` to deploy from: ``front.csv``, ``launch.sh`` (a server
        command per pool), ``router.json`` and ``README.md`` (:mod:`costsim.planner.deploy`);
        ``inputs``: files never to write over; ``p_accept``: the p_u the plan ran at, for the
        README. Returns the paths written."""
        from .planner.deploy import write

        return write(self, folder, inputs=inputs, p_accept=p_accept)


def plan(task_rate, *, latency_p95=COMMANDS.latency_p95_s, devices=None, weak_devices=None, max_gpus=None, protocols=None,
         edge_devices=None, K=None, price=None, trace=None, tasks: int = COMMANDS.plan_tasks, confirm: int = COMMANDS.plan_confirm,
         workers=None, scheduler=None, state=None, fresh: bool = False, progress=None, on_warning=None,
         **options) -> PlanResult:
    """The cheapest fleet for ``task_rate`` tasks/s under a p95 target, searched over strong
    device × GPUs per replica × weak device × K (a range '2..12', a list '2,4,6' or a sequence)
    × protocol: an analytic screen ranks every configuration, the simulator confirms the
    cheapest. ``price``: ``["h100=2.5", ...]`` USD per GPU-hour overriding the profiles'; ``state``:
    a folder that keeps the finished pieces (``fresh``: drop them first). ``options``:
    :data:`PLAN_OPTIONS`."""
    import time

    from . import fleet_cost
    from . import planner as P
    from .config import EDGE_CLOUD, PLAN_SEARCH
    from .protocols import api_protocols
    from .units import parse_rate, parse_seconds

    _options("plan", options, PLAN_OPTIONS)
    rate, target = parse_rate(task_rate), parse_seconds(latency_p95)
    check_workers(workers)
    if fresh and not state:
        raise ValueError("--fresh needs --state FOLDER")
    if max_gpus is not None and max_gpus < 1:
        raise ValueError(f"--max-gpus must be >= 1, got {max_gpus}")
    if not 20 <= tasks <= 100_000:
        raise ValueError(f"--tasks must be in [20, 100,000], got {tasks}")
    if not 1 <= confirm <= 50:
        raise ValueError(f"--confirm must be in [1, 50], got {confirm}")
    default = PLAN_SEARCH.protocols + (api_protocols() if options.get("api") else ())
    names = P.check_protocols(_names(protocols if protocols is not None else default, "--protocols"),
                                        options.get("api"))
    ks = P.parse_ks(K) if isinstance(K, str) else tuple(K) if K is not None else PLAN_SEARCH.Ks
    t0 = time.perf_counter()
    warnings = Warnings(on_warning)
    work = _tasks(trace, tasks, options.get("seed"), warnings)
    base = _scenario(options, work if trace else None)
    strong_dtype = base.strong.weight_dtype  # the precision policy's (costsim.sizing.weight_dtype)
    dev = _names(devices if devices is not None else PLAN_SEARCH.devices, "--devices")
    wdev = _names(weak_devices, "--weak-devices") if weak_devices is not None else dev
    configs = P.configurations(base.strong.model, base.weak.model, dev, names, ks, options.get("engine"),
                               strong_dtype, base.weak.weight_dtype, max_gpus, wdev, base.api,
                               _names(edge_devices if edge_devices is not None else EDGE_CLOUD.edge_device,
                                      "--edge-devices"), options.get("gpu_memory_utilization"))
    if not configs:
        raise ValueError(f"no configuration to search: none of --devices runs {strong_dtype} weights and holds the "
                         "strong model" + (f" on at most {max_gpus} GPUs" if max_gpus else " on one node (8 GPUs)"))
    searched = sorted({c.strong.device.name for c in configs if c.strong} | {c.weak.device.name for c in configs if c.weak})
    overrides = fleet_cost.parse_prices(price)
    stray = sorted(set(overrides) - set(searched))
    if stray:
        raise ValueError(f"--price {', '.join(stray)}: not a searched device (searched: {', '.join(searched)})")
    table = fleet_cost.prices(searched, overrides)
    kept = P.State(state) if state else None
    from contextlib import nullcontext

    from .files import exclusive

    with exclusive(kept.folder, "plan") if kept else nullcontext():  # one plan writes a state folder at a time
        if kept and fresh:
            kept.clear()
        if progress:
            progress(0, len(configs))
        res = P.recommend(work, base, rate, target, configs, table, confirm, progress, scheduler, workers, kept)
    res["seconds"] = time.perf_counter() - t0
    res["tasks"] = len(work)
    res["engine"] = f"{base.strong.engine.display_name} serves both models (--engine)"
    res["assumptions"] = P.assumptions(base)
    if base.api:
        res["api"] = P.api_of(base)
    return PlanResult(res, warnings, configs)


# --- a result as one HTML file: `costsim report` ----------------------------------------------------


#: The most digits an integer of a result may have: a command writes at most ~20 (Python refuses
#: to read more than 4,300, in words that name no file).
_MAX_DIGITS = 300


class _NotJSON(ValueError):
    """What the JSON reader of :func:`_read_result` refuses, in plain words."""


def _int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise _NotJSON(f"a number of {len(text.lstrip('-')):,} digits; a result's have at most {_MAX_DIGITS}")
    return int(text)


def _float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise _NotJSON(f"the number {text[:40]} is out of the range of a float")
    return x


def _constant(text: str):
    raise _NotJSON(f"{text} is not a JSON number (a command writes null for what has none)")


def _read_result(path) -> dict:
    """The JSON a command printed, read from ``path`` (at most
    :data:`costsim.config.MAX_RESULT_BYTES`, refused by its size before it is read); ValueError
    in one line naming the file for a file that is not there, not readable, too large, not
    UTF-8 or not JSON (a number past a float's range, NaN, nesting too deep to read included)."""
    import errno
    import json

    from .config import MAX_RESULT_BYTES
    from .files import read_text

    name = str(path) if str(path).isprintable() else repr(str(path))
    try:
        text = read_text(path, max_bytes=MAX_RESULT_BYTES)
    except FileNotFoundError:
        raise ValueError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{name}: is a directory, not a result file") from None
    except OSError as e:
        if e.errno == errno.EFBIG:
            raise ValueError(f"{name}: {e.strerror}, the most `costsim report` reads (a command's --json result is "
                             "5-20 KB)") from None
        raise ValueError(f"{name}: cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name}: not UTF-8 text (expected the JSON a command printed with --json)") from None
    except ValueError as e:  # a NUL in the path
        raise ValueError(f"{name}: not a valid path ({e})") from None
    try:
        return json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as e:
        raise ValueError(f"{name}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except _NotJSON as e:
        raise ValueError(f"{name}: not JSON costsim reads ({e})") from None
    except RecursionError:
        raise ValueError(f"{name}: not JSON costsim reads (nested too deeply to read; a result is a few levels "
                         "deep)") from None
    except ValueError as e:  # any other refusal of the reader, in one line
        raise ValueError(f"{name}: not JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None


def report(result, out=None) -> str:
    """One self-contained HTML page (inline CSS and SVG, no script, nothing fetched) of a result
    of predict, replay (or simulate), capacity or plan: its verdict in its own words, its figure
    (plan's Pareto front in USD per 1,000 tasks with a tooltip on every point; capacity's cost
    per protocol; predict's R_u and L_u against p_u), its tables, its inputs with their sources,
    and what the model is unsure of (the roofline's errors against measurement, the result's
    assumptions and notes). ``result``: a :class:`Result`, a dict (what ``--json`` printed) or a
    path to that JSON; which command made it is told by its keys
    (:func:`costsim.html_report.kind_of`). Returns the HTML text; ``out``: also write it there,
    atomically (never over the result's own file)."""
    from .html_report import COMMANDS, BadValue, kind_of, page

    source, warnings = None, ()
    if isinstance(result, Result):
        data, warnings = result.to_dict(), result.warnings
    elif isinstance(result, Mapping):
        data = to_jsonable(dict(result))
    elif isinstance(result, (str, Path)) or hasattr(result, "__fspath__"):
        source = Path(result)
        data = _read_result(source)
    else:
        raise TypeError(f"report() takes a Result, a dict or a path, not {type(result).__name__}")
    if out is not None and source is not None:
        refuse_overwriting_input(out, (source,))
    where = f"{source if str(source).isprintable() else repr(str(source))}: " if source else ""
    try:
        kind = kind_of(data)
    except ValueError as e:
        raise ValueError(where + str(e)) from None
    try:
        text = page(kind, data, roofline_validate()["summary"], warnings=warnings,
                    source=source.name if source else None)
    except BadValue as e:  # a value that is not what the command writes, named
        raise ValueError(f"{where}the keys of `{COMMANDS[kind]} --json`, but not its values: {e}") from None
    except (KeyError, TypeError, AttributeError, IndexError, ValueError, ArithmeticError) as e:  # the same, unnamed
        raise ValueError(f"{where}the keys of `{COMMANDS[kind]} --json`, but not its values "
                         f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if out is not None:
        write_atomic(out, text)
    return text


# --- the roofline and its measured validation set ------------------------------------------------------


class RooflineResult(Result):
    """`costsim roofline`: one engine iteration (seconds, HBM bytes, FLOPs, balance point), or
    with a concurrency what a serving benchmark reports; ``deployment``: what was costed."""

    def __init__(self, data: dict, deployment):
        super().__init__(data)
        self.deployment = deployment

    def sequences_text(self) -> str:
        """The KV pool's capacity in sequences, in words."""
        from .memory import sequences_text

        return sequences_text(self.data["kv_capacity_sequences"], self.data["kv_capacity_context_tokens"])


def _finite(name: str, v, lo: float = 0.0) -> None:
    if v is not None and not (math.isfinite(v) and v >= lo):
        raise ValueError(f"--{name} must be a finite number >= {lo:g}, got {v}")


def roofline(model: str, device: str, *, gpus=None, dtype=None, engine=None, expert_parallel: bool = False,
             batch: int = COMMANDS.roofline_batch, context: float = COMMANDS.roofline_context_tokens, prefill=None,
             concurrency=None, input_len: float = COMMANDS.bench_input_tokens,
             output_len: float = COMMANDS.bench_output_tokens, gpu_memory_utilization=None) -> RooflineResult:
    """Seconds, HBM bytes and FLOPs of one decode iteration of ``model`` on ``device`` (and of a
    prefill of ``prefill`` tokens), or with ``concurrency`` what a serving benchmark reports in
    steady state (TTFT, TPOT, throughput)."""
    from . import memory, serving
    from . import roofline as rl
    from .sizing import deployment

    if batch < 1:
        raise ValueError(f"--batch must be >= 1, got {batch}")
    _finite("context", context)
    _finite("prefill", prefill)
    _finite("input-len", input_len)
    _finite("output-len", output_len, 1)
    _finite("concurrency", concurrency, 1)
    if gpus is not None and gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    ctx_held = input_len + output_len if concurrency is not None else context + (prefill or 0)
    held = concurrency if concurrency is not None else batch
    dep = deployment(model, device, gpus, dtype, engine, expert_parallel, gpu_memory_utilization, held, ctx_held)
    memory.require_fits(dep, held, ctx_held)
    coef = rl.coefficients(dep)
    head = {"model": dep.model.name, "device": dep.device.name, "gpus": dep.n_devices, "dtype": dep.weight_dtype,
            "expert_dtype": dep.expert_precision, "engine": dep.engine.name, "expert_parallel": expert_parallel,
            "fixed_latency_s_per_iteration": coef.fixed_s, "moe_layer_latency_us": rl.moe_layer_us(dep) if dep.model.is_moe else 0.0,
            "bandwidth_fraction": rl.bandwidth_fraction(dep), "flops_fraction": dep.engine.fraction("flops_fraction", dep.device),
            "weight_bytes": dep.weight_bytes, "kv_pool_bytes": memory.kv_pool_bytes(dep),
            "reserve_bytes": dep.n_devices * memory.reserve_bytes(dep.device, dep.engine),
            "memory_utilization": memory.share_taken(dep),
            "kv_capacity_tokens": memory.kv_capacity_tokens(dep),
            "kv_capacity_sequences": memory.sequences_held(dep, ctx_held),  # none: unbounded
            "kv_capacity_context_tokens": ctx_held}
    if concurrency is not None:
        pt = serving.serving_point(dep, concurrency, input_len, output_len)
        return RooflineResult({**head, "concurrency": concurrency, "input_len": input_len, "output_len": output_len,
                               "ttft_s": pt.ttft_s, "tpot_s": pt.itl_s, "itl_s": pt.itl_s,
                               "output_tokens_per_s": pt.output_tok_s, "request_latency_s": pt.e2e_s,
                               "decode_batch": pt.decode_batch, "prefill_iteration_fraction": pt.prefill_fraction},
                              dep)
    dec = rl.decode_step(dep, batch, context)
    out = {
        **head, "batch": batch, "context_tokens": context,
        "decode_s_per_token": float(dec.seconds),
        "decode_tokens_per_s_per_sequence": float(1.0 / dec.seconds),
        "decode_tokens_per_s_total": float(batch / dec.seconds),
        "hbm_bytes_per_decode_step": float(dec.hbm_bytes),
        "flops_per_decode_step": float(dec.flops),
        "decode_compute_s": float(dec.compute_s), "decode_memory_s": float(dec.memory_s),
        "balance_batch": rl.balance_batch(dep, context),
        "balance_batch_paper": float(rl.balance_batch_paper(dep)),
        "regime": "compute-bound" if bool(dec.compute_bound) else "memory-bound",
        "prefill_tokens": prefill, "prefill_s": None,
    }
    if prefill:
        pre = rl.prefill(dep, prefill, context)
        out.update(prefill_s=float(pre.seconds), prefill_hbm_bytes=float(pre.hbm_bytes), prefill_flops=float(pre.flops),
                   prefill_regime="compute-bound" if bool(pre.compute_bound) else "memory-bound")
    return RooflineResult(out, dep)


class BenchRunResult(Result):
    """`costsim bench`: what `vllm bench serve` would report, simulated. :meth:`to_dict` is
    vLLM's result JSON (its keys, in its order: the run's settings, the user's ``--metadata``,
    then ``duration`` in s, counts, throughputs in requests or tokens per s, and ``mean_``,
    ``median_``, ``std_``, ``pNN_`` of each latency in ms) with costsim's own under
    ``"costsim"``: the deployment, the server's limits, ``overload`` and plain-word ``notes``."""

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in self.to_dict().items() if k != "costsim"}])


def bench(model: str, device: str, *, gpus=None, dtype=None, engine=None, expert_parallel: bool = False,
          dataset: str = "random", num_prompts: int = 1000, input_len=None, output_len=None, range_ratio=0.0,
          sharegpt_output_len=None, request_rate: float = math.inf, burstiness: float = 1.0, max_concurrency=None,
          seed: int = 0, percentile_metrics: str = "ttft,tpot,itl,e2el", metric_percentiles: str = "99",
          max_num_seqs=None, max_num_batched_tokens=None, calibration=None, role: str = "strong", label=None,
          metadata=(), gpu_memory_utilization=None, arrivals=None) -> BenchRunResult:
    """`vllm bench serve` against ``model`` on ``gpus`` of ``device`` under ``engine``, simulated
    by costsim (:mod:`costsim.bench`): the same load options, the same result keys. The server's
    limits default to the engine's on that device; ``calibration`` (a `costsim calibrate` file)
    replaces the roofline's times by the ``role`` endpoint's measured ones, and the engine's
    per-request overhead by its fitted one. ``metadata``: ``KEY=VALUE`` strings, kept as vLLM
    keeps them (top-level keys, string values). ``arrivals``: a `vllm bench serve
    --save-detailed` result whose requests are sent again, the same lengths at the same times
    (:func:`costsim.loadgen.sent`), in place of the load options."""
    import datetime as _dt
    from dataclasses import replace

    from . import bench as sim_bench
    from . import loadgen
    from . import roofline as rl
    from .calibration import endpoint_fits, load_calibration
    from .sizing import deployment

    if gpus is not None and gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    for flag, v in (("--max-num-seqs", max_num_seqs), ("--max-num-batched-tokens", max_num_batched_tokens)):
        if v is not None and v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    metrics = tuple(m.strip() for m in percentile_metrics.split(",") if m.strip())
    try:
        percentiles = tuple(float(p) for p in str(metric_percentiles).split(",") if p.strip())
    except ValueError:
        raise ValueError(f"--metric-percentiles: comma-separated numbers, got {metric_percentiles!r}") from None
    meta = {}
    for item in metadata or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--metadata takes KEY=VALUE, got {item!r}")
        meta[key.strip()] = value.strip()
    requests = None
    if arrivals is not None:  # the measured run's requests, at its times
        load, requests = loadgen.sent(arrivals)
        load = replace(load, seed=seed)
        num_prompts, request_rate, burstiness, max_concurrency = load.num_prompts, load.request_rate, load.burstiness, None
    else:
        try:
            load = loadgen.Load(num_prompts=num_prompts, dataset=dataset, input_len=input_len, output_len=output_len,
                                range_ratio=range_ratio, sharegpt_output_len=sharegpt_output_len,
                                request_rate=request_rate, burstiness=burstiness, max_concurrency=max_concurrency,
                                seed=seed)
        except ValueError as e:
            raise ValueError(f"--{str(e).replace('_', '-')}") from None
    dep = deployment(model, device, gpus, dtype, engine, expert_parallel, gpu_memory_utilization, max_concurrency,
                     load.lengths[0] + load.lengths[1])
    coef, source = None, "the roofline of the deployment and the engine's fitted parameters"
    if calibration:
        fits = {w: (pre, dec, over) for w, pre, dec, over in endpoint_fits(load_calibration(calibration))}
        if role not in fits:
            raise ValueError(f"--role {role}: {calibration} has no [{role}] endpoint fit (it has {', '.join(fits)})")
        pre, dec, over = fits[role]
        dep = replace(dep, engine=replace(dep.engine, request_overhead_ms=over * 1e3))
        coef = rl.calibrated(rl.coefficients(dep), pre, dec)
        source = f"the {role} endpoint measured in {calibration} (per-token times and per-request overhead)"
    res = sim_bench.run(dep, load, metrics, percentiles, max_num_batched_tokens, max_num_seqs, coef, requests)
    out = {"date": _dt.datetime.now().strftime("%Y%m%d-%H%M%S"), "endpoint_type": "costsim", "backend": "costsim",
           "label": label, "model_id": dep.model.name, "tokenizer_id": dep.model.name, "num_prompts": num_prompts,
           **meta, "request_rate": "inf" if math.isinf(request_rate) else request_rate, "burstiness": burstiness,
           "max_concurrency": max_concurrency, **res.metrics}
    out["costsim"] = {
        "simulated": True, "deployment": dep.describe(), "costs_from": source,
        "dataset": dataset if arrivals is None else f"the requests of {Path(arrivals).name}",
        "input_len_tokens": load.lengths[0], "output_len_tokens": load.lengths[1],
        "range_ratio": list(load.ratios),
        "max_num_seqs": max_num_seqs or dep.max_seqs, "max_num_batched_tokens": max_num_batched_tokens or dep.token_budget,
        "request_overhead_ms": dep.engine.request_overhead_ms, "overload": res.overload, "notes": list(res.notes)}
    return BenchRunResult(out)


class ValidationResult(Result):
    """`costsim roofline validate`: every measured case predicted (``["cases"]``), the median
    |error| and worst factor per group (``["summary"]``), and weak/strong step-time ratios
    measured in one harness (``["pairs"]``); :meth:`to_frame` is the cases."""

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.data["cases"])


def roofline_validate(file=None, *, engine=None, model=None, device=None, gpus=None, dtype=None,
                      expert_parallel=None, split=None) -> ValidationResult:
    """Predicted against measured for every case of the shipped validation set, or of ``file``
    (a validation TOML, or `vllm bench serve` results: a `--save-result` JSON, `--append-result`
    lines, a sweep's summary; ``model``, ``device``, ``gpus``, ``dtype``, ``expert_parallel``
    say the deployment where the results' metadata does not); ``engine``: cost every case with
    this engine profile instead of its own; ``split``: only 'fit' or 'holdout' cases. Results
    read from a file are described in ``["runs"]``: the workload each was read as."""
    from . import measured as v
    from .profiles import load_engine

    cases = v.load_cases(file, model=model, device=device, gpus=gpus, weight_dtype=dtype,
                         expert_parallel=expert_parallel)
    if split:
        if split not in ("fit", "holdout"):
            raise ValueError("--split must be 'fit' or 'holdout'")
        cases = [c for c in cases if c.split == split]
    engines = None
    if engine:
        e = load_engine(engine)
        engines = {c.engine: e for c in cases}
    rows = v.evaluate(cases, engines)
    runs = list(dict.fromkeys(v.describe_run(c) for c in cases)) if file and not str(file).endswith(".toml") else []
    return ValidationResult({"engine_override": engine, "runs": runs, "cases": rows, "summary": v.summary(rows),
                             "metric_summary": v.summary(rows, "metric_group"), "pairs": v.harness_pairs(rows)})


def roofline_fit(file=None) -> Result:
    """The engines' parameters fitted on the fit cases of the validation set (or of ``file``):
    kernel latencies shared, scheduler overhead and bandwidth per engine."""
    from . import measured as v

    _, rep = v.fit_engines(v.load_cases(file))
    return Result(rep)


# --- traces -------------------------------------------------------------------------------------------


class TraceStatsResult(Result):
    """`costsim traces stats`: per trace, its steps, tokens, context growth, SpecAgent's chunks
    and implied reviews (``["files"]``)."""

    def to_frame(self):
        """One row per task of every trace."""
        import pandas as pd

        return pd.DataFrame([{"trace": f["trace"], **row} for f in self.data["files"] for row in f["per_task"]])


def trace_stats(traces, *, K=None, chunking=None, strict: bool = False, on_warning=None) -> TraceStatsResult:
    """Steps, tokens, context growth, SpecAgent's chunk lengths (``chunking`` rule, chunks of at
    most ``K`` steps) and implied reviews, per trace (files or shipped names)."""
    from .config import CHUNKINGS, WORKLOAD
    from .protocols.chunking import DEFAULT_CHUNKING, trace_stats as stats
    from .traces import load

    K = WORKLOAD.K if K is None else K
    chunking = chunking or DEFAULT_CHUNKING
    if chunking not in CHUNKINGS:
        raise ValueError(f"--chunking: expected one of {', '.join(CHUNKINGS)}, got {chunking!r}")
    files, warnings = [], Warnings(on_warning)
    for name in [traces] if isinstance(traces, str) else traces:
        res = load(name, strict=strict)
        warnings.extend(res.warnings)
        if not res.tasks:  # as import and replay refuse it
            raise ValueError(f"{name}: no valid task ({len(res.warnings)} malformed line(s) skipped)")
        try:
            s = stats(res.tasks, K, chunking)
        except ValueError as e:
            raise ValueError(f"--{e}" if str(e).startswith(("K ", "chunking ")) else str(e)) from None
        files.append({"trace": name, "header": res.header, "skipped_lines": len(res.warnings), **s})
    return TraceStatsResult({"K": K, "chunking": chunking, "files": files}, warnings)


class ListResult(Result):
    """A list of named things (``["items"]``); :meth:`to_dict` is the list."""

    def to_dict(self):
        return to_jsonable(self.data["items"])

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame(self.to_dict())


def shipped_traces() -> ListResult:
    """The traces shipped with costsim, usable by name: tasks, steps, domain and source of each."""
    from .traces import load, shipped

    rows = []
    for name in shipped():
        res = load(name)
        h = res.header
        rows.append({"name": name, "tasks": len(res.tasks), "steps": sum(len(t.steps) for t in res.tasks),
                     "domain": h.get("domain", ""), "source": h.get("source", ""),
                     "schema_version": h.get("schema_version")})
    return ListResult({"items": rows})


# --- profiles and protocols --------------------------------------------------------------------------------


class ProfileResult(Result):
    """One profile (device, engine, API or model): its fields, ``["sources"]`` naming where each
    comes from; ``profile``: the object itself."""

    def __init__(self, profile):
        from dataclasses import asdict

        super().__init__(asdict(profile))
        self.profile = profile


class ProfilesResult(Result):
    """Shipped profiles by name (grouped by kind for hardware); :meth:`to_dict` gives each as
    `hardware show --json` / `models show --json` does (its fields, with ``sources``)."""

    def to_dict(self) -> dict:
        from dataclasses import asdict, is_dataclass

        def out(x):
            return asdict(x) if is_dataclass(x) else {k: out(v) for k, v in x.items()}
        return to_jsonable(out(self.data))


def hardware() -> ProfilesResult:
    """The shipped device, serving-engine and API profiles (``["devices"]``, ``["engines"]``,
    ``["apis"]``: name -> profile)."""
    from .profiles import load_api, load_device, load_engine, names

    return ProfilesResult({"devices": {n: load_device(n) for n in names("devices")},
                   "engines": {n: load_engine(n) for n in names("engines")},
                   "apis": {n: load_api(n) for n in names("apis")}})


def hardware_show(name: str) -> ProfileResult:
    """One device, engine or API profile by name or file (a device first)."""
    from .profiles import ProfileError, load_api, load_device, load_engine

    errors = []
    for load in (load_device, load_engine, load_api):
        try:
            return ProfileResult(load(name))
        except ProfileError as e:
            errors.append(e)
    raise errors[0]  # a device was the likeliest intent: list the known devices


class MemoryResult(Result):
    """What a model leaves of a device's memory for its KV cache; ``deployment``: what was
    sized; ``sequences_text``: the capacity in sequences, in words."""

    def __init__(self, data: dict, deployment, sequences_text: str):
        super().__init__(data)
        self.deployment, self.sequences_text = deployment, sequences_text


def kv_capacity(device: str, model: str, *, gpus=None, dtype=None, engine=None, context: float = COMMANDS.roofline_context_tokens,
                gpu_memory_utilization=None) -> MemoryResult:
    """What ``model`` leaves of ``device``'s memory (on ``gpus``, as many as hold it where not
    given) for its KV cache, in tokens and in sequences of ``context`` tokens;
    ``deployment``: what was sized."""
    from . import memory
    from .sizing import deployment

    if not (context >= 0 and context < math.inf):
        raise ValueError(f"--context must be a finite number >= 0, got {context}")
    if gpus is not None and gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    dep = deployment(model, device, gpus, dtype, engine, gpu_memory_utilization=gpu_memory_utilization, context=context)
    memory.require_fits(dep)
    eng, m = dep.engine, dep.model
    return MemoryResult({"device": dep.device.name, "model": m.name, "gpus": dep.n_devices, "dtype": dep.weight_dtype,
                  "engine": eng.name, "memory_bytes": dep.memory_bytes, "weight_bytes": dep.weight_bytes,
                  "reserve_bytes": dep.n_devices * memory.reserve_bytes(dep.device, eng), "memory_utilization": memory.share_taken(dep),
                  "kv_pool_bytes": memory.kv_pool_bytes(dep),
                  "kv_bytes_per_token": m.kv_bytes_per_token(dep.kv_dtype, dep.n_devices),
                  "state_bytes_per_sequence": memory.state_bytes(dep), "kv_capacity_tokens": memory.kv_capacity_tokens(dep),
                  "context_tokens": context, "kv_capacity_sequences": memory.sequences_held(dep, context)},  # none: unbounded
                        dep, memory.sequences_text(memory.sequences_held(dep, context), context))


def models() -> ProfilesResult:
    """The shipped model profiles (name -> profile)."""
    from .profiles import load_model, names

    return ProfilesResult({n: load_model(n) for n in names("models")})


def model(name: str) -> ProfileResult:
    """One model profile by name, TOML file or Hugging Face ``config.json``."""
    from .profiles import load_model

    return ProfileResult(load_model(name))


def protocols(names=None) -> Result:
    """Each protocol (all, or ``names``): what it is, the options it fixes, and each option it
    takes with its default, allowed values and help."""
    from . import protocols as p

    return Result({n: p.describe(n) for n in (names or p.PROTOCOLS)})


# --- sweeps and figures -----------------------------------------------------------------------------------


def sweep(grid, *, out="sweep.parquet", scheduler=None, workers=None, serial: bool = False, fresh: bool = False,
          progress=None) -> Result:
    """Every cell of a grid file (TOML: [base] settings, [grid] lists) into one table at ``out``
    (.parquet), on Dask (a cluster at ``scheduler``, or a local one of ``workers``) or
    ``serial``; finished cells are kept and skipped unless ``fresh``. ``progress(k)`` as cells finish."""
    from . import sweep as sw

    check_workers(workers)
    if scheduler and serial:
        raise ValueError("--scheduler and --serial are exclusive")
    cells = sw.load_grid(grid)
    if progress:
        progress(0, len(cells))
    if fresh:
        sw.clear(out)
    return Result(sw.run(cells, out, scheduler=scheduler, workers=workers, serial=serial, progress=progress))


def figures(out="figures", *, only=None, log=None) -> Result:
    """Regenerate the committed figures (all, or those named in ``only``) and their index into
    ``out``; ``log(line)`` as each is written. ``["figures"]``: name -> seconds it took."""
    from . import figures as figs

    done = figs.generate(out, only=only, log=log)
    return Result({"out": str(out), "figures": {k: v["seconds"] for k, v in done.items()}})


# --- live mode --------------------------------------------------------------------------------------------

#: The options calibrate and validate share, as the flags name them: the endpoints (``weak``
#: and ``strong`` are base URLs here), the call shapes, the requests.
LIVE_OPTIONS = {"weak_url": None, "strong_url": None, "local": False, "api_key_env": None, "weak_api_key_env": None,
                "strong_api_key_env": None, "K": None, "step_tokens": None, "obs_tokens": None, "verdict_tokens": None,
                "chunk_tokens": None, "repair_tokens": None, "shape_trace": None, "repeats": LIVE.repeats, "timeout": LIVE.timeout_s,
                "retries": LIVE.retries, "seed": 0, "model_dir": None}
_SHAPES = ("K", "step_tokens", "obs_tokens", "verdict_tokens", "chunk_tokens", "repair_tokens")
#: Keyword arguments renamed (old -> new), taken for one release with a DeprecationWarning: a
#: name means one thing in every function (``weak``/``strong`` name a model elsewhere).
RENAMED_KWARGS = {"weak": "weak_url", "strong": "strong_url", "trace": "shape_trace",
                  "save_calibration": "calibration_out"}


def _renamed(command: str, options: dict) -> dict:
    """``options`` with the old names of :data:`RENAMED_KWARGS` replaced, each with a warning."""
    import warnings

    out = {}
    for k, v in options.items():
        if k in RENAMED_KWARGS:
            warnings.warn(f"{command}({k}=...) is deprecated: use {RENAMED_KWARGS[k]}=", DeprecationWarning, stacklevel=3)
            k = RENAMED_KWARGS[k]
        out[k] = v
    return out


def _live(command: str, options: dict) -> dict:
    """The live options of ``command``, defaults filled in."""
    options = _options(command, _renamed(command, options), LIVE_OPTIONS)
    return {**LIVE_OPTIONS, **options}


def _shapes(o: dict):
    from .live.probes import call_shapes

    return call_shapes(o["local"], trace=o["shape_trace"], **{k: o[k] for k in _SHAPES})


def _endpoints(o: dict):
    """The run's two endpoints, a context manager (local servers started with ``local``)."""
    from .live.endpoints import key_envs, open_endpoints

    keys = key_envs(o["api_key_env"], o["weak_api_key_env"], o["strong_api_key_env"])
    from .units import parse_seconds

    return open_endpoints(o["weak_url"], o["strong_url"], o["local"], keys, parse_seconds(o["timeout"], "--timeout", at_most=86400),
                          o["retries"], o["model_dir"], o["seed"])


def _as_updates(progress, label: str):
    """A ``(done, total)`` callback feeding ``progress(k, total, label)`` with the increments."""
    if progress is None:
        return None
    last = [0]

    def update(done, total=None):
        progress(done - last[0], total, label)
        last[0] = done
    return update


def _calibrated(weak, strong, w, o: dict, *, allow_cache=False, max_prompt_tokens=None, max_output_tokens=None,
                probes=None, resume=False, progress=None, label="calibrating") -> dict:
    """Measure both endpoints and fit (:func:`costsim.live.calibrate.run_calibration`); a run
    that cannot finish is a ValueError (one line; its probes are kept)."""
    from .live.calibrate import CalibrationRunError, run_calibration

    try:
        return run_calibration(weak, strong, w, repeats=o["repeats"], seed=o["seed"], allow_cache=allow_cache,
                               max_prompt_tokens=max_prompt_tokens, max_output_tokens=max_output_tokens,
                               probes_path=probes, resume=resume, progress=_as_updates(progress, label),
                               local=o["local"])
    except CalibrationRunError as e:
        raise ValueError(str(e)) from None


class CalibrationResult(Result):
    """`costsim calibrate`: per endpoint, its fitted prefill and decode time per token and its
    overhead (``["fits"]``), the ratios for the call shapes (``["ratios"]``), the server's own
    cross-check; :meth:`toml` is the calibration file."""

    def __init__(self, res: dict, source: str):
        super().__init__(res, res["warnings"])
        self.source = source

    def toml(self) -> str:
        """The calibration file (URLs without credentials, no API key)."""
        from .live.calibrate import calibration_file

        return calibration_file(self.data, self.source)

    def to_dict(self) -> dict:
        fits = {r: {**f.as_dict(), "ci95": f.ci95} for r, f in self.data["fits"].items()}
        return to_jsonable({"workload": self.data["workload"], "fits": fits, "ratios": self.data["ratios"],
                            "direct": self.data["direct"], "server": self.data["server"],
                            "models": self.data["models"], "urls": self.data["urls"],
                            "forced_decode": self.data["forced_decode"], "warnings": self.data["warnings"]})


def calibrate(*, max_prompt_tokens=None, max_output_tokens=None, allow_cache: bool = False, resume: bool = False,
              probes=None, progress=None, **options) -> CalibrationResult:
    """Measure two OpenAI-compatible endpoints (``weak_url`` and ``strong_url``, or two local
    llama.cpp servers with ``local``), fit prefill, decode and overhead per endpoint, and derive
    kappa, v/d and rho for the call shapes. ``probes``: where the completed probes are kept as
    they come (``resume``: go on from them). ``options``: :data:`LIVE_OPTIONS`."""
    o = _live("calibrate", options)
    for flag, v in (("--max-prompt-tokens", max_prompt_tokens), ("--max-output-tokens", max_output_tokens)):
        if v is not None and v < 1:
            raise ValueError(f"{flag} must be >= 1, got {v}")
    w = _shapes(o)
    with _endpoints(o) as (we, se):
        res = _calibrated(we, se, w, o, allow_cache=allow_cache, max_prompt_tokens=max_prompt_tokens,
                          max_output_tokens=max_output_tokens, probes=probes, resume=resume, progress=progress)
    src = ("costsim calibrate --local (generated llama.cpp models)" if o["local"] else
           f"costsim calibrate --weak-url {res['urls']['weak']} --strong-url {res['urls']['strong']}")
    return CalibrationResult(res, src)


def validate(p_accept: float, *, calibration=None, tasks=None, steps=None, calibration_out=None,
             resume: bool = False, progress=None, **options) -> Result:
    """Run SpecAgent for real (the weak endpoint drafts, the strong one reviews) and Strong-only
    beside it, and put the measured L and strong tokens beside the predicted ones. The ratios
    come from ``calibration`` (a file), or from a calibration made first in the same run (saved
    to ``calibration_out`` where given). ``progress(k, total, label)`` for each stage."""
    from .live.client import EndpointError
    from .live.fit import ratios_for
    from .live.validation import run_validation

    if "save_calibration" in options:  # its old name
        calibration_out = _renamed("validate", {"save_calibration": options.pop("save_calibration")})["calibration_out"]
    o = _live("validate", options)
    if not 0.0 <= p_accept <= 1.0:
        raise ValueError(f"--p-accept must be in [0, 1], got {p_accept}")
    if (o["K"] is not None and o["K"] < 1) or (tasks is not None and tasks < 1) or (steps is not None and steps < 1):
        raise ValueError("--K, --tasks and --steps must be >= 1")
    if resume and not calibration_out:
        raise ValueError("--resume goes on from the probes of --calibration-out: give it too")
    if o["chunk_tokens"] is not None:
        raise ValueError("--chunk-tokens: validate runs SpecAgent's own schedule, whose reviews prefill the chunk "
                         "itself (K (d + o) tokens); shape it with --step-tokens, --obs-tokens and --K")
    if calibration and calibration_out:
        raise ValueError("--calibration-out is for a run that calibrates; --calibration gives one already")
    local, seed = o["local"], o["seed"]
    tasks = tasks or (LIVE.validate_tasks_local if local else LIVE.validate_tasks)
    w = _shapes(o)
    steps = steps or (LIVE.validate_steps_local if local else LIVE.validate_steps)
    ratios = src = None
    if calibration:
        ratios, src = ratios_for(calibration, w)
    with _endpoints(o) as (we, se):
        if ratios is None:
            probes = calibration_out + ".probes.json" if calibration_out else None
            res = _calibrated(we, se, w, o, probes=probes, resume=resume, progress=progress,
                              label="calibrating (same run)")
            ratios, src = res["ratios"]["time"], "a calibration in this run"
            if calibration_out:
                from .files import write_atomic
                from .live.calibrate import calibration_file

                write_atomic(calibration_out,
                             calibration_file(res, f"costsim validate (its own calibration, {we.url}, {se.url})"))
                src = f"a calibration in this run, saved to {calibration_out}"
        try:
            out = run_validation(we, se, w, p_accept, ratios, tasks, steps, seed=seed,
                                 progress=_as_updates(progress, "validating"))
        except EndpointError as e:
            raise ValueError(str(e)) from None
        out["urls"] = {"weak": we.url, "strong": se.url}
    out["calibration"] = src
    return Result(out)


def serve_local(*, weak_port: int = 0, strong_port: int = 0, threads=None, seed: int = 0, model_dir=None,
                weak_size: str = "weak", strong_size: str = "strong") -> "LocalServersResult":
    """Start two local llama.cpp servers with generated Llama models (:class:`LocalServersResult`;
    its :meth:`~LocalServersResult.stop` stops them)."""
    from .live.gguf_model import SIZES, ModelShape
    from .live.local import LocalServerError, LocalServers

    for name, port in (("--weak-port", weak_port), ("--strong-port", strong_port)):
        if not 0 <= port <= 65535:
            raise ValueError(f"{name} must be in 0..65535, got {port}")
    try:
        local = LocalServers(weak_size, strong_size, seed=seed, model_dir=model_dir, threads=threads,
                             ports=(weak_port, strong_port)).start()
    except LocalServerError as e:
        raise ValueError(str(e)) from None
    return LocalServersResult(local, {role: ModelShape(**SIZES[local.sizes[role]]).n_params() for role in local.servers})


class LocalServersResult(Result):
    """Two local llama.cpp servers, running: ``["servers"]`` role -> server (its ``url``,
    ``alive()``), ``["params"]`` role -> its model's parameters; :meth:`stop` stops both."""

    def __init__(self, local, params: dict):
        super().__init__({"servers": local.servers, "params": params})
        self.local = local

    def stop(self) -> None:
        self.local.stop()


# --- measuring p_u: `costsim acceptance` ---------------------------------------------------------------

#: The options `costsim acceptance` shares with `calibrate`, as the flags name them.
ACCEPTANCE_OPTIONS = {"weak_url": None, "strong_url": None, "local": False, "api_key_env": None,
                      "weak_api_key_env": None, "strong_api_key_env": None, "timeout": LIVE.timeout_s,
                      "retries": LIVE.retries, "seed": 0, "model_dir": None}


class _AcceptanceResult(Result):
    """`costsim acceptance`: p_u measured on recorded conversations (``["accept_rate"]``, per
    task, by kind and tool, the Beta fit, the verdict tokens, the cost); :meth:`trace_jsonl` is
    the conversations as a trace with the recorded verdicts; :meth:`to_frame` the per-task table."""

    def __init__(self, data: dict, warnings, trace_text: str | None):
        super().__init__(data, warnings)
        self._trace = trace_text

    def trace_jsonl(self) -> str | None:
        """The trace (JSONL) whose steps carry the verdicts measured (None for a dry run)."""
        return self._trace

    def to_frame(self):
        import pandas as pd

        rows = [{"task_id": r["task_id"], "accept_rate": r["accept_rate"]["mean"],
                 "ci95_lo": (r["accept_rate"]["ci95"] or [None, None])[0],
                 "ci95_hi": (r["accept_rate"]["ci95"] or [None, None])[1],
                 **{k: v for k, v in r.items() if k not in ("task_id", "accept_rate")}} for r in self.data["per_task"]]
        return pd.DataFrame(rows)


def measure_acceptance(conversations, *, K=None, chunking=None, exact_match: bool = False,
                       structured: str = "json-schema", max_tasks=None, max_steps=None, max_tokens=None, tools=(),
                       dry_run: bool = False, resume: bool = False, probes=None, progress=None, on_warning=None,
                       on_request=None, **options) -> _AcceptanceResult:
    """Measure p_u on recorded conversations (tau² result files ``conversations``): the weak
    endpoint drafts teacher-forced, the strong one reviews each chunk in one call (or, with
    ``exact_match``, a step is accepted only where it is the recorded one). ``options``:
    :data:`ACCEPTANCE_OPTIONS` (the endpoints, keys, deadline, retries, as `calibrate`'s).
    ``probes``: the file where the answers are kept as they come (``resume``: go on from it).
    ``dry_run``: nothing is sent; ``on_request(request)`` gets each request that would be
    (its endpoint, URL, how it is authorised, its body), as if the weak model repeated the
    recorded steps and the strong one accepted them all. Docs: docs/live.md."""
    from .config import SpecAgentOptions
    from .live import acceptance_probe as ap
    from .live.client import Endpoint, EndpointError
    from .live.endpoints import key_envs, open_endpoints
    from .units import parse_seconds

    o = {**ACCEPTANCE_OPTIONS, **_options("measure_acceptance", _renamed("measure_acceptance", options),
                                          ACCEPTANCE_OPTIONS)}
    K = SpecAgentOptions.K if K is None else K
    chunking = chunking or SpecAgentOptions.chunking
    max_tokens = ap.DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens
    ap.check_options(K, chunking, structured, max_tokens, max_tasks, max_steps)
    files = [conversations] if isinstance(conversations, str) or hasattr(conversations, "__fspath__") else list(conversations)
    if not files:
        raise ValueError("no conversations file given")
    if resume and not probes:
        raise ValueError("--resume goes on from a probe file: give one (the CLI keeps it beside --out)")
    if dry_run and resume:
        raise ValueError("--dry-run sends nothing and keeps nothing: --resume has nothing to go on from")
    timeout = parse_seconds(o["timeout"], "--timeout", at_most=86400)
    if exact_match and not o["local"] and o["weak_url"] and not o["strong_url"]:
        o["strong_url"] = o["weak_url"]  # exact match asks no strong model: any URL stands in
    tools = [tools] if isinstance(tools, str) else list(tools or ())
    convs, warnings, header = ap.load_conversations(files, ap.tool_kinds_of(tools))
    warned = Warnings(on_warning)
    warned.extend(warnings)
    if not convs:
        raise ValueError("no conversation with a model call of the agent in " + ", ".join(map(str, files)))
    offered = ap.tool_schemas(convs, tools)  # every tool the files' agent called, not only the measured tasks'
    convs = convs[:max_tasks]
    opts = ap.Options(K=K, chunking=chunking, exact=bool(exact_match), structured=structured, max_tokens=max_tokens,
                      max_steps=max_steps, tools=tuple(offered))
    keys = key_envs(o["api_key_env"], o["weak_api_key_env"], o["strong_api_key_env"])
    run = dict(kinds=ap.tool_kinds_of(tools), probes=probes, resume=resume, progress=progress, on_warning=warned.append)
    try:
        if dry_run:
            if o["local"] and (o["weak_url"] or o["strong_url"]):
                raise ValueError("give either --local or --weak-url/--strong-url, not both")
            if not o["local"] and not (o["weak_url"] and o["strong_url"]):
                raise ValueError("both --weak-url and --strong-url are needed (or --local)")
            eps = {}
            for role, key in zip(("weak", "strong"), keys):
                url = o[f"{role}_url"]
                try:
                    eps[role] = Endpoint(url, api_key_env=key, timeout_s=timeout, retries=o["retries"]) if url else None
                except ValueError as e:
                    raise ValueError(f"--{role}-url {e}") from None

            def show(role, body):
                ep = eps[role]
                if on_request is None:
                    return
                on_request({
                    "endpoint": role, "url": (ep.url if ep else "(a local llama.cpp server, not started)") + "/v1/chat/completions",
                    "authorization": f"Bearer <the key in ${ep.api_key_env}: not shown>" if ep and ep.api_key_env else None,
                    "body": {"model": "(the served model, from GET /v1/models)", **body}})
            res = ap.run_acceptance(convs, eps, opts, dry=show, **run)
            urls = {r: (e.url if e else None) for r, e in eps.items()}
            models = {"weak": None, "strong": None}
        else:
            with open_endpoints(o["weak_url"], o["strong_url"], o["local"], keys, timeout, o["retries"],
                                o["model_dir"], o["seed"]) as (we, se):
                res = ap.run_acceptance(convs, {"weak": we, "strong": se}, opts, local=o["local"], **run)
                urls = {"weak": we.url, "strong": None if exact_match else se.url}
                models = {"weak": we.model, "strong": None if exact_match else se.model}
    except ap.AcceptanceRunError as e:
        raise ValueError(str(e)) from None
    except EndpointError as e:  # discovery of a local server's model
        raise ValueError(str(e)) from None
    results = res.pop("results")
    res.pop("warnings")
    mode = "exact-match" if exact_match else "semantic"
    data = {"conversations": [str(f) for f in files], "dry_run": bool(dry_run), "mode": mode, "K": K,
            "chunking": chunking, "structured": None if exact_match else structured, "models": models, "urls": urls,
            **res, "warnings": list(warned)}
    trace = None
    if not dry_run:
        if max_tasks is not None:  # the importer's counts are the files', not the trace's
            header.pop("scripted_greetings_dropped", None)
        header.update({"source": ", ".join(Path(f).name for f in files),
                       "verdicts": (f"costsim acceptance ({mode}, teacher-forced): K = {K}, {chunking} chunking; weak "
                                    f"{models['weak']} at {urls['weak']}"
                                    + ("" if exact_match else f", strong {models['strong']} at {urls['strong']}")),
                       "verdicts_positions": "each model call of the agent judged once; a task cut after "
                                             "--max-steps calls where given"})
        trace = ap.verdict_trace(results, header)
    return _AcceptanceResult(data, list(warned), trace)


# --- the what-if page -----------------------------------------------------------------------------


def ui_server(host: str = "127.0.0.1", port: int = 0):
    """`costsim ui`: the what-if page's server, listening on ``host``:``port`` (0: any free
    port) once returned: ``url``, ``serve_forever()``, ``shutdown()`` (from another thread),
    ``open_browser()``; ``loopback``: whether only this machine can reach it (the page has no
    authentication). Its endpoints answer with :func:`predict` and :func:`plan`'s ``to_dict()``
    (:mod:`costsim.ui`)."""
    from . import api
    from .ui import Server

    return Server(host, port, api=api)

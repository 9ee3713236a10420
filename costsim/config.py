"""One scenario from settings: what `simulate`, `replay`, `capacity` and `sweep` all build.

Settings are plain values keyed by :class:`costsim.sim.Scenario` field names, plus the
deployment keys of :func:`costsim.predict.deployments` (:data:`DEPLOY_KEYS`), latencies as the
strings :meth:`costsim.sim.Latency.parse` reads, ``protocols`` as names (a comma-separated
string or a list), ``options`` as a table or ``NAME=VALUE`` strings (values read as TOML
scalars), and ``calibration`` as the path of a `costsim calibrate` file. Defaults are the
Scenario's and the deployments' own: nothing is defaulted here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """The workload shape every command assumes when the user gives none (each with its
    source in :data:`WORKLOAD_SOURCES`); tokens per step, per observation, per verdict."""

    steps_per_task: float = 13.8
    step_tokens: float = 340.0
    obs_tokens: float = 175.0
    context_tokens: float = 7720.0
    verdict_tokens: float = 24.0
    K: int = 6
    rho: float = 1.0


WORKLOAD = Workload()
WORKLOAD_SOURCES = {
    "steps_per_task": "paper: Strong-only strong calls per task on tau² Airline",
    "step_tokens": "median completion tokens per agent call, shipped tau² Airline trace",
    "obs_tokens": "median tool-result tokens (chars/4), shipped tau² Airline trace",
    "context_tokens": "median prompt tokens per agent call, shipped tau² Airline trace",
    "verdict_tokens": "assumption: a verdict (j, short reason) of ~24 tokens",
    "K": "paper: the chunk size of its tau² runs",
    "rho": "assumption: fused repair decodes one replacement step (≈ d̄ tokens)",
}

DEPLOY_KEYS = ("strong", "weak", "strong_device", "weak_device", "strong_gpus", "strong_dtype", "weak_dtype",
               "engine", "weak_engine", "expert_parallel")
LATENCY_KEYS = ("tool_latency", "user_latency")
#: The baseline protocol added to a run that asks for a protocol billed by an API.
API_BILLED = {"edge-cloud": "cloud-strong-only"}


def scenario_keys() -> set[str]:
    """The settings that are Scenario fields taken as they are."""
    from dataclasses import fields

    from .sim.run import Scenario

    return {f.name for f in fields(Scenario)} - {"strong", "weak", "protocols", "options", "calibration", "step_scale_source",
                                              *LATENCY_KEYS}


def setting_keys() -> set[str]:
    """Every key :func:`build_scenario` takes."""
    return scenario_keys() | set(DEPLOY_KEYS) | set(LATENCY_KEYS) | {"protocols", "options", "calibration"}


def build_scenario(settings: dict, tasks=None):
    """The validated :class:`~costsim.sim.Scenario` of ``settings`` (None values: the default).
    ValueError (one line) for anything wrong; unknown keys are refused. ``tasks``: the tasks it
    will run; where neither step scale is set and their steps name the scenario's two models,
    the scales are the trace's own (:func:`costsim.traces.stats.step_scales`)."""
    from .predict import deployments
    from .sim.agent import Latency
    from .sim.run import Scenario, validate

    settings = {k: v for k, v in settings.items() if v is not None}
    unknown = sorted(set(settings) - setting_keys())
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
    fields = scenario_keys()
    kw = {k: v for k, v in settings.items() if k in fields}
    if "protocols" in settings:
        names = settings["protocols"]
        names = tuple(x.strip() for x in names.split(",") if x.strip()) if isinstance(names, str) else tuple(names)
        if names:
            kw["protocols"] = names + tuple(API_BILLED[n] for n in names if n in API_BILLED and API_BILLED[n] not in names)
    for k in LATENCY_KEYS:
        if k in settings:
            kw[k] = Latency.parse(settings[k])
    if "options" in settings:
        kw["options"] = parse_options(settings["options"])
    if "calibration" in settings:
        kw["calibration"] = calibration_fits(settings["calibration"])
    strong, weak = deployments(**{k: settings[k] for k in DEPLOY_KEYS if k in settings})
    if {"strong_step_scale", "weak_step_scale"} & set(settings):
        kw["step_scale_source"] = "given"
    elif tasks is not None:
        from .traces.stats import step_scales

        found = step_scales(tasks, (strong.model.name, strong.model.display_name),
                            (weak.model.name, weak.model.display_name))
        if found:
            kw.update(strong_step_scale=found["strong_step_scale"], weak_step_scale=found["weak_step_scale"],
                      step_scale_source=found["source"])
    try:
        sc = Scenario(strong=strong, weak=weak, **kw)
    except TypeError as e:
        raise ValueError(str(e)) from None
    validate(sc)
    return sc


def parse_options(options) -> tuple:
    """Protocol options as ``((name, value), ...)``: from a table (sorted by name), or from
    ``NAME=VALUE`` strings in their order, values read as TOML scalars (numbers, true/false,
    quoted or bare strings); a name given twice is refused."""
    import tomllib

    if isinstance(options, dict):
        return tuple(sorted(options.items()))
    if isinstance(options, tuple) and all(isinstance(o, tuple) for o in options):
        return options
    if isinstance(options, str) or not isinstance(options, (list, tuple)):
        raise ValueError("options must be a table of protocol options")
    out = []
    for item in options:
        name, eq, raw = str(item).partition("=")
        name = name.strip().replace("-", "_")
        if not eq or not name.isidentifier():
            raise ValueError(f"--option {item!r}: expected NAME=VALUE")
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        if any(n == name for n, _ in out):
            raise ValueError(f"--option {name} is given twice")
        out.append((name, value))
    return tuple(out)


def calibration_fits(path) -> tuple:
    """The measured endpoint fits of a calibration file for a Scenario (() without one)."""
    if not path:
        return ()
    from .calibration import CalibrationError, endpoint_fits, load_calibration

    try:
        return endpoint_fits(load_calibration(path))
    except CalibrationError as e:
        raise ValueError(str(e)) from None

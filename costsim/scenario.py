"""The scenario: everything a run needs besides its tasks, built and checked in one place.

:class:`Scenario` is what `simulate`, `replay`, `capacity`, `plan` and `sweep` run, and what
the simulator, the exact twin and live validation all read; :func:`check` refuses an
impossible one in one line; :func:`replica_costs` is what a call costs on its replicas (the
roofline's, or a calibration's measured endpoints); :class:`Latency` is a tool's or a user's
time.

:func:`build_scenario` makes one from settings: plain values keyed by :class:`Scenario` field
names, plus the deployment keys of :func:`costsim.sizing.deployments`
(:data:`costsim.config.DEPLOY_KEYS`), latencies as the strings :meth:`Latency.parse` reads,
``protocols`` as names (a comma-separated string or a list), ``options`` as a table or
``NAME=VALUE`` strings (values read as TOML scalars), and ``calibration`` as the path of a
`costsim calibrate` file; a setting not given takes the Scenario's default.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

import numpy as np

from . import protocols, roofline
from .acceptance import parse_p_dist
from .calibration import CalibrationError, endpoint_fits, load_calibration
from .config import (COMMANDS, DEPLOY_KEYS, LATENCY_KEYS, OPTION_SETTINGS, MAX_CALL_TOKENS, MAX_RATIO, MAX_REPLICAS, MAX_SECONDS, WORKLOAD,
                     PREFIX_CACHE, PREFIX_CACHES, ROUTING, ROUTINGS,
                     AgentCollabOptions, SelfSpecOptions, SpeculativeActionsOptions, StepScales, VerifierOptions,
                     check_option, check_scale, OPTIONS)
from .formulas import check_K
from .profiles import Deployment
from .sizing import deployments
from .traces.stats import step_scales
from .units import parse_seconds


#: A lognormal latency's sigma is at most this (a spread of e^10, about 22,000x, per standard
#: deviation); its median, like any latency, at most config.MAX_SECONDS.
MAX_SIGMA = 10.0


@dataclass(frozen=True)
class Latency:
    """Latency of an external call: fixed ``seconds``, or lognormal with that median and
    ``sigma`` (log-space standard deviation). ``recorded``: a step's own recorded time
    (``Step.tool_duration_s``) where the trace has one, else the above."""

    seconds: float = 0.0
    sigma: float = 0.0
    recorded: bool = False

    def of(self, step) -> float | None:
        """The step's recorded seconds, when this latency uses them and the step has them."""
        return step.tool_duration_s if self.recorded and step.tool_duration_s is not None else None

    def __bool__(self) -> bool:
        """Whether a call with this latency can take time at all."""
        return self.seconds > 0 or self.recorded

    @property
    def mean(self) -> float:
        """Expected seconds: the median times exp(sigma²/2) for a lognormal."""
        return self.seconds * float(np.exp(self.sigma**2 / 2.0)) if self.seconds > 0 else 0.0

    def sample(self, rng: np.random.Generator, calls: int = 1) -> float:
        """Seconds of ``calls`` such calls run together (in parallel): the longest of their draws."""
        if self.seconds <= 0:
            return 0.0
        if self.sigma <= 0:
            return self.seconds
        z = rng.standard_normal() if calls == 1 else float(rng.standard_normal(calls).max())
        return float(self.seconds * np.exp(self.sigma * z))

    def mean_of(self, calls: int = 1) -> float:
        """Expected seconds of ``calls`` such calls run together: E[max] of their draws (for a
        lognormal, the integral of n φ(z) Φ(z)^(n-1) times the draw at z, by the trapezoid rule
        on 4,001 points over ±12 standard deviations: exact to far below a microsecond)."""
        if calls == 1 or self.seconds <= 0 or self.sigma <= 0:
            return self.mean
        return _mean_of_max(self.seconds, self.sigma, calls)

    @classmethod
    def parse(cls, spec: str | float | None) -> "Latency":
        """'0.5' (fixed seconds), 'lognormal:median,sigma', or 'recorded[:FALLBACK]' (each
        step's recorded tool time; FALLBACK, either form above, for steps without one)."""
        if spec is None or spec == "":
            return cls()
        kind, _, args = (("", "", spec) if isinstance(spec, (int, float)) and not isinstance(spec, bool)
                         else str(spec).partition(":"))
        if kind == "recorded":
            return replace(cls.parse(args or "0"), recorded=True)
        try:
            if kind == "lognormal":
                med, sig = args.split(",")
                if 0 <= float(sig) <= MAX_SIGMA:
                    return cls(parse_seconds(med, "latency", zero=True, at_most=MAX_SECONDS), float(sig))
            elif not kind or not args:
                return cls(parse_seconds(args if not kind else kind, "latency", zero=True, at_most=MAX_SECONDS))
        except ValueError:
            pass
        raise ValueError(f"latency {spec!r}: expected a duration in [0, {MAX_SECONDS:g}] s (0.5, 500ms, 2min), "
                         f"lognormal:median,sigma (sigma at most {MAX_SIGMA:g}) or recorded[:fallback]")


@lru_cache(maxsize=256)
def _mean_of_max(median_s: float, sigma: float, n: int) -> float:
    z = np.linspace(-12.0, 12.0, 4001)
    phi = np.exp(-z * z / 2.0) / math.sqrt(2.0 * math.pi)
    cdf = np.array([0.5 * (1.0 + math.erf(x / math.sqrt(2.0))) for x in z])
    y = median_s * np.exp(sigma * z) * n * phi * cdf ** (n - 1)
    return float(((y[1:] + y[:-1]) / 2.0 * np.diff(z)).sum())


@dataclass(frozen=True)
class Scenario:
    """Everything a simulation run needs besides the tasks."""

    strong: Deployment
    weak: Deployment
    p: float = COMMANDS.p_accept
    K: int = WORKLOAD.K
    p_dist: str | None = None
    protocols: tuple = COMMANDS.protocols
    rho: float = WORKLOAD.rho     # a rejected step's repair, in strong steps (scaled as they are)
    verdict_tokens: int = int(WORKLOAD.verdict_tokens)
    sessions: int = COMMANDS.sessions
    arrival_rate: float | None = None
    strong_replicas: int = 1
    weak_replicas: int = 1
    token_budget: int | None = None  # tokens an iteration (None: each replica's engine's on its device)
    max_seqs: int | None = None      # sequences running at once (None: likewise)
    kv_cap: bool = True           # admissions must fit the replica's KV pool (costsim.memory)
    # A session's prefix between its calls: "hot", "evict" (the engine's cache) or "off"
    # (costsim.config.PREFIX_CACHES; costsim.sim.replica).
    prefix_cache: str = PREFIX_CACHE
    # Which replica a call goes to: "session" (a task's calls to one replica) or "call" (round-robin
    # per call) (costsim.config.ROUTINGS; costsim.sim.run).
    routing: str = ROUTING
    tool_latency: Latency = field(default_factory=Latency)
    user_latency: Latency = field(default_factory=Latency)
    network_rtt_s: float = 0.0    # added to every strong call (the strong model is remote)
    seed: int = 0
    # Decoded tokens per recorded token of a step the model authors (a thinking model: > 1);
    # from a trace's per-model step tokens (costsim.traces.stats.step_scales) or flags.
    strong_step_scale: float = StepScales.strong_step_scale
    weak_step_scale: float = StepScales.weak_step_scale
    step_scale_source: str = ""   # where the step scales came from (empty: the values given)
    # --- the protocols beyond the paper's (docs/protocols.md); None: the protocol's default ---
    # Defaults, help and sources of these: costsim.config.
    false_accept: float = VerifierOptions.false_accept  # verifier errors of SpecAgent's reviews
    false_reject: float = VerifierOptions.false_reject
    escalate_p: float | None = None       # AgentCollab no-progress rate (None: its fitted default)
    escalation_span: int = AgentCollabOptions.escalation_span
    spec_hit_rate: float = SpeculativeActionsOptions.spec_hit_rate
    self_spec_hit_rate: float = SelfSpecOptions.self_spec_hit_rate
    # Edge-cloud (costsim.sim.hosted); None: the profile's where it has one, else config.EDGE_CLOUD.
    api: str | None = None                # the strong model's API profile
    api_ttft_s: float | None = None       # its time to first token, s
    api_output_tps: float | None = None   # its output speed, tokens/s
    edge_device: str | None = None        # the weak model's local device
    options: tuple = ()                   # further protocol options: ((name, value), ...)
    # Measured endpoints (`costsim calibrate`): ((which, prefill_s_per_token, decode_s_per_token,
    # overhead_s), ...) for which in "strong", "weak"; replaces the roofline's times for them.
    calibration: tuple = ()

    def limits(self, dep: Deployment) -> tuple[int, int]:
        """The scheduler's limits of a replica of ``dep``: (token budget of an iteration, most
        sequences running), the scenario's where set, else the engine's on that device
        (``max_batched_tokens`` and ``max_seqs``, :class:`costsim.profiles.Engine`)."""
        return self.token_budget or dep.token_budget, self.max_seqs or dep.max_seqs


#: Scenario fields passed to every protocol as options (each takes those it knows).
PROTOCOL_OPTIONS = ("K", "rho", "verdict_tokens", "strong_step_scale", "weak_step_scale", "false_accept",
                    "false_reject", "escalate_p", "escalation_span", "spec_hit_rate", "self_spec_hit_rate")


def protocol_options(sc: Scenario) -> dict:
    """The options of the scenario's protocols: the fields above, then ``sc.options``."""
    opts = {k: getattr(sc, k) for k in PROTOCOL_OPTIONS}
    if sc.escalate_p is None:
        del opts["escalate_p"]
    opts.update(dict(sc.options))
    return opts


def check(sc: Scenario) -> None:
    """Raise ValueError with a one-line message for an impossible scenario."""
    for f in fields(Scenario):  # the numbers first: a sweep's grid may hold anything
        v = getattr(sc, f.name)
        if f.type in ("float", "int", "float | None", "int | None") and v is not None and (
                isinstance(v, bool) or not isinstance(v, numbers.Real)):  # numpy's numbers are Real
            flag = "p-accept" if f.name == "p" else f.name.replace("_", "-")
            raise ValueError(f"--{flag} must be a number, got {v!r}")
    if not 0.0 <= sc.p <= 1.0:
        raise ValueError(f"--p-accept must be in [0, 1], got {sc.p}")
    check_K(sc.K)
    if isinstance(sc.seed, bool) or not isinstance(sc.seed, int) or sc.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {sc.seed!r}")
    if not isinstance(sc.prefix_cache, str) or sc.prefix_cache not in PREFIX_CACHES:
        raise ValueError(f"--prefix-cache must be one of {', '.join(PREFIX_CACHES)}, got {sc.prefix_cache!r}")
    if not isinstance(sc.routing, str) or sc.routing not in ROUTINGS:
        raise ValueError(f"--routing must be one of {', '.join(ROUTINGS)}, got {sc.routing!r}")
    if sc.sessions < 1 or sc.strong_replicas < 1 or sc.weak_replicas < 1:
        raise ValueError("--sessions and replica counts must be >= 1")
    if max(sc.strong_replicas, sc.weak_replicas) > MAX_REPLICAS:
        raise ValueError(f"--strong-replicas and --weak-replicas must be at most {MAX_REPLICAS:,} (one simulation holds "
                         "every replica in memory; capacity and plan size larger fleets cell by cell)")
    if sc.arrival_rate is not None and sc.sessions != 1:
        raise ValueError("--sessions (closed loop) and --arrival-rate (open loop) are exclusive: give one")
    if sc.arrival_rate is not None and not 0 < sc.arrival_rate < math.inf:
        raise ValueError(f"--arrival-rate must be > 0 tasks/s, got {sc.arrival_rate}")
    check_scale(sc.strong_step_scale, "--strong-step-scale")
    check_scale(sc.weak_step_scale, "--weak-step-scale")
    # Upper bounds on what sizes a call (repair and verdict tokens): far past any real agent.
    for name, v, hi in (("rho", sc.rho, MAX_RATIO), ("verdict-tokens", sc.verdict_tokens, MAX_CALL_TOKENS),
                        ("network-rtt", sc.network_rtt_s, MAX_SECONDS)):
        if not (math.isfinite(v) and 0 <= v <= hi):
            raise ValueError(f"--{name} must be a finite number in [0, {hi:g}], got {v}")
    for name in sc.protocols:
        protocols.get(name)
    parse_p_dist(sc.p_dist, sc.p)
    rates = dict(false_accept=sc.false_accept, false_reject=sc.false_reject, spec_hit_rate=sc.spec_hit_rate,
                 self_spec_hit_rate=sc.self_spec_hit_rate)
    if sc.escalate_p is not None:
        rates["escalate_p"] = sc.escalate_p
    for k, v in rates.items():
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"--{k.replace('_', '-')} must be in [0, 1], got {v}")
    if sc.escalation_span < 1:
        raise ValueError(f"--escalation-span must be >= 1, got {sc.escalation_span}")
    for k, v in (("api-ttft", sc.api_ttft_s), ("api-tps", sc.api_output_tps)):
        if v is not None and not (math.isfinite(v) and (v >= 0 if k == "api-ttft" else v > 0)):
            raise ValueError(f"--{k} must be a finite number {'>= 0' if k == 'api-ttft' else '> 0'}, got {v}")
    # What each protocol of the run takes: its options, less those it fixes (an ablation's).
    taken = set().union(*(protocols.option_names(p.run) - set(p.fixed) for p in map(protocols.PROTOCOLS.get, sc.protocols)))
    for k, v in sc.options:
        if k in PROTOCOL_OPTIONS:
            raise ValueError(f"protocol option {k!r} is a field of the scenario: set that instead")
        if k not in taken:
            fixed = [f"{n} fixes {k}={protocols.PROTOCOLS[n].fixed[k]}" for n in sc.protocols if k in protocols.PROTOCOLS[n].fixed]
            raise ValueError(f"protocol option {k!r} is taken by none of {', '.join(sc.protocols)}"
                             + (f" ({'; '.join(fixed)})" if fixed else ""))
        check_option(k, v)


def replica_costs(sc: Scenario):
    """``((coefficients, seconds added to each call), ...)`` of the scenario's strong and weak
    replicas: the roofline's, or a measured endpoint's (``sc.calibration``) with its per-call
    overhead; strong calls also pay the network round trip."""
    cal = {which: (pre, dec, over) for which, pre, dec, over in sc.calibration}
    out = []
    for which, dep, rtt in (("strong", sc.strong, sc.network_rtt_s), ("weak", sc.weak, 0.0)):
        coef = roofline.coefficients(dep)
        if which in cal:
            pre, dec, over = cal[which]
            out.append((roofline.calibrated(coef, pre, dec), rtt + over))
        else:
            out.append((coef, rtt))
    return tuple(out)


def scenario_keys() -> set[str]:
    """The settings that are Scenario fields taken as they are."""
    return {f.name for f in fields(Scenario)} - {"strong", "weak", "protocols", "options", "calibration", "step_scale_source",
                                              *LATENCY_KEYS}


def setting_keys() -> set[str]:
    """Every key :func:`build_scenario` takes."""
    return scenario_keys() | set(DEPLOY_KEYS) | set(LATENCY_KEYS) | {"protocols", "options", "calibration"}


#: Settings that name something (a model, a device, an engine, a precision, a file, a rule): strings.
NAME_SETTINGS = ("api", "calibration", "edge_device", "engine", "p_dist", "prefix_cache", "routing", "strong", "strong_device",
                 "strong_dtype", "weak", "weak_device", "weak_dtype", "weak_engine")


def _check_kinds(settings: dict) -> None:
    """ValueError (one line) for a setting of the wrong kind, before any use of it: a grid file
    or a notebook can hand any TOML or Python value (a date, a table, a list) to any setting."""
    for k in NAME_SETTINGS:
        if k in settings and not isinstance(settings[k], str):
            raise ValueError(f"{k} must be a name (a string), got {settings[k]!r}")
    v = settings.get("protocols")
    if v is not None and not (isinstance(v, str) or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))):
        raise ValueError(f"protocols must be a name or a list of names, got {v!r}")
    v = settings.get("strong_gpus")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise ValueError(f"strong_gpus must be a whole number of GPUs, got {v!r}")


def build_scenario(settings: dict, tasks=None):
    """The validated :class:`Scenario` of ``settings`` (None values: the default).
    ValueError (one line) for anything wrong; unknown keys are refused. ``tasks``: the tasks it
    will run; where neither step scale is set and their steps name the scenario's two models,
    the scales are the trace's own (:func:`costsim.traces.stats.step_scales`)."""
    settings = {k: v for k, v in settings.items() if v is not None}
    unknown = sorted(set(settings) - setting_keys())
    if unknown:
        raise ValueError(f"unknown setting(s) {', '.join(unknown)}")
    _check_kinds(settings)
    if "options" in settings:
        # An option that is a field of the scenario (K, rho, the rates...) sets that field: one
        # value, checked and reported as the field is.
        opts = parse_options(settings.pop("options"))
        for k, v in opts:
            if k in PROTOCOL_OPTIONS and v is not None:  # none: the field's default
                if k in settings:
                    raise ValueError(f"--option {k} is given twice: by its own setting and by --option")
                settings[k] = v
        settings["options"] = tuple((k, v) for k, v in opts if k not in PROTOCOL_OPTIONS)
    taken = scenario_keys()
    kw = {k: v for k, v in settings.items() if k in taken}
    if settings.get("protocols") is not None:
        names = settings["protocols"]
        names = tuple(x.strip() for x in names.split(",") if x.strip()) if isinstance(names, str) else tuple(names)
        if not names:
            raise ValueError("--protocols names no protocol")
        if names:
            # a protocol on the API backend runs with its API-only baseline (its API ratios' denominator)
            extra = (protocols.PROTOCOLS[n].api_baseline for n in names if n in protocols.PROTOCOLS)
            kw["protocols"] = names + tuple(dict.fromkeys(b for b in extra if b and b not in names))
    for k in LATENCY_KEYS:
        if k in settings:
            kw[k] = Latency.parse(settings[k])
    if "network_rtt_s" in kw:
        kw["network_rtt_s"] = parse_seconds(kw["network_rtt_s"], "--network-rtt", zero=True, at_most=MAX_SECONDS)
    if "options" in settings:
        kw["options"] = settings["options"]
    if "calibration" in settings:
        kw["calibration"] = calibration_fits(settings["calibration"])
    strong, weak = deployments(**{k: settings[k] for k in DEPLOY_KEYS if k in settings})
    if {"strong_step_scale", "weak_step_scale"} & set(settings):
        kw["step_scale_source"] = "given"
    elif tasks is not None:
        found = step_scales(tasks, (strong.model.name, strong.model.display_name),
                            (weak.model.name, weak.model.display_name))
        if found:
            kw.update(strong_step_scale=found["strong_step_scale"], weak_step_scale=found["weak_step_scale"],
                      step_scale_source=found["source"])
    try:
        sc = Scenario(strong=strong, weak=weak, **kw)
    except TypeError as e:
        raise ValueError(str(e)) from None
    check(sc)
    return sc


def parse_options(options) -> tuple:
    """Protocol options as ``((name, value), ...)``: from a table (sorted by name), pairs, or
    ``NAME=VALUE`` strings in their order, values read as TOML scalars (numbers, true/false,
    quoted or bare strings; a bare ``none`` is None). In every form a name given twice is
    refused and a whole-number float of a count is the count (TOML's 3.0 is 3)."""
    import tomllib

    if isinstance(options, dict):
        pairs = sorted(options.items())
    elif isinstance(options, tuple) and all(isinstance(o, tuple) and len(o) == 2 for o in options):
        pairs = list(options)
    elif isinstance(options, str) or not isinstance(options, (list, tuple)):
        raise ValueError("options must be a table of protocol options")
    else:
        pairs = []
        for item in options:
            name, eq, raw = str(item).partition("=")
            name = name.strip().replace("-", "_")
            if not eq or not name.isidentifier():
                raise ValueError(f"--option {item!r}: expected NAME=VALUE")
            try:
                value = tomllib.loads(f"v = {raw.strip()}")["v"]
            except tomllib.TOMLDecodeError:
                value = raw.strip()
                if value.lower() == "none":  # TOML has no null: the word stands for "none" (max_span=none)
                    value = None
            pairs.append((name, value))
    out = []
    for name, value in pairs:
        if any(n == name for n, _ in out):
            raise ValueError(f"--option {name} is given twice")
        if (type(value) is float and value.is_integer() and name in OPTIONS
                and OPTIONS[name][1].type.startswith("int")):
            value = int(value)
        out.append((name, value))
    return tuple(out)


def calibration_fits(path) -> tuple:
    """The measured endpoint fits of a calibration file for a Scenario (() without one)."""
    if not path:
        return ()
    try:
        return endpoint_fits(load_calibration(path))
    except CalibrationError as e:
        raise ValueError(str(e)) from None


def settings_of(options: dict) -> dict:
    """A command's scenario options (``p_accept=0.8``, ``option=["K=3"]``) as the settings
    :func:`build_scenario` takes (``p=0.8``, ``options=("K=3",)``)."""
    return {OPTION_SETTINGS.get(k, k): v for k, v in options.items()}

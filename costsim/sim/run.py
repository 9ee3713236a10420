"""Run protocols over tasks on simulated replicas; collect one row per task per protocol.

Every protocol runs in its own SimPy environment, on its own replicas, over the same tasks,
with the same per-task random streams (common random numbers: the ratios between protocols are
paired). Sessions are closed-loop (``sessions`` agents each working through tasks back to
back) or open-loop (tasks arriving as a Poisson process of ``arrival_rate`` per second).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields

import numpy as np
import simpy

from .. import protocols, roofline
from ..config import (MAX_CALL_TOKENS, check_scale, MAX_RATIO, MAX_SECONDS, ON_API, WORKLOAD, AgentCollabOptions, SelfSpecOptions, SpeculativeActionsOptions, StepScales,
                      VerifierOptions, check_option)
from ..profiles import Deployment
from . import api
from ..acceptance import parse_p_dist
from .agent import Latency, TaskRun
from .replica import Replica


@dataclass(frozen=True)
class Scenario:
    """Everything a simulation run needs besides the tasks."""

    strong: Deployment
    weak: Deployment
    p: float = 0.8
    K: int = WORKLOAD.K
    p_dist: str | None = None
    protocols: tuple = protocols.DEFAULT
    rho: float | None = None      # repair tokens per recorded step token (None: strong_step_scale)
    verdict_tokens: int = int(WORKLOAD.verdict_tokens)
    sessions: int = 1
    arrival_rate: float | None = None
    strong_replicas: int = 1
    weak_replicas: int = 1
    token_budget: int = 8192
    max_seqs: int = 256
    kv_cap: bool = True           # admissions must fit the replica's KV pool (costsim.memory)
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
    # Edge-cloud (costsim.sim.api); None: the profile's where it has one, else config.EDGE_CLOUD.
    api: str | None = None                # the strong model's API profile
    api_ttft_s: float | None = None       # its time to first token, s
    api_output_tps: float | None = None   # its output speed, tokens/s
    edge_device: str | None = None        # the weak model's local device
    options: tuple = ()                   # further protocol options: ((name, value), ...)
    # Measured endpoints (`costsim calibrate`): ((which, prefill_s_per_token, decode_s_per_token,
    # overhead_s), ...) for which in "strong", "weak"; replaces the roofline's times for them.
    calibration: tuple = ()


    def __post_init__(self):
        if self.rho is None:  # a repair is a step the strong model authors
            object.__setattr__(self, "rho", WORKLOAD.rho * self.strong_step_scale)


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


def validate(sc: Scenario) -> None:
    """Raise ValueError with a one-line message for an impossible scenario."""
    for f in fields(Scenario):  # the numbers first: a sweep's grid may hold anything
        v = getattr(sc, f.name)
        if f.type in ("float", "int", "float | None", "int | None") and v is not None and (
                isinstance(v, bool) or not isinstance(v, numbers.Real)):  # numpy's numbers are Real
            flag = "p-accept" if f.name == "p" else f.name.replace("_", "-")
            raise ValueError(f"--{flag} must be a number, got {v!r}")
    if not 0.0 <= sc.p <= 1.0:
        raise ValueError(f"--p-accept must be in [0, 1], got {sc.p}")
    from ..formulas import check_K

    check_K(sc.K)
    if isinstance(sc.seed, bool) or not isinstance(sc.seed, int) or sc.seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {sc.seed!r}")
    if sc.sessions < 1 or sc.strong_replicas < 1 or sc.weak_replicas < 1:
        raise ValueError("--sessions and replica counts must be >= 1")
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
    taken = set().union(*(protocols.option_names(fn) - set(fixed)
                          for fn, fixed, _ in (protocols.PROTOCOLS[n] for n in sc.protocols)))
    for k, v in sc.options:
        if k in PROTOCOL_OPTIONS:
            raise ValueError(f"protocol option {k!r} is a field of the scenario: set that instead")
        if k not in taken:
            fixed = [f"{n} fixes {k}={protocols.PROTOCOLS[n][1][k]}" for n in sc.protocols if k in protocols.PROTOCOLS[n][1]]
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


def simulate(tasks, sc: Scenario, progress=None) -> list[dict]:
    """Rows (dicts) of per-task metrics for every protocol of the scenario, in task order.

    ``progress``, if given, is called with the number of tasks finished since the last call.
    """
    validate(sc)
    root = np.random.SeedSequence(sc.seed)  # task i's stream: its i-th child (LazyGenerator)
    rows = []
    for name in sc.protocols:
        rows.extend(_run_protocol(name, tasks, root, sc, progress))
    return rows


def _run_protocol(name, tasks, root, sc: Scenario, progress):
    env = simpy.Environment()
    on_api = name in ON_API
    if on_api:
        strong, weak = api.replicas(env, sc)
    else:
        (s_coef, s_call_s), (w_coef, w_call_s) = replica_costs(sc)
        pool = None if sc.kv_cap else math.inf
        strong = [Replica(env, sc.strong, f"strong{i}", sc.token_budget, sc.max_seqs, s_call_s, s_coef, pool)
                  for i in range(sc.strong_replicas)]
        weak = [Replica(env, sc.weak, f"weak{i}", sc.token_budget, sc.max_seqs, w_call_s, w_coef, pool)
                for i in range(sc.weak_replicas)]
    proc = protocols.get(name, **protocol_options(sc))
    make_acceptance = parse_p_dist(sc.p_dist, sc.p)
    rows = [None] * len(tasks)

    def begin(i):
        rng = LazyGenerator(root, i)
        tr = TaskRun(env, tasks[i], strong[i % len(strong)], weak[i % len(weak)], make_acceptance(rng),
                     rng, sc.tool_latency, sc.user_latency)
        tr.wakes_alone = True  # a session or arrival process: its start, then its own events
        return api.BilledRun(tr) if on_api else tr

    def end(i, tr):
        row = tr.finish()
        row.update(task_id=tasks[i].task_id, protocol=name, task_index=i, start_s=tr.start, end_s=tr.end)
        rows[i] = row
        if progress:
            progress(1)

    if sc.arrival_rate:
        def one(i):
            tr = begin(i)
            yield from proc(tr, tasks[i])
            end(i, tr)

        def arrivals():
            rng = np.random.default_rng(np.random.SeedSequence([sc.seed, 0xA11]))
            for i in range(len(tasks)):
                env.process(one(i))
                yield env.timeout(rng.exponential(1.0 / sc.arrival_rate))
        env.process(arrivals())
    else:
        queue = iter(range(len(tasks)))

        def session():  # the task's process inlined: a level less of generators per event
            for i in queue:
                tr = begin(i)
                yield from proc(tr, tasks[i])
                end(i, tr)
        for _ in range(min(sc.sessions, len(tasks))):
            env.process(session())
    env.run()
    horizon = env.now
    run_wide = {"strong_mean_batch": float(np.mean([s.mean_batch for s in strong])),
                "weak_mean_batch": float(np.mean([w.mean_batch for w in weak])),
                "strong_utilisation": float(sum(s.busy_s for s in strong) / (horizon * len(strong))) if horizon else 0.0,
                "strong_kv_blocked_share": float(sum(getattr(s, "kv_blocked_s", 0.0) for s in strong)
                                                 / max(sum(s.busy_s for s in strong), 1e-12)),
                "makespan_s": horizon}
    for r in rows:
        r.update(run_wide)
    return rows


class LazyGenerator:
    """Task ``i``'s ``numpy.random.Generator``, from the ``i``-th child of the ``root``
    SeedSequence (``root.spawn(n)[i]`` for a root that has spawned none), both made on first use: many tasks draw nothing
    (Strong-only without latencies; SpecAgent without a review), and making them costs as much
    as simulating a few steps. Draws are those of the generator itself; what is read of it is
    kept as an attribute, so that the next read is a plain one."""

    def __init__(self, root: np.random.SeedSequence, i: int):
        self._root, self._i, self._gen = root, i, None

    def __getattr__(self, name):  # only for what is not an attribute yet
        if name.startswith("_"):  # its own, before __init__ has set them (a copy, an unpickling)
            raise AttributeError(name)
        if self._gen is None:
            r = self._root
            self._gen = np.random.default_rng(
                np.random.SeedSequence(r.entropy, spawn_key=(*r.spawn_key, self._i), pool_size=r.pool_size))
        value = getattr(self._gen, name)
        setattr(self, name, value)
        return value

"""Every default, limit and protocol option, once, with its source: data, not code.

The defaults: the workload shape (:class:`Workload`), the deployment (:class:`Deployments`),
edge-cloud's (:class:`EdgeCloud`), what plan searches (:class:`PlanSearch`), the limits any
input is held to (``MAX_*``), and each protocol's options (one frozen dataclass per protocol,
indexed by :data:`OPTIONS`). Every other module, and the CLI's help, names them from here.
This module imports nothing of costsim (and no numpy): the CLI reads it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar


@dataclass(frozen=True)
class Workload:
    """The workload shape every command assumes when the user gives none (each with its
    source in :data:`WORKLOAD_SOURCES`); tokens per step, per observation, per verdict.
    The step is the typical step of the recorded tau²-Bench Airline run by the one rule every
    command applies to a trace (:func:`costsim.traces.stats.step_shape`: the means over its
    model calls, the paper's d̄ = "mean step length"), to whole tokens."""

    steps_per_task: float = 13.8
    step_tokens: float = 418.0
    obs_tokens: float = 181.0
    context_tokens: float = 8219.0
    verdict_tokens: float = 24.0
    K: int = 6
    rho: float = 1.0


WORKLOAD = Workload()
WORKLOAD_SOURCES = {
    "steps_per_task": "paper: Strong-only strong calls per task on tau² Airline",
    "step_tokens": "mean completion tokens over the 467 agent calls of the recorded tau²-Bench Airline run "
                   "(418.02; the paper's d̄ is the mean step length)",
    "obs_tokens": "mean observation per agent call of that run: what comes back after a call (its tool "
                  "results and the user's replies, ceil(chars/4)) over its 467 calls (181.47)",
    "context_tokens": "mean prompt tokens over the 467 agent calls of that run (8,219.13)",
    "verdict_tokens": "assumption: a verdict (j, short reason) of ~24 tokens",
    "K": "paper: the chunk size of its tau² runs",
    "rho": "assumption: fused repair decodes one replacement step (≈ d̄ tokens)",
}


@dataclass(frozen=True)
class Deployments:
    """The deployment when the user gives none (each with its source in
    :data:`DEPLOYMENT_SOURCES`): models, device, precisions, engine, decode batch per replica."""

    strong: str = "qwen3.5-397b-a17b"
    weak: str = "qwen3.5-4b"
    device: str = "h20"
    strong_dtype: str = "fp8"     # the default strong model's; any other model's is its checkpoint's own
    engine: str = "vllm"
    batch: int = 16


DEPLOYMENTS = Deployments()
DEPLOYMENT_SOURCES = {
    "strong": "paper: its strong model (Qwen3.5-397B-A17B)",
    "weak": "paper: its weak model (Qwen3.5-4B)",
    "device": "paper: the device of its balance-point caveat (B* about 37 on an H20)",
    "strong_dtype": "assumption: the default strong model served from its FP8 checkpoint "
                    "(Qwen/Qwen3.5-397B-A17B-FP8), which fits one 8-GPU H20 node; the precision policy "
                    "(costsim.sizing.weight_dtype): a given --dtype/--strong-dtype/--weak-dtype, else this for the "
                    "default strong model, else every model's checkpoint's own (its profile's default_dtype, a "
                    "config.json's torch_dtype and quantization_config)",
    "engine": "assumption: both models served by vLLM (the paper names no engine)",
    "batch": "assumption: 16 concurrent sessions per replica",
}
#: The source of every default above, workload and deployment.
SOURCES = {**WORKLOAD_SOURCES, **DEPLOYMENT_SOURCES}


@dataclass(frozen=True)
class EdgeCloud:
    """Edge-cloud's deployment when the user gives none (:mod:`costsim.sim.hosted`): the hosted
    strong model's API profile, the weak model's local device, and the API's time to first
    token (s) and output speed (tokens/s) where its profile has none."""

    api: str = "qwen3.5-397b-a17b"
    edge_device: str = "rtx-5090"
    ttft_s: float = 1.0
    output_tps: float = 50.0


EDGE_CLOUD = EdgeCloud()
EDGE_CLOUD_SOURCES = {
    "api": "paper: its strong model (Qwen3.5-397B-A17B), here behind a priced API",
    "edge_device": "assumption: one workstation GPU that holds the weak model",
    "ttft_s": "assumption: the shipped API profiles carry no time to first token",
    "output_tps": "assumption: the shipped API profiles carry no output speed",
}
#: The scenario settings of the API backend: setting -> (its EdgeCloud default, what it is).
#: The CLI's flags and `costsim protocols` both read their help from here.
EDGE_CLOUD_SETTINGS = {
    "api": ("api", "API profile of the strong model"),
    "api_ttft_s": ("ttft_s", "API time to first token, s, where its profile has none"),
    "api_output_tps": ("output_tps", "API output tokens/s, where its profile has none"),
    "edge_device": ("edge_device", "local device of the weak model"),
}


def edge_cloud_setting(setting: str) -> tuple:
    """``(default, what it is, its source)`` of an API-backend setting (:data:`EDGE_CLOUD_SETTINGS`)."""
    f, what = EDGE_CLOUD_SETTINGS[setting]
    return getattr(EDGE_CLOUD, f), what, EDGE_CLOUD_SOURCES[f]


@dataclass(frozen=True)
class PlanSearch:
    """What `costsim plan` searches when the user names none: the datacentre devices with
    on-demand list prices in ``hardware/`` (for the strong replicas, and the weak ones), the
    chunk sizes, and the protocols (with an API named, also those on the API backend:
    ``costsim.protocols.api_protocols``)."""

    devices: tuple = ("h20", "h100-sxm", "h200", "b200")
    Ks: tuple = (2, 4, 6, 8, 10, 12)
    protocols: tuple = ("strong-only", "specagent")


PLAN_SEARCH = PlanSearch()


@dataclass(frozen=True)
class Commands:
    """What a command assumes when the user gives none of these (each with its source in
    :data:`COMMAND_SOURCES`): the acceptance rate, the protocols, the load and the sizes of a
    run, capacity's and plan's latency target (s) and their search."""

    p_accept: float = 0.8
    protocols: tuple = ("strong-only", "weak-only", "specagent")
    sessions: int = 1
    simulate_tasks: int = 200
    latency_p95_s: float = 60.0
    capacity_protocols: tuple = ("strong-only", "specagent")
    capacity_tasks: int = 400
    capacity_tolerance: float = 0.05
    plan_tasks: int = 200
    plan_confirm: int = 3
    closed_form_tasks: int = 20_000
    roofline_batch: int = 1
    roofline_context_tokens: float = 4096.0
    bench_input_tokens: int = 1024
    bench_output_tokens: int = 128


COMMANDS = Commands()
COMMAND_SOURCES = {
    "p_accept": "assumption: a per-step acceptance rate of 0.8 (the paper publishes none; the README's main "
                "job asks for it explicitly, as predict and validate require it)",
    "protocols": "assumption: the paper's comparison: Strong-only, Weak-only and SpecAgent",
    "sessions": "assumption: one closed-loop session (an uncontended run)",
    "simulate_tasks": "assumption: 200 synthetic tasks, enough for the ratios' intervals to be a few percent wide",
    "latency_p95_s": "assumption: a task's p95 latency target of 60 s",
    "capacity_protocols": "assumption: the two protocols a capacity comparison is about (as plan's, "
                          "PlanSearch.protocols)",
    "capacity_tasks": "assumption: 400 tasks per probe of the load search",
    "capacity_tolerance": "assumption: the load search stops when its bracket is within 5%",
    "plan_tasks": "assumption: 200 tasks screened per configuration",
    "plan_confirm": "assumption: the 3 cheapest screened configurations confirmed by simulation",
    "closed_form_tasks": "assumption: a simulation's closed forms (exact twin, renewal form) over its first 20,000 tasks "
                         "at most: they cost ~0.5 ms a task, and on synthetic tasks (independent draws) 20,000 give the "
                         "twin's R within 0.1% of 360,000's (0.06212 both; measured 2026-12-02)",
    "roofline_batch": "assumption: one iteration of one sequence (roofline; the batch the user asks about beside it)",
    "roofline_context_tokens": "assumption: a 4,096-token context per sequence (roofline, kv capacity)",
    "bench_input_tokens": "vLLM's `vllm bench serve --dataset-name random` default --random-input-len (1024)",
    "bench_output_tokens": "vLLM's `vllm bench serve --dataset-name random` default --random-output-len (128)",
}


@dataclass(frozen=True)
class Live:
    """The live mode's defaults (each with its source in :data:`LIVE_SOURCES`): probes per
    shape, the client's deadline (s) and retries, validate's tasks and committed steps per task
    (remote endpoints, and the generated local models)."""

    repeats: int = 3
    timeout_s: float = 120.0
    retries: int = 3
    validate_tasks: int = 20
    validate_tasks_local: int = 8
    validate_steps: int = 12
    validate_steps_local: int = 6
    local_step_tokens: int = 32
    local_obs_tokens: int = 16
    local_verdict_tokens: int = 8


LIVE = Live()
LIVE_SOURCES = {
    "repeats": "assumption: 3 probes per shape (the fit works from per-shape medians)",
    "timeout_s": "assumption: 2 minutes per call, past any step at the default shapes",
    "retries": "assumption: 3 retries of a failed call",
    "validate_tasks": "assumption: 20 tasks per protocol",
    "validate_tasks_local": "assumption: 8 tasks per protocol on the generated models (a 2-core CPU)",
    "validate_steps": "assumption: 12 committed steps per task (about the paper's 13.8)",
    "validate_steps_local": "assumption: 6 committed steps per task on the generated models",
    "local_step_tokens": "assumption: small shapes for the generated local models on a 2-core CPU (a strong prefill "
                         "there costs ~10 ms per token): a 32-token step",
    "local_obs_tokens": "assumption: a 16-token observation on the generated local models",
    "local_verdict_tokens": "assumption: an 8-token verdict on the generated local models",
}


@dataclass(frozen=True)
class Scheduler:
    """An engine's scheduler limits where its profile names none: the most tokens one iteration
    prefills and decodes, and the most sequences it runs."""

    max_batched_tokens: int = 8192
    max_seqs: int = 256


SCHEDULER = Scheduler()
SCHEDULER_SOURCES = {
    "max_batched_tokens": "assumption: vLLM's `vllm serve` token budget on H100/H200, 8192 (vLLM 0.33.0 "
                          "vllm/engine/arg_utils.py get_batch_defaults)",
    "max_seqs": "assumption: vLLM's `vllm serve` max_num_seqs on A100 and smaller GPUs, 256 (the same source)",
}


#: How the simulator's replicas keep a session's prefix (the context its calls say is cached)
#: between its calls (``Scenario.prefix_cache``, :class:`costsim.sim.replica.Replica`).
PREFIX_CACHES = {
    "hot": "always resident, holding no room: the exact twin's idealisation, and costsim's before the cache was modelled",
    "evict": "the engine's prefix cache (its profile's prefix_caching; off where it has none): a finished call's "
             "sequence stays in the KV pool until evicted, least recently used first, from its tail in blocks of "
             "kv_block_tokens; a call prefills again what of its context is not resident at its admission",
    "off": "no reuse: every call prefills its whole context",
}
#: The simulator's default: "hot" until capacity and plan account for the cache (docs/cost-model.md,
#: "Prefix caching"); where nothing of a live session is evicted "evict" gives the same numbers.
PREFIX_CACHE = "hot"
#: How the simulator's fleet sends a task's calls to replicas (``Scenario.routing``).
ROUTINGS = {
    "session": "session-affine: each task's calls go to one replica of each pool, the tasks spread round-robin over "
               "them (a session's prefix stays where it was cached), as agent deployments route",
    "call": "each call to the next replica of its pool, round-robin: a stateless load balancer (a session's next call "
            "may find its prefix on another replica)",
}
#: The simulator's default routing: session-affine (what costsim has always simulated).
ROUTING = "session"


def serving_words(prefix_cache: str, routing: str) -> str:
    """How a run keeps and routes sessions, in words: 'prefix cache: hot (always resident,
    holding no room); routing: session (session-affine)' (each description's first clause)."""
    return (f"prefix cache: {prefix_cache} ({PREFIX_CACHES[prefix_cache].split(':')[0]}); "
            f"routing: {routing} ({ROUTINGS[routing].split(':')[0]})")


@dataclass(frozen=True)
class Synthetic:
    """The synthetic generator's medians (:mod:`costsim.traces.synthetic`), in tokens: the
    lognormal medians of a step's output and of a tool result (distributions, not the typical
    step: their means are higher, as the recorded run's are)."""

    output_median: float = 340.0
    tool_obs_median: float = 175.0


SYNTHETIC = Synthetic()
SYNTHETIC_SOURCES = {
    "output_median": "median completion tokens over the 467 agent calls of the recorded tau²-Bench Airline run",
    "tool_obs_median": "median tool result of that run, ceil(chars/4) over its 371 tool calls: 174; 175, "
                       "declared before that recount, is kept",
}


#: The longest any latency or recorded duration may be, in seconds (11.6 days), and the most
#: tokens a recorded call may count: far past any real agent, and short of the float overflows
#: that would print inf or nan.
MAX_SECONDS, MAX_TOKENS = 1e6, 10**9
#: The largest time ratio (kappa, v/d, rho) and steps per task any command takes: far past any
#: real deployment, short of the overflows that would print inf.
MAX_RATIO, MAX_STEPS = 1000.0, 1e6
#: The most tokens one call may prefill or decode in a scenario (a step, an observation, a verdict).
MAX_CALL_TOKENS = 1e6
#: The dearest GPU-hour a price may be, USD: on-demand list prices run to about $10 (a B200),
#: so 10^4 refuses a typo (1e308 recommended "USD inf") and no real price.
MAX_USD_PER_GPU_HOUR = 1e4
#: The most replicas of one pool a scenario may simulate: capacity's and plan's uncontended runs
#: give each of their (at most 10^5) tasks a replica; past that a fleet is sized cell by cell
#: (`--strong-replicas 1e9` hung, then ran out of memory).
MAX_REPLICAS = 100_000
#: The largest result file `costsim report` reads: a command's --json is 5-20 KB (a plan of a
#: large search some hundreds), and parsing JSON takes ~25 times a file's size in memory.
MAX_RESULT_BYTES = 16 << 20


def check_price(name: str, usd) -> float:
    """A USD per GPU-hour price, refused (ValueError, one line) unless in [0, MAX_USD_PER_GPU_HOUR]."""
    if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not 0 <= usd <= MAX_USD_PER_GPU_HOUR:
        raise ValueError(f"{name} must be a price in [0, {MAX_USD_PER_GPU_HOUR:g}] USD per GPU-hour, got {usd!r}")
    return float(usd)


def check_scale(scale: float, name: str = "a step scale") -> float:
    """A step scale (decoded tokens per recorded token), refused unless in (0, MAX_RATIO]."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= MAX_RATIO:
        raise ValueError(f"{name} must be a number in (0, {MAX_RATIO:g}] (decoded tokens per recorded step token), got {scale!r}")
    return scale


# --- each protocol's options ------------------------------------------------------------
# One frozen dataclass per protocol (and one for what several share): the one place an
# option's default, type, allowed words and help (its unit and source) live. The protocols'
# signatures name these defaults (a test holds them to it); the CLI's flags and `costsim
# protocols` are generated from them. Nothing here imports numpy: the CLI reads it at start-up.


def option(default, help: str, choices: tuple = (), at_most: float | None = None):
    """A protocol option's declaration: default, help, for a word the words it takes, and for a
    number the most it may be (a probability: 1)."""
    return field(default=default, metadata={"help": help, "choices": choices, "at_most": at_most})


#: SpecAgent's chunking rules (``costsim.protocols.chunking.chunk_end``; docs/protocols.md).
CHUNKINGS = ("messages-end", "messages-pass", "writes-only", "writes+final", "hold-messages")


@dataclass(frozen=True)
class StepScales:
    """What every protocol whose models author steps takes."""

    TITLE: ClassVar[str] = "Step scales"

    strong_step_scale: float = option(1.0, "tokens the strong model decodes per recorded token of a step it "
                                           "authors (a thinking model: > 1); replay takes it from a trace whose "
                                           "steps name both models")
    weak_step_scale: float = option(1.0, "tokens the weak model decodes per recorded token of a step it drafts "
                                         "or authors")


@dataclass(frozen=True)
class SpecAgentOptions:
    """SpecAgent (costsim.protocols.specagent)."""

    TITLE: ClassVar[str] = "SpecAgent"

    K: int = option(WORKLOAD.K, "chunk size: most steps (model calls) the weak model drafts per chunk ("
                    + WORKLOAD_SOURCES["K"] + ")")
    # The paper's rule as its text gives it: a chunk ends at the first state-changing action,
    # held and reviewed with the reads drafted before it; a chunk of K reads is committed
    # without review; messages to the user are sent (holding them is the paper's ablation) and
    # drafting goes on. Every other rule is an ablation of ours (docs/protocols.md).
    chunking: str = option("writes-only", "what ends a drafted chunk and what is held for review (docs/protocols.md; "
                                         "default: the paper's text: the first write, held and reviewed, or K "
                                         "reads, committed unreviewed; messages sent, not held)", CHUNKINGS)
    review: str = option("held", "which chunks the strong model reviews: held or marked ones, or all (the "
                                 "paper's ablation)", ("held", "all"))
    repair: str = option("fused", "after a rejection the strong model authors the step in the verdict's call (at "
                                  "correction_rate a correction turn instead), "
                                  "or in a separate correction turn", ("fused", "separate"))
    rho: float = option(WORKLOAD.rho, "a rejected step's repair in strong steps, each decoding --strong-step-scale "
                                      "tokens per recorded token (" + WORKLOAD_SOURCES["rho"] + ")")
    verdict_tokens: int = option(int(WORKLOAD.verdict_tokens), "tokens of a verdict (" + WORKLOAD_SOURCES["verdict_tokens"] + ")")
    correction_tokens: int = option(64, "prompt tokens of a correction turn (assumption)")
    correction_rate: float = option(0.0, "with repair=fused, P(a rejection's fix is a correction turn of its own "
                                         "instead of the fused replacement: a fix over several calls, or one the "
                                         "adapter refuses; the paper's text; 0: always fused, an assumption)",
                                  at_most=1.0)
    correction_rho: float = option(1.5, "a correction turn's decoding in strong steps, each --strong-step-scale "
                                        "tokens per recorded token of the replaced step (the paper's AutomationBench: "
                                        "a separate repair of about 1.5 d̄)", at_most=MAX_RATIO)


@dataclass(frozen=True)
class VerifierOptions:
    """The strong reviewer's errors, in every SpecAgent variant (costsim.protocols.verifier)."""

    TITLE: ClassVar[str] = "SpecAgent's verifier"

    false_accept: float = option(0.0, "P(the strong reviewer accepts a bad drafted step)")
    false_reject: float = option(0.0, "P(the strong reviewer rejects a good drafted step)")


@dataclass(frozen=True)
class AgentCollabOptions:
    """AgentCollab-style escalation (costsim.protocols.agentcollab)."""

    TITLE: ClassVar[str] = "AgentCollab"

    # Fitted so that AgentCollab's strong calls are the paper's 18.5 / 13.8 = 1.34x Strong-only's
    # on the shipped tau2-airline trace (default deployments and options):
    # costsim.paper.fit_agentcollab_stall, which a test reruns. AgentCollab publishes neither its
    # stall rate nor its spans; this is the one free parameter.
    escalate_p: float = option(0.325, "P(no progress) per weak step (fitted to the paper's strong calls on "
                                      "tau2-airline: costsim.paper.fit_agentcollab_stall; with stall=acceptance "
                                      "unused: 1 - p_u)")
    stall: str = option("rate", "no progress at escalate_p per weak step, or when the acceptance process "
                                "rejects the step (1 - p_u)", ("rate", "acceptance"))
    escalation_span: int = option(2, "strong steps of the first escalation (assumption)")
    escalation_growth: float = option(2.0, "span multiplier per escalation in a task, each span one step at least (assumption)")
    max_span: int | None = option(None, "cap on one escalation's span (none: uncapped)")
    reflection: str = option("separate", "self-reflection as a call of its own (it reads the step's tool "
                                         "result), or folded into the next step's call", ("separate", "inline"))
    reflect_prompt_tokens: int = option(64, "reflection prompt tokens prefilled (assumption)")
    reflect_tokens: int = option(16, "reflection verdict tokens decoded (assumption)")
    recovery_steps: int = option(1, "strong clean-up steps after a wasted message or write (assumption)")


@dataclass(frozen=True)
class SpeculativeActionsOptions:
    """Speculative Actions (costsim.protocols.speculative_actions)."""

    TITLE: ClassVar[str] = "Speculative Actions"

    spec_hit_rate: float = option(0.5, "P(the weak guess is right: the user's reply, or with speculate=always "
                                       "the strong step) (assumption; its code's notebook: 0.23-0.34)")
    lookahead: bool = option(True, "speculate=always: also call the actor for the next step on the guess")
    spec_guess_tokens: int | None = option(None, "speculate=always: tokens of a guess (none: the step's own)")
    speculate: str = option("user-turns", "where to speculate: at the user's turns (its public tau-bench code), "
                                          "at every step (its general framework), or only when in time",
                            ("user-turns", "always", "in-time"))
    adopt: str = option("always", "background steps kept whatever the guess (its code's default) or on a hit "
                                  "(what its --guesser-check means to do)", ("always", "on-hit"))
    spec_depth: int = option(5, "most tool steps one user-turn speculation runs (its code's max_num_steps)")
    final_speculation: bool = option(False, "also speculate after the closing message (costed, not waited for)")


@dataclass(frozen=True)
class SelfSpecOptions:
    """Tool-call self-speculation (costsim.protocols.self_spec)."""

    TITLE: ClassVar[str] = "Self-speculation"

    self_spec_hit_rate: float = option(0.66, "Hit@1 of a predicted read-only call (0.61-0.66 reported after "
                                             "joint agent-speculator training)")
    spec_suffix_tokens: int = option(16, "speculation suffix tokens prefilled (assumption)")
    spec_call_tokens: int = option(40, "tokens of a predicted call decoded, at most the step's (assumption)")


#: Every protocol option: name -> (its dataclass, its field). Names are unique across them.
OPTIONS = {f.name: (cls, f) for cls in (StepScales, SpecAgentOptions, VerifierOptions, AgentCollabOptions,
                                         SpeculativeActionsOptions, SelfSpecOptions) for f in fields(cls)}


def check_option(name: str, value) -> None:
    """ValueError (one line) unless ``value`` is what protocol option ``name`` takes: one of its
    words, a flag, a whole number >= 1 where it is an integer (counts, spans; or none where
    none is its default), a finite number >= 0 else."""
    import math

    if name not in OPTIONS:
        raise ValueError(f"unknown protocol option {name!r}; known: {', '.join(OPTIONS)}")
    f = OPTIONS[name][1]
    bad, kind, choices = f"--option {name}={value!r}: ", f.type.split("|")[0].strip(), f.metadata["choices"]
    if value is None and "None" in f.type:
        return
    if choices:
        if value not in choices:
            raise ValueError(bad + f"expected one of {', '.join(choices)}")
        return
    if kind == "str":
        if type(value) is not str:
            raise ValueError(bad + "expected a word")
        return
    if kind == "bool":
        if type(value) is not bool:
            raise ValueError(bad + "expected true or false")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(bad + "expected a finite number")
    if kind == "int" and (value != int(value) or value < 1):
        raise ValueError(bad + "expected a whole number >= 1")
    if value < 0:
        raise ValueError(bad + "expected a number >= 0")
    hi = f.metadata.get("at_most")
    if hi is not None and value > hi:
        raise ValueError(bad + f"expected a number in [0, {hi:g}]")


#: The JSON vocabulary: keys that mean one thing, with one type, in every command's --json
#: (name -> (JSON types, unit and meaning)); tests/test_cli.py collects the keys of the commands'
#: output and holds them to it. A simulated quantity is an estimate, ``{"mean": x, "ci95": [lo,
#: hi]}``, where a closed form gives the number itself.
JSON_KEYS = {
    "gpus": ("number", "GPUs of one replica"),
    "fleet_gpus": ("number|null", "GPUs of a whole fleet, strong and weak replicas"),
    "strong_fleet_gpus": ("number|null", "GPUs of a fleet's strong replicas"),
    "weak_fleet_gpus": ("number|null", "GPUs of a fleet's weak replicas"),
    "cost_per_1k_tasks_usd": ("number|null", "USD per 1,000 tasks: the fleet's hourly price over the tasks it "
                                             "completes, plus what an API bills"),
    "api_cost_per_1k_tasks_usd": ("number", "USD per 1,000 tasks billed by an API"),
    "usd_per_gpu_hour": ("number|null", "USD per GPU-hour of one device"),
    "strong_usd_per_gpu_hour": ("number|null", "USD per GPU-hour of the strong replicas' device"),
    "weak_usd_per_gpu_hour": ("number|null", "USD per GPU-hour of the weak replicas' device"),
    "latency_p95_s": ("number|null", "95th percentile of task latency, s"),
    "task_rate_per_s": ("number", "tasks arriving per second"),
    "specagent_pays": ("object|null", "the one verdict (costsim.payoff): does SpecAgent pay in time here"),
    "backend": ("string", "where a protocol's strong model runs: 'replicas' (costsim's) or 'api' (a priced API)"),
    "out": ("string", "the file (or, for figures, the folder) a command wrote"),
    "hbm_bandwidth_gb_per_s": ("number", "a device's memory bandwidth, GB/s (10^9 bytes/s)"),
    "interconnect_bandwidth_gb_per_s": ("number", "a device's link within a node, GB/s both directions"),
    "internode_bandwidth_gb_per_s": ("number", "a device's link between nodes (its NIC), GB/s both directions"),
    "feasible": ("bool", "whether any number of replicas reaches the target (capacity; plan's count is feasible_configurations)"),
    "feasible_configurations": ("number", "configurations the screen found within the target, a count"),
    "configurations": ("number", "configurations screened, a count"),
    "context_tokens": ("number", "context of a sequence, tokens"),
    "arrival_rate": ("number|null", "tasks arriving per second (open loop); null: closed loop"),
    "strong_prefix_cache_hit_rate": ("number|null", "share of the context tokens the strong replicas looked up in "
                                                    "their prefix caches at admission that were resident (hits / "
                                                    "queried, in tokens); 1 where none was queried or the cache is "
                                                    "always hot (prefix_cache 'hot')"),
    "weak_prefix_cache_hit_rate": ("number|null", "the same for the weak replicas: hits / queried context tokens"),
    "strong_prefix_cache_call_hit_rate": ("number|null", "share of the strong calls with a context whose whole "
                                                         "context was resident at admission; 1 where none was queried"),
    "weak_prefix_cache_call_hit_rate": ("number|null", "the same for the weak calls"),
    "strong_prefill_recomputed_tokens": ("number", "tokens of context the strong model prefilled again because they "
                                                   "were not resident (evicted, or no prefix cache), per task"),
    "weak_prefill_recomputed_tokens": ("number", "the same for the weak model, tokens per task"),
    "fleet": ("string", "a plan's fleet in words: the replicas of each pool, the GPUs and device of each replica "
                        "('2× strong (8× h200, EP) + 4× weak (1× h200)'; costsim.planner.space.Config.fleet)"),
    "ratios_measure": ("string", "what predict's R and L are ratios of: 'weight passes' (the paper's pass counting: R "
                                 "in strong weight passes, L in wall time with time ∝ passes) or 'time' (a calibration "
                                 "measured v/d or rho in time: R in strong replica time, L in wall time)"),
}
#: The unit of each number :data:`JSON_KEYS` declares, short (the column head of a table), where its
#: meaning is not itself that; a ratio's, a probability's or a model field's unit is its meaning.
JSON_UNITS = {
    "gpus": "GPUs", "fleet_gpus": "GPUs", "strong_fleet_gpus": "GPUs", "weak_fleet_gpus": "GPUs",
    "cost_per_1k_tasks_usd": "USD per 1,000 tasks", "api_cost_per_1k_tasks_usd": "USD per 1,000 tasks (billed by an API)",
    "usd_per_gpu_hour": "USD per GPU-hour", "strong_usd_per_gpu_hour": "USD per GPU-hour",
    "weak_usd_per_gpu_hour": "USD per GPU-hour", "latency_p95_s": "seconds", "task_rate_per_s": "tasks per second",
    "hbm_bandwidth_gb_per_s": "GB/s", "interconnect_bandwidth_gb_per_s": "GB/s", "internode_bandwidth_gb_per_s": "GB/s",
    "feasible_configurations": "configurations", "configurations": "configurations", "context_tokens": "tokens",
    "arrival_rate": "tasks per second (null: a closed loop)",
    "strong_prefix_cache_hit_rate": "a share of context tokens, in [0, 1]",
    "weak_prefix_cache_hit_rate": "a share of context tokens, in [0, 1]",
    "strong_prefix_cache_call_hit_rate": "a share of calls, in [0, 1]", "weak_prefix_cache_call_hit_rate": "a share of calls, in [0, 1]",
    "strong_prefill_recomputed_tokens": "tokens per task", "weak_prefill_recomputed_tokens": "tokens per task",
    "tokens": "tokens", "step_scales": "tokens decoded per recorded token",
}
_DIMENSIONLESS = {
    # the paper's ratios and costsim's, each against Strong-only
    "R": "strong weight traffic of SpecAgent over Strong-only's (the paper's R)",
    "L": "wall time of SpecAgent over Strong-only's (the paper's L)",
    "R_time": "R in strong replica time", "L_time": "L in time at the deployments' batches",
    "R_passes": "R by the paper's pass counting", "L_passes": "L by the paper's pass counting",
    "R_limit_p0": "R as p_u -> 0", "R_limit_p1": "R as p_u -> 1",
    "kappa": "a weak step's time over a strong step's", "break_even_kappa": "the kappa at which L = 1",
    "v_over_d": "a verdict's cost in strong steps", "v_over_d_passes": "v/d by pass counting",
    "v_over_d_time_at_K": "v/d in time for a chunk of K steps",
    "rho": "a fused repair's cost in strong steps", "rho_time": "rho in time",
    "rho_per_rejection": "repair per rejection in strong steps (fused and correction turns mixed)",
    "correction_rho": "a correction turn's decoding in strong steps",
    "verify_prefill_weight_passes_at_K": "a chunk's verification prefill in weight passes",
    "best_K_L": "L at the best K",
    "p": "the per-step acceptance rate p_u, a probability",
    "strong_step_scale": "tokens decoded per recorded token of a strong step",
    "weak_step_scale": "tokens decoded per recorded token of a weak step",
    "memory_utilization": "share of GPU memory the engine may take (vLLM's gpu_memory_utilization)",
    "strong_utilisation": "share of the run the strong replicas were busy",
    "burstiness": "the gamma shape of arrivals (vLLM's --burstiness; 1 is Poisson)",
    # per-step and per-review averages, steps over steps
    "commits_per_review": "committed steps per review", "reviewed_commits_per_review": "reviewed steps committed per review",
    "reviews_per_commit": "reviews per committed step", "weak_steps_per_commit": "weak drafts per committed step",
    "steps_per_review": "committed steps per review", "calls_per_review": "model calls per review",
    "mean_chunk_steps": "steps in a drafted chunk, mean", "mean_length": "steps in a chunk, mean",
    "sessions_per_strong_replica": "sessions each strong replica serves, mean",
    "sessions_per_weak_replica": "sessions each weak replica serves, mean",
}
_COUNTS = {
    # a whole number of the thing it names
    "K": "chunk size, steps", "best_K": "chunk size, steps", "best_K_searched": "largest chunk size searched, steps",
    "tasks": "tasks", "tasks_simulated": "tasks", "sessions": "agent sessions", "sessions_in_flight": "sessions",
    "seed": "a random seed", "cells": "cells", "probes": "simulations", "grown": "times the fleet was grown",
    "gpus_per_node": "GPUs", "gpus_per_replica": "GPUs", "n_devices": "GPUs",
    "max_seqs": "sequences", "max_num_seqs": "sequences", "max_concurrent_requests": "requests",
    "batch": "sequences in a decode batch", "strong_batch": "sequences (mean running batch)",
    "weak_batch": "sequences (mean running batch)", "balance_batch_paper": "sequences (peak FLOPs over bandwidth)",
    "calls": "model calls", "chunks": "chunks", "reviews": "reviews", "steps": "steps", "skipped_lines": "lines",
    "scripted_greetings_dropped": "steps", "schema_version": "a version number",
    "read": "steps of this kind", "write": "steps of this kind", "respond": "steps of this kind",
    "final": "steps of this kind", "end": "tasks ending so", "response": "tasks ending so",
    "completed": "requests (vLLM's key)", "failed": "requests (vLLM's key)", "num_prompts": "requests (vLLM's key)",
}
# A model's own config fields, named as Hugging Face names them: sizes and counts of the architecture.
_MODEL_FIELDS = ("head_dim", "hidden_size", "kv_layers", "kv_lora_rank", "linear_layers", "linear_state_elements",
                 "moe_layers", "num_attention_heads", "num_experts", "num_kv_heads", "num_layers", "num_shared_experts",
                 "qk_rope_head_dim", "sliding_layers", "sliding_window", "vocab_size")
# vLLM's result keys, kept as `vllm bench serve` writes them.
_VLLM = {"duration": "s", "request_throughput": "requests/s", "output_throughput": "output tokens/s",
         "total_token_throughput": "tokens/s"}
# Keys whose unit is in the words before the last one.
_OTHER = {"decode_tokens_per_s_per_sequence": "tokens/s of one sequence", "decode_tokens_per_s_total": "tokens/s of the batch",
          "fixed_latency_s_per_iteration": "s per engine iteration", "flops_per_decode_step": "FLOP per decode iteration",
          "hbm_bytes_per_decode_step": "bytes per decode iteration", "gpu_hours_per_1k_tasks": "GPU-hours per 1,000 tasks",
          "task_rate_per_cell": "tasks/s one cell sustains", "kv_capacity_context_tokens": "tokens",
          "mean_context_first": "tokens", "mean_context_last": "tokens", "context_first": "tokens",
          "context_last": "tokens", "flops": "FLOP", "elapsed_s": "s", "verify_prefill_s_at_K": "s",
          "verify_prefill_tokens_at_K": "tokens", "strong_mean_batch": "sequences (mean running batch)",
          "tool_s_saved": "s of tool latency hidden by speculation", "wrong_writes_per_1000_tasks": "writes per 1,000 tasks"}
JSON_KEYS["tokens"] = ("object", "tokens, by what they are (prompt, completion, observation)")
JSON_KEYS["step_scales"] = ("object", "tokens decoded per recorded token, by model (strong, weak)")
# null where it does not apply (no weak replicas, no review, a dense model)
JSON_KEYS.update({k: ("number|null", v) for k, v in _DIMENSIONLESS.items()})
JSON_KEYS.update({k: ("number|null", f"a count: {v}") for k, v in _COUNTS.items()})
JSON_KEYS.update({k: ("number|null", "a model config field (Hugging Face's name)") for k in _MODEL_FIELDS})
JSON_KEYS.update({k: ("number", f"{v} (vLLM's key)") for k, v in _VLLM.items()})
JSON_KEYS.update({k: ("number", v) for k, v in _OTHER.items() if k not in JSON_KEYS})
JSON_UNITS.update(_DIMENSIONLESS)
JSON_UNITS.update(_COUNTS)
JSON_UNITS.update({k: JSON_KEYS[k][1] for k in _MODEL_FIELDS})
JSON_UNITS.update(_VLLM)
JSON_UNITS.update({k: v for k, v in _OTHER.items() if k not in JSON_UNITS})
#: A numeric key not in :data:`JSON_KEYS` names its unit by its ending (key ending -> unit); the
#: keys of an object whose key names a unit (mean, ci95, strong, weak, a GPU count) take its unit.
JSON_UNIT_ENDINGS = {
    "_s": "seconds", "_ms": "milliseconds", "_us": "microseconds", "_days": "days", "_usd": "US dollars",
    "_tokens": "tokens", "_bytes": "bytes", "_gb": "GB (10^9 bytes)", "_gib": "GiB", "_mib": "MiB",
    "_per_s": "per second", "_per_task": "per task", "_per_step": "per committed step", "_per_token": "per token",
    "_per_gpu_hour": "per GPU-hour", "_gb_per_s": "GB/s", "_tflops": "10^12 FLOP/s", "_flops": "FLOP",
    "_b": "billions (of parameters)", "_ratio": "a ratio to the baseline protocol", "_share": "a share in [0, 1]",
    "_fraction": "a fraction in [0, 1]", "_rate": "a probability per event (a rate per second ends _per_s)",
    "_calls": "model calls", "_steps": "steps", "_replicas": "replicas", "_gpus": "GPUs", "_sequences": "sequences",
}
#: Keys inside an object that take the unit of the object's key.
JSON_INHERIT = ("mean", "max", "min", "median", "ci95", "strong", "weak", "lo", "hi", "p50", "p90", "p95", "p99",
                "prompt", "completion", "observation")
#: Endings that name no quantity: a ``_per_`` ending after one of them does not compose with it
#: ('max_task_rate_per_s' is per second, not "a probability per second").
_NOT_QUANTITIES = ("_ratio", "_share", "_fraction", "_rate")


def unit_of(path) -> str:
    """The unit (for a ratio, a count or a probability: its meaning) of the value at ``path`` in a
    command's JSON: a tuple of keys from the top (list indices as digits), or one key, or dotted
    keys ('cell.pool_rates_per_s.strong'); '' where it names none (text, a flag, an object).

    The one rule, in order: a key of :data:`JSON_INHERIT` or a digit (a list index, a GPU count)
    takes the unit of the key above it; a key :data:`JSON_KEYS` declares has its
    :data:`JSON_UNITS` entry; any other key names its unit by its ending
    (:data:`JSON_UNIT_ENDINGS`, the longest that matches), and a ``_per_`` ending composes with
    the quantity before it: 'wall_s_per_step' is seconds per committed step,
    'strong_calls_per_task' model calls per task."""
    if isinstance(path, str):
        path = tuple(path.split("."))
    path = tuple(str(k) for k in path)
    if not path:
        return ""
    key = path[-1]
    if key in JSON_INHERIT or key.isdigit():
        return unit_of(path[:-1]) if len(path) > 1 else ""
    if key in JSON_KEYS:
        return JSON_UNITS.get(key, "")
    return _ending_unit(key)


def _ending_unit(key: str) -> str:
    """The unit ``key``'s ending names (:func:`unit_of`), a ``_per_`` ending composed with the
    quantity before it; '' for none."""
    end = max((e for e in JSON_UNIT_ENDINGS if key.endswith(e) and len(key) > len(e)), key=len, default=None)
    if end is None:
        return ""
    words = JSON_UNIT_ENDINGS[end]
    if end.startswith("_per_"):
        rest = key[:-len(end)]
        if not rest.endswith(_NOT_QUANTITIES):
            base = _ending_unit(rest)
            if base:
                return f"{base} {words}"
    return words


#: Spellings retired for one of :data:`JSON_KEYS` (old -> new): no command prints them.
RETIRED_JSON_KEYS = {"cost_per_1k_tasks": "cost_per_1k_tasks_usd", "api_cost_per_1k_tasks": "api_cost_per_1k_tasks_usd",
                     "prices_per_gpu_hour_usd": "strong_usd_per_gpu_hour, weak_usd_per_gpu_hour", "output": "out",
                     "hbm_bandwidth_gbps": "hbm_bandwidth_gb_per_s", "interconnect_bandwidth_gbps": "interconnect_bandwidth_gb_per_s",
                     "internode_bandwidth_gbps": "internode_bandwidth_gb_per_s", "price_per_hour_usd": "usd_per_gpu_hour"}

DEPLOY_KEYS = ("strong", "weak", "strong_device", "weak_device", "strong_gpus", "strong_dtype", "weak_dtype",
               "engine", "weak_engine", "expert_parallel", "gpu_memory_utilization")
LATENCY_KEYS = ("tool_latency", "user_latency")

#: The scenario options as the commands name them (``--p-accept`` is ``p_accept``), where the
#: scenario's setting has another name.
OPTION_SETTINGS = {"p_accept": "p", "network_rtt": "network_rtt_s", "spec_hit": "spec_hit_rate",
                   "self_spec_hit": "self_spec_hit_rate", "api_ttft": "api_ttft_s", "api_tps": "api_output_tps",
                   "option": "options"}

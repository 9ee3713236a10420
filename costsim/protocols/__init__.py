"""The protocols, by the names used in output keys and ``--protocols``.

A protocol is a SimPy process function ``run(task_run, task, **options)``: it decides which
model calls and tool calls happen, in which order; the replicas decide what they cost.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from . import agentcollab, self_spec, specagent, speculative_actions, strong_only, weak_only
from .verifier import with_verifier_errors

_specagent = with_verifier_errors(specagent.run)
_VERIFIER = ("false_accepts", "false_rejects", "irreversible_errors")  # with_verifier_errors' counters
_API = ("api_cost_usd", "remote_calls", "remote_input_tokens", "remote_cached_tokens", "remote_output_tokens")
_SPEC = ("spec_calls", "spec_hits", "spec_wasted_tools", "tool_s_saved")


@dataclass(frozen=True)
class Protocol:
    """One protocol, and everything the rest of costsim asks of it: the one home of "is it
    served by an API", "which models does it call", "is it SpecAgent", "does the twin cost it".

    ``run``: the simulator's process function ``run(tr, task, **options)``. A protocol whose
    ``run`` is ``schedule.process(schedule)`` is a pure schedule (:attr:`schedule`), which the
    simulator, the exact twin, plan's screen and live validation can all drive; one that is not
    is *timed*: its decisions depend on when things finish (a guess out before the actor
    decided), so it is a SimPy process and only the simulator runs it."""

    run: Callable
    description: str                  # one line; docs/protocols.md has its source and assumptions
    fixed: Mapping = field(default_factory=dict)   # options it fixes (an ablation's)
    models: tuple = ("strong", "weak")  # the models it calls
    on_api: bool = False              # the strong model behind a priced API, the weak one on an edge device (sim.hosted)
    baseline: str = "strong-only"     # the protocol its paired ratios (R, L, ...) are taken against
    api_baseline: str | None = None   # its API-only baseline, added to its runs (metrics.API_RATIOS against it)
    drafts: bool = False              # SpecAgent-like: the weak model drafts, the strong one reviews (K; the payoff verdict)
    twin: bool = False                # the exact twin (costsim.twin) costs it: its only random command is Review
    counters: tuple = ()              # the metrics.EXTRA_COUNTERS its rows can make non-zero

    @property
    def schedule(self):
        """Its pure schedule, or None for a timed protocol."""
        return getattr(self.run, "__schedule__", None)

    @property
    def timed(self) -> bool:
        return self.schedule is None


#: name -> its record. SpecAgent ablations are ``specagent-<variant>``.
PROTOCOLS = {
    "strong-only": Protocol(strong_only.run, "the strong model authors every step (the baseline of the ratios)",
                            models=("strong",), twin=True),
    "weak-only": Protocol(weak_only.run, "the weak model authors every step (the quality floor; the cost floor)",
                          models=("weak",), twin=True),
    "specagent": Protocol(_specagent, "the weak model drafts chunks, the strong model reviews them (the paper's protocol)",
                          drafts=True, twin=True, counters=_VERIFIER),
    "specagent-hold-responses": Protocol(_specagent, "SpecAgent holding every message to the user for review (the "
                                         "paper's ablation)", {"chunking": "hold-messages"},
                                         drafts=True, twin=True, counters=_VERIFIER),
    "specagent-review-all": Protocol(_specagent, "SpecAgent reviewing every chunk (the other ablation)", {"review": "all"},
                                     drafts=True, twin=True, counters=_VERIFIER),
    "specagent-separate-repair": Protocol(_specagent, "SpecAgent repairing a rejection in a correction turn of its own",
                                          {"repair": "separate"}, drafts=True, twin=True, counters=_VERIFIER),
    "agentcollab": Protocol(agentcollab.run, "the weak model acts; on no progress the strong model takes over "
                                             "(AgentCollab, arXiv 2603.26034)",
                            counters=("escalations", "wasted_steps", "reflection_calls", "irreversible_errors")),
    "speculative-actions": Protocol(speculative_actions.run, "the strong model acts; a weak guesser lets it run ahead "
                                                             "(arXiv 2510.04371, its public code)",
                                    counters=(*_SPEC, "spec_wasted_strong_calls", "spec_wait_s", "irreversible_errors")),
    "self-spec": Protocol(self_spec.run, "Strong-only, the strong agent predicting its own read-only tool calls",
                          models=("strong",), counters=_SPEC),
    "specagent-self-spec": Protocol(with_verifier_errors(self_spec.run_specagent),
                                    "SpecAgent, the weak drafter predicting the read-only tool calls it drafts",
                                    drafts=True, counters=(*_SPEC, *_VERIFIER)),
    "edge-cloud": Protocol(_specagent, "SpecAgent with the weak model on a local device and the strong model behind a "
                                       "priced API", on_api=True, api_baseline="cloud-strong-only", drafts=True,
                           counters=(*_API, *_VERIFIER)),
    "cloud-strong-only": Protocol(strong_only.run, "Strong-only behind the priced API (edge-cloud's baseline)",
                                  models=("strong",), on_api=True, api_baseline="cloud-strong-only",
                                  counters=_API),
}


def protocol(name: str) -> Protocol:
    """The record of protocol ``name`` (ValueError, one line, naming the known ones)."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None


def on_api(name: str) -> bool:
    """Whether protocol ``name`` runs its strong model behind a priced API (a name not
    registered, e.g. a test's, runs on replicas)."""
    p = PROTOCOLS.get(name)
    return p is not None and p.on_api


def payoff_judges(name: str) -> bool:
    """Whether the one "does SpecAgent pay" verdict (:mod:`costsim.payoff`) judges protocol
    ``name``: SpecAgent-like, with both models on replicas (an API's strong model is billed, not
    timed at a batch)."""
    return drafts(name) and not on_api(name)


def api_protocols() -> tuple:
    """The protocols on the API backend, in the registry's order."""
    return tuple(n for n, p in PROTOCOLS.items() if p.on_api)


def drafts(name: str) -> bool:
    """Whether protocol ``name`` is SpecAgent-like: weak drafts, strong reviews."""
    p = PROTOCOLS.get(name)
    return p is not None and p.drafts


def option_defaults(fn) -> dict:
    """The options a process function takes: name -> (default or None, annotation text)."""
    out: dict = {}
    while fn is not None:
        params = inspect.signature(fn).parameters.values()
        for p in params:
            if p.name.startswith("_"):  # internal, not a user option
                continue
            if p.kind is p.KEYWORD_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and p.name not in ("tr", "task")):
                out.setdefault(p.name, (None if p.default is p.empty else p.default,
                                        "" if p.annotation is p.empty else str(p.annotation)))
        fn = getattr(fn, "__wrapped_run__", None) if any(p.kind is p.VAR_KEYWORD for p in params) else None
    return out


def option_names(fn) -> set[str]:
    """The options a process function takes (through verifier and speculation wrappers)."""
    return set(option_defaults(fn))


def get(name: str, **options):
    """The process function of protocol ``name`` with those ``options`` applied that it takes
    (others are ignored: a scenario passes every protocol the same options)."""
    p = protocol(name)
    fn, fixed = p.run, p.fixed
    takes = option_names(fn)
    kw = {k: v for k, v in options.items() if k in takes}
    kw.update(fixed)
    return partial(fn, **kw) if kw else fn


def describe(name: str) -> dict:
    """What `costsim protocols` shows of protocol ``name``: its description, the options it
    fixes (an ablation's), and each option it takes, in its declaration's order
    (:data:`costsim.config.OPTIONS`), with default, allowed words and help; and for a protocol
    on the API backend, the ``deployment`` settings it reads (:data:`costsim.config.EDGE_CLOUD_SETTINGS`)."""
    from ..config import EDGE_CLOUD_SETTINGS, OPTIONS, edge_cloud_setting

    p = protocol(name)
    fixed = p.fixed
    takes = option_names(p.run)
    out = {"description": p.description,
           "fixed": dict(fixed),
           "timed": p.timed,
           "models": list(p.models),
           "backend": "api" if p.on_api else "replicas",
           "baseline": p.baseline,
           "specagent_like": p.drafts,
           "exact_twin": p.twin,
           "counters": list(p.counters),
           "options": {k: {"default": f.default, "choices": list(f.metadata["choices"]), "help": f.metadata["help"],
                           "declared_in": cls.__name__}
                       for k, (cls, f) in OPTIONS.items() if k in takes and k not in fixed}}
    if p.on_api:  # the strong model behind an API; the weak one (edge-cloud's) on a local device
        out["deployment"] = {}
        for k in EDGE_CLOUD_SETTINGS:
            if k != "edge_device" or "weak" in p.models:
                default, what, source = edge_cloud_setting(k)
                out["deployment"][k] = {"default": default, "help": f"{what} ({source})"}
    return out


def schedule_of(name: str):
    """``(schedule, fixed options)`` of protocol ``name``, or None for a timed protocol."""
    p = protocol(name)
    return (p.schedule, p.fixed) if p.schedule else None

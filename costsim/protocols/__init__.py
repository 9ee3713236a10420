"""The protocols, by the names used in output keys and ``--protocols``.

A protocol is a SimPy process function ``run(task_run, task, **options)``: it decides which
model calls and tool calls happen, in which order; the replicas decide what they cost.
"""

from __future__ import annotations

import inspect
from functools import partial

from . import agentcollab, self_spec, specagent, speculative_actions, strong_only, weak_only
from .verifier import with_verifier_errors

_specagent = with_verifier_errors(specagent.run)

#: name -> (process function, fixed options, what it is in a line; docs/protocols.md has each
#: one's source and assumptions). SpecAgent ablations are ``specagent-<variant>``.
PROTOCOLS = {
    "strong-only": (strong_only.run, {}, "the strong model authors every step (the baseline of the ratios)"),
    "weak-only": (weak_only.run, {}, "the weak model authors every step (the quality floor; the cost floor)"),
    "specagent": (_specagent, {}, "the weak model drafts chunks, the strong model reviews them (the paper's protocol)"),
    "specagent-hold-responses": (_specagent, {"chunking": "hold-messages"},
                                 "SpecAgent holding every message to the user for review (the paper's ablation)"),
    "specagent-review-all": (_specagent, {"review": "all"}, "SpecAgent reviewing every chunk (the other ablation)"),
    "specagent-separate-repair": (_specagent, {"repair": "separate"},
                                  "SpecAgent repairing a rejection in a correction turn of its own"),
    "agentcollab": (agentcollab.run, {}, "the weak model acts; on no progress the strong model takes over "
                                         "(AgentCollab, arXiv 2603.26034)"),
    "speculative-actions": (speculative_actions.run, {}, "the strong model acts; a weak guesser lets it run ahead "
                                                         "(arXiv 2510.04371, its public code)"),
    "self-spec": (self_spec.run, {}, "Strong-only, the strong agent predicting its own read-only tool calls"),
    "specagent-self-spec": (with_verifier_errors(self_spec.run_specagent), {},
                            "SpecAgent, the weak drafter predicting the read-only tool calls it drafts"),
    # SpecAgent and Strong-only on the API backend (costsim.sim.hosted: strong behind a priced API).
    "edge-cloud": (_specagent, {}, "SpecAgent with the weak model on a local device and the strong model behind "
                                   "a priced API"),
    "cloud-strong-only": (strong_only.run, {}, "Strong-only behind the priced API (edge-cloud's baseline)"),
}


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
    try:
        fn, fixed, _ = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None
    takes = option_names(fn)
    kw = {k: v for k, v in options.items() if k in takes}
    kw.update(fixed)
    return partial(fn, **kw) if kw else fn


def describe(name: str) -> dict:
    """What `costsim protocols` shows of protocol ``name``: its description, the options it
    fixes (an ablation's), and each option it takes, in its declaration's order
    (:data:`costsim.config.OPTIONS`), with default, allowed words and help; and for a protocol
    on the API backend, the ``deployment`` settings it reads (:data:`costsim.config.EDGE_CLOUD_SETTINGS`)."""
    from ..config import API_BILLED, EDGE_CLOUD_SETTINGS, ON_API, OPTIONS, edge_cloud_setting

    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}")
    fn, fixed, description = PROTOCOLS[name]
    takes = option_names(fn)
    out = {"description": description,
           "fixed": dict(fixed),
           "options": {k: {"default": f.default, "choices": list(f.metadata["choices"]), "help": f.metadata["help"],
                           "declared_in": cls.__name__}
                       for k, (cls, f) in OPTIONS.items() if k in takes and k not in fixed}}
    if name in ON_API:  # the strong model behind an API; the weak one (edge-cloud's) on a local device
        out["deployment"] = {}
        for k in EDGE_CLOUD_SETTINGS:
            if k != "edge_device" or name in API_BILLED:
                default, what, source = edge_cloud_setting(k)
                out["deployment"][k] = {"default": default, "help": f"{what} ({source})"}
    return out


def schedule_of(name: str):
    """``(schedule, fixed options)`` of protocol ``name``, or None for a timed protocol."""
    fn, fixed, _ = PROTOCOLS[name]
    sched = getattr(fn, "__schedule__", None)
    return (sched, fixed) if sched else None

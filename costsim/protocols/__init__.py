"""The protocols, by the names used in output keys and ``--protocols``.

A protocol is a SimPy process function ``run(task_run, task, **options)``: it decides which
model calls and tool calls happen, in which order; the replicas decide what they cost.
"""

from __future__ import annotations

from functools import partial

from . import specagent, strong_only, weak_only

#: name -> (process function, fixed options). SpecAgent ablations are ``specagent-<variant>``.
PROTOCOLS = {
    "strong-only": (strong_only.run, {}),
    "weak-only": (weak_only.run, {}),
    "specagent": (specagent.run, {}),
    "specagent-hold-responses": (specagent.run, {"hold": "writes+responses"}),
    "specagent-review-all": (specagent.run, {"review": "all"}),
    "specagent-separate-repair": (specagent.run, {"repair": "separate"}),
}
DEFAULT = ("strong-only", "weak-only", "specagent")


def get(name: str, **options):
    """The process function of protocol ``name`` with ``options`` applied where it takes them."""
    try:
        fn, fixed = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None
    if fn is specagent.run:
        return partial(fn, **{**options, **fixed})
    return fn

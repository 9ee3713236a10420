"""A protocol as a pure schedule: a generator of the commands below, and nothing else.

A schedule decides which model calls and tool calls happen, in which order, and what happens
after each review; it never touches SimPy, HTTP or a random number generator. Drivers give the
commands their costs and answers:

- :meth:`costsim.sim.agent.TaskRun.drive`: the simulator (SimPy replicas, sampled verdicts);
- :mod:`costsim.twin`: the exact twin (expected costs over every verdict branch);
- :func:`costsim.live.validation.run_validation`: real endpoints.

A driver answers :class:`Call` with the finished request (or None), :class:`Review` with the
accepted prefix length, :class:`Chance` and :class:`Stall` with a bool and :class:`Redraw` with
new steps; every other command with None. A schedule that yields :class:`Boundary` at each point where its
future depends only on a hashable state, and that can be restarted from that state
(``start=state``), can be merged over branches: that is what makes the twin exact and fast.
"""

from __future__ import annotations

from typing import NamedTuple



class Call(NamedTuple):
    """One model call: prefill ``prefill`` new tokens on top of ``context`` cached ones, decode
    ``decode`` tokens. ``model``: "strong" or "weak"."""

    model: str
    prefill: int
    context: int
    decode: int


class Execute(NamedTuple):
    """Run a step's side effect in the world: its tool call, or its message to the user."""

    step: object


class Review(NamedTuple):
    """The strong model judges drafted ``steps``: answered with the accepted prefix, 0..len."""

    steps: tuple


class Stall(NamedTuple):
    """Whether ``step`` makes no progress (AgentCollab): with probability ``p``, or, with
    ``p=None``, when the task's acceptance process rejects it. Answered with a bool."""

    step: object
    p: float | None = None


class Redraw(NamedTuple):
    """A generative task's steps ``start .. start+count`` drawn again after a repair (the
    drafted path after a rejection changes). Answered with the new steps."""

    start: int
    count: int


class Chance(NamedTuple):
    """Whether an event of probability ``p`` happens (a rejection's fix that takes a correction
    turn): answered with a bool. The twin weighs both answers."""

    p: float


class Count(NamedTuple):
    """Add ``n`` to the task's counter ``name`` (reviews, rejections, committed_steps, ...)."""

    name: str
    n: float = 1


class Boundary(NamedTuple):
    """The schedule is at committed ``position`` in ``state``; it could restart from it."""

    position: int
    state: tuple


def step_decode(step, scale: float) -> int:
    """Tokens a model decodes to author ``step``: ``scale`` per recorded output token (a
    thinking model decodes more than the step it leaves in the history: scale > 1). The
    history keeps the recorded tokens."""
    return step.output_tokens if scale == 1.0 else int(round(scale * step.output_tokens))


def process(schedule):
    """The simulator's process function ``run(tr, task, **options)`` of ``schedule``; it takes
    the schedule's options (its signature, less ``start``) and keeps it as ``__schedule__``."""
    import inspect

    def run(tr, task, **options):
        return tr.drive(schedule(task, **options))

    sig = inspect.signature(schedule)
    params = [inspect.Parameter("tr", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [p for p in sig.parameters.values() if p.name != "start"]
    run.__signature__ = sig.replace(parameters=params)
    run.__name__, run.__doc__, run.__schedule__ = schedule.__name__, schedule.__doc__, schedule
    return run


class Wrapper:
    """A task-run handle around another (:class:`costsim.sim.agent.TaskRun` or a wrapper):
    everything is the wrapped one's except what a subclass overrides; a schedule driven
    through it (``wrapper.drive``) makes its calls through the subclass's ``call``."""

    def __init__(self, tr):
        self._tr = tr

    def __getattr__(self, name):
        return getattr(self._tr, name)

    def drive(self, schedule, via=None):
        return self._tr.drive(schedule, via=via or self)

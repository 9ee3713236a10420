"""Acceptance processes: how many steps of a drafted chunk the strong reviewer accepts.

Each process is created per task with the task's own random stream and answers
``accepted(steps)`` with the length j of the accepted prefix (j = len(steps) when all pass).
"""

from __future__ import annotations

import numpy as np


class Bernoulli:
    """Each step passes independently with probability p (the paper's assumption)."""

    def __init__(self, rng: np.random.Generator, p: float):
        self.rng, self.p = rng, float(p)

    def accepted(self, steps) -> int:
        n = len(steps)
        if self.p >= 1.0:
            return n
        if self.p <= 0.0:
            return 0
        # Passes before the first rejection: geometric with success probability 1 - p.
        return min(int(self.rng.geometric(1.0 - self.p)) - 1, n)


class BetaBernoulli(Bernoulli):
    """Per-task p_u drawn from Beta(a, b), then Bernoulli within the task."""

    def __init__(self, rng: np.random.Generator, a: float, b: float):
        super().__init__(rng, rng.beta(a, b))


class Markov:
    """Two-state chain (good/bad) over drafted steps: correlated rejections.

    In state g a step passes with ``p_good``, in state b with ``p_bad``; after each step the
    state flips with ``switch_gb`` (good to bad) or ``switch_bg``. The stationary acceptance is
    (p_good·switch_bg + p_bad·switch_gb) / (switch_gb + switch_bg).
    """

    def __init__(self, rng, p_good: float, p_bad: float, switch_gb: float, switch_bg: float):
        self.rng, self.p = rng, (float(p_good), float(p_bad))
        self.switch = (float(switch_gb), float(switch_bg))
        pi_bad = switch_gb / (switch_gb + switch_bg) if switch_gb + switch_bg > 0 else 0.0
        self.state = int(rng.random() < pi_bad)

    @property
    def stationary_p(self) -> float:
        return stationary_p(*self.p, *self.switch)

    def accepted(self, steps) -> int:
        for j in range(len(steps)):
            ok = self.rng.random() < self.p[self.state]
            if self.rng.random() < self.switch[self.state]:
                self.state = 1 - self.state
            if not ok:
                return j
        return len(steps)


def stationary_p(p_good: float, p_bad: float, switch_gb: float, switch_bg: float) -> float:
    """The long-run share of a :class:`Markov` chain's steps that pass (a chain that never
    switches stays in the good state it starts in)."""
    gb, bg = switch_gb, switch_bg
    return (p_good * bg + p_bad * gb) / (gb + bg) if gb + bg > 0 else p_good


class Recorded:
    """Verdicts recorded in the trace; steps without one pass with probability ``fallback_p``."""

    def __init__(self, rng, fallback_p: float = 1.0):
        self.fallback = Bernoulli(rng, fallback_p)

    def accepted(self, steps) -> int:
        for j, s in enumerate(steps):
            v = s.verdict
            if v is None:
                v = self.fallback.accepted((s,)) == 1
            if not v:
                return j
        return len(steps)


def p_dist_parts(spec: str | None) -> tuple[str, list[float]]:
    """``--p-dist``'s kind and numbers (``("", [])`` for none given): 'beta:4,1' is
    ``("beta", [4.0, 1.0])``. ValueError where the numbers are not numbers."""
    kind, _, args = (spec or "").partition(":")
    try:
        return kind, [float(x) for x in args.split(",")] if args else []
    except ValueError:
        raise ValueError(f"--p-dist {spec!r}: parameters must be numbers") from None


def beta_params(spec: str) -> tuple[float, float]:
    """``(a, b)`` of ``--p-dist beta:a,b``; ValueError (one line) for any other."""
    kind, ab = p_dist_parts(spec)
    if kind != "beta" or len(ab) != 2 or not all(v > 0 for v in ab):
        raise ValueError(f"--p-dist {spec!r}: expected beta:a,b with a, b > 0 here (costsim acceptance fits one)")
    return ab[0], ab[1]


def beta_mean(spec: str) -> float:
    """The mean p_u a/(a+b) of ``--p-dist beta:a,b`` (:func:`beta_params`)."""
    a, b = beta_params(spec)
    return a / (a + b)


def recorded_fallback(spec: str | None, p: float) -> float:
    """The p_u of steps without a recorded verdict under ``--p-dist recorded[:p]`` (else ``p``)."""
    kind, vals = p_dist_parts(spec)
    return vals[0] if kind == "recorded" and vals else p


def parse_p_dist(spec: str | None, p: float):
    """A factory ``rng -> process`` from ``--p-dist``: None (Bernoulli p), 'beta:a,b',
    'markov:p_good,p_bad,switch_gb,switch_bg', or 'recorded[:fallback_p]'."""
    if not spec:
        return lambda rng: Bernoulli(rng, p)
    kind, vals = p_dist_parts(spec)
    if kind == "beta" and len(vals) == 2 and all(0 < v < float("inf") for v in vals):
        return lambda rng: BetaBernoulli(rng, *vals)
    if kind == "markov" and len(vals) == 4 and all(0 <= v <= 1 for v in vals):
        return lambda rng: Markov(rng, *vals)
    if kind == "recorded" and len(vals) <= 1 and all(0 <= v <= 1 for v in vals):
        return lambda rng: Recorded(rng, recorded_fallback(spec, p))
    raise ValueError(f"--p-dist {spec!r}: expected beta:a,b (a, b > 0), "
                     "markov:p_good,p_bad,switch_gb,switch_bg (each in [0, 1]) or recorded[:p] (p in [0, 1])")

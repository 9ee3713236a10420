"""Maximum-likelihood per-step acceptance p_u from recorded verdicts, with 95% intervals.

Model (the paper's assumption 2): the steps of a reviewed chunk are accepted independently
with probability p. A verdict is prefix-shaped, so a reviewed chunk of n drafted steps tells

- no rejection: all n steps passed — likelihood p^n (the chunk is *censored*: nothing is known
  about when the first failure would have come);
- rejection at step j+1: j passes and one failure — likelihood p^j (1 - p); the n - j - 1 steps
  after it were never judged and contribute nothing (they are *not* failures).

Over chunks the likelihood is p^S (1 - p)^F with S passes and F failures, so the MLE is
S / (S + F) (the geometric and binomial likelihoods coincide up to a constant). Intervals:
Wilson score and profile likelihood (likelihood ratio, chi-square 1 df); both stay in [0, 1]
and are defined at S = 0 or F = 0, where the profile bounds have closed forms
exp(-z²/(2S)) and 1 - exp(-z²/(2F)).

In a trace, ``Step.verdict`` True means the weak draft at that position was accepted; False
means it was rejected (the step recorded is the committed repair), which ends the chunk; None
means not reviewed. Pooled fits assume one p for all tasks; per-task fits do not.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist


@dataclass(frozen=True)
class Fit:
    """MLE of p from S passes and F failures with two intervals at ``level``."""

    passes: int
    failures: int
    p_hat: float | None
    wilson: tuple[float, float] | None
    profile: tuple[float, float] | None
    level: float = 0.95

    def as_dict(self) -> dict:
        return asdict(self)


def _z(level: float) -> float:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def wilson(S: int, F: int, level: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion S / (S + F)."""
    n = S + F
    if n == 0:
        return None
    z = _z(level)
    p = S / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # exact ends at S = 0 or F = 0 (the formula gives them only up to rounding)
    return (0.0 if S == 0 else max(0.0, centre - half), 1.0 if F == 0 else min(1.0, centre + half))


def _loglik(p: float, S: int, F: int) -> float:
    out = 0.0
    if S:
        out += S * math.log(p) if p > 0 else -math.inf
    if F:
        out += F * math.log1p(-p) if p < 1 else -math.inf
    return out


def _bisect(f, lo: float, hi: float) -> float:
    """Root of an increasing-or-decreasing f on [lo, hi] with a sign change, to ~1e-12."""
    flo = f(lo)
    for _ in range(200):
        mid = (lo + hi) / 2
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
        if hi - lo < 1e-13:
            break
    return (lo + hi) / 2


def profile(S: int, F: int, level: float = 0.95) -> tuple[float, float] | None:
    """Likelihood-ratio interval {p : 2 (l(p_hat) - l(p)) <= z²}."""
    n = S + F
    if n == 0:
        return None
    z2 = _z(level) ** 2
    if F == 0:
        return (math.exp(-z2 / (2 * S)), 1.0)
    if S == 0:
        return (0.0, -math.expm1(-z2 / (2 * F)))
    p = S / n
    target = _loglik(p, S, F) - z2 / 2
    g = lambda q: _loglik(q, S, F) - target  # noqa: E731  >0 inside the interval
    return (_bisect(g, 0.0, p), _bisect(g, p, 1.0))


def fit_counts(S: int, F: int, level: float = 0.95) -> Fit:
    """The MLE S / (S + F) with Wilson and profile-likelihood intervals (None with no data)."""
    for name, v in (("passes", S), ("failures", F)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    n = S + F
    return Fit(S, F, S / n if n else None, wilson(S, F, level), profile(S, F, level), level)


def fit_chunks(outcomes, level: float = 0.95) -> Fit:
    """Fit from reviewed chunks given as ``(n_drafted, j_accepted)``; j == n means no rejection.
    A chunk rejected at step j+1 adds j passes and 1 failure; an unrejected one n passes."""
    S = F = 0
    for n, j in outcomes:
        if not (0 <= j <= n) or n < 1:
            raise ValueError(f"a chunk needs 0 <= j <= n and n >= 1, got n={n}, j={j}")
        S += j
        F += j < n
    return fit_counts(S, F, level)


def chunk_outcomes(steps) -> list[tuple[int, int]]:
    """Reviewed chunks of a trace as ``(judged steps, accepted prefix)``: runs of steps with a
    verdict; a False ends its chunk. The judged length of a rejected chunk is j + 1 (what came
    after the rejection was never judged)."""
    out, j = [], 0
    for s in steps:
        if s.verdict is None:
            if j:
                out.append((j, j))
            j = 0
        elif s.verdict:
            j += 1
        else:
            out.append((j + 1, j))
            j = 0
    if j:
        out.append((j, j))
    return out


def fit_tasks(tasks, level: float = 0.95) -> dict:
    """Per-task and pooled fits from the steps' recorded verdicts (tasks without any omitted)."""
    per_task, S, F = {}, 0, 0
    for t in tasks:
        oc = chunk_outcomes(t.steps)
        if not oc:
            continue
        f = fit_chunks(oc, level)
        per_task[t.task_id] = f.as_dict()
        S, F = S + f.passes, F + f.failures
    return {"pooled": fit_counts(S, F, level).as_dict(), "per_task": per_task}

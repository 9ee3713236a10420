"""The closed forms of the SpecAgent cost model — the single source of every formula.

Notation (the paper's; docs/cost-model.md writes each formula out):

- ``p``: per-step acceptance rate p_u of the task (steps of a chunk accepted independently);
- ``n``: steps in a reviewed chunk (the paper's K when every chunk is reviewed at full length);
- ``v_over_d``: strong weight passes per verification (one prefill pass + verdict tokens)
  divided by strong weight passes per authored step (≈ mean step length d̄ in tokens);
- ``rho``: strong repair cost per rejection, in units of d;
- ``kappa``: time of one weak step / time of one strong step.

All ratios are *per committed step, relative to Strong-only*, under the paper's assumptions: a
strong replica at small batch is memory-bandwidth bound, so time and HBM traffic are
proportional to weight passes. Every function is a pure numpy ufunc-style function: arguments
broadcast against each other and a scalar in gives a 0-d array (or float) out.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "v_over_d_passes",
    "commits_per_review",
    "weak_steps_per_commit",
    "reject_probability",
    "R",
    "L",
    "R_and_L",
    "R_limit_p0",
    "R_limit_p1",
    "L_limit_p0",
    "L_limit_p1",
    "break_even_kappa",
    "best_K",
    "strong_calls_per_task",
    "chunk_length_pmf_write_rate",
    "renewal_ratios",
    "renewal_R_L",
    "expected_over_beta",
    "api_cost_ratio",
]


#: The largest chunk size any command accepts. Arrays of K entries are allocated (chunk-length
#: distributions, per-length v/d), and no agent drafts more than a few dozen steps unreviewed.
MAX_K = 1024


def check_K(K, name: str = "--K") -> None:
    """ValueError (one line) unless ``K`` is a whole number of steps in [1, :data:`MAX_K`]."""
    if isinstance(K, bool) or not isinstance(K, numbers.Integral) or not 1 <= K <= MAX_K:
        raise ValueError(f"{name} must be an integer in [1, {MAX_K}], got {K!r}")


def _arr(x):
    return np.asarray(x, dtype=float)


def repair_decode_scale(rho, strong_step_scale):
    """Tokens a repair decodes per recorded token of the step it replaces: ``rho`` (the repair,
    in strong steps: the paper's rho, ``--rho`` in every command) times ``strong_step_scale``
    (what the strong model decodes per recorded token of a step it authors). The one
    conversion of rho into tokens (the schedules and the roofline both take it from here)."""
    return rho * strong_step_scale


def v_over_d_passes(verdict_tokens, step_tokens):
    """The paper's pass counting of v/d: a verification is one prefill pass plus one pass per
    verdict token, an authored step one pass per token."""
    return (1.0 + _arr(verdict_tokens)) / _arr(step_tokens)


def commits_per_review(p, n):
    """Expected committed steps per review, E = (1 - p^n) / (1 - p); E = n at p = 1.

    A review of n steps commits the accepted prefix plus, after a rejection, the repaired step:
    P(commits >= k) = p^(k-1) for k = 1..n, so E = sum_k p^(k-1).
    """
    p, n = _arr(p), _arr(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (1.0 - p**n) / (1.0 - p)
    near1 = np.abs(1.0 - p) < 1e-9  # on p's own shape: cheap
    if near1.any():
        # Near p = 1 the quotient loses all precision; the series sum is exact there.
        e = np.where(near1, n - n * (n - 1) / 2.0 * (1.0 - p), e)
    return e


def reject_probability(p, n):
    """Probability that a review of n steps rejects one of them: 1 - p^n."""
    return 1.0 - _arr(p) ** _arr(n)


def weak_steps_per_commit(p, n):
    """Weak steps drafted per committed step: n / E = n (1 - p) / (1 - p^n)."""
    return _arr(n) / commits_per_review(p, n)


def R(p, n, v_over_d, rho):
    """Strong weight passes (≈ HBM traffic) per committed step relative to Strong-only.

    R_u = (1 - p) / (1 - p^n) * (v/d) + rho * (1 - p). Memory-bound strong replica assumed.
    """
    return _arr(v_over_d) / commits_per_review(p, n) + _arr(rho) * (1.0 - _arr(p))


def L(p, n, v_over_d, rho, kappa):
    """Latency per committed step relative to Strong-only: L_u = R_u + kappa * n (1-p)/(1-p^n).

    Every committed step must first be drafted by the weak model (kappa = weak/strong step time).
    """
    e = commits_per_review(p, n)
    return (_arr(v_over_d) + _arr(kappa) * _arr(n)) / e + _arr(rho) * (1.0 - _arr(p))


def R_and_L(p, n, v_over_d, rho, kappa):
    """``(R_u, L_u)`` in one pass: E = (1 - p^n)/(1 - p) is computed once (grids of 10^6 points)."""
    e = commits_per_review(p, n)
    r = _arr(v_over_d) / e + _arr(rho) * (1.0 - _arr(p))
    return r, r + _arr(kappa) * _arr(n) / e


def R_limit_p0(v_over_d, rho):
    """R at p = 0: every review commits one (repaired) step, R = v/d + rho."""
    return _arr(v_over_d) + _arr(rho)


def R_limit_p1(n, v_over_d):
    """R as p -> 1: every review commits n steps, R = v / (n d)."""
    return _arr(v_over_d) / _arr(n)


def L_limit_p0(n, v_over_d, rho, kappa):
    """L at p = 0: v/d + rho + kappa n."""
    return R_limit_p0(v_over_d, rho) + _arr(kappa) * _arr(n)


def L_limit_p1(n, v_over_d, kappa):
    """L as p -> 1: v/(n d) + kappa."""
    return R_limit_p1(n, v_over_d) + _arr(kappa)


def break_even_kappa(p, n, v_over_d, rho):
    """The weak/strong step-time ratio kappa at which L_u = 1: (1 - R_u) * E / n.

    SpecAgent is faster than Strong-only only for kappa below this. A value <= 0 means it never
    is (R_u >= 1 already: the strong model alone spends as much time as Strong-only).
    """
    return (1.0 - R(p, n, v_over_d, rho)) / weak_steps_per_commit(p, n)


def best_K(p, v_over_d, rho, kappa, K_max=64, objective="L", write_rate=None):
    """The chunk length K in 1..K_max that minimises L_u (default) or R_u, and that minimum.

    R_u alone always prefers the longest chunk; L_u trades review amortisation against wasted
    weak drafting. With ``write_rate`` the renewal form (:func:`renewal_R_L`) is minimised
    instead (scalar inputs). Returns ``(K, value)`` broadcast over the inputs.
    """
    if objective not in ("L", "R"):
        raise ValueError(f"objective must be 'L' or 'R', not {objective!r}")
    if write_rate is not None:
        vals = [float(renewal_R_L(p, k, write_rate, v_over_d, rho, kappa)[objective == "L"])
                for k in range(1, int(K_max) + 1)]
        i = int(np.argmin(vals))
        return i + 1, vals[i]
    K = np.arange(1, int(K_max) + 1, dtype=float)
    args = [np.expand_dims(_arr(a), -1) for a in (p, v_over_d, rho, kappa)]
    vals = L(args[0], K, args[1], args[2], args[3]) if objective == "L" else R(args[0], K, args[1], args[2])
    i = np.argmin(vals, axis=-1)
    return K[i].astype(int), np.take_along_axis(vals, i[..., None], -1)[..., 0]


def strong_calls_per_task(steps, p, n, calls_per_review=1.0, reviewed_fraction=1.0):
    """Strong calls per task of ``steps`` committed steps: one call per review.

    ``calls_per_review`` is 1 with fused repair, 1 + (1 - p^n) with a separate correction turn.
    ``reviewed_fraction`` is the fraction of committed steps that pass through a review (1 when
    every chunk is reviewed; see :func:`renewal_ratios` for chunks that auto-commit).
    """
    return _arr(steps) * _arr(reviewed_fraction) / commits_per_review(p, n) * _arr(calls_per_review)


# --- Beyond the paper: chunk lengths from a per-step write probability (renewal-reward) -------


def chunk_length_pmf_write_rate(q, K):
    """Chunk lengths when each drafted step is state-changing with probability q.

    A chunk ends at its first write (held and reviewed) or at K reads (committed without
    review). Returns ``(pmf_reviewed, pmf_unreviewed)`` over lengths 1..K along the last axis:
    pmf_reviewed[n-1] = P(first write at step n <= K) = (1-q)^(n-1) q, and pmf_unreviewed puts
    the rest, (1-q)^K, at length K.
    """
    q = np.expand_dims(_arr(q), -1)
    n = np.arange(1, int(K) + 1, dtype=float)
    reviewed = (1.0 - q) ** (n - 1) * q
    unreviewed = np.zeros(np.broadcast_shapes(q.shape, n.shape))
    unreviewed[..., -1] = (1.0 - q[..., 0]) ** K
    return reviewed, unreviewed


def renewal_ratios(p, pmf_reviewed, pmf_unreviewed, v_over_d, rho, kappa, v_over_d_per_length=None):
    """R, L and the per-cycle expectations for an arbitrary distribution of chunk lengths.

    One renewal cycle drafts one chunk. Lengths 1..N are indexed along the last axis of the two
    pmfs (which together sum to 1). A reviewed chunk of length n costs v + rho·d·(1 - p^n)
    strong passes and commits (1 - p^n)/(1 - p) steps; an unreviewed chunk costs nothing strong
    and commits n. By the renewal-reward theorem the long-run ratio per committed step is
    E[cost per cycle] / E[commits per cycle]. With all mass on one reviewed length n this is
    exactly :func:`R` and :func:`L`.

    ``v_over_d_per_length`` optionally gives v/d for each length (a longer chunk is a longer
    verification prefill); it defaults to ``v_over_d`` for every length.

    Returns a dict of arrays: R, L, commits_per_cycle, weak_steps_per_cycle, reviews_per_cycle,
    rejections_per_cycle, reviewed_commit_fraction (committed steps that went through a review).
    """
    pr, pu = _arr(pmf_reviewed), _arr(pmf_unreviewed)
    N = pr.shape[-1]
    n = np.arange(1, N + 1, dtype=float)
    p_ = np.expand_dims(_arr(p), -1)
    if v_over_d_per_length is None:
        vd = np.expand_dims(_arr(v_over_d), -1)
    else:
        vd = _arr(v_over_d_per_length)
    e = commits_per_review(p_, n)
    reviewed_commits = (pr * e).sum(-1)
    commits = reviewed_commits + (pu * n).sum(-1)
    rejects = pr * reject_probability(p_, n)
    strong = (pr * vd).sum(-1) + (np.expand_dims(_arr(rho), -1) * rejects).sum(-1)
    weak = ((pr + pu) * n).sum(-1)
    reviews = pr.sum(-1)
    r = strong / commits
    return {
        "R": r,
        "L": r + _arr(kappa) * weak / commits,
        "commits_per_cycle": commits,
        "weak_steps_per_cycle": weak,
        "reviews_per_cycle": reviews,
        "rejections_per_cycle": rejects.sum(-1),
        "reviewed_commit_fraction": reviewed_commits / commits,
    }


def renewal_R_L(p, K, q, v_over_d, rho, kappa, review_full_chunks=False):
    """R and L when chunks end at the first write (probability q per step) or at K reads.

    ``review_full_chunks=True`` is the paper's "review every chunk" ablation: K-read chunks are
    reviewed too. At q = 1 every chunk is one reviewed step (the paper's formula with n = 1).
    """
    pr, pu = chunk_length_pmf_write_rate(q, K)
    if review_full_chunks:
        pr, pu = pr + pu, np.zeros_like(pu)
    out = renewal_ratios(p, pr, pu, v_over_d, rho, kappa)
    return out["R"], out["L"]


# --- Beyond the paper: heterogeneity of p_u across tasks -------------------------------------


def expected_over_beta(func, a, b, nodes=64):
    """E[func(p)] for p ~ Beta(a, b), by Gauss–Jacobi quadrature (exact for polynomials).

    Because R and L are convex in p over most of their range, the mean over tasks is not R at
    the mean p: Jensen's gap is what per-task heterogeneity costs. ``func`` maps an array of p
    (last axis: quadrature nodes) to values.
    """
    from scipy.special import roots_jacobi  # lazy: scipy is slow to import

    a, b = float(a), float(b)
    if a <= 0 or b <= 0:
        raise ValueError(f"Beta parameters must be > 0, got a={a}, b={b}")
    with np.errstate(all="ignore"):
        # Jacobi weight (1-x)^alpha (1+x)^beta on [-1, 1]; p = (1+x)/2 gives p^(a-1) (1-p)^(b-1).
        x, w = roots_jacobi(int(nodes), b - 1.0, a - 1.0)
        w = w / w.sum()
    p = (1.0 + x) / 2.0
    if not (np.all(np.isfinite(w)) and np.all(np.isfinite(p))):
        # Very concentrated Betas overflow the Jacobi weights: integrate over quantiles instead,
        # E f(p) = ∫_0^1 f(F⁻¹(u)) du, smooth in u exactly when the Beta is concentrated.
        from scipy.stats import beta as beta_dist

        u, w = np.polynomial.legendre.leggauss(int(nodes))
        p, w = beta_dist.ppf((u + 1.0) / 2.0, a, b), w / 2.0
    return np.tensordot(np.asarray(func(p), dtype=float), w, axes=([-1], [0]))


# --- Beyond the paper: API cost ------------------------------------------------------


def api_cost_ratio(
    p, n, context_tokens, step_tokens, obs_tokens, verdict_tokens, rho,
    price_input, price_cached_input, price_output, weak_cost_per_step=0.0,
):
    """Strong-API cost per committed step relative to Strong-only (prices per token, any unit).

    Each strong call re-sends the context of ``context_tokens``; the part it has seen before is
    billed as cached input, the tokens added since its last call as fresh input. Strong-only
    adds one step and one observation per call, (d + o) fresh tokens, and outputs d. A review
    adds the whole chunk, n·(d + o) fresh tokens, and outputs the verdict plus rho·d repair
    tokens after a rejection. This is why cost falls less than output tokens: reviews still pay
    for the context. ``weak_cost_per_step`` is the weak model's cost per drafted step (0 when it
    runs locally). Returns ``(ratio, strong_output_token_ratio)``.
    """
    p, n, c, d, o, tv = map(_arr, (p, n, context_tokens, step_tokens, obs_tokens, verdict_tokens))
    pin, pc, pout = _arr(price_input), _arr(price_cached_input), _arr(price_output)
    e = commits_per_review(p, n)
    fresh_s = d + o
    base = pin * fresh_s + pc * np.maximum(c - fresh_s, 0.0) + pout * d
    fresh_r = n * (d + o)
    out_r = tv + _arr(rho) * d * reject_probability(p, n)
    review = pin * fresh_r + pc * np.maximum(c - fresh_r, 0.0) + pout * out_r
    ratio = (review + _arr(weak_cost_per_step) * n) / e / base
    return ratio, out_r / e / d

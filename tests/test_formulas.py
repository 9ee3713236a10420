"""The closed forms against their definitions: brute-force enumeration, limits, invariants."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import formulas as F

probs = st.floats(0.0, 1.0)
open_probs = st.floats(0.01, 0.99)
ns = st.integers(1, 8)
pos = st.floats(0.0, 5.0)


def enumerate_review(p, n, vd, rho, kappa):
    """Expected commits, strong passes (units of d) and weak steps of one review, by summing
    over all 2^n accept/reject patterns of the chunk (the verdict stops at the first reject)."""
    commits = strong = 0.0
    for pattern in itertools.product((True, False), repeat=n):
        prob = np.prod([p if a else 1 - p for a in pattern])
        j = pattern.index(False) if False in pattern else n
        commits += prob * (j + 1 if j < n else n)
        strong += prob * (vd + (rho if j < n else 0.0))
    weak = float(n)
    return commits, strong, weak


@settings(max_examples=200, deadline=None)
@given(p=probs, n=st.integers(1, 7), vd=pos, rho=pos, kappa=pos)
def test_R_L_match_brute_force_enumeration(p, n, vd, rho, kappa):
    commits, strong, weak = enumerate_review(p, n, vd, rho, kappa)
    assert F.commits_per_review(p, n) == pytest.approx(commits, rel=1e-9, abs=1e-12)
    assert F.R(p, n, vd, rho) == pytest.approx(strong / commits, rel=1e-9, abs=1e-12)
    assert F.L(p, n, vd, rho, kappa) == pytest.approx((strong + kappa * weak) / commits, rel=1e-9, abs=1e-12)
    r, l = F.R_and_L(p, n, vd, rho, kappa)
    assert (r, l) == (pytest.approx(F.R(p, n, vd, rho)), pytest.approx(F.L(p, n, vd, rho, kappa)))


@given(n=ns, vd=pos, rho=pos, kappa=pos)
def test_limits(n, vd, rho, kappa):
    assert F.R(0.0, n, vd, rho) == pytest.approx(F.R_limit_p0(vd, rho))
    assert F.L(0.0, n, vd, rho, kappa) == pytest.approx(F.L_limit_p0(n, vd, rho, kappa))
    for p in (1.0, 1 - 1e-12, 1 - 1e-7):
        assert F.R(p, n, vd, rho) == pytest.approx(F.R_limit_p1(n, vd), rel=1e-5, abs=1e-5)
        assert F.L(p, n, vd, rho, kappa) == pytest.approx(F.L_limit_p1(n, vd, kappa), rel=1e-5, abs=1e-5)


def test_commits_per_review_is_continuous_through_p_equals_one():
    p = np.array([1 - 1e-6, 1 - 1e-9, 1 - 1e-10, 1.0])
    e = F.commits_per_review(p, 6)
    assert np.all(np.abs(e - 6) < 1e-4) and np.all(np.diff(e) >= -1e-12)


@given(p1=probs, p2=probs, n=ns, vd=pos, rho=pos, kappa=pos)
def test_monotone_decreasing_in_p(p1, p2, n, vd, rho, kappa):
    lo, hi = sorted((p1, p2))
    assert F.R(hi, n, vd, rho) <= F.R(lo, n, vd, rho) + 1e-9
    assert F.L(hi, n, vd, rho, kappa) <= F.L(lo, n, vd, rho, kappa) + 1e-9


@given(p=open_probs, n=ns, vd=st.floats(0.01, 5), rho=pos)
def test_R_decreases_with_chunk_length(p, n, vd, rho):
    longer, shorter = F.R(p, n + 1, vd, rho), F.R(p, n, vd, rho)
    assert longer <= shorter
    if p**n * vd > 1e-9:  # otherwise the difference is below double precision
        assert longer < shorter


@given(p=open_probs, n=ns, vd=st.floats(0, 0.5), rho=st.floats(0, 0.5))
def test_break_even_kappa_gives_L_equal_one(p, n, vd, rho):
    k = F.break_even_kappa(p, n, vd, rho)
    if k > 0:
        assert F.L(p, n, vd, rho, k) == pytest.approx(1.0, rel=1e-9)
        assert F.L(p, n, vd, rho, k * 0.99) < 1.0


@given(p=probs, vd=pos, rho=pos, kappa=st.floats(0, 2))
def test_best_K_is_the_minimum(p, vd, rho, kappa):
    K, val = F.best_K(p, vd, rho, kappa, K_max=32)
    Ls = F.L(p, np.arange(1, 33), vd, rho, kappa)
    assert val == pytest.approx(Ls.min()) and 1 <= K <= 32
    assert F.L(p, K, vd, rho, kappa) == pytest.approx(Ls.min())


def test_vectorised_million_point_grid():
    p = np.linspace(0, 1, 1000)[:, None]
    K = np.arange(1, 1001)[None, :]
    R = F.R(p, K, 0.1, 1.0)
    L = F.L(p, K, 0.1, 1.0, 0.3)
    assert R.shape == L.shape == (1000, 1000)
    assert np.all(np.isfinite(R)) and np.all(L >= R)
    i, j = 537, 5
    assert R[i, j] == pytest.approx(float(F.R(p[i, 0], K[0, j], 0.1, 1.0)))


def test_paper_setting_spot_value():
    # p = 0.8, n = 6: E = (1 - 0.8^6)/0.2 = 3.68928; R = 0.1/E + 1.0*0.2.
    E = (1 - 0.8**6) / 0.2
    assert F.commits_per_review(0.8, 6) == pytest.approx(3.68928, rel=1e-6)
    assert F.R(0.8, 6, 0.1, 1.0) == pytest.approx(0.1 / E + 0.2)
    assert F.weak_steps_per_commit(0.8, 6) == pytest.approx(6 / E)
    assert F.strong_calls_per_task(13.8, 0.8, 6) == pytest.approx(13.8 / E)


# --- renewal-reward generalisation -----------------------------------------------------------


@given(p=probs, n=ns, vd=pos, rho=pos, kappa=pos)
def test_renewal_reduces_to_paper_with_a_single_reviewed_length(p, n, vd, rho, kappa):
    pr = np.zeros(n)
    pr[-1] = 1.0
    out = F.renewal_ratios(p, pr, np.zeros(n), vd, rho, kappa)
    assert out["R"] == pytest.approx(F.R(p, n, vd, rho), rel=1e-9, abs=1e-12)
    assert out["L"] == pytest.approx(F.L(p, n, vd, rho, kappa), rel=1e-9, abs=1e-12)


@given(p=probs, K=ns, vd=pos, rho=pos, kappa=pos)
def test_renewal_limits_of_write_rate(p, K, vd, rho, kappa):
    R1, L1 = F.renewal_R_L(p, K, 1.0, vd, rho, kappa)  # every step a write: n = 1
    assert R1 == pytest.approx(F.R(p, 1, vd, rho)) and L1 == pytest.approx(F.L(p, 1, vd, rho, kappa))
    R0, L0 = F.renewal_R_L(p, K, 0.0, vd, rho, kappa)  # no writes: everything auto-commits
    assert R0 == pytest.approx(0.0) and L0 == pytest.approx(kappa)
    Ra, La = F.renewal_R_L(p, K, 0.0, vd, rho, kappa, review_full_chunks=True)
    assert Ra == pytest.approx(F.R(p, K, vd, rho)) and La == pytest.approx(F.L(p, K, vd, rho, kappa))


def enumerate_renewal(p, K, q, vd, rho, kappa):
    """Per-cycle expectations by summing over every write pattern and accept pattern."""
    commits = strong = weak = 0.0
    for writes in itertools.product((True, False), repeat=K):
        pw = np.prod([q if w else 1 - q for w in writes])
        n = writes.index(True) + 1 if True in writes else K
        if True not in writes:  # K reads: committed without review
            commits += pw * K
            weak += pw * K
            continue
        c, s, _ = enumerate_review(p, n, vd, rho, kappa)
        commits += pw * c
        strong += pw * s
        weak += pw * n
    return strong / commits, (strong + kappa * weak) / commits


@settings(max_examples=60, deadline=None)
@given(p=probs, K=st.integers(1, 5), q=st.floats(0.0, 1.0), vd=pos, rho=pos, kappa=pos)
def test_renewal_matches_enumeration(p, K, q, vd, rho, kappa):
    R, L = F.renewal_R_L(p, K, q, vd, rho, kappa)
    Rb, Lb = enumerate_renewal(p, K, q, vd, rho, kappa)
    assert R == pytest.approx(Rb, rel=1e-9, abs=1e-12)
    assert L == pytest.approx(Lb, rel=1e-9, abs=1e-12)


def test_renewal_broadcasts_over_q():
    R, L = F.renewal_R_L(np.array([[0.5], [0.9]]), 6, np.array([0.1, 0.2, 0.3]), 0.1, 1.0, 0.3)
    assert R.shape == (2, 3)
    assert R[1, 2] == pytest.approx(float(F.renewal_R_L(0.9, 6, 0.3, 0.1, 1.0, 0.3)[0]))


# --- heterogeneity over tasks ------------------------------------------------------------------


@pytest.mark.parametrize("a,b", [(8.0, 2.0), (2.0, 2.0), (0.5, 0.5), (1.0, 3.0)])
def test_expected_over_beta_matches_numerical_integration(a, b):
    from scipy import integrate, stats

    f = lambda p: F.R(p, 6, 0.1, 1.0)  # noqa: E731
    got = F.expected_over_beta(f, a, b)
    want = integrate.quad(lambda p: float(f(p)) * stats.beta.pdf(p, a, b), 0, 1, limit=200)[0]
    assert got == pytest.approx(want, rel=1e-6)


def test_mean_over_tasks_is_not_R_of_mean_p():
    # Jensen: R is convex in p here, so heterogeneous tasks cost more than the mean task.
    a, b = 2.0, 0.5  # mean p = 0.8, spread over tasks
    mean_R = F.expected_over_beta(lambda p: F.R(p, 6, 0.1, 1.0), a, b)
    assert mean_R > F.R(a / (a + b), 6, 0.1, 1.0) + 1e-3
    # A concentrated Beta has (almost) no gap.
    tight = F.expected_over_beta(lambda p: F.R(p, 6, 0.1, 1.0), 8000.0, 2000.0)
    assert tight == pytest.approx(float(F.R(0.8, 6, 0.1, 1.0)), rel=1e-3)


# --- API cost ------------------------------------------------------------------------


def test_api_cost_ratio_by_hand():
    # p = 1, n = 2, context 1000, d = 100, o = 50, verdict 10; prices in 1, 0.1, 4 per token.
    ratio, out_ratio = F.api_cost_ratio(1.0, 2, 1000, 100, 50, 10, 1.0, 1.0, 0.1, 4.0)
    base = 1.0 * 150 + 0.1 * 850 + 4.0 * 100
    review = 1.0 * 300 + 0.1 * 700 + 4.0 * 10
    assert ratio == pytest.approx(review / 2 / base)
    assert out_ratio == pytest.approx(10 / 2 / 100)


def test_best_K_with_write_rate_minimises_the_renewal_form():
    K, val = F.best_K(0.9, 0.1, 1.0, 0.2, K_max=20, write_rate=0.15)
    Ls = [float(F.renewal_R_L(0.9, k, 0.15, 0.1, 1.0, 0.2)[1]) for k in range(1, 21)]
    assert val == pytest.approx(min(Ls)) and Ls[K - 1] == pytest.approx(min(Ls))

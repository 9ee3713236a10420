"""Maximum-likelihood p_u from prefix-shaped verdicts: closed forms and censoring."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from costsim.traces import Step, Task
from costsim.traces.verdicts import _loglik, chunk_outcomes, fit_chunks, fit_counts, fit_tasks, profile, wilson

Z2 = 1.959963984540054 ** 2


def test_closed_form_8_of_10():
    f = fit_counts(8, 2)
    assert f.p_hat == 0.8
    # Wilson 8/10 at 95%: (0.4902, 0.9433), the textbook value
    assert f.wilson == pytest.approx((0.49016, 0.94332), abs=1e-5)
    lo, hi = f.profile
    assert lo < 0.8 < hi
    for b in (lo, hi):  # the profile bounds sit exactly z²/2 below the maximum
        assert _loglik(0.8, 8, 2) - _loglik(b, 8, 2) == pytest.approx(Z2 / 2, abs=1e-9)


def test_closed_forms_at_the_edges():
    assert fit_counts(10, 0).p_hat == 1.0
    assert profile(10, 0) == pytest.approx((math.exp(-Z2 / 20), 1.0))  # 0.8253
    assert profile(0, 4) == pytest.approx((0.0, 1 - math.exp(-Z2 / 8)))
    assert wilson(10, 0)[1] == 1.0 and wilson(0, 4)[0] == 0.0
    empty = fit_counts(0, 0)
    assert (empty.p_hat, empty.wilson, empty.profile) == (None, None, None)


def test_censoring_counts_only_judged_steps():
    # an accepted chunk of 3; a chunk of 4 rejected at step 2 (1 pass, 1 failure, 2 never
    # judged); an accepted chunk of 2  ->  S = 6, F = 1, p = 6/7 (not 6/9: the unjudged steps
    # are not failures)
    f = fit_chunks([(3, 3), (4, 1), (2, 2)])
    assert (f.passes, f.failures) == (6, 1) and f.p_hat == pytest.approx(6 / 7)
    with pytest.raises(ValueError):
        fit_chunks([(2, 3)])


def test_chunk_outcomes_from_step_verdicts():
    v = [True, True, None, True, False, True, None, False]
    steps = [Step("read", 1, verdict=x) for x in v]
    assert chunk_outcomes(steps) == [(2, 2), (2, 1), (1, 1), (1, 0)]
    out = fit_tasks([Task("a", tuple(steps)), Task("b", (Step("read", 1),))])
    assert list(out["per_task"]) == ["a"]
    assert (out["pooled"]["passes"], out["pooled"]["failures"]) == (4, 2)


def test_mle_recovers_p_from_simulated_censored_chunks():
    rng = random.Random(7)
    p, K, outcomes = 0.7, 6, []
    for _ in range(4000):
        j = 0
        while j < K and rng.random() < p:
            j += 1
        outcomes.append((K, j))
    f = fit_chunks(outcomes)
    assert f.p_hat == pytest.approx(p, abs=0.015)
    assert f.profile[0] < p < f.profile[1] and f.wilson[0] < p < f.wilson[1]


@given(st.integers(0, 500), st.integers(0, 500))
def test_intervals_contain_the_mle(S, F):
    f = fit_counts(S, F)
    if S + F:
        for lo, hi in (f.wilson, f.profile):
            assert 0 <= lo <= f.p_hat <= hi <= 1

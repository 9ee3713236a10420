"""Verifier errors (beyond the paper): a strong reviewer that is sometimes wrong.

The acceptance process of the task is read as the *truth*: a drafted step is good or bad with
the process's per-step rate p_u (or its recorded verdict). The reviewer then errs on each step
it judges: it rejects a good step with probability ``false_reject`` and accepts a bad one with
probability ``false_accept``. Its verdict is still a prefix — the first step it rejects. After
a false accept the truth of the following steps comes from the same acceptance process, started
again after the accepted bad step.

What reaches the environment: a falsely accepted bad *write* (a state-changing call, always the
held last step of its chunk) is executed — an irreversible error. A falsely accepted bad read
or message stays in the history (its downstream effect on later drafts is not modelled). A
false reject costs a repair the chunk did not need; the strong model's repair is taken as good.

With both rates 0 (the default) the wrapper is not installed and SpecAgent draws exactly the
random numbers it always did; the reviewer's errors are drawn from a side stream of the task, so
the truth (acceptance) draws stay paired with plain SpecAgent's.
"""

from __future__ import annotations

from ..config import VerifierOptions
from ._rng import side_rng


class NoisyVerifier:
    """Wraps a task's acceptance process; counts false accepts/rejects and wrong writes in ``row``."""

    def __init__(self, truth, rng, row, false_accept: float = 0.0, false_reject: float = 0.0):
        self.truth, self.rng, self.row = truth, rng, row
        self.fa, self.fr = float(false_accept), float(false_reject)

    def __getattr__(self, name):  # p, stationary_p, ... of the wrapped process
        return getattr(self.truth, name)

    def accepted(self, steps) -> int:
        n, pos, bad_accepted = len(steps), 0, []
        verdict = n
        while pos < n:
            a = pos + self.truth.accepted(steps[pos:])  # first truly bad step at or after pos
            k = self._first_false_reject(pos, a)
            if k is not None:
                self.row["false_rejects"] += 1
                verdict = k
                break
            if a >= n:
                break
            if self.fa > 0 and self.rng.random() < self.fa:
                self.row["false_accepts"] += 1
                bad_accepted.append(a)
                pos = a + 1
                continue
            verdict = a
            break
        for k in bad_accepted:
            if k < verdict and steps[k].kind == "write":
                self.row["irreversible_errors"] += 1
        return verdict

    def _first_false_reject(self, lo, hi):
        if self.fr <= 0 or hi <= lo:
            return None
        # Good steps lo..hi-1, each wrongly rejected with probability fr: geometric.
        k = lo + int(self.rng.geometric(self.fr)) - 1
        return k if k < hi else None


def with_verifier_errors(run):
    """``run`` (a SpecAgent-like protocol) taking ``false_accept``/``false_reject`` options."""

    def wrapped(tr, task, false_accept: float = VerifierOptions.false_accept,
                false_reject: float = VerifierOptions.false_reject, **options):
        if false_accept or false_reject:
            tr.acceptance = NoisyVerifier(tr.acceptance, side_rng(tr.rng, 1), tr.row, false_accept, false_reject)
        return run(tr, task, **options)

    wrapped.__name__, wrapped.__doc__ = run.__name__, run.__doc__
    wrapped.__wrapped_run__ = run  # protocols.get() passes the options of both
    if hasattr(run, "__schedule__"):  # without errors (the twin's case) it is the schedule alone
        wrapped.__schedule__ = run.__schedule__
    return wrapped

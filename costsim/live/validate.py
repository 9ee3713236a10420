"""Execute a SpecAgent schedule for real against two endpoints, and Strong-only beside it.

A task is ``steps`` committed agent steps. Strong-only makes one strong call per step: the last
observation in (o tokens), the step out (d tokens). SpecAgent drafts chunks of K steps on the
weak endpoint (each one call: o in, d out), then the strong endpoint verifies the chunk in one
call: the whole chunk in (K (d + o) tokens, or ``chunk_tokens``) and a verdict out; after a
rejection the fused replacement step (``repair_tokens``) is decoded in the same call. Whether a
review accepts j of the K steps is drawn with the per-step acceptance p_u (text quality is not
what is measured); draws are stratified so that the realised mix of outcomes follows the
geometric law closely even over few reviews.

Both protocols run the same tasks with their calls interleaved (whichever has committed fewer
steps goes next), so that drift of the machine and bursts of contention fall on both alike; a
protocol's time is the sum of its calls' wall times. Measured and predicted ratios are per committed step relative to
Strong-only, the quantities of :func:`costsim.formulas.L` and :func:`costsim.formulas.R`.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

from .. import formulas
from .client import Endpoint
from .plan import Workload


class StratifiedReviews:
    """Accepted-prefix lengths j in 0..K (K: all accepted), P(j >= k) = p^k, stratified.

    Uniforms are drawn in blocks of ``block``, one per stratum [i/block, (i+1)/block), in random
    order; each is mapped through the inverse CDF of j. Every draw is still exactly distributed
    as j; a block's empirical distribution is much closer to the law than i.i.d. draws are.
    """

    def __init__(self, p: float, K: int, seed: int = 0, block: int = 16):
        self.p, self.K, self.block = float(p), int(K), int(block)
        self.rng = random.Random(seed)
        self.buf: list[float] = []

    def _u(self) -> float:
        if not self.buf:
            us = [(i + self.rng.random()) / self.block for i in range(self.block)]
            self.rng.shuffle(us)
            self.buf = us
        return self.buf.pop()

    def draw(self) -> int:
        u = self._u()
        # P(j = k) = p^k (1 - p) for k < K, P(j = K) = p^K.
        acc = 0.0
        for k in range(self.K):
            acc += self.p**k * (1.0 - self.p)
            if u < acc:
                return k
        return self.K


@dataclass
class Tally:
    seconds: float = 0.0
    committed: int = 0
    strong_calls: int = 0
    weak_calls: int = 0
    strong_tokens: int = 0
    weak_tokens: int = 0
    reviews: int = 0
    rejections: int = 0

    def add(self, other: "Tally"):
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


def _call(ep: Endpoint, tokens_in: int, tokens_out: int, rng: random.Random):
    """One call; returns (seconds, completion tokens)."""
    t0 = time.perf_counter()
    r = ep.complete(ep.random_prompt(tokens_in, rng), tokens_out)
    return time.perf_counter() - t0, r.completion_tokens


def strong_only_task(strong: Endpoint, w: Workload, steps: int, rng: random.Random, tally: Tally):
    """One Strong-only task; yields after each committed step."""
    for _ in range(steps):
        dt, n = _call(strong, w.obs_tokens, w.step_tokens, rng)
        tally.seconds += dt
        tally.strong_calls += 1
        tally.strong_tokens += n
        tally.committed += 1
        yield


def specagent_task(weak: Endpoint, strong: Endpoint, w: Workload, steps: int, reviews: StratifiedReviews,
                   rng: random.Random, tally: Tally):
    """One SpecAgent task: draft K, review, commit the accepted prefix (+ the repaired step),
    until ``steps`` are committed; yields after each review."""
    committed = 0
    while committed < steps:
        for _ in range(w.K):
            dt, n = _call(weak, w.obs_tokens, w.step_tokens, rng)
            tally.seconds += dt
            tally.weak_calls += 1
            tally.weak_tokens += n
        j = reviews.draw()
        rejected = j < w.K
        dt, n = _call(strong, w.chunk, w.verdict_tokens + (w.repair if rejected else 0), rng)
        tally.seconds += dt
        tally.strong_calls += 1
        tally.strong_tokens += n
        tally.reviews += 1
        tally.rejections += int(rejected)
        c = j + 1 if rejected else w.K
        committed += c
        tally.committed += c
        yield


def interleave(a, b, ta: Tally, tb: Tally):
    """Advance generators ``a`` and ``b``, always the one with fewer committed steps so far.

    The two protocols' calls alternate in time, so slow drift of the machine and bursts of
    contention fall on both in proportion to the steps they commit.
    """
    live = {"a": a, "b": b}
    while live:
        key = min(live, key=lambda k: ((ta if k == "a" else tb).committed, k))
        try:
            next(live[key])
        except StopIteration:
            del live[key]


def predicted(p: float, w: Workload, ratios: dict) -> dict:
    """The closed-form predictions for this schedule (via :mod:`costsim.formulas`)."""
    K = w.K
    return {
        "L_predicted": float(formulas.L(p, K, ratios["v_over_d"], ratios["rho"], ratios["kappa"])),
        "R_time_predicted": float(formulas.R(p, K, ratios["v_over_d"], ratios["rho"])),
        # Strong decoded tokens are R in token units: v/d = verdict/d, rho = repair/d.
        "strong_tokens_ratio_predicted": float(formulas.R(p, K, w.verdict_tokens / w.step_tokens,
                                                          w.repair / w.step_tokens)),
        "commits_per_review_predicted": float(formulas.commits_per_review(p, K)),
        "weak_steps_per_commit_predicted": float(formulas.weak_steps_per_commit(p, K)),
    }


def run_validation(weak: Endpoint, strong: Endpoint, w: Workload, p: float, ratios: dict, tasks: int,
                   steps: int, seed: int = 0, progress=None) -> dict:
    """Run ``tasks`` tasks of ``steps`` committed steps under both protocols; compare with the model."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"--p-accept must be in [0, 1], got {p}")
    if tasks < 1 or steps < 1:
        raise ValueError(f"--tasks and --steps must be >= 1, got {tasks} and {steps}")
    rng = random.Random()  # prompt contents: fresh every call
    draws = StratifiedReviews(p, w.K, seed)
    so, sa = Tally(), Tally()
    per_task = []
    for ep in (weak, strong):
        ep.discover()
        ep.complete(ep.random_prompt(16, rng), 4)  # warm-up, unrecorded
    for i in range(tasks):
        t_so, t_sa = Tally(), Tally()
        interleave(specagent_task(weak, strong, w, steps, draws, rng, t_sa),
                   strong_only_task(strong, w, steps, rng, t_so), t_sa, t_so)
        so.add(t_so)
        sa.add(t_sa)
        per_task.append({"task": i, "so": t_so, "sa": t_sa})
        if progress:
            progress(i + 1, tasks)
    per_step_so = so.seconds / so.committed
    per_step_sa = sa.seconds / sa.committed
    L_meas = per_step_sa / per_step_so
    tok_meas = (sa.strong_tokens / sa.committed) / (so.strong_tokens / so.committed)
    pred = predicted(p, w, ratios)
    out = {
        "p": p, "K": w.K, "tasks": tasks, "steps_per_task": steps,
        "L_measured": L_meas, "L_predicted": pred["L_predicted"],
        "L_rel_error": (L_meas - pred["L_predicted"]) / pred["L_predicted"],
        "strong_tokens_ratio_measured": tok_meas,
        "strong_tokens_ratio_predicted": pred["strong_tokens_ratio_predicted"],
        "strong_tokens_rel_error": (tok_meas - pred["strong_tokens_ratio_predicted"]) / pred["strong_tokens_ratio_predicted"],
        "commits_per_review_measured": sa.committed / sa.reviews if sa.reviews else math.nan,
        "commits_per_review_predicted": pred["commits_per_review_predicted"],
        "weak_steps_per_commit_measured": sa.weak_calls / sa.committed,
        "weak_steps_per_commit_predicted": pred["weak_steps_per_commit_predicted"],
        "strong_calls_per_step_measured": sa.strong_calls / sa.committed,
        "strong_only_seconds_per_step": per_step_so,
        "specagent_seconds_per_step": per_step_sa,
        "ratios": dict(ratios),
        "workload": w.as_dict(),
        "strong_only": vars(so).copy(),
        "specagent": vars(sa).copy(),
        "per_task_L": [(r["sa"].seconds / r["sa"].committed) / (r["so"].seconds / r["so"].committed) for r in per_task],
    }
    return out

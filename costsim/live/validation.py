"""Run SpecAgent's schedule for real against two endpoints, and Strong-only's beside it.

The protocols are the simulator's own schedules (:mod:`costsim.protocols`), driven here by
real calls. A task is ``steps`` identical agent steps shaped by the workload: each a read-only
call of d output tokens whose observation is o tokens (the task starts with one observation's
worth of context). Strong-only: one strong call per step (what is new in, the step out).
SpecAgent reviews every chunk (``review="all"``: the validated schedule is the closed form's,
in which every chunk of K is reviewed): the weak endpoint drafts the chunk one step per call,
the strong endpoint prefills what it has not seen (the chunk, K (d + o) tokens, and the
observation of a repaired step) and decodes a verdict; after a rejection the fused repair of
``repair_tokens`` is decoded in the same call, and the next chunk starts after the repaired
step (at the end of the task a chunk is shorter). Prompts are fresh random tokens of the
prefill's length: the cached context is not re-sent, as an engine's prefix cache would spare
it. Whether a review accepts j of the steps is drawn with the per-step acceptance p_u (text
quality is not what is measured); draws are stratified so that the realised mix of outcomes
follows the geometric law closely even over few reviews.

Both protocols run the same tasks with their calls interleaved (whichever has committed fewer
steps goes next), so that drift of the machine and bursts of contention fall on both alike; a
protocol's time is the sum of its calls' wall times. Measured and predicted ratios are per
committed step relative to Strong-only, the quantities of :func:`costsim.formulas.L` and
:func:`costsim.formulas.R`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from .. import formulas
from ..protocols import PROTOCOLS
from ..protocols.schedule import Boundary, Call, Chance, Count, Execute, Review
from ..traces import Step, Task
from .client import Endpoint
from .probes import CallShapes


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
    retried_calls: int = 0  # calls that failed first: only their answering attempt is timed

    def add(self, other: "Tally"):
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


def workload_task(w: CallShapes, steps: int) -> Task:
    """A task of ``steps`` read-only steps of the workload's shape (d out, o observed)."""
    st = Step("read", w.step_tokens, w.obs_tokens, tool="live_read", context_tokens=-1)
    return Task("live", (replace(st, context_tokens=w.obs_tokens),) + (st,) * (steps - 1))


def drive(schedule, endpoints: dict, reviews: StratifiedReviews, rng: random.Random, tally: Tally):
    """Run ``schedule`` on real endpoints (``{"strong": Endpoint, "weak": Endpoint}``); yields
    after each commit (for :func:`interleave`)."""
    value = None
    while True:
        try:
            cmd = schedule.send(value)
        except StopIteration:
            return
        value = None
        kind = type(cmd)
        if kind is Call:
            ep = endpoints[cmd.model]
            r = ep.complete(ep.random_prompt(max(cmd.prefill, 1), rng), cmd.decode)
            tally.seconds += r.wall_s  # the attempt that answered: no retry's wait or backoff
            tally.retried_calls += r.attempts > 1
            setattr(tally, f"{cmd.model}_calls", getattr(tally, f"{cmd.model}_calls") + 1)
            setattr(tally, f"{cmd.model}_tokens", getattr(tally, f"{cmd.model}_tokens") + r.completion_tokens)
        elif kind is Review:
            value = min(reviews.draw(), len(cmd.steps))
        elif kind is Chance:
            value = rng.random() < cmd.p
        elif kind is Count and cmd.name in _TALLIED:
            setattr(tally, _TALLIED[cmd.name], getattr(tally, _TALLIED[cmd.name]) + int(cmd.n))
            if cmd.name == "committed_steps":
                yield
        elif kind not in (Execute, Boundary, Count):  # a read's tool call takes no time here
            raise TypeError(f"live validation cannot run {cmd!r}")


_TALLIED = {"committed_steps": "committed", "reviews": "reviews", "rejections": "rejections"}


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


def predicted(p: float, w: CallShapes, ratios: dict) -> dict:
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


#: The protocol validate runs, against its baseline (Strong-only): SpecAgent reviewing every
#: chunk, the protocol the closed forms L_u and R_u describe.
VALIDATED = "specagent-review-all"


def run_validation(weak: Endpoint, strong: Endpoint, w: CallShapes, p: float, ratios: dict, tasks: int,
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
    endpoints = {"weak": weak, "strong": strong}
    task = workload_task(w, steps)
    sa_rec = PROTOCOLS[VALIDATED]
    so_schedule = PROTOCOLS[sa_rec.baseline].schedule
    options = dict(sa_rec.fixed, K=w.K, verdict_tokens=w.verdict_tokens, rho=w.repair / w.step_tokens)
    for i in range(tasks):
        t_so, t_sa = Tally(), Tally()
        interleave(drive(sa_rec.schedule(task, **options), endpoints, draws, rng, t_sa),
                   drive(so_schedule(task), endpoints, draws, rng, t_so), t_sa, t_so)
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

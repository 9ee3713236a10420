"""Synthetic trajectories: step kinds and token lengths drawn from stated distributions.

The default shape follows the tau²-Bench Airline run the shipped trace comes from
(claude-sonnet-4-5 agent, 50 tasks): median 340 completion tokens per agent call, tool results
of median ~175 tokens (chars/4), user replies of a few dozen tokens, a first prompt (system +
policy + task) of ~5,700 tokens. Its step counts were taken over the run's 671 agent messages,
the 50 scripted greetings included (13.4 a task; 46% tool reads, 9% writes), which the importer
drops: ``generate(5000)`` draws 13.5 steps a task (5.8 reads, 1.1 writes, 5.6 messages and a final one) where
the shipped trace has 12.4 (6.2, 1.2, 4.0 and the final) and 6.3 steps a review against its 5.6. A trace
itself (``--trace tau2-airline``) replays its own steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import SYNTHETIC
from .schema import Step, Task


@dataclass(frozen=True)
class Shape:
    """Distributions of a synthetic task. Token lengths are lognormal (median, sigma)."""

    steps_mean: float = 13.4          # committed steps per task, 1 + Poisson(steps_mean - 1)
    p_read: float = 0.46              # kind of each non-final step
    p_write: float = 0.09
    p_respond: float = 0.45
    output_median: float = SYNTHETIC.output_median      # tokens the agent decodes per step
    output_sigma: float = 0.6
    tool_obs_median: float = SYNTHETIC.tool_obs_median  # tokens of a tool result
    tool_obs_sigma: float = 0.5
    user_obs_median: float = 40.0     # tokens of the user's reply
    user_obs_sigma: float = 0.5
    initial_context: int = 5700       # tokens before the first step

    @classmethod
    def fixed(cls, steps: int, output_tokens: int, obs_tokens: int, p_write: float = 0.0,
              initial_context: int = 0) -> "Shape":
        """Deterministic lengths and i.i.d. kinds (reads, and writes with ``p_write``): the
        setting of the closed form."""
        return cls(steps_mean=float(steps), p_read=1.0 - p_write, p_write=p_write, p_respond=0.0,
                   output_median=output_tokens, output_sigma=0.0, tool_obs_median=obs_tokens,
                   tool_obs_sigma=0.0, user_obs_median=obs_tokens, user_obs_sigma=0.0,
                   initial_context=initial_context)


def _lognormal(rng, median, sigma, size):
    if sigma == 0:
        return np.full(size, max(int(round(median)), 1))
    return np.maximum(np.rint(median * np.exp(sigma * rng.standard_normal(size))), 1).astype(int)


def _draw(rng, shape: Shape, n: int, ctx: int, final: bool) -> list[Step]:
    """``n`` steps drawn from ``shape`` starting at context ``ctx``; the last is final if asked."""
    probs = np.array([shape.p_read, shape.p_write, shape.p_respond], float)
    # Python strings, not a numpy string array: numpy's str_ scalars can swallow a Ctrl-C
    # that arrives while one is converted (a KeyboardInterrupt lost inside str(k[j])).
    k = [_KINDS[i] for i in rng.choice(3, size=n, p=probs / probs.sum()).tolist()]
    if final and n:
        k[-1] = "final"
    out = _lognormal(rng, shape.output_median, shape.output_sigma, n)
    tool = _lognormal(rng, shape.tool_obs_median, shape.tool_obs_sigma, n)
    user = _lognormal(rng, shape.user_obs_median, shape.user_obs_sigma, n)
    steps = []
    for j in range(n):
        kind = k[j]
        obs = 0 if kind == "final" else int(user[j] if kind == "respond" else tool[j])
        steps.append(Step(kind=kind, output_tokens=int(out[j]), observation_tokens=obs,
                          tool="" if kind in ("respond", "final") else f"synthetic_{kind}",
                          context_tokens=ctx))
        ctx += int(out[j]) + obs
    return steps


_KINDS = ("read", "write", "respond")


def generate(n_tasks: int, seed: int = 0, shape: Shape = Shape(), deterministic_length: bool = False,
             fresh_after_reject: bool = False) -> list[Task]:
    """``n_tasks`` synthetic tasks; each task has its own stream from ``SeedSequence(seed)``.

    The last step of every task is ``final``; ``deterministic_length`` gives every task
    exactly ``steps_mean`` steps (then no final step: with ``Shape.fixed``, all reads/writes).
    ``fresh_after_reject`` makes the trajectory generative: after a rejection SpecAgent redraws
    the drafted steps after the repaired one (``task.meta["redraw"](rng, start, count)``; steps
    it never drafted are unseen draws already), as the closed form's renewal argument assumes;
    otherwise the recorded path stays fixed, as in a replayed trace.
    """
    return list(SyntheticTasks(n_tasks, seed, shape, deterministic_length, fresh_after_reject))


class SyntheticTasks:
    """:func:`generate`'s tasks as a sequence that draws task ``i`` when it is read (the same
    task, from the ``i``-th child of ``SeedSequence(seed)``) and keeps none: a run of 10^5 or
    10^6 tasks holds only those in flight (a task is ~3.6 KB). Reading one twice draws it twice."""

    def __init__(self, n_tasks: int, seed: int = 0, shape: Shape = Shape(), deterministic_length: bool = False,
                 fresh_after_reject: bool = False):
        probs = np.array([shape.p_read, shape.p_write, shape.p_respond], float)
        if np.any(probs < 0) or probs.sum() <= 0:
            raise ValueError("step-kind probabilities must be >= 0 and not all zero")
        self.n, self.seed, self.shape = int(n_tasks), seed, shape
        self.deterministic_length, self.fresh_after_reject = deterministic_length, fresh_after_reject
        self._root = np.random.SeedSequence(seed)

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        return (self[i] for i in range(self.n))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        i = range(self.n)[i]  # negative indices; IndexError past the end
        r, shape = self._root, self.shape
        # what SeedSequence(seed).spawn(n)[i] is
        rng = np.random.default_rng(np.random.SeedSequence(r.entropy, spawn_key=(*r.spawn_key, i), pool_size=r.pool_size))
        if self.deterministic_length:
            n = max(int(shape.steps_mean), 1)
        else:
            n = 1 + int(rng.poisson(max(shape.steps_mean - 1.0, 0.0)))
        final = not self.deterministic_length
        steps = _draw(rng, shape, n, shape.initial_context, final)
        meta = {}
        if self.fresh_after_reject:
            def redraw(rng, start, count, steps=steps, n=n, final=final):
                count = min(count, n - start)
                return tuple(_draw(rng, shape, count, steps[start].context_tokens, final and start + count == n))
            meta["redraw"] = redraw
        return Task(task_id=f"synthetic-{self.seed}-{i}", steps=tuple(steps), domain="synthetic",
                    source=f"costsim synthetic seed={self.seed}", meta=meta)

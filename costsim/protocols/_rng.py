"""Side random streams of a task, so that a protocol's extra draws leave the main stream alone.

The task's stream (``task_run.rng``) drives acceptance and tool latencies; a protocol that draws
more (speculation hits, verifier errors) takes them from a stream of its own, derived from the
task's seed and a tag, so that its acceptance draws stay paired with plain SpecAgent's.
"""

from __future__ import annotations

import numpy as np


def side_rng(rng: np.random.Generator, tag: int) -> np.random.Generator:
    """A generator independent of ``rng``'s draws, fixed by its seed and ``tag``."""
    ss = getattr(rng.bit_generator, "seed_seq", None)
    if ss is None:  # a generator not made from a SeedSequence: fall back to a draw
        return np.random.default_rng([int(rng.integers(2**63)), tag])
    return np.random.default_rng(np.random.SeedSequence(ss.entropy, spawn_key=(*ss.spawn_key, 0x51DE, tag)))

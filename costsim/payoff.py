"""Does SpecAgent pay here? The one verdict `predict`, `plan` and `capacity` print.

SpecAgent is faster than Strong-only per committed step when L = R + kappa w < 1 (the paper's
L_u, in its renewal form: R the strong replica's time per committed step over Strong-only's, w
the weak steps drafted per committed step, kappa a weak step's time over a strong step's). The
verdict is in *time*, on the deployments, at the batches they run: v/d, rho and kappa from the
roofline at the strong and weak replicas' batches (predict: its ``--batch``; plan and capacity:
the simulated mean running batches), each replaced by a value the user gave or calibrated. The
same deployment at the same batches gets the same answer from every command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import formulas, roofline


@dataclass(frozen=True)
class Payoff:
    """The quantities of the verdict, per committed step: ``R`` (strong replica time over
    Strong-only's), ``weak_steps_per_commit``, ``kappa``; the batches (sequences) they are read
    at, and the strong replica's balance point B* (sequences) at ``context_tokens``."""

    p: float
    K: int
    R: float
    weak_steps_per_commit: float
    kappa: float
    strong_batch: float
    weak_batch: float
    balance_batch: float
    context_tokens: float

    @property
    def L(self) -> float:
        """Wall time per committed step over Strong-only's: R + kappa w."""
        return self.R + self.kappa * self.weak_steps_per_commit

    @property
    def break_even_kappa(self) -> float:
        """The kappa at which L = 1, (1 - R) / w; <= 0: no weak model is fast enough."""
        return (1.0 - self.R) / self.weak_steps_per_commit

    @property
    def pays(self) -> bool:
        return self.L < 1.0

    def text(self) -> str:
        """The verdict in plain words: which side of break-even, and what would move it."""
        bek, kap, w = self.break_even_kappa, self.kappa, self.weak_steps_per_commit
        at = (f"at p_u = {self.p:g}, K = {self.K}, strong batch {self.strong_batch:.1f} and weak batch "
              f"{self.weak_batch:.1f} sequences")
        if bek <= 0:
            return (f"SpecAgent cannot be faster here: {at}, the strong model's reviews and repairs alone take "
                    f"{self.R:.2f} of Strong-only's time (break-even kappa <= 0), before any drafting and however "
                    "fast the weak model. It needs a higher p_u.")
        b = "∞" if not math.isfinite(self.balance_batch) else f"{self.balance_batch:.0f}"
        if not self.pays:
            return (f"SpecAgent is slower than Strong-only here (L = {self.L:.2f} in time): {at}, a weak step takes "
                    f"{kap:.2f} of a strong one (kappa), above the break-even {bek:.2f}. Each committed step needs "
                    f"{w:.2f} drafted weak steps, so drafting alone takes {kap * w:.2f} of Strong-only's time. It pays "
                    f"below kappa {bek:.2f}: a faster or less busy weak deployment, longer strong steps (a thinking "
                    "strong model), or a higher p_u.")
        return (f"SpecAgent is faster than Strong-only here (L = {self.L:.2f} in time): {at}, a weak step takes "
                f"{kap:.2f} of a strong one (kappa), below the break-even {bek:.2f}; drafting takes {kap * w:.2f} and "
                f"reviews and repairs {self.R:.2f} of Strong-only's time. It stops paying when kappa passes {bek:.2f} "
                f"(slower or busier weak replicas) or when the strong batch passes the balance point B* = {b} at "
                f"{self.context_tokens:,.0f} tokens of context, where its extra prefill FLOPs become time.")

    def to_dict(self) -> dict:
        return {"pays": self.pays, "L_time": self.L, "R_time": self.R, "kappa": self.kappa,
                "break_even_kappa": self.break_even_kappa, "weak_steps_per_commit": self.weak_steps_per_commit,
                "strong_batch_sequences": self.strong_batch, "weak_batch_sequences": self.weak_batch,
                "balance_batch_sequences": None if not math.isfinite(self.balance_batch) else self.balance_batch,
                "context_tokens": self.context_tokens, "text": self.text()}


def specagent_payoff(strong, weak, p: float, K: int, step_tokens: float, obs_tokens: float, verdict_tokens: float,
                     rho: float, context_tokens: float, strong_batch: float, weak_batch: float, *,
                     strong_step_scale: float = 1.0, weak_step_scale: float = 1.0, write_rate: float | None = None,
                     v_over_d: float | None = None, kappa: float | None = None, rho_given: float | None = None,
                     pp=None) -> Payoff:
    """The verdict for SpecAgent at chunk size ``K`` on these deployments at these batches
    (sequences, at least 1): the roofline's time ratios there, v/d per reviewed chunk length and
    rho (a rejection's repair, ``rho`` strong steps) and kappa, each replaced by ``v_over_d``,
    ``rho_given`` or ``kappa`` where given. Chunks are K steps, or with ``write_rate`` cut at
    the first write (:func:`costsim.formulas.chunk_length_pmf_write_rate`). ``pp``: the
    roofline's :func:`costsim.roofline.protocol_parameters` for chunk lengths 1..K at these
    batches, where the caller has them."""
    sb, wb = max(float(strong_batch), 1.0), max(float(weak_batch), 1.0)
    if pp is None:
        pp = roofline.protocol_parameters(strong, weak, np.arange(1, K + 1), step_tokens, obs_tokens, verdict_tokens,
                                          rho, context_tokens, strong_batch=sb, weak_batch=wb,
                                          strong_step_scale=strong_step_scale, weak_step_scale=weak_step_scale)
    if write_rate is None:
        pr, pu = np.zeros(K), np.zeros(K)
        pr[-1] = 1.0
    else:
        pr, pu = formulas.chunk_length_pmf_write_rate(write_rate, K)
    kap = float(pp.kappa) if kappa is None else float(kappa)
    r = formulas.renewal_ratios(p, pr, pu, v_over_d, float(pp.rho["time"]) if rho_given is None else rho_given, kap,
                                v_over_d_per_length=None if v_over_d is not None else pp.v_over_d["time"])
    return Payoff(p=float(p), K=int(K), R=float(r["R"]),
                  weak_steps_per_commit=float(r["weak_steps_per_cycle"] / r["commits_per_cycle"]), kappa=kap,
                  strong_batch=sb, weak_batch=wb, balance_batch=float(roofline.balance_batch(strong, context_tokens)),
                  context_tokens=float(context_tokens))

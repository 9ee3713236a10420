"""The SpecAgent paper's published numbers, and the checks of costsim's protocols against them.

The numbers are data (``benchmarks/measured/specagent_paper.toml``, with their sources); what
is computed here is costsim's side of each comparison, on the shipped tau² traces of the
paper's two tau² domains (other agent runs than the paper's: a comparison of shape and size,
with the paper's acceptance rates unknown).
"""

from __future__ import annotations

import math
import tomllib
from functools import lru_cache

from .resources import data_dir

#: The setting of the paper's tau² comparisons as costsim replays them: p_u (not published:
#: the traces carry no verdicts) and K (the paper's).
TAU2_P, TAU2_K = 0.85, 6


@lru_cache(maxsize=None)
def published() -> dict:
    """``benchmarks/measured/specagent_paper.toml`` as a dict (sources in the file)."""
    return tomllib.loads(data_dir("measured").joinpath("specagent_paper.toml").read_text())


def tau2_benchmarks() -> dict:
    """``{shipped trace name: published benchmark entry}`` for the benchmarks with a trace."""
    return {b["trace"]: b for b in published()["benchmark"].values() if "trace" in b}


def chunking_ratios(rules=None, p: float = TAU2_P, K: int = TAU2_K) -> dict:
    """``{trace: {rule: {metric: value}}}``: SpecAgent against Strong-only on each tau² trace
    under each chunking rule — the exact twin's expectations (one session, default
    deployments): strong calls ratio, decoded strong-token share, committed steps per review,
    HBM and wall ratios — beside the paper's strong-call ratio."""
    from .predict import deployments
    from .sim import Scenario
    from .sim.twin import ratios
    from .traces import load
    from .traces.stats import CHUNKINGS

    s, w = deployments()
    out = {}
    for trace, b in tau2_benchmarks().items():
        tasks = [t for t in load(trace).tasks if t.steps]
        out[trace] = {}
        for rule in rules or CHUNKINGS:
            sc = Scenario(strong=s, weak=w, p=p, K=K, protocols=("strong-only", "specagent"),
                          options=(("chunking", rule),))
            sa = ratios(tasks, sc)["specagent"]
            out[trace][rule] = {
                "strong_calls_ratio": sa["strong_calls_ratio"],
                "paper_strong_calls_ratio": b["specagent_calls"] / b["strong_only_calls"],
                "strong_decode_tokens_ratio": sa["strong_decode_tokens_ratio"],
                "steps_per_review": sa["committed_steps"] / sa["reviews_per_task"] if sa["reviews_per_task"] else math.inf,
                "hbm_ratio": sa["hbm_ratio"], "wall_ratio": sa["wall_ratio"]}
    return out


def closest_chunking(table: dict) -> str:
    """The rule whose worst log-ratio miss of the paper's strong-call ratio over the traces is
    smallest: what :data:`costsim.traces.stats.DEFAULT_CHUNKING` was chosen by."""
    rules = next(iter(table.values()))

    def worst(rule):
        return max(abs(math.log(t[rule]["strong_calls_ratio"] / t[rule]["paper_strong_calls_ratio"]))
                   for t in table.values())
    return min(rules, key=worst)


def agentcollab_calls_ratio(escalate_p: float, seeds=range(8), trace: str = "tau2-airline") -> float:
    """AgentCollab's strong calls over Strong-only's on ``trace`` at no-progress rate
    ``escalate_p`` (default deployments and options; simulated, summed over ``seeds``: the
    escalations are random)."""
    from .predict import deployments
    from .sim import Scenario, simulate
    from .traces import load

    s, w = deployments()
    tasks = [t for t in load(trace).tasks if t.steps]
    calls = {"strong-only": 0.0, "agentcollab": 0.0}
    for seed in seeds:
        sc = Scenario(strong=s, weak=w, protocols=tuple(calls), escalate_p=escalate_p, seed=seed)
        for r in simulate(tasks, sc):
            calls[r["protocol"]] += r["strong_calls"]
    return calls["agentcollab"] / calls["strong-only"]


def fit_agentcollab_stall(tol: float = 0.002) -> float:
    """The no-progress rate at which AgentCollab's strong calls are the paper's multiple of
    Strong-only's on Airline (18.5 / 13.8), by bisection to ``tol``: the fit behind
    :data:`costsim.protocols.agentcollab.STALL_P`."""
    b = published()["benchmark"]["Airline"]
    target = b["agentcollab_calls"] / b["strong_only_calls"]
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if agentcollab_calls_ratio(mid) < target else (lo, mid)
    return round((lo + hi) / 2, 3)


def implied_strong_step_scale(trace: str = "tau2-airline", p: float = TAU2_P, K: int = TAU2_K) -> dict:
    """How many times the weak model's tokens the strong model must decode per step it authors
    (Strong-only's steps and SpecAgent's repairs: ``strong_step_scale`` = rho) for SpecAgent's
    wall ratio on ``trace`` to be the paper's, under the default deployments (exact twin).

    Kappa is a ratio of *step* times: a thinking strong model makes strong steps longer and
    kappa smaller at the same decode speeds. Returns the scale (None where even 64x does not
    reach the paper's wall), the wall ratio at scale 1, and the target."""
    from .predict import deployments
    from .sim import Scenario
    from .sim.twin import ratios
    from .traces import load

    s, w = deployments()
    tasks = [t for t in load(trace).tasks if t.steps]
    target = tau2_benchmarks()[trace]["wall"]

    def wall(scale):
        sc = Scenario(strong=s, weak=w, p=p, K=K, rho=scale, protocols=("strong-only", "specagent"),
                      options=(("strong_step_scale", scale),))
        return ratios(tasks, sc)["specagent"]["wall_ratio"]

    out = {"target_wall": target, "wall_at_1": wall(1.0), "scale": None}
    lo, hi = 1.0, 64.0
    if wall(hi) > target:
        return out
    while hi / lo > 1.01:
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if wall(mid) > target else (lo, mid)
    out["scale"] = (lo * hi) ** 0.5
    return out

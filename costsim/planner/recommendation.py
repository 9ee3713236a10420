"""Plan's recommendation: the screen's cheapest fleets confirmed by simulation, the cheapest
that meets the target recommended and why, and where SpecAgent stops paying."""

from __future__ import annotations

import math

import numpy as np

from ..config import COMMANDS
from ..distributed import fork_map
from ..fleet_cost import usd_per_1k_tasks, usd_per_gpu_hour
from ..payoff import Payoff, specagent_payoff
from ..protocols import PROTOCOLS, drafts, on_api, payoff_judges
from ..sizing import api_profile, api_speeds
from ..traces.stats import step_shape
from .screen import Rows, Screen, Screened, pareto
from .screening import State, _apis, search
from .space import Config, scenario_of


def cells_of(strong: int, weak: int, at_least: int = 1) -> tuple[int, int, int]:
    """A fleet of ``strong`` and ``weak`` replicas as identical cells: ``(cells, strong per
    cell, weak per cell)``. Tasks spread evenly over replicas interact only within the
    gcd(strong, weak) cells of a fleet; where that is fewer than ``at_least``, the weak pool
    grows by the fewest replicas that make it as many (or, failing that, a cell per strong
    replica, as capacity plans). A pool of none (Strong-only's weak, an API's strong) gives
    cells of one replica of the other."""
    if not (strong and weak):
        n = max(strong, weak)
        return n, int(strong > 0), int(weak > 0)
    top = -(-weak // strong) * strong  # a multiple of strong: a cell per strong replica
    w = next((w for w in range(weak, top) if math.gcd(strong, w) >= at_least), top)
    g = math.gcd(strong, w)
    return g, strong // g, w // g


def confirm(tasks, base, s: Screened, task_rate: float, target_s: float, price_table: dict, grow: int = 8) -> dict:
    """The screened fleet simulated at ``task_rate``, as identical cells (:func:`cells_of`: as
    many as a steady run of one needs, the weak pool grown to them where the fleet splits
    into fewer), tasks spread evenly over the cells: one cell at its share of the rate, as a
    Poisson stream (burstier than an even spread: conservative), stands for all,
    simulated as capacity simulates its operating point
    (:func:`~costsim.capacity_search.steady_run`: arrivals spanning ``steady_spans`` of its own
    p95, at most ``max_probe_tasks`` tasks). While the p95 misses the target, each pool grows
    by a tenth (at least one replica), at most ``grow`` times. Returns the replicas it confirms,
    their p95 and cost; ``steady`` is False where the longest run was still too short."""
    from ..capacity_search import Search, steady_run

    c, srch = s.config, Search()
    sc = scenario_of(base, c)
    strong, weak = s.strong_replicas, s.weak_replicas
    # the tasks a steady run of the whole fleet needs at the screen's p95 (most runs are steady
    # at once from there), and so the fewest cells whose share a run of max_probe_tasks can hold
    need = 1.2 * srch.steady_spans * s.p95_s * task_rate
    for attempt in range(grow + 1):
        cells, cs, cw = cells_of(strong, weak, math.ceil(need / srch.max_probe_tasks))
        strong, weak = cells * cs, cells * cw
        share = task_rate / cells
        rows, p50, p95, _, steady = steady_run(tasks, sc, c.protocol, share, max(cs, 1), max(cw, 1), srch,
                                               math.ceil(need / cells))
        if p95 <= target_s or attempt == grow:
            break
        strong, weak = (v + max(1, math.ceil(v / 10)) if v else 0 for v in (strong, weak))
    gpus = {k: n * d.n_devices for k, n, d in (("strong", strong, c.strong), ("weak", weak, c.weak)) if d is not None and n}
    usd_h = sum(gpus[k] * price_table[d.device.name]["usd_per_gpu_hour"]
                for k, d in (("strong", c.strong), ("weak", c.weak)) if k in gpus)
    api = float(np.mean([r.get("api_cost_usd", 0.0) for r in rows]))
    return {"strong_replicas": strong, "weak_replicas": weak, "fleet": c.fleet(strong, weak),
            "fleet_gpus": sum(gpus.values()), "strong_fleet_gpus": gpus.get("strong", 0),
            "weak_fleet_gpus": gpus.get("weak", 0),
            "latency_p50_s": p50, "latency_p95_s": p95, "meets_target": p95 <= target_s,
            "cost_per_1k_tasks_usd": usd_per_1k_tasks(usd_h, task_rate, api),
            "api_cost_per_1k_tasks_usd": 1000.0 * api,
            "simulated": {"cells": cells, "strong_replicas": cs, "weak_replicas": cw, "task_rate_per_cell": share,
                          "tasks": len(rows), "steady": steady, "text": cell_words(cells, cs, cw, share)},
            "tasks_simulated": len(rows), "steady": steady, "grown": attempt,
            "note": None if steady else not_steady(len(rows), srch.steady_spans),
            "strong_batch": rows[0]["strong_mean_batch"] if strong else None,
            "weak_batch": rows[0]["weak_mean_batch"] if weak else None}


def cell_words(cells: int, strong: int, weak: int, rate: float) -> str:
    """The cell a confirmation simulated, in words: 'one of 8 cells (1 strong + 8 weak) at 12.5
    tasks/s', or 'the whole fleet as one cell (...)' (a confirmation's ``simulated.text``)."""
    which = f"one of {cells} cells" if cells > 1 else "the whole fleet as one cell"
    return f"{which} ({strong} strong + {weak} weak) at {rate:.3g} tasks/s"


def not_steady(tasks: int, spans: float) -> str:
    """The caveat of a confirmation whose run was too short to be steady (its ``note``)."""
    return (f"on a run too short to be steady ({tasks:,} tasks arrive in less than {spans:g} of their p95s): "
            "its p95 may be low")


def specagent_payoff_of(base, s: Screened, tasks) -> Payoff:
    """The one verdict (:mod:`costsim.payoff`) for a SpecAgent plan: in time at its operating
    mean running batches, at the tasks' typical step."""
    c = s.config
    d, o, ctx = step_shape(tasks)
    return specagent_payoff(c.strong, c.weak, base.p, c.K, d, o, base.verdict_tokens, base.rho, ctx,
                            s.strong_batch or 1.0, s.weak_batch or 1.0, strong_step_scale=base.strong_step_scale,
                            weak_step_scale=base.weak_step_scale)


#: recommend confirms at most this many times ``confirm_top`` candidates (see :func:`recommend`).
CONFIRM_AT_MOST = 3


def recommend(tasks, base, task_rate: float, target_s: float, configs, price_table: dict, confirm_top: int = COMMANDS.plan_confirm,
              progress=None, scheduler: str | None = None, workers: int | None = None, state=None) -> dict:
    """Screen every configuration (on Dask with ``scheduler`` or ``workers``: :func:`search`),
    confirm the ``confirm_top`` cheapest screened ones by simulation (and further ones, up to
    ``CONFIRM_AT_MOST`` times as many, while one's screened cost is below the cheapest confirmed
    cost: a confirmation that grows its pools can leave a cheaper candidate unconfirmed), and
    recommend the cheapest that the simulator confirms meets the target. ``state``: a folder (:class:`State`) that
    keeps the finished pieces, so that an interrupted plan run again resumes."""
    if not task_rate > 0:
        raise ValueError(f"--task-rate must be > 0 tasks/s, got {task_rate}")
    if not target_s > 0:
        raise ValueError(f"--latency-p95 must be > 0 s, got {target_s}")
    state = State(state) if state is not None and not isinstance(state, State) else state
    screened = search(tasks, base, task_rate, target_s, configs, price_table, progress, scheduler, workers, state)
    front = pareto(screened)
    feasible = [s for s in screened if s.feasible]
    usd = usd_per_gpu_hour(price_table)  # the key of a confirmation: the prices, not their ages (they change daily)

    def confirmed_of(batch) -> list:
        """(candidate, confirmation) for each of ``batch``: kept ones from the state, the rest
        side by side on ``workers`` processes (independent runs: the same as one by one)."""
        keys = [(tasks, base, s, task_rate, target_s, usd, _apis(base, [s.config]), "cells") for s in batch]
        got = [state.get("confirm", k, valid=lambda v: isinstance(v, dict) and {"meets_target", "fleet", "note"} <= set(v))
               if state else None
               for k in keys]
        new = iter(fork_map(lambda s: confirm(tasks, base, s, task_rate, target_s, price_table),
                            [s for s, r in zip(batch, got) if r is None], workers))
        out = []
        for s, k, r in zip(batch, keys, got):
            if r is None:
                r = next(new)
                if state:
                    state.put("confirm", k, r)
            out.append((s, r))
            if progress:
                progress(0)
        return out

    confirmed = confirmed_of(feasible[:confirm_top])
    for s in feasible[confirm_top:CONFIRM_AT_MOST * confirm_top]:
        # Past the first confirm_top, go on while a candidate could still beat the best confirmed
        # one: a confirmation only adds replicas, so its screened cost bounds its cost from below.
        if s.cost_per_1k >= min((r["cost_per_1k_tasks_usd"] for _, r in confirmed
                                 if r.get("meets_target") and r.get("cost_per_1k_tasks_usd") is not None),
                                default=math.inf):
            break
        confirmed += confirmed_of([s])
    ok = [(s, r) for s, r in confirmed if r.get("meets_target") and r.get("cost_per_1k_tasks_usd") is not None]
    rec = min(ok, key=lambda sr: sr[1]["cost_per_1k_tasks_usd"]) if ok else None
    out = {"task_rate_per_s": task_rate, "latency_p95_target_s": target_s, "configurations": len(configs),
           "resumed": None if state is None else {"folder": str(state.folder), "pieces": state.hits},
           "feasible": len(feasible), "screened": screened, "front": front, "confirmed": confirmed,
           "recommended": rec, "prices": price_table}
    if rec is None:
        best_p95 = min((s.uncontended_p95_s for s in screened), default=math.inf)
        out["why_none"] = (
            f"no configuration meets a p95 of {target_s:g} s: the fastest uncontended p95 is {best_p95:.1f} s"
            if not feasible else
            "the simulator confirmed none of the screen's cheapest candidates (raise --confirm)")
    else:
        s, r = rec
        bits = [f"the cheapest of {len(confirmed)} candidates the simulator confirmed "
                f"(of {len(feasible)} the screen found feasible among {len(configs)})"]
        so = [x for x in feasible if x.config.protocol == "strong-only"]
        sa = [x for x in feasible if payoff_judges(x.config.protocol)]
        other = so if drafts(s.config.protocol) else sa if s.config.protocol == "strong-only" else []
        if other:
            o = other[0]
            name = "Strong-only" if other is so else "SpecAgent"
            bits.append(f"the screen's cheapest {name} plan ({o.config.describe()}) costs "
                        + (f"{o.cost_per_1k / r['cost_per_1k_tasks_usd']:.2f}x its cost" if r["cost_per_1k_tasks_usd"] > 0
                           else f"USD {o.cost_per_1k:.3f} per 1,000 tasks"))
            if o.uncontended_p95_s > 0.8 * target_s:
                bits.append(f"its uncontended p95 is {o.uncontended_p95_s:.1f} s, within "
                            f"{1 - o.uncontended_p95_s / target_s:.0%} of the target, so its replicas must run nearly "
                            "empty")
        out["why"] = "; ".join(bits)
        if payoff_judges(s.config.protocol):
            out["specagent_pays"] = specagent_payoff_of(base, s, tasks).to_dict()
        elif sa:
            out["specagent_pays"] = specagent_payoff_of(base, sa[0], tasks).to_dict()
    return out


def screen_against_simulator(tasks, base, config: Config, replicas: dict, load: float) -> tuple[float, float, float]:
    """``(rate, screen p95, simulated p95)`` of one strong replica's cell: the task rate at
    which the screen's p95 is ``load`` times the uncontended p95, simulated there with enough
    Poisson arrivals (the tasks repeated) to span three of those p95s. What the screen's stated
    error is measured on (``benchmarks/plan_screen_error.py``, ``tests/test_plan.py``)."""
    from .. import capacity_search as cap

    scr = Screen(Rows(tasks, base), config)
    target = scr.uncontended_p95 * load
    lo, hi = 0.0, 50.0
    for _ in range(50):
        mid = (lo + hi) / 2
        r = scr.latency(mid, replicas)
        lo, hi = (mid, hi) if r is not None and r[0] <= target else (lo, mid)
    n = max(len(tasks), math.ceil(cap.Search().steady_spans * target * lo * 1.5))
    rows = cap._run(cap.repeated(tasks, n), base, config.protocol, lo, replicas.get("strong", 1),
                    replicas.get("weak") or cap.AMPLE)
    return lo, target, cap.latency_percentiles(rows)[1]


def searchable_protocols() -> list[str]:
    """The protocols plan can search: those whose schedule the twin costs (the screen needs its
    expected calls), and those on the API backend."""
    return [n for n, p in PROTOCOLS.items() if p.twin or p.on_api]


def check_protocols(names, api: str | None) -> tuple[str, ...]:
    """``names`` if plan can search each of them with this ``api`` (ValueError, one line)."""
    known = searchable_protocols()
    bad = [n for n in names if n not in known]
    if bad:
        raise ValueError(f"--protocols: plan cannot search {', '.join(bad)}; it searches {', '.join(known)}")
    if any(map(on_api, names)) and not api:
        raise ValueError("--protocols edge-cloud / cloud-strong-only need --api PROFILE (the strong model's API)")
    return tuple(names)


def api_of(base) -> dict:
    """The API the strong model is behind in ``base``: its prices per million tokens, date, and
    the TTFT and output speed its calls take, each with where it comes from."""
    a = api_profile(base.api)
    (ttft, ttft_from), (tps, tps_from) = api_speeds(a, base.api_ttft_s, base.api_output_tps)
    return {"name": a.name, "input_per_mtok_usd": a.price_input_per_mtok_usd,
            "cached_input_per_mtok_usd": a.price_cached_input_per_mtok_usd,
            "output_per_mtok_usd": a.price_output_per_mtok_usd, "ttft_s": ttft, "ttft_from": ttft_from,
            "output_tokens_per_s": tps, "output_tokens_per_s_from": tps_from, "date": a.date, "source": a.source}


#: What a plan assumes, in the words its output prints.
ASSUMPTIONS = [
    "screen: expected per-task costs from the exact twin (uncontended calls, verdicts at p_u); each pool a "
    "batching server whose decode slows by f(B) (roofline decode time at batch B over batch 1, at the tasks' "
    "mean context) and by the share of time other calls' prefills take; task p95 scaled from its "
    "uncontended p95 (docs/plan.md states its error against the simulator)",
    "confirmed: the screened fleet as gcd(strong, weak) identical cells, tasks spread evenly over the cells (where "
    "that is too few cells for a steady run of one, the weak pool grows by the fewest replicas that make enough, at "
    "most to a cell per strong replica, as capacity plans); one cell simulated at its share of the task rate "
    "as Poisson arrivals (burstier than an even spread: conservative), until its arrivals span 3 of its own p95s; p95 "
    "over tasks 20%..90% by arrival; a fleet that misses grows each pool by a tenth until it meets",
    "cost: every replica paid by the hour at the on-demand list prices below, busy or idle",
]


def assumptions(base) -> list[str]:
    """:data:`ASSUMPTIONS`, and what the plan takes of the scenario ``base``'s prefix cache and routing."""
    from ..config import serving_words

    return [*ASSUMPTIONS,
            "the screen takes a session's prefix as always resident, at no memory cost (its roofline sees no eviction); "
            f"the confirmations simulate {serving_words(base.prefix_cache, base.routing)}",
            *([f"p_u: the screen at the mean of {base.p_dist} (its call weights take one p_u); the confirmations "
               f"draw each task's p_u from it"] if base.p_dist else [])]


def point(s: Screened) -> dict:
    """One screened configuration as plan's JSON has it."""
    c = s.config
    return {"protocol": c.protocol, "K": c.K or None,
            "strong": None if c.strong is None else {"device": c.strong.device.name, "gpus_per_replica": c.strong.n_devices,
                                                     "expert_parallel": c.strong.expert_parallel},
            "weak": None if c.weak is None else {"device": c.weak.device.name, "gpus_per_replica": c.weak.n_devices},
            "api": c.api,
            "feasible": s.feasible, "strong_replicas": s.strong_replicas, "weak_replicas": s.weak_replicas,
            "fleet": c.fleet(s.strong_replicas, s.weak_replicas),
            "fleet_gpus": s.gpus, "cost_per_1k_tasks_usd": s.cost_per_1k, "latency_p95_s": s.p95_s,
            "uncontended_latency_p95_s": s.uncontended_p95_s, "strong_batch": s.strong_batch,
            "weak_batch": s.weak_batch, "why_not": s.why or None}


def to_json(res: dict) -> dict:
    """A plan (:func:`recommend`'s result, with ``seconds``, ``tasks``, ``engine`` and ``api``
    added by :func:`costsim.api.plan`) as plan's ``--json`` prints it."""
    from ..measured import latency_under_load  # the simulator's error under load (it imports SimPy)

    rec = res["recommended"]
    return {"task_rate_per_s": res["task_rate_per_s"], "latency_p95_target_s": res["latency_p95_target_s"],
            "configurations": res["configurations"], "feasible_configurations": res["feasible"], "elapsed_s": res["seconds"],
            "tasks": res["tasks"], "front": [point(s) for s in res["front"]],
            "confirmed": [{"screen": point(s), "simulated": r} for s, r in res["confirmed"]],
            "recommended": None if rec is None else {"screen": point(rec[0]), "simulated": rec[1]},
            "why": res.get("why") or res.get("why_none"), "specagent_pays": res.get("specagent_pays"),
            "prices": res["prices"], "api": res.get("api"), "resumed": res.get("resumed"), "engine": res["engine"],
            "assumptions": [*res["assumptions"], latency_under_load()]}

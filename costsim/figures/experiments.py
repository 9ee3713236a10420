"""One experiment per figure: each returns a DataFrame of the numbers its figure plots (its CSV),
with what the drawing and the index need besides in ``df.attrs``.

Closed forms from :mod:`costsim.formulas`, costs from :mod:`costsim.roofline`, runs of
:mod:`costsim.sim` with fixed seeds: the same code gives the same numbers.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import formulas, roofline
from ..config import COMMANDS, DEPLOYMENTS, WORKLOAD
from ..paper import TAU2_K, TAU2_P, implied_strong_step_scale, tau2_benchmarks
from ..traces.stats import step_shape

#: Pass counting's v/d (predict's default): (1 prefill pass + the verdict's tokens) / the workload's step.
STEP_TOKENS, VERDICT_TOKENS = WORKLOAD.step_tokens, WORKLOAD.verdict_tokens
VD_PASSES = float(formulas.v_over_d_passes(VERDICT_TOKENS, STEP_TOKENS))


def _frame(columns, rows, **attrs) -> pd.DataFrame:
    df = pd.DataFrame([tuple(r) for r in rows], columns=list(columns))
    df.attrs.update(attrs)
    return df


# --- 1. the cost model's curves ------------------------------------------------------------------

COST_MODEL_NS = (1, 2, 4, 6, 8, 16)


def default_operating_point() -> dict:
    """The default operating point as `costsim predict` computes it (nothing given but p_u):
    p_u = ``COMMANDS.p_accept``, K = ``WORKLOAD.K`` (every chunk reviewed at n = K), and kappa
    from the roofline of the default strong and weak deployments at the default batch and
    context; R_u and L_u there by pass counting."""
    from ..prediction import predict

    r = predict(COMMANDS.p_accept, WORKLOAD.K)
    return {"p": float(r["p"]), "n": int(r["K"]), "kappa": float(r["kappa"]), "R": float(r["R"]), "L": float(r["L"]),
            "v_over_d": float(r["v_over_d"]), "rho": float(r["rho"]), "kappa_source": r["sources"]["kappa"]}


def cost_model(kappa: float = 0.2, rho: float = WORKLOAD.rho) -> pd.DataFrame:
    """R_u and L_u against p_u by pass counting, for chunk lengths :data:`COST_MODEL_NS`: every
    20th of 400 points per curve; ``attrs["curves"]``: all of them and the p = 0, p → 1 limits.
    ``kappa`` is illustrative; curve ``L_default`` is L_u at the default operating point's chunk
    length and kappa (:func:`default_operating_point`), ``result["default"]`` that point."""
    p = np.linspace(0.0, 0.999, 400)
    rows, curves = [], {}
    for which in ("R", "L"):
        for n in COST_MODEL_NS:
            if which == "R":
                y = formulas.R(p, n, VD_PASSES, rho)
                y0, y1 = formulas.R_limit_p0(VD_PASSES, rho), formulas.R_limit_p1(n, VD_PASSES)
            else:
                y = formulas.L(p, n, VD_PASSES, rho, kappa)
                y0, y1 = formulas.L_limit_p0(n, VD_PASSES, rho, kappa), formulas.L_limit_p1(n, VD_PASSES, kappa)
            curves[(which, n)] = (y, float(y0), float(y1))
            rows += [(which, n, float(pi), float(yi)) for pi, yi in zip(p[::20], y[::20])]
    op = default_operating_point()
    n0, k0 = op["n"], op["kappa"]
    y = formulas.L(p, n0, VD_PASSES, rho, k0)
    curves[("L_default", n0)] = (y, float(formulas.L_limit_p0(n0, VD_PASSES, rho, k0)),
                                 float(formulas.L_limit_p1(n0, VD_PASSES, k0)))
    rows += [("L_default", n0, float(pi), float(yi)) for pi, yi in zip(p[::20], y[::20])]
    R_all = np.concatenate([np.append(curves[("R", n)][0], curves[("R", n)][1:]) for n in COST_MODEL_NS])
    return _frame(["curve", "n", "p", "value"], rows, p=p, curves=curves,
                  result={"kappa": kappa, "rho": rho, "v_over_d": VD_PASSES,
                          "R_range": (float(R_all.min()), float(R_all.max())), "default": op})


# --- 2. costsim's model fitted to the paper's numbers ------------------------------------------------------------------


def paper_fit() -> pd.DataFrame:
    """:func:`costsim.paper.fit_to_paper`, one row per compared number."""
    from ..paper import fit_to_paper as run

    res = run()
    return _frame(["benchmark", "quantity", "role", "observed", "observed_lo", "observed_hi", "model", "miss", "p_u",
                   "q", "K"],
                  [(r["benchmark"], r["quantity"], r["role"], r["observed"], r["lo"], r["hi"], r["model"], r["miss"],
                    r["p_u"], r["q"], r["K"]) for r in res["rows"]], result=res)


# --- 3. the balance point under contention ----------------------------------------------------------

BALANCE_SESSIONS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def balance_runs(devices=("h20", "h100", "b200"), sessions=BALANCE_SESSIONS, protocol="specagent-hold-responses"):
    """SpecAgent's strong-time ratio against the strong replica's running batch, per device.

    Strong Llama-3.1-70B (bf16, on as many devices as hold it), weak Llama-3.1-8B on one device
    (8 weak replicas, so that the strong side is what contends), 1,500-token initial context,
    p_u = 0.8, K = 6, one strong replica, closed-loop sessions; tasks = max(60, 2·sessions).
    """
    from ..memory import devices_to_hold, max_sequences
    from ..profiles import Deployment, load_device, load_model
    from ..metrics import summarize
    from ..scenario import Scenario
    from ..sim import simulate
    from ..traces.synthetic import Shape, generate

    m70, m8 = load_model("llama-3.1-70b"), load_model("llama-3.1-8b")
    shape = Shape(initial_context=1500)
    probe = generate(60, seed=4, shape=shape)
    ctx = step_shape(probe)[2]
    out = {}
    for dev_name in devices:
        dev = load_device(dev_name)
        fewest = Deployment(m70, dev, devices_to_hold(m70, dev, "bf16"), "bf16")
        # The fewest GPUs that hold the weights may hold too little KV to reach a finite B*:
        # double them until the pool holds B* sequences at the tasks' mean context (at most 8).
        strong = fewest
        while (math.isfinite(roofline.balance_batch(strong, ctx)) and strong.n_devices < 8
               and max_sequences(strong, ctx) < roofline.balance_batch(strong, ctx)):
            strong = Deployment(m70, dev, 2 * strong.n_devices, "bf16")
        weak = Deployment(m8, dev, 1, "bf16")
        pts = []
        for s in sessions:
            tasks = generate(max(60, 2 * s), seed=4, shape=shape)
            sc = Scenario(strong=strong, weak=weak, p=0.8, K=6, sessions=s, weak_replicas=8,
                          protocols=("strong-only", protocol))
            res = summarize(simulate(tasks, sc))
            spec = res[protocol]
            pts.append(dict(sessions=s, batch=res["strong-only"]["strong_mean_batch"]["mean"],
                            spec_batch=spec["strong_mean_batch"]["mean"], R_time=spec["R_time"]["mean"],
                            R_time_lo=spec["R_time"]["ci95"][0], R_time_hi=spec["R_time"]["ci95"][1],
                            R=spec["R"]["mean"]))
        out[dev_name] = dict(deployment=strong, points=pts, context=ctx,
                             B_star=roofline.balance_batch(strong, ctx),
                             B_star_paper=roofline.balance_batch_paper(strong),
                             kv_limit=max_sequences(strong, ctx), fewest_gpus=fewest.n_devices,
                             fewest_kv_limit=max_sequences(fewest, ctx),
                             fewest_B_star=roofline.balance_batch(fewest, ctx))
    return out


def balance_point() -> pd.DataFrame:
    """:func:`balance_runs`, one row per device and session count; ``attrs["runs"]`` per device,
    ``attrs["moe"]``: B* of the paper's MoE strong model (FP8 on 8 H20) by context."""
    from ..sizing import deployments

    runs = balance_runs()
    rows = [(dev, q["sessions"], q["batch"], q["spec_batch"], q["R_time"], q["R_time_lo"], q["R_time_hi"], q["R"],
             r["B_star"], r["B_star_paper"], r["kv_limit"]) for dev, r in runs.items() for q in r["points"]]
    s, _ = deployments(strong_device="h20")
    moe = {ctx: roofline.balance_batch(s, ctx) for ctx in (0, 1500, int(WORKLOAD.context_tokens), 32000)}
    result = {"runs": {k: {**{kk: vv for kk, vv in v.items() if kk != "deployment"}, "gpus": v["deployment"].n_devices}
                       for k, v in runs.items()}, "moe": moe, "moe_B_star_paper": float(roofline.balance_batch_paper(s))}
    return _frame(["device", "sessions", "strong_only_batch", "specagent_batch", "R_time", "R_time_lo", "R_time_hi",
                   "R_hbm", "B_star", "B_star_paper", "kv_limit"], rows, runs=runs, result=result)


def crossing(points) -> float:
    """The running batch at which R in time first reaches 1 (interpolated in log batch)."""
    for a, b in zip(points, points[1:]):
        if a["R_time"] < 1.0 <= b["R_time"]:
            x = (1.0 - a["R_time"]) / (b["R_time"] - a["R_time"])
            return float(np.exp(np.log(a["batch"]) + x * (np.log(b["batch"]) - np.log(a["batch"]))))
    return float("nan")


# --- 4. capacity curves -------------------------------------------------------------------------------

CAPACITY_RATES = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
CAPACITY_TASKS = 300
#: The latency target of figure 4: above an uncontended Strong-only task's p95 on the default
#: deployment under the shipped (vLLM) engine profile (below it Strong-only has no replica count
#: at any rate and the figure cannot be drawn), with room for queueing. It was 120 s until the MoE
#: latency became per engine and layout (2026-12-02): vLLM's tensor-sharded MoE layers cost
#: 2.5x the old shared figure, and the uncontended p95 rose past 120 s.
CAPACITY_P95_S = 180.0


def capacity_curves(rates=CAPACITY_RATES, n_tasks=CAPACITY_TASKS, latency_p95_s=CAPACITY_P95_S):
    """Replicas for each task rate, Strong-only and SpecAgent, default deployment on H20."""
    from .. import capacity_search as cap
    from ..sizing import deployments
    from ..scenario import Scenario
    from ..traces.synthetic import generate

    s, w = deployments(strong_device="h20", weak_device="h20")
    tasks = generate(n_tasks, seed=0)
    sc = Scenario(strong=s, weak=w, p=0.8, K=6)
    srch = cap.Search(latency_p95_s=latency_p95_s, rel_tol=0.05)
    names = ("strong-only", "specagent")
    cells = {n: cap.search_cell(tasks, sc, n, srch) for n in names}
    table = []
    for rate in rates:
        for n in names:
            S, W = cap.replicas_for(cells[n], rate)
            table.append(dict(protocol=n, rate=rate, strong=S, weak=W, gpus=S * s.n_devices + W * w.n_devices,
                              usd_per_1k=fleet_usd_per_1k(s, w, S, W, rate)))
    return table, cells, (s, w)


def fleet_usd_per_1k(s, w, strong: int, weak: int, rate: float) -> float:
    """USD per 1,000 tasks of ``strong`` and ``weak`` replicas at ``rate`` tasks/s, as `costsim
    capacity` costs a fleet (:func:`costsim.fleet_cost.costs`: the devices' on-demand list prices,
    every GPU paid by the hour, busy or idle)."""
    from ..fleet_cost import costs

    return costs(s, w, strong, weak, rate)["cost_per_1k_tasks_usd"]


def capacity() -> pd.DataFrame:
    """:func:`capacity_curves` at :data:`CAPACITY_RATES`; ``attrs["grid"]``, ``attrs["curves"]``:
    replicas over a fine grid of rates, for drawing."""
    from .. import capacity_search as cap

    from ..fleet_cost import price_per_gpu_hour

    table, cells, (s, w) = capacity_curves()
    grid = np.geomspace(CAPACITY_RATES[0], CAPACITY_RATES[-1], 600)
    curves, usd = {}, {}
    for n, cell in cells.items():
        counts = [cap.replicas_for(cell, r) for r in grid]
        curves[n] = (np.array([k[0] for k in counts]), np.array([k[1] for k in counts]))
        usd[n] = np.array([fleet_usd_per_1k(s, w, S, W, r) for (S, W), r in zip(counts, grid)], float)
    prices = {role: dict(zip(("usd_per_gpu_hour", "source"), price_per_gpu_hour(d.device)), device=d.device.name,
                         date=d.device.price_date) for role, d in (("strong", s), ("weak", w))}
    result = {"cells": {n: dict(strong=c.strong, weak=c.weak, rate=c.rate, capped=c.capped,
                                uncontended_p95_s=c.uncontended_p95_s) for n, c in cells.items()}, "table": table,
              "prices": prices}
    return _frame(["protocol", "task_rate", "strong_replicas", "weak_replicas", "gpus", "usd_per_1k_tasks"],
                  [(r["protocol"], r["rate"], r["strong"], r["weak"], r["gpus"], r["usd_per_1k"]) for r in table],
                  grid=grid, curves=curves, usd=usd, gpus_per_replica=(s.n_devices, w.n_devices), result=result)


# --- 5. pass counting versus roofline time ----------------------------------------------------------------

PASS_COUNTING_OBS = (int(WORKLOAD.obs_tokens), 1000, 2000)


def pass_counting() -> pd.DataFrame:
    """v/d in roofline time per reviewed chunk length, H20 and H100, three observation lengths;
    ``attrs["R_ratio"]``: R_u in roofline time over R_u by pass counting against p_u, K = 6."""
    from ..sizing import deployments

    lengths = np.arange(1, 9)
    rows, vd_at_6 = [], {}
    for dev in ("h20", "h100"):
        s, w = deployments(strong_device=dev, weak_device=dev)
        for o in PASS_COUNTING_OBS:
            pp = roofline.protocol_parameters(s, w, lengths, STEP_TOKENS, o, VERDICT_TOKENS, 1.0,
                                              WORKLOAD.context_tokens, DEPLOYMENTS.batch, DEPLOYMENTS.batch)
            vd = pp.v_over_d["time"]
            rows += [(dev, o, int(n), float(v), bool(cb)) for n, v, cb in zip(lengths, vd, pp.verify_compute_bound)]
            vd_at_6[(dev, o)] = (float(vd[5]), pp.rho["time"])
    p = np.linspace(0.0, 0.999, 300)
    base = formulas.R(p, 6, VD_PASSES, 1.0)
    ratio = {k: formulas.R(p, 6, vd, rho) / base for k, (vd, rho) in vd_at_6.items()}
    return _frame(["device", "obs_tokens", "n", "v_over_d_time", "verify_compute_bound"], rows, p=p, R_ratio=ratio,
                  result={"v_over_d_time_at_6_h20": {o: v for (dev, o), (v, _) in vd_at_6.items() if dev == "h20"}})


# --- 6. tau² replay -------------------------------------------------------------------------------------------


def replay_tau2(p=TAU2_P, K=TAU2_K):
    from ..sizing import deployments
    from ..scenario import Scenario
    from ..sim import simulate
    from ..traces import load

    s, w = deployments()
    out = {}
    for name in ("tau2-airline", "tau2-retail"):
        tasks = load(name).tasks
        rows = simulate(tasks, Scenario(strong=s, weak=w, p=p, K=K, protocols=("strong-only", "specagent"), seed=0))
        so = {r["task_index"]: r for r in rows if r["protocol"] == "strong-only"}
        sa = {r["task_index"]: r for r in rows if r["protocol"] == "specagent"}
        out[name] = [(tasks[i].task_id, so[i]["strong_calls"], sa[i]["strong_calls"], sa[i]["reviews"],
                      sa[i]["committed_steps"]) for i in sorted(so)]
    return out


def tau2_replay() -> pd.DataFrame:
    """:func:`replay_tau2`: strong calls per task under Strong-only and SpecAgent, per trace;
    ``attrs["result"]``: per-trace means, the paper's, and the strong step scale the paper's wall
    implies."""
    data = replay_tau2()
    paper = {t: (b["strong_only_calls"], b["specagent_calls"]) for t, b in tau2_benchmarks().items()}
    summary = {}
    for name, pts in data.items():
        so = np.array([q[1] for q in pts], float)
        sa = np.array([q[2] for q in pts], float)
        summary[name] = dict(tasks=len(so), strong_only=float(so.mean()), specagent=float(sa.mean()),
                             median_reduction=float(np.median(1.0 - sa / so)), paper=paper[name],
                             steps_per_review=sum(q[4] for q in pts) / sum(q[3] for q in pts),
                             thinking=implied_strong_step_scale(name))
    rows = [(name, tid, int(a), int(b)) for name, pts in data.items() for tid, a, b, _, _ in pts]
    return _frame(["trace", "task_id", "strong_only_calls", "specagent_calls"], rows, paper=paper, result=summary)


#: Closed-loop sessions on the one strong replica of :func:`prefix_cache` (fig7).
CACHE_SESSIONS = (1, 4, 16, 32, 64, 96, 128, 192, 256)


def prefix_cache(sessions=CACHE_SESSIONS, protocol="specagent-hold-responses") -> pd.DataFrame:
    """SpecAgent's strong-time ratio against sessions per strong replica, with a session's prefix
    always resident (``hot``: the closed forms' assumption), kept in the engine's prefix cache
    with LRU eviction (``evict``) and not kept (``off``); and, evicting, each protocol's strong
    prefix-cache hit rate (tokens). fig3's workload on one strong Llama-3.1-70B bf16 replica of
    4 H20 (the fewest that hold it: a KV pool that fills), weak Llama-3.1-8B on 8 replicas of one
    H20, vLLM, p_u = 0.8, K = 6; tasks = max(60, 2·sessions), seed 4. Each protocol has its own
    fleet (costsim simulates no shared pool): a protocol's sessions evict each other's prefixes."""
    from ..memory import max_sequences
    from ..metrics import summarize
    from ..profiles import Deployment, load_device, load_model
    from ..scenario import Scenario
    from ..sim import simulate
    from ..traces.synthetic import Shape, generate

    h20 = load_device("h20")
    strong, weak = Deployment(load_model("llama-3.1-70b"), h20, 4, "bf16"), Deployment(load_model("llama-3.1-8b"), h20, 1, "bf16")
    shape = Shape(initial_context=1500)
    rows = []
    for n in sessions:
        tasks = generate(max(60, 2 * n), seed=4, shape=shape)
        for mode in ("hot", "evict", "off"):
            sc = Scenario(strong=strong, weak=weak, p=0.8, K=6, sessions=n, weak_replicas=8, prefix_cache=mode,
                          protocols=("strong-only", protocol))
            res = summarize(simulate(tasks, sc))
            sp, so = res[protocol], res["strong-only"]
            rows.append((n, mode, sp["R_time"]["mean"], sp["R_time"]["ci95"][0], sp["R_time"]["ci95"][1],
                         so["strong_prefix_cache_hit_rate"]["mean"], sp["strong_prefix_cache_hit_rate"]["mean"],
                         so["strong_mean_batch"]["mean"]))
    ctx = step_shape(generate(60, seed=4, shape=shape))[2]
    evicting = [r for r in rows if r[1] == "evict"]
    first = next((r[0] for r in evicting if min(r[5], r[6]) < 1.0), None)
    result = {"deployment": f"{strong.model.name} {strong.weight_dtype} on {strong.n_devices}x {h20.name.upper()}",
              "kv_sequences": max_sequences(strong, ctx), "context": ctx,
              "first_evicting_sessions": first,
              "at_most": {m: {k: v for k, v in zip(("sessions", "R_time"), (rows[-3 + i][0], rows[-3 + i][2]))}
                          for i, m in enumerate(("hot", "evict", "off"))},
              "hit_rates_at_most": {"strong-only": evicting[-1][5], "specagent": evicting[-1][6]}}
    return _frame(["sessions", "prefix_cache", "R_time", "R_time_lo", "R_time_hi", "strong_only_strong_hit_rate",
                   "specagent_strong_hit_rate", "strong_only_batch"], rows, result=result, protocol=protocol)

"""Drawing only: each figure's experiment (:mod:`.experiments`) onto a deterministic PNG.

matplotlib is imported here only, and only when a figure is drawn; Agg backend, fixed rcParams
and no software/date metadata, so the same code and library versions give the same bytes.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..paper import TAU2_K, TAU2_P
from ..config import WORKLOAD
from ..files import write_atomic
from ..protocols.chunking import DEFAULT_CHUNKING
from .experiments import BALANCE_SESSIONS, CAPACITY_P95_S, CAPACITY_TASKS, PASS_COUNTING_OBS, STEP_TOKENS, VD_PASSES, VERDICT_TOKENS

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcdefaults()
    matplotlib.rcParams.update({
        "font.family": "DejaVu Sans", "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10,
        "legend.fontsize": 8.5, "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.dpi": 100,
        "savefig.dpi": 130, "axes.grid": True, "grid.alpha": 0.3, "svg.hashsalt": "costsim",
        "axes.spines.top": False, "axes.spines.right": False,
    })
    return plt


def save(fig, path: Path) -> None:
    plt = _plt()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None}, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def _plain_log(ax, axis="y"):
    """Log-axis tick labels as plain numbers (0.01, 0.1, 1, 2) instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def cost_model(df):
    plt = _plt()
    a = df.attrs
    kappa, rho, p = a["result"]["kappa"], a["result"]["rho"], a["p"]
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3))
    for ax, which in zip(axes, ("R", "L")):
        for n, c in zip(sorted({k[1] for k in a["curves"]}), COLORS):
            y, y0, y1 = a["curves"][(which, n)]
            ax.plot(p, y, color=c, lw=1.6, label=f"n = {n}")
            ax.plot([1.0], [y1], marker="o", color=c, ms=5, clip_on=False, zorder=5)
            ax.plot([0.0], [y0], marker="s", color=c, ms=4, clip_on=False, zorder=5)
        ax.axhline(1.0, color="k", lw=1, ls="--")
        ax.text(0.3 if which == "R" else 0.03, 1.06 if which == "R" else 0.94, "Strong-only = 1", fontsize=8.5,
                va="bottom" if which == "R" else "top", transform=ax.get_yaxis_transform())
        ax.set_yscale("log")
        _plain_log(ax)
        ax.set_xlim(0, 1)
        ax.set_xlabel("per-step acceptance rate $p_u$")
    axes[0].set_ylabel("$R_u$: strong weight passes per committed step\n(relative to Strong-only)")
    axes[0].set_title("(a) $R_u$ — strong HBM traffic, memory-bound replica")
    axes[1].set_ylabel("$L_u$: wall time per committed step\n(relative to Strong-only)")
    axes[1].set_title(f"(b) $L_u$ — latency, weak/strong step time $\\kappa$ = {kappa:g}")
    axes[0].set_ylim(3e-3, 2.0)
    axes[1].set_ylim(0.15, 6.0)
    axes[0].legend(loc="lower left", ncol=2, title="chunk length n")
    axes[0].annotate("■ p = 0 limit: v/d + ρ (the same for every n)\n● p → 1 limit: v/(n d)", xy=(0.03, 0.45),
                     xycoords="axes fraction", ha="left", va="top", fontsize=8.5,
                     bbox=dict(boxstyle="round", fc="white", ec="0.7"))
    axes[1].annotate("■ p = 0 limit: v/d + ρ + κ n\n● p → 1 limit: v/(n d) + κ", xy=(0.03, 0.04),
                     xycoords="axes fraction", fontsize=8.5, bbox=dict(boxstyle="round", fc="white", ec="0.7"))
    fig.suptitle(f"The paper's cost model: v/d = {VD_PASSES:.3f} (1 prefill pass + {VERDICT_TOKENS:g} verdict tokens "
                 f"over a {STEP_TOKENS:g}-token step), ρ = {rho:g}", fontsize=10.5)
    fig.tight_layout()
    return fig


def paper_fit(df):
    plt = _plt()
    res = df.attrs["result"]
    rows, fit = res["rows"], res["fit"]
    marker = {"strong calls (SA/SO)": "o", "HBM-read fraction": "s", "wall-time fraction": "^",
              "decoded strong tokens (SA/SO)": "D", "reviews that reject": "v", "strong share of HBM": "P"}
    color = dict(zip(dict.fromkeys(r["benchmark"] for r in rows), COLORS))
    fig, ax = plt.subplots(figsize=(7.6, 6.4))
    ax.plot([0, 1.0], [0, 1.0], color="k", lw=1)
    ax.fill_between([0, 1.0], [-0.05, 0.95], [0.05, 1.05], color="0.85", alpha=0.6, lw=0)
    for r in rows:
        ax.errorbar(r["model"], r["observed"], yerr=[[r["observed"] - r["lo"]], [r["hi"] - r["observed"]]],
                    fmt=marker[r["quantity"]], ms=8, color=color[r["benchmark"]],
                    mfc="white" if r["role"] == "fitted" else color[r["benchmark"]], mew=1.6, capsize=3, lw=1.2)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    h = [Line2D([], [], ls="", marker="o", color=c, ms=7, label=k) for k, c in color.items()]
    h += [Line2D([], [], ls="", marker=m, color="0.3", ms=7, label=q) for q, m in marker.items()]
    h += [Line2D([], [], ls="", marker="o", color="0.3", mfc="white", ms=7, label="hollow: fitted"),
          Line2D([], [], ls="", marker="o", color="0.3", ms=7, label="filled: predicted"),
          Patch(color="0.85", alpha=0.6, label="within ±0.05 of the paper")]
    ax.legend(handles=h, loc="upper left", fontsize=8)
    ax.set_xlim(0, 1.0)
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("costsim's model (renewal form, chunk lengths from a write rate q)")
    ax.set_ylabel("published in the paper")
    pred = [r for r in rows if r["role"] == "predicted"]
    within = sum(r["miss"] <= 0.05 for r in pred)
    ax.set_title("costsim's model fitted to the paper's numbers — fitted: (p, q) per benchmark, κ on Airline's\n"
                 f"wall; shared ω, v/d, ρ; predicted: {len(pred)}, {within} within 0.05 (not the paper's figure)",
                 fontsize=9.5)
    ax.text(0.98, 0.02, f"ω = {fit['omega']:.3f} (profiles), κ = {fit['kappa']:.3f}\n"
            f"v/d = {fit['v_over_d']:.3f}, ρ = {fit['rho']:.3f} (VitaBench), 1.5 separate on AutomationBench",
            ha="right", va="bottom", fontsize=8.5, bbox=dict(boxstyle="round", fc="white", ec="0.7"))
    fig.tight_layout()
    return fig


def balance_point(df):
    import math

    plt = _plt()
    runs = df.attrs["runs"]
    fig, ax = plt.subplots(figsize=(8.8, 5.2))
    for (dev, r), c in zip(runs.items(), COLORS):
        pts = r["points"]
        x = [q["batch"] for q in pts]
        y = [q["R_time"] for q in pts]
        err = [[q["R_time"] - q["R_time_lo"] for q in pts], [q["R_time_hi"] - q["R_time"] for q in pts]]
        d = r["deployment"]
        ax.errorbar(x, y, yerr=err, color=c, marker="o", ms=5, lw=1.8, capsize=2,
                    label=f"{d.device.display_name.split(' (')[0]} ({d.n_devices}× for the 70B)")
        if math.isfinite(r["B_star"]):
            ax.axvline(r["B_star"], color=c, ls="--", lw=1.2)
            ax.text(r["B_star"] * 1.04, 1.42, f"B* = {r['B_star']:.0f} ({dev}, roofline)\n"
                    f"peak FLOPs/bandwidth: {r['B_star_paper']:.0f}", color=c, fontsize=8.5, va="top")
        else:
            ax.text(0.02, 0.02 + 0.055 * (len(runs) - 1 - list(runs).index(dev)),
                    f"{dev.upper()}: B* = ∞ at {r['context']:,.0f} tokens of context (peak FLOPs/bandwidth: {r['B_star_paper']:.0f})",
                    color=c, fontsize=8.5, ha="left", transform=ax.transAxes)
        if r["kv_limit"] < 300:
            ax.axvline(r["kv_limit"], color=c, ls=":", lw=1.4)
            ax.text(r["kv_limit"] * 0.96, 0.22, f"KV limit {r['kv_limit']} ({dev})", color=c, fontsize=8,  # above the B* notes
                    rotation=90, ha="right", va="bottom")
    ax.axhline(1.0, color="k", lw=1, ls=":")
    ax.text(1.05, 1.02, "Strong-only", fontsize=8.5)
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import FixedLocator, FuncFormatter

    ax.xaxis.set_major_locator(FixedLocator([2.0**k for k in range(9)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel(f"strong replica's mean running decode batch under Strong-only (sequences; {BALANCE_SESSIONS[0]} to {BALANCE_SESSIONS[-1]} sessions; "
                  "held within the KV pool)")
    ax.set_ylabel("SpecAgent's strong-replica time / Strong-only's ($R$ in time)")
    ax.set_ylim(0, 1.45)
    ax.set_title("Past the balance point the extra prefill FLOPs become time\n"
                 "strong Llama-3.1-70B bf16, weak Llama-3.1-8B, 1,500-token start, p_u = 0.8, K = 6, "
                 "holding writes and responses", fontsize=10)
    ax.legend(loc="upper left")
    fig.tight_layout()
    return fig


def capacity(df):
    plt = _plt()
    a = df.attrs
    grid, (s_gpus, w_gpus), cells = a["grid"], a["gpus_per_replica"], a["result"]["cells"]
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.6))
    style = {"strong-only": COLORS[0], "specagent": COLORS[1]}
    for n, c in style.items():
        S, W = a["curves"][n]
        axes[0].plot(grid, S, color=c, lw=2.0, label=f"{n}: strong replicas ({s_gpus}× H20 each)")
        if W.any():
            axes[0].plot(grid, W, color=c, lw=1.4, ls=(0, (4, 2)), label=f"{n}: weak replicas (1× H20 each)")
        axes[1].plot(grid, S * s_gpus + W * w_gpus, color=c, lw=2.0, label=n)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax, "x")
        _plain_log(ax, "y")
        ax.set_xlabel("task rate (tasks/s, Poisson arrivals)")
    axes[0].set_ylabel("replicas needed")
    axes[0].set_title(f"(a) replicas for task-latency p95 ≤ {CAPACITY_P95_S:g} s")
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].set_ylabel("H20 GPUs in total")
    axes[1].set_title("(b) GPUs in total (strong + weak)")
    cs = cells["specagent"]
    note = (f"cells found: Strong-only 1 strong replica ≤ {cells['strong-only']['rate']:.3f} tasks/s; "
            f"SpecAgent 1 strong + {cs['weak']} weak ≤ {cs['rate']:.3f} tasks/s"
            + (" (the probes' limit: a lower bound)" if cs["capped"] else ""))
    axes[1].legend(loc="upper left")
    fig.suptitle("Capacity, Qwen3.5-397B-A17B FP8 (strong) and Qwen3.5-4B (weak) on H20, p_u = 0.8, K = 6, "
                 f"{CAPACITY_TASKS} synthetic tau²-shaped tasks per probe\n" + note, fontsize=9.5)
    fig.tight_layout()
    return fig


def pass_counting(df):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.4))
    for dev, ls in (("h20", "-"), ("h100", "--")):
        for o, c in zip(PASS_COUNTING_OBS, COLORS):
            d = df[(df.device == dev) & (df.obs_tokens == o)]
            axes[0].plot(d.n.to_numpy(), d.v_over_d_time.to_numpy(), color=c, ls=ls, marker="o" if dev == "h20" else None,
                         ms=4, lw=1.6, label=f"roofline, {dev.upper()}, {o}-token observations")
    axes[0].axhline(VD_PASSES, color="k", lw=1.6, label="pass counting (the paper): 1 pass + verdict")
    axes[0].set_xlabel("reviewed chunk length n (steps)")
    axes[0].set_ylabel("v/d: verification time / strong step time")
    axes[0].set_title("(a) a review's cost grows with the chunk it prefills")
    axes[0].legend(fontsize=7.5, loc="upper left")
    axes[0].set_ylim(0, 0.3)
    p = df.attrs["p"]
    for (dev, o), ratio in df.attrs["R_ratio"].items():
        axes[1].plot(p, ratio, color=COLORS[PASS_COUNTING_OBS.index(o)], lw=1.6, ls="-" if dev == "h20" else "--",
                     label=f"{dev.upper()}, {o}-token observations")
    axes[1].axhline(1.0, color="k", lw=1.6, label="pass counting")
    axes[1].set_xlabel("per-step acceptance rate $p_u$")
    axes[1].set_ylabel("$R_u$ in roofline time / $R_u$ by pass counting")
    axes[1].set_title("(b) how optimistic pass counting is, K = 6")
    axes[1].legend(fontsize=8, loc="upper left")
    fig.suptitle("Pass counting versus the roofline: Qwen3.5-397B-A17B FP8 on 8 GPUs, batch 16, "
                 f"{WORKLOAD.context_tokens:,.0f}-token context, {WORKLOAD.step_tokens:,.0f}-token steps", fontsize=9.5)
    fig.tight_layout()
    return fig


def tau2_replay(df):
    plt = _plt()
    paper = df.attrs["paper"]
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.4))
    reds = {}
    jit = np.random.default_rng(0)  # the scatter's jitter: presentation only
    traces = list(dict.fromkeys(df.trace))
    for name, c in zip(traces, COLORS):
        d = df[df.trace == name]
        so, sa = d.strong_only_calls.to_numpy(float), d.specagent_calls.to_numpy(float)
        j = jit.uniform(-0.25, 0.25, size=(2, len(so)))
        axes[0].scatter(so + j[0], sa + j[1], s=14, color=c, alpha=0.55, lw=0, label=f"{name}: tasks ({len(so)})")
        axes[0].plot([so.mean()], [sa.mean()], marker="X", ms=11, color=c, mec="k", ls="",
                     label=f"{name}: mean {so.mean():.1f} → {sa.mean():.1f}")
        axes[0].plot([paper[name][0]], [paper[name][1]], marker="*", ms=15, color=c, mec="k", ls="",
                     label=f"paper: {paper[name][0]} → {paper[name][1]}")
        reds[name] = 1.0 - sa / so
    xlim = int(df.strong_only_calls.max()) + 2
    ylim = int(df.specagent_calls.max()) + 3
    for name, c in zip(paper, COLORS):
        k = paper[name][1] / paper[name][0]
        axes[0].plot([0, xlim], [0, k * xlim], color=c, lw=1, ls="--")
    axes[0].text(xlim * 0.97, 0.25, "dashed: the paper's mean ratios\n("
                 + ", ".join(f"{b}/{a}" for a, b in paper.values()) + ")", ha="right",
                 va="bottom", fontsize=8)
    axes[0].set_xlim(0, xlim)
    axes[0].set_ylim(0, ylim)
    bins = np.linspace(0, 1, 21)
    axes[1].hist(list(reds.values()), bins=bins, color=COLORS[:len(reds)],
                 weights=[np.full(len(r), 1.0 / len(r)) for r in reds.values()],
                 label=[f"{k}: median {np.median(r):.0%}" for k, r in reds.items()])
    axes[0].set_xlabel("strong calls per task, Strong-only")
    axes[0].set_ylabel("strong calls per task, SpecAgent")
    axes[0].set_title("(a) per task (jittered ±0.25)")
    axes[0].legend(fontsize=7.5, loc="upper left", ncol=2)
    axes[1].set_xlabel("per-task strong-call reduction, 1 − SpecAgent / Strong-only")
    axes[1].set_ylabel("share of the trace's tasks")
    axes[1].set_title("(b) distribution over tasks")
    axes[1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"tau²-Bench trajectories replayed (shipped traces), synthetic acceptance p_u = {TAU2_P:g}, "
                 f"K = {TAU2_K}, chunking {DEFAULT_CHUNKING}", fontsize=9.5)
    fig.tight_layout()
    return fig


def plan_front(res: dict):
    """`costsim plan --figure`: every feasible screened configuration (cost per 1,000 tasks
    against p95), the Pareto front, the simulated candidates and the recommendation."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.4, 5.4))
    by = {}
    for s in res["screened"]:
        if s.feasible:
            by.setdefault(s.config.protocol, []).append(s)
    for (name, pts), c in zip(sorted(by.items()), COLORS):
        ax.scatter([s.p95_s for s in pts], [s.cost_per_1k for s in pts], s=12, color=c, alpha=0.45, lw=0,
                   label=f"{name}: {len(pts)} configurations (screen)")
    front = res["front"]
    ax.plot([s.p95_s for s in front], [s.cost_per_1k for s in front], color="k", lw=1.2, marker="o", ms=4,
            label="Pareto front (screen)")
    for s, r in res["confirmed"]:
        ax.plot([r["latency_p95_s"]], [r["cost_per_1k_tasks_usd"]], marker="D", ms=7, mfc="none", mec="k", ls="")
    if res["confirmed"]:
        ax.plot([], [], marker="D", ms=7, mfc="none", mec="k", ls="", label="confirmed by simulation")
    if res["recommended"]:
        s, r = res["recommended"]
        ax.plot([r["latency_p95_s"]], [r["cost_per_1k_tasks_usd"]], marker="*", ms=16, color="#d62728", mec="k", ls="",
                label=f"recommended: {s.config.describe()}")
    ax.axvline(res["latency_p95_target_s"], color="0.4", ls="--", lw=1)
    ax.text(res["latency_p95_target_s"], 0.02, "target ", ha="right", va="bottom", fontsize=8.5, color="0.3",
            transform=ax.get_xaxis_transform())
    costs = [s.cost_per_1k for s in res["screened"] if s.feasible]
    if costs and min(costs) > 0:
        ax.set_yscale("log")
        _plain_log(ax)
    if not costs:
        ax.text(0.5, 0.5, "no configuration meets the target", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("task latency p95 (s)")
    ax.set_ylabel("USD per 1,000 tasks (GPUs paid by the hour)")
    ax.set_title(f"costsim plan: {res['task_rate_per_s']:g} tasks/s, p95 ≤ {res['latency_p95_target_s']:g} s, "
                 f"{res['configurations']} configurations", fontsize=10)
    ax.legend(fontsize=7.5, loc="upper center")
    fig.tight_layout()
    return fig

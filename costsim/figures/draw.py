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
    op = a["result"]["default"]
    ns = sorted({k[1] for k in a["curves"] if k[0] == "R"})
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4.3))
    for ax, which in zip(axes, ("R", "L")):
        for n, c in zip(ns, COLORS):
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
    axes[1].set_title(f"(b) $L_u$ — latency, weak/strong step time $\\kappa$ = {kappa:g} (illustrative)")
    # The default operating point: p_u, K and the roofline's kappa of the default deployments.
    c0 = COLORS[ns.index(op["n"])]
    y, _, _ = a["curves"][("L_default", op["n"])]
    dashed = dict(color=c0, lw=1.6, ls=(0, (5, 2)))
    axes[1].plot(p, y, **dashed)
    star = dict(marker="*", ms=14, color=c0, mec="k", mew=0.8, ls="", zorder=6)
    axes[0].plot([op["p"]], [op["R"]], **star)
    axes[1].plot([op["p"]], [op["L"]], **star)
    from matplotlib.lines import Line2D

    limit = dict(ls="", color="k", ms=5)
    axes[1].legend(handles=[
        Line2D([], [], marker="s", label="p = 0 limit: v/d + ρ + κ n", **limit),
        Line2D([], [], marker="o", label="p → 1 limit: v/(n d) + κ", **limit),
        Line2D([], [], **dashed,
               label=f"n = {op['n']} at the default deployments' κ = {op['kappa']:.3f} (roofline)"),
        Line2D([], [], **{**star, "ms": 11},
               label=f"default operating point: p_u = {op['p']:g}, K = {op['n']}, $L_u$ = {op['L']:.3f}"),
    ], loc="lower left", fontsize=8)
    axes[0].set_ylim(3e-3, 2.0)
    axes[1].set_ylim(0.15, 6.0)
    axes[0].legend(loc="lower left", ncol=2, title="chunk length n")
    axes[0].annotate("■ p = 0 limit: v/d + ρ (the same for every n)\n● p → 1 limit: v/(n d)\n"
                     f"★ default operating point: p_u = {op['p']:g}, n = K = {op['n']},\n    $R_u$ = {op['R']:.3f}",
                     xy=(0.03, 0.64),
                     xycoords="axes fraction", ha="left", va="top", fontsize=8.5,
                     bbox=dict(boxstyle="round", fc="white", ec="0.7"))
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

    from matplotlib.lines import Line2D

    plt = _plt()
    runs = df.attrs["runs"]
    fig, ax = plt.subplots(figsize=(8.8, 5.4))
    refs = []  # the vertical reference lines: (batch, label, colour), labelled above the axes
    notes = []
    for (dev, r), c in zip(runs.items(), COLORS):
        pts = r["points"]
        x = [q["batch"] for q in pts]
        y = [q["R_time"] for q in pts]
        err = [[q["R_time"] - q["R_time_lo"] for q in pts], [q["R_time_hi"] - q["R_time"] for q in pts]]
        d = r["deployment"]
        ax.errorbar(x, y, yerr=err, color=c, marker="o", ms=5, lw=1.8, capsize=2,
                    label=f"{d.device.display_name.split(' (')[0]} ({d.n_devices}× for the 70B)")
        finite = math.isfinite(r["B_star"])
        if finite:
            ax.axvline(r["B_star"], color=c, ls="--", lw=1.2)
            refs.append((r["B_star"], f"B* = {r['B_star']:.0f} ({dev.upper()})", c))
        b_star = f"{r['B_star']:.0f}" if finite else "∞"
        notes.append((f"{dev.upper()}: B* = {b_star} at {r['context']:,.0f} tokens of context "
                      f"(peak FLOPs/bandwidth: {r['B_star_paper']:.0f})", c))
        if r["kv_limit"] < 300:
            ax.axvline(r["kv_limit"], color=c, ls=":", lw=1.4)
            refs.append((r["kv_limit"], f"KV {r['kv_limit']} ({dev.upper()})", c))
    # Labels above the axes, in the lines' colours; a label closer than 0.8 octave to the one
    # before it goes a row higher, so that none overlaps another, a line or a point.
    rows = []
    for x, text, c in sorted(refs):
        row = 0
        while row < len(rows) and math.log2(x) - math.log2(rows[row]) < 0.8:
            row += 1
        rows[row:row + 1] = [x]
        ax.annotate(text, xy=(x, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 3 + 11 * row),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8.5, color=c)
    for i, (text, c) in enumerate(reversed(notes)):
        ax.text(0.98, 0.025 + 0.06 * i, text, color=c, fontsize=8.5, ha="right", transform=ax.transAxes,
                bbox=dict(fc="white", ec="none", pad=1.5), zorder=4)  # over the reference lines
    ax.axhline(1.0, color="k", lw=1, ls=":")
    ax.text(1.05, 1.02, "Strong-only", fontsize=8.5)
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import FixedLocator, FuncFormatter

    ax.xaxis.set_major_locator(FixedLocator([2.0**k for k in range(9)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.grid(False, axis="x")  # a vertical grid line would fall on a reference line (B* 131 by 128, KV 16 on 16)
    ax.set_xlabel(f"strong replica's mean running decode batch under Strong-only (sequences; {BALANCE_SESSIONS[0]} to {BALANCE_SESSIONS[-1]} sessions; "
                  "held within the KV pool)")
    ax.set_ylabel("SpecAgent's strong-replica time / Strong-only's ($R$ in time)")
    ax.set_ylim(0, 1.45)
    ax.set_title("Past the balance point the extra prefill FLOPs become time\n"
                 "strong Llama-3.1-70B bf16, weak Llama-3.1-8B, 1,500-token start, p_u = 0.8, K = 6, "
                 "holding writes and responses", fontsize=10, pad=8 + 11 * len(rows))
    h, _ = ax.get_legend_handles_labels()
    h += [Line2D([], [], color="0.3", ls="--", lw=1.2, label="B*: balance point (roofline, tasks' mean context)"),
          Line2D([], [], color="0.3", ls=":", lw=1.4, label="KV: sequences the strong replica's KV pool holds")]
    ax.legend(handles=h, loc="upper left")
    fig.tight_layout()
    return fig


def capacity(df):
    plt = _plt()
    a = df.attrs
    grid, (s_gpus, w_gpus), cells = a["grid"], a["gpus_per_replica"], a["result"]["cells"]
    prices = a["result"]["prices"]
    dev = {role: v["device"].upper() for role, v in prices.items()}
    fig, axes = plt.subplots(1, 3, figsize=(15.0, 4.8))
    style = {"strong-only": COLORS[0], "specagent": COLORS[1]}
    for n, c in style.items():
        S, W = a["curves"][n]
        axes[0].plot(grid, S, color=c, lw=2.0, label=f"{n}: strong replicas ({s_gpus}× {dev['strong']} each)")
        if W.any():
            axes[0].plot(grid, W, color=c, lw=1.4, ls=(0, (4, 2)),
                         label=f"{n}: weak replicas ({w_gpus}× {dev['weak']} each)")
        axes[1].plot(grid, S * s_gpus + W * w_gpus, color=c, lw=2.0, label=n)
        axes[2].plot(grid, a["usd"][n], color=c, lw=2.0, label=n)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax, "x")
        _plain_log(ax, "y")
        ax.set_xlabel("task rate (tasks/s, Poisson arrivals)")
    axes[0].set_ylabel("replicas needed")
    axes[0].set_title(f"(a) replicas for task-latency p95 ≤ {CAPACITY_P95_S:g} s")
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].set_ylabel(" + ".join(dict.fromkeys(dev.values())) + " GPUs in total")
    axes[1].set_title("(b) GPUs in total (strong + weak)")
    cs = cells["specagent"]
    note = (f"cells found: Strong-only 1 strong replica ≤ {cells['strong-only']['rate']:.3f} tasks/s; "
            f"SpecAgent 1 strong + {cs['weak']} weak ≤ {cs['rate']:.3f} tasks/s"
            + (" (the probes' limit: a lower bound)" if cs["capped"] else ""))
    axes[1].legend(loc="upper left")
    # (c) the fleet's cost: capacity's (fleet_cost.costs), at the device profiles' list prices.
    paid = ", ".join(dict.fromkeys(f"{v['device'].upper()} ${v['usd_per_gpu_hour']:.2f}/GPU-hour"
                                   for v in prices.values()))
    read = "; ".join(dict.fromkeys(f"hardware/{v['device']}.toml" + (f", read {v['date']}" if v["date"] else "")
                                   for v in prices.values()))
    axes[2].set_ylabel(f"USD per 1,000 tasks\n({paid}, paid busy or idle)")
    axes[2].set_title("(c) fleet cost, USD per 1,000 tasks")
    axes[2].legend(loc="center right", title=f"on-demand list price\n({read})", title_fontsize=8)
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
        # Hollow, so that two paper points a fraction of a call apart both show (tau²'s are
        # 13.8 → 3.1 and 13.1 → 3.1), each labelled by a leader line.
        axes[0].plot([paper[name][0]], [paper[name][1]], marker="*", ms=13, mfc="none", mec=c, mew=1.8, ls="",
                     zorder=5, label=f"paper: {paper[name][0]} → {paper[name][1]}")
        reds[name] = 1.0 - sa / so
    # Leader lines in opposite directions, across the dashed ratio lines rather than along them:
    # the right-hand paper point's label down and right, the other's up and left.
    for name, (dx, dy, ha) in zip(sorted(paper, key=lambda k: -paper[k][0]), ((55, -32, "left"), (-35, 62, "right"))):
        c = COLORS[traces.index(name)]
        axes[0].annotate(f"paper, {name}", xy=paper[name], xytext=(dx, dy), textcoords="offset points",
                         fontsize=8, color=c, ha=ha, va="center",
                         arrowprops=dict(arrowstyle="-", color=c, lw=1.0, shrinkA=2, shrinkB=6))
    xlim = int(df.strong_only_calls.max()) + 2
    ylim = int(df.specagent_calls.max()) + 3
    for name, c in zip(paper, COLORS):
        k = paper[name][1] / paper[name][0]
        axes[0].plot([0, xlim], [0, k * xlim], color=c, lw=1, ls="--")
    axes[0].text(xlim * 0.97, 0.25, "dashed: the paper's mean ratios\n("
                 + ", ".join(f"{b}/{a}" for a, b in paper.values()) + ")", ha="right",
                 va="bottom", fontsize=8)
    axes[0].set_xlim(-0.5, xlim)  # below 0: the jitter of tasks at 0 calls stays in view
    axes[0].set_ylim(-0.5, ylim)
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
    # The simulator confirms the screen's cheapest: each simulated point is joined to where the
    # screen put that configuration, so a point off the front says how far the screen was off.
    # Arcs bowing upwards (into the axes, never over the labels below), so that two at the same
    # cost stay apart (the longer above); the recommendation's in red.
    rec = res["recommended"][1] if res["recommended"] else None
    for s, r in res["confirmed"]:
        if r.get("cost_per_1k_tasks_usd") is None:
            continue
        ax.annotate("", xy=(r["latency_p95_s"], r["cost_per_1k_tasks_usd"]), xytext=(s.p95_s, s.cost_per_1k),
                    arrowprops=dict(arrowstyle="-|>", color="#d62728" if r is rec else "0.45", lw=0.9, shrinkA=3,
                                    shrinkB=6, mutation_scale=9,
                                    connectionstyle=f"arc3,rad={-0.25 if r['latency_p95_s'] >= s.p95_s else 0.25}"))
        ax.plot([s.p95_s], [s.cost_per_1k], marker="o", ms=7, mfc="none", mec="0.45", ls="")
        ax.plot([r["latency_p95_s"]], [r["cost_per_1k_tasks_usd"]], marker="D", ms=7, mfc="none", mec="k", ls="")
    if res["confirmed"]:
        from matplotlib.lines import Line2D

        ax.plot([], [], marker="D", ms=7, mfc="none", mec="k", ls="", label="confirmed by simulation")
        ax.add_line(Line2D([], [], marker="o", ms=7, mfc="none", mec="0.45", color="0.45", lw=0.9,
                           label="its screen estimate → its simulation"))
    note = ""
    if res["recommended"]:
        s, r = res["recommended"]
        ax.plot([r["latency_p95_s"]], [r["cost_per_1k_tasks_usd"]], marker="*", ms=16, color="#d62728", mec="k", ls="",
                label=f"recommended: {s.config.describe()}")
        grown = f", its fleet grown {r['grown']}× to meet the target" if r.get("grown") else ""
        note = ("The front and the dots are the screen's estimates; ◇ and ★ are the simulator's, each joined to "
                "its screen estimate (○).\n"
                f"Recommended (red arrow): screened at p95 {s.p95_s:.1f} s, USD {s.cost_per_1k:.3f}; simulated at p95 "
                f"{r['latency_p95_s']:.1f} s, USD {r['cost_per_1k_tasks_usd']:.3f}{grown}.\n"
                "It is the cheapest simulated configuration that meets the target, so it may lie off the screen's front.")
    ax.axvline(res["latency_p95_target_s"], color="0.4", ls="--", lw=1)
    ax.text(res["latency_p95_target_s"], 1.0, " target", ha="center", va="bottom", fontsize=8.5, color="0.3",
            transform=ax.get_xaxis_transform())
    costs = [s.cost_per_1k for s in res["screened"] if s.feasible]
    if costs and min(costs) > 0:
        ax.set_yscale("log")
        _plain_log(ax)
    if not costs:
        ax.text(0.5, 0.5, "no configuration meets the target", ha="center", va="center", transform=ax.transAxes,
                bbox=dict(fc="white", ec="0.7", boxstyle="round"), zorder=4)  # over the target line
    ax.set_xlabel("task latency p95 (s)")
    ax.set_ylabel("USD per 1,000 tasks (GPUs paid by the hour)")
    ax.set_title(f"costsim plan: {res['task_rate_per_s']:g} tasks/s, p95 ≤ {res['latency_p95_target_s']:g} s, "
                 f"{res['configurations']} configurations", fontsize=10, pad=14)
    # Below the axes, where no point can be: the legend, and the note on the recommendation.
    leg = ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    if note:
        leg.set_title(note, prop={"size": 7.5})
    fig.tight_layout()
    return fig


def prefix_cache(df):
    """fig7: SpecAgent's strong-time ratio by sessions per strong replica under three prefix
    caches; beside it, evicting, each protocol's strong hit rate."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    plt = _plt()
    r = df.attrs["result"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.5, 4.6))
    styles = {"hot": ("always resident (hot: the closed forms')", COLORS[0], "-"),
              "evict": ("engine's cache, LRU eviction (evict)", COLORS[1], "-"),
              "off": ("no prefix reuse (off)", COLORS[2], "--")}
    for mode, (label, c, ls) in styles.items():
        d = df[df["prefix_cache"] == mode]
        ax.errorbar(d["sessions"], d["R_time"], yerr=[d["R_time"] - d["R_time_lo"], d["R_time_hi"] - d["R_time"]],
                    color=c, ls=ls, marker="o", ms=4, lw=1.6, capsize=2, label=label)
    ax.axhline(1.0, color="k", lw=1, ls=":")
    ax.text(1.05, 1.03, "Strong-only", fontsize=8.5)
    d = df[df["prefix_cache"] == "evict"]
    bx.plot(d["sessions"], d["strong_only_strong_hit_rate"], color=COLORS[0], marker="o", ms=4, label="Strong-only")
    bx.plot(d["sessions"], d["specagent_strong_hit_rate"], color=COLORS[1], marker="s", ms=4, label="SpecAgent")
    for a in (ax, bx):
        a.set_xscale("log", base=2)
        a.xaxis.set_major_locator(FixedLocator([2.0**k for k in range(9)]))
        a.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        a.set_xlabel("closed-loop sessions on the strong replica")
        if r["first_evicting_sessions"]:
            a.axvline(r["first_evicting_sessions"], color="0.5", lw=1, ls=":")
    ax.set_ylabel("SpecAgent's strong-replica time / Strong-only's ($R$ in time)")
    ax.set_ylim(0, max(1.4, float(df["R_time_hi"].max()) * 1.05))
    ax.set_title("(a) SpecAgent's strong time, by prefix cache", fontsize=10)
    ax.legend(loc="upper left", fontsize=8.5)
    bx.set_ylabel("strong prefix-cache hit rate, evicting\n(context tokens resident at admission / looked up)")
    bx.set_ylim(-0.03, 1.05)
    bx.set_title("(b) what each protocol's strong replica kept", fontsize=10)
    bx.legend(loc="lower left", fontsize=8.5)
    if r["first_evicting_sessions"]:
        bx.annotate(f"first eviction: {r['first_evicting_sessions']} sessions", xy=(r["first_evicting_sessions"], 1.0),
                    xytext=(-6, -14), textcoords="offset points", ha="right", fontsize=8.5, color="0.35")
    fig.suptitle(f"Sessions' prefixes in the KV pool: one strong replica, {r['deployment']} (its pool holds "
                 f"{r['kv_sequences']} sequences of {r['context']:,.0f} tokens)\neach protocol on a fleet of its own; "
                 "evicting is hot until the first eviction", fontsize=10)
    fig.tight_layout()
    return fig

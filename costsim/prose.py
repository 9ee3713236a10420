"""The numbers the docs quote, generated: a number the tool computes is never copied by hand.

In README.md, docs/*.md and benchmarks/measured/README.md a block between ``<!-- costsim: NAME -->`` and ``<!-- /costsim -->``
is the text :data:`BLOCKS` ``[NAME]`` makes now; ``python -m costsim.prose`` rewrites every block
of a checkout, and tests/test_docs.py fails on a block that is stale (a refit or a protocol change
that moves a number fails it until the text is made again). figures/README.md is written whole
by `costsim figures`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from .paper import TAU2_K, TAU2_P, published, tau2_benchmarks

#: The files whose blocks are generated, relative to a checkout's root.
FILES = ("README.md", "docs/protocols.md", "docs/cost-model.md", "docs/api.md", "benchmarks/measured/README.md")
_BLOCK = re.compile(r"(<!-- costsim: ([a-z0-9-]+) -->\n)(.*?)(<!-- /costsim -->)", re.S)

#: The protocols of the docs' comparison on the Airline trace, and its tool latency (s).
COMPARED = ("strong-only", "weak-only", "specagent", "specagent-hold-responses", "specagent-review-all",
            "specagent-separate-repair", "agentcollab", "speculative-actions", "self-spec", "specagent-self-spec",
            "edge-cloud")
COMPARED_TOOL_S = 0.5


def _tasks(trace: str):
    from .traces import load

    return [t for t in load(trace).tasks if t.steps]


@lru_cache(maxsize=None)
def _replayed(trace: str, protocols: tuple, tool_s: float = 0.0, ideal: bool = False, options: tuple = ()) -> dict:
    """The summary of a replay of ``trace`` (p_u and K as the paper's tau² comparison, seed 0):
    on the default deployments, or with ``ideal`` on the paper's memory-bound ideal devices,
    kappa 0.3 (:func:`costsim.profiles.deployment.ideal`)."""
    from .metrics import summarize
    from .profiles.deployment import ideal as ideal_deployment
    from .scenario import Latency, Scenario
    from .sim import simulate
    from .sizing import deployments

    strong, weak = (ideal_deployment(0.1), ideal_deployment(0.03)) if ideal else deployments()
    sc = Scenario(strong=strong, weak=weak, p=TAU2_P, K=TAU2_K, protocols=protocols,
                  tool_latency=Latency(tool_s), options=options)
    return summarize(simulate(_tasks(trace), sc))


@lru_cache(maxsize=None)
def _twin(trace: str) -> dict:
    from .scenario import Scenario
    from .sizing import deployments
    from .twin import ratios

    strong, weak = deployments()
    return ratios(_tasks(trace), Scenario(strong=strong, weak=weak, p=TAU2_P, K=TAU2_K,
                                          protocols=("strong-only", "specagent")))


@lru_cache(maxsize=None)
def _validation() -> tuple:
    from . import measured

    rows = measured.evaluate(measured.load_cases())
    ideal_rows = measured.evaluate(measured.load_cases(), {c.engine: _engine("ideal")
                                                            for c in measured.load_cases()})
    return rows, measured.summary(rows), measured.harness_pairs(rows), measured.summary(ideal_rows), ideal_rows


def _engine(name):
    from .profiles import load_engine

    return load_engine(name)


def _pct(x: float) -> str:
    return f"{x:.0%}"


# --- the blocks ----------------------------------------------------------------------------------------


def readme_validation() -> str:
    rows, summ, pairs, _, _ = _validation()
    hold = {s["group"]: s for s in summ if s["split"] == "holdout"}
    within = sum(abs(p["error"]) <= 0.2 for p in pairs)
    return (f"`costsim roofline validate` holds it against {len(rows)} public measured serving figures\n"
            f"(`benchmarks/measured/`); on the hold-out part the median |error| is "
            + ", ".join(f"{_pct(hold[g]['median_abs_error'])} for {words}" for g, words in
                        (("dense-1gpu", "dense models on one GPU"), ("dense-tp", "dense models under tensor parallelism"),
                         ("moe-1gpu", "MoE models on one GPU"), ("moe-multi", "MoE models on several GPUs"))
                        if g in hold)
            + f";\nweak/strong step-time ratios measured in one harness come out within 20% in {within} of {len(pairs)} "
            "pairs. `docs/cost-model.md` has the table, what is still off and why.\n")


def readme_protocols() -> str:
    air, ret = (tau2_benchmarks()[t] for t in ("tau2-airline", "tau2-retail"))
    twin = {t: _twin(t)["specagent"] for t in ("tau2-airline", "tau2-retail")}
    sim = {t: _replayed(t, ("strong-only", "specagent", "agentcollab", "speculative-actions"))
           for t in ("tau2-airline", "tau2-retail")}

    def calls(t, name):
        return sim[t][name]["strong_calls_ratio"]["mean"]
    sa = sim["tau2-airline"]["specagent"]["strong_calls_ratio"]
    half = (sa["ci95"][1] - sa["ci95"][0]) / 2
    return (f"Replaying the shipped tau² traces at p_u = {TAU2_P:g}, K = {TAU2_K} under the paper's chunking rule as its text\n"
            f"gives it (a chunk ends at its first write, held and reviewed, or at K reads, committed unreviewed),\n"
            f"Strong-only makes the recorded agent's model calls ({sim['tau2-airline']['strong-only']['strong_calls_per_task']['mean']:.2f} "
            f"and {sim['tau2-retail']['strong-only']['strong_calls_per_task']['mean']:.2f} a task) and SpecAgent\n"
            f"{twin['tau2-airline']['strong_calls_ratio']:.3f} (Airline) and {twin['tau2-retail']['strong_calls_ratio']:.3f} (Retail) "
            f"of them in expectation (the exact twin; `costsim replay`\nsamples {calls('tau2-airline', 'specagent'):.3f} ± {half:.3f} "
            f"and {calls('tau2-retail', 'specagent'):.3f}), against the paper's {air['specagent_calls'] / air['strong_only_calls']:.3f} "
            f"and {ret['specagent_calls'] / ret['strong_only_calls']:.3f}, committing\n"
            f"{twin['tau2-airline']['steps_per_review']:.1f} and {twin['tau2-retail']['steps_per_review']:.1f} steps per review "
            f"(the paper: about {published()['tau2']['steps_per_review']}); `docs/protocols.md` has the arithmetic of the gap "
            "and every rule's numbers.\n"
            f"AgentCollab (its one free rate fitted on Airline: {calls('tau2-airline', 'agentcollab'):.2f}x Strong-only's strong "
            f"calls, Retail {calls('tau2-retail', 'agentcollab'):.2f}x)\nand Speculative Actions (as its public tau-bench code "
            f"speculates, at the user's turns, nothing fitted:\n{calls('tau2-airline', 'speculative-actions'):.2f}x, the paper's "
            f"{air['speculative_actions_calls'] / air['strong_only_calls']:.2f}x; Retail {calls('tau2-retail', 'speculative-actions'):.2f}x) "
            "make more strong calls than Strong-only; SpecAgent reads\n"
            f"{twin['tau2-airline']['hbm_ratio']:.2f} of Strong-only's HBM and takes {twin['tau2-airline']['wall_ratio']:.2f} of its "
            f"wall time on the default deployments, where the paper has {air['wall']}.\n")


def readme_plan() -> str:
    from .config import DEPLOYMENTS
    from .planner import configurations
    from .profiles import load_model

    n = len(configurations(load_model(DEPLOYMENTS.strong), load_model(DEPLOYMENTS.weak)))
    return f"weak device × K × protocol — {n} configurations by default — for the cheapest fleet that meets\n"


def protocols_chunking() -> str:
    from .config import CHUNKINGS
    from .paper import chunking_ratios
    from .protocols.chunking import DEFAULT_CHUNKING

    table = chunking_ratios()
    lines = ["| trace | rule | strong calls ratio (paper) | decoded strong share | steps per review | reviewed chunk "
             "| strong share of HBM | HBM ratio | wall ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for trace, rules in table.items():
        for rule in CHUNKINGS:
            r = rules[rule]
            name = f"**{rule}**" if rule == DEFAULT_CHUNKING else rule
            calls = f"**{r['strong_calls_ratio']:.3f}**" if rule == DEFAULT_CHUNKING else f"{r['strong_calls_ratio']:.3f}"
            lines.append(f"| {trace.removeprefix('tau2-').capitalize()} | {name} | {calls} ({r['paper_strong_calls_ratio']:.3f}) "
                         f"| {r['strong_decode_tokens_ratio']:.3f} | {r['steps_per_review']:.2f} | {r['reviewed_chunk_steps']:.2f} "
                         f"| {r['strong_hbm_share']:.3f} | {r['hbm_ratio']:.3f} | {r['wall_ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def protocols_gaps() -> str:
    from .config import WORKLOAD
    from .paper import implied_strong_step_scale

    air = tau2_benchmarks()["tau2-airline"]
    so, sa = _twin("tau2-airline")["strong-only"], _twin("tau2-airline")["specagent"]
    per_call = air["strong_only_calls"] / air["specagent_calls"]  # committed calls per strong call
    tasks = _tasks("tau2-airline")
    tools_per_call = sum(len(t.steps) for t in tasks) / sum(len(t.calls) for t in tasks)
    paper_calls_per_review = published()["tau2"]["steps_per_review"] / tools_per_call
    paper_reviews = air["strong_only_calls"] / paper_calls_per_review
    reviews = sa["reviews_per_task"]
    verdicts = WORKLOAD.verdict_tokens * reviews
    repairs = sa["strong_decode_tokens"] - verdicts
    need = {x: (x * so["strong_decode_tokens"] - repairs) / reviews for x in published()["tau2"]["decoded_strong_share"]}
    lo, hi = published()["shares"]["strong_hbm_share"]
    scale = implied_strong_step_scale()
    return (
        f"- **Strong calls {air['specagent_calls']} / {air['strong_only_calls']} = {1 / per_call:.3f} against "
        f"{sa['strong_calls_ratio']:.3f} here.** Every\n  strong call here is a review (fused repairs), so the ratio is the "
        f"reviews per committed model call: 1 / {sa['steps_per_review']:.2f}.\n"
        f"  The paper's {air['strong_only_calls']} / {air['specagent_calls']} = {per_call:.2f} committed calls per strong call "
        f"sits beside its \"about one review per {published()['tau2']['steps_per_review']} committed steps\": if those steps "
        f"are tool\n  calls at the shipped Airline run's own {tools_per_call:.2f} a model call, {published()['tau2']['steps_per_review']} "
        f"steps are {paper_calls_per_review:.1f} calls a review,\n  {air['strong_only_calls']} / {paper_calls_per_review:.1f} = "
        f"{paper_reviews:.1f} reviews a task, and correction turns (the mixed repair, `--option correction_rate=`)\n  close the "
        f"other {air['specagent_calls'] - paper_reviews:.1f} strong calls. Here the recorded agent\n  makes {so['strong_calls_per_task']:.2f} calls a task and writes in few of "
        f"them, so a chunk runs {sa['reviewed_chunk_steps']:.2f} calls to its write\n  on average and a review commits "
        f"{sa['steps_per_review']:.2f}: fewer reviews than the paper's per call, the ratio lower.\n"
        f"- **Decoded strong tokens {_pct(published()['tau2']['decoded_strong_share'][0])}-"
        f"{_pct(published()['tau2']['decoded_strong_share'][1])} of Strong-only's.** A review decodes a verdict "
        f"({WORKLOAD.verdict_tokens:g} tokens,\n  an assumption) and, after a rejection, one repaired step; Strong-only "
        f"decodes every call. On Airline Strong-only decodes\n  {so['strong_decode_tokens']:,.0f} strong tokens a task; "
        f"SpecAgent {reviews:.2f} reviews, {sa['strong_decode_tokens']:,.0f} tokens ({verdicts:,.0f} of verdicts, "
        f"{repairs:,.0f} of repairs): a share of\n  {sa['strong_decode_tokens_ratio']:.1%}. Reaching "
        + " and ".join(f"{_pct(x)} needs verdicts of about ({x:g} · {so['strong_decode_tokens']:,.0f} - {repairs:,.0f}) / "
                       f"{reviews:.2f} = {v:,.0f} tokens" for x, v in need.items())
        + " — reasoning verdicts, or strong steps longer\n  than the weak model's (a thinking strong model). `costsim predict` "
        "shows the answer at the v/d the paper's\n  VitaBench numbers imply beside its own.\n"
        f"- **The strong model's share of SpecAgent's HBM reads {_pct(lo)}-{_pct(hi)}.** Here "
        f"{sa['strong_hbm_share']:.1%} on Airline: with verdicts of a few\n  dozen tokens a review reads the strong "
        "weights a handful of times, while the weak model reads its own at every\n  drafted call; the paper's share needs "
        "dearer reviews and repairs, the same gap as the decoded tokens'.\n"
        f"- **Wall {air['wall']} on Airline.** Wall time follows kappa, the weak/strong step-time ratio of the deployments. "
        f"Here\n  the wall is {sa['wall_ratio']:.2f}; with the strong model decoding "
        + (f"{scale['scale']:.2f}x" if scale["scale"] else "more than 64x")
        + " the weak model's tokens per step it authors (a thinking\n  strong model, its repairs as long) the default "
        "deployments give the paper's wall\n  (`costsim.paper.implied_strong_step_scale`; `--strong-step-scale S` for a run).\n")


def protocols_replay() -> str:
    res = _replayed("tau2-airline", COMPARED + ("cloud-strong-only",), COMPARED_TOOL_S)
    lines = ["| protocol | strong calls/task | weak calls/task | strong calls ratio | HBM ratio | wall ratio | API cost ratio "
             "| remote out tokens | wall vs cloud strong-only |", "|---|---|---|---|---|---|---|---|---|"]

    def f(m, key, nd=3):
        return f"{m[key]['mean']:.{nd}f}" if key in m else "—"
    for name, m in res.items():
        lines.append(f"| {name} | {f(m, 'strong_calls_per_task', 2)} | {f(m, 'weak_calls_per_task', 2)} "
                     f"| {f(m, 'strong_calls_ratio')} | {f(m, 'hbm_ratio')} | {f(m, 'wall_ratio')} | {f(m, 'api_cost_ratio')} "
                     f"| {f(m, 'remote_output_tokens_ratio')} | {f(m, 'wall_ratio_api')} |")
    return "\n".join(lines) + "\n"


def protocols_ideal() -> str:
    res = _replayed("tau2-airline", ("strong-only", "specagent", "agentcollab", "speculative-actions"), 0.0, True)
    sa, ac, sp = res["specagent"], res["agentcollab"], res["speculative-actions"]
    return (f"gives SpecAgent {sa['hbm_ratio']['mean']:.3f} of Strong-only's HBM reads and {sa['wall_ratio']['mean']:.3f} of "
            f"its wall time (the paper: 0.43-0.45 and\n0.41), AgentCollab {ac['strong_calls_ratio']['mean']:.2f}x the strong "
            f"calls and {ac['hbm_ratio']['mean']:.2f} of the HBM, {ac['wall_ratio']['mean']:.2f} of the wall, Speculative "
            f"Actions\n{sp['strong_calls_ratio']['mean']:.2f}x the strong calls, {sp['hbm_ratio']['mean']:.2f} the HBM and "
            f"{sp['wall_ratio']['mean']:.2f} the wall.\n")


def _baselines(trace: str, **options) -> dict:
    """Strong-only, AgentCollab and Speculative Actions replayed with 0.5 s tools (the docs'
    comparison setting); ``options``: Speculative Actions' (``speculate="always"``...)."""
    return _replayed(trace, ("strong-only", "agentcollab", "speculative-actions"), COMPARED_TOOL_S,
                     options=tuple(sorted(options.items())))


def protocols_agentcollab_costs() -> str:
    a, r = _baselines("tau2-airline"), _baselines("tau2-retail")
    ac, so = a["agentcollab"], a["strong-only"]
    return (f"fitted rate on Airline (0.5 s tools): {ac['strong_calls_per_task']['mean']:.1f} strong calls per task "
            f"(Strong-only {so['strong_calls_per_task']['mean']:.1f}), {ac['escalations_per_task']['mean']:.1f} "
            f"escalations, wall\n{ac['wall_ratio']['mean']:.2f}x and HBM {ac['hbm_ratio']['mean']:.2f}x Strong-only's "
            f"(the paper: slower than Strong-only). On Retail, where nothing\nis fitted, "
            f"{r['agentcollab']['strong_calls_ratio']['mean']:.2f}x the strong calls.\n")


def protocols_speculative_actions() -> str:
    air, ret = _baselines("tau2-airline"), _baselines("tau2-retail")
    b = tau2_benchmarks()["tau2-airline"]
    sp, so = air["speculative-actions"], air["strong-only"]
    extra = sp["strong_calls_per_task"]["mean"] - so["strong_calls_per_task"]["mean"]
    paper_extra = b["speculative_actions_calls"] - b["strong_only_calls"]
    return (f"On Airline at the defaults (0.5 s tools), {extra:.2f} of the {sp['strong_calls_per_task']['mean']:.1f} strong "
            f"calls per task are the dropped answers\n(Strong-only has {so['strong_calls_per_task']['mean']:.2f}, the "
            f"recorded agent's calls): the paper's {b['speculative_actions_calls']} - {b['strong_only_calls']} = "
            f"{paper_extra:.1f} extra a task, with nothing fitted,\nbut {sp['strong_calls_ratio']['mean']:.2f}x Strong-only "
            f"against the paper's {b['speculative_actions_calls'] / b['strong_only_calls']:.2f}x, on an agent that makes fewer "
            f"calls a task. HBM is {sp['hbm_ratio']['mean']:.2f}x\nand wall {sp['wall_ratio']['mean']:.2f}x (the paper says "
            f"\"more traffic and time\"). On Retail it is {ret['speculative-actions']['strong_calls_ratio']['mean']:.2f}x. "
            f"AgentCollab ({air['agentcollab']['strong_calls_ratio']['mean']:.2f}x,\n"
            f"{ret['agentcollab']['strong_calls_ratio']['mean']:.2f}x) is fitted to the paper's ratio, so the paper's "
            "AgentCollab > Speculative Actions does not hold\nhere; Speculative Actions > Strong-only > SpecAgent does (a test).\n")


def protocols_speculate_always() -> str:
    air, ret = (_baselines(t, speculate="always") for t in ("tau2-airline", "tau2-retail"))
    share = {t: sum(s.kind in ("read", "write") for x in _tasks(t) for s in x.calls) / sum(len(x.calls) for x in _tasks(t))
             for t in ("tau2-airline", "tau2-retail")}
    return (f"Under this variant Airline has {air['speculative-actions']['strong_calls_ratio']['mean']:.2f}x the strong "
            f"calls and Retail {ret['speculative-actions']['strong_calls_ratio']['mean']:.2f}x: its waste grows with the "
            f"share of tool calls\n({share['tau2-airline']:.0%} of Airline's model calls, {share['tau2-retail']:.0%} of "
            "Retail's).\n")


def protocols_agentcollab() -> str:
    from .config import AgentCollabOptions

    return f"`agentcollab.STALL_P` = {AgentCollabOptions.escalate_p:g}, is *fitted*: the rate at which AgentCollab's strong calls are the\n"


def cost_model_validation() -> str:
    _, summ, pairs, ideal, _ = _validation()
    ideal = {(s["split"], s["group"]): s for s in ideal}
    lines = ["| split | group | cases | a pure roofline of datasheet peaks (`--engine ideal`) | now |", "|---|---|---|---|---|"]
    for s in summ:
        i = ideal[(s["split"], s["group"])]
        lines.append(f"| {'hold-out' if s['split'] == 'holdout' else 'fit'} | {s['group']} | {s['cases']} "
                     f"| {_pct(i['median_abs_error'])}, x{i['worst_factor']:.3g} | {_pct(s['median_abs_error'])}, "
                     f"x{s['worst_factor']:.3g} |")
    errs = sorted(abs(p["error"]) for p in pairs)
    lines += ["", f"Weak/strong step-time ratios measured in one harness: {sum(e <= 0.2 for e in errs)} of {len(errs)} "
              f"within 20%, median |error| {_pct(errs[len(errs) // 2])}."]
    return "\n".join(lines) + "\n"


def cost_model_set() -> str:
    """What the validation set holds and what the fit fits on it."""
    from . import measured

    cases = measured.load_cases()
    fit = [c for c in cases if c.split == "fit"]
    loaded = [c for c in cases if c.scenario in measured.UNDER_LOAD]
    slots = measured.fit_parameters(cases)
    shared = [k for e, k in slots if e is None]
    own = {}
    for e, k in slots:
        if e:
            own.setdefault(e, []).append(k)
    return (f"{len(cases)} public measured figures: {len(fit)} in the fit split, {len(cases) - len(fit)} held out; "
            f"{len(loaded)} of them measured under load ({len({measured.run_of(c) for c in loaded})} runs). "
            f"The fit has {len(slots)} parameters: {len(shared)} shared ({', '.join(f'`{k}`' for k in shared)}) and "
            + "; ".join(f"{len(ks)} of {e}'s own" for e, ks in own.items()) + ".\n")


def measured_counts() -> str:
    """benchmarks/measured/README.md's counts of the set."""
    from collections import Counter

    from . import measured

    cases = measured.load_cases()
    groups = Counter(c.group for c in cases)
    loaded = [c for c in cases if c.scenario in measured.UNDER_LOAD]
    kinds = Counter(c.scenario for c in loaded)
    metrics = Counter(measured.metric_group(c) for c in loaded)
    return (f"{len(cases)} cases: " + ", ".join(f"{g} {groups[g]}" for g in measured.GROUPS) + ". "
            f"Under load {len(loaded)}, from {len({measured.run_of(c) for c in loaded})} runs: {kinds['serving']} closed-loop, "
            f"{kinds['rate']} open-loop; by what they measure: " + ", ".join(f"{METRIC_WORDS[g]} {metrics[g]}"
                                                                             for g in measured.METRIC_GROUPS) + ". "
            f"Batches or concurrencies of 32 and more: {sum(c.concurrency >= 32 for c in cases)}; "
            f"prefill or TTFT: {sum(c.metric == 'ttft_ms' or c.scenario == 'prefill' for c in cases)}.\n")


def cost_model_families() -> str:
    """The devices with achieved fractions of their own, their values and the fit cases on them."""
    from . import measured
    from .profiles import load_device

    cases = [c for c in measured.load_cases() if c.split == "fit"]
    eng = _engine("vllm")
    lines = ["| device or family | fraction | value | fit cases on it |", "|---|---|---|---|"]
    for k in measured.SHARED:
        kind, _, dev = k.partition("@")
        if not dev:
            continue
        on = sorted(c.id for c in cases if dev in (c.device, load_device(c.device).family))
        lines.append(f"| {dev} | {kind} | {eng.families[dev][kind]:.3g} | {len(on)}: {', '.join(f'`{i}`' for i in on)} |")
    return "\n".join(lines) + "\n"


#: The per-metric groups in words.
METRIC_WORDS = {"ttft": "TTFT (means and medians)", "tpot-itl": "TPOT and ITL", "e2e": "end-to-end latency",
                "throughput": "throughput", "p99": "99th percentiles"}


def cost_model_workload() -> str:
    """The workload rows of docs/cost-model.md's defaults table: config.WORKLOAD and its sources."""
    from .config import WORKLOAD, WORKLOAD_SOURCES

    rows = (("steps per task", "steps_per_task"), ("step tokens d̄", "step_tokens"),
            ("observation tokens", "obs_tokens"), ("context", "context_tokens"),
            ("verdict tokens", "verdict_tokens"), ("rho", "rho"))
    return "".join(f"| {label} | {getattr(WORKLOAD, k):,g} | {WORKLOAD_SOURCES[k]} |\n" for label, k in rows)


def cost_model_defaults() -> str:
    """Every other default of the commands (config's Commands, Live, Scheduler, Synthetic), with its source."""
    from dataclasses import fields

    from . import config

    out = "| setting | default | source |\n|---|---|---|\n"
    for name, obj, sources in (("Commands", config.COMMANDS, config.COMMAND_SOURCES), ("Live", config.LIVE, config.LIVE_SOURCES),
                               ("Scheduler", config.SCHEDULER, config.SCHEDULER_SOURCES),
                               ("Synthetic", config.SYNTHETIC, config.SYNTHETIC_SOURCES)):
        for f in fields(obj):
            v = getattr(obj, f.name)
            shown = ", ".join(v) if isinstance(v, tuple) else f"{v:,g}" if isinstance(v, (int, float)) else v
            out += f"| `{name}.{f.name}` | {shown} | {sources[f.name]} |\n"
    return out


def readme_bench() -> str:
    from . import measured

    rows = _validation()[0]
    loaded = [r for r in rows if r["scenario"] in measured.UNDER_LOAD]
    hold = {s["metric_group"]: s for s in measured.summary(loaded, "metric_group") if s["split"] == "holdout"}
    return (f"Against the {len(loaded)} figures of the validation set measured under load (closed loops and open loops, "
            f"{len({(r['model'], r['device'], r['gpus'], r['engine']) for r in loaded})} deployments), each run simulated as "
            "`costsim bench` runs it, the hold-out median |error| is "
            + ", ".join(f"{_pct(hold[g]['median_abs_error'])} for {METRIC_WORDS[g]}" for g in measured.METRIC_GROUPS
                        if g in hold) + ".\n")


def cost_model_metrics() -> str:
    from . import measured

    rows, _, _, _, ideal_rows = _validation()
    now = measured.summary(rows, "metric_group")
    ideal = {(s["split"], s["metric_group"]): s for s in measured.summary(ideal_rows, "metric_group")}
    lines = ["| split | measures | cases | a pure roofline of datasheet peaks (`--engine ideal`) | now |",
             "|---|---|---|---|---|"]
    for s in now:
        i = ideal[(s["split"], s["metric_group"])]
        lines.append(f"| {'hold-out' if s['split'] == 'holdout' else 'fit'} | {METRIC_WORDS[s['metric_group']]} | {s['cases']} "
                     f"| {_pct(i['median_abs_error'])}, x{i['worst_factor']:.3g} | {_pct(s['median_abs_error'])}, "
                     f"x{s['worst_factor']:.3g} |")
    return "\n".join(lines) + "\n"


def cost_model_twin() -> str:
    """`costsim simulate --tasks 2000 --seed 1` at the defaults: simulated R and L with their
    intervals, the exact twin's and the renewal form's."""
    from .api import simulate

    res = simulate(tasks=2000, seed=1)
    sa, cf = res["protocols"]["specagent"], res["closed_form"]

    def pm(m):
        lo, hi = m["ci95"]
        return f"{m['mean']:.4f} ± {(hi - lo) / 2:.4f}"
    exact = cf["exact"]["specagent"]
    return (f"  (default deployments and chunking): simulated R {pm(sa['R'])} and L {pm(sa['L'])} against the twin's\n"
            f"  {exact['R']:.4f} and {exact['L']:.4f}, and the renewal form's {cf['renewal']['R']:.3f} and "
            f"{cf['renewal']['L']:.3f}: the renewal form misses because a\n")


def api_json_vocabulary() -> str:
    """The JSON vocabulary (costsim.config, read by its one rule :func:`costsim.config.unit_of`):
    unit endings, then every key declared with its unit."""
    from .config import JSON_INHERIT, JSON_KEYS, JSON_UNIT_ENDINGS, unit_of

    lines = ["A number's key ends in its unit (`costsim.config.unit_of` reads it; the longest ending that "
             "matches, and a `_per_` ending composes with the quantity before it: `wall_s_per_step` is "
             f"{unit_of('wall_s_per_step')}, `strong_calls_per_task` {unit_of('strong_calls_per_task')}):", ""]
    lines += [f"- `{e}`: {u}" for e, u in JSON_UNIT_ENDINGS.items()]
    lines += ["", "or is one of these (the keys inside an object of a key with a unit take its unit: "
              + ", ".join(f"`{k}`" for k in JSON_INHERIT) + ", a digit: a list index or a GPU count):", "",
              "| key | JSON type | unit | meaning |", "|---|---|---|---|"]
    lines += [f"| `{k}` | {t.replace('|', ' or ')} | {'' if unit_of(k) == m else unit_of(k)} | {m} |"
              for k, (t, m) in sorted(JSON_KEYS.items(), key=lambda x: x[0].lower())]
    return "\n".join(lines) + "\n"


BLOCKS = {
    "readme-validation": readme_validation,
    "readme-protocols": readme_protocols,
    "readme-plan": readme_plan,
    "protocols-chunking": protocols_chunking,
    "protocols-gaps": protocols_gaps,
    "protocols-replay": protocols_replay,
    "protocols-ideal": protocols_ideal,
    "protocols-agentcollab": protocols_agentcollab,
    "protocols-agentcollab-costs": protocols_agentcollab_costs,
    "protocols-speculative-actions": protocols_speculative_actions,
    "protocols-speculate-always": protocols_speculate_always,
    "cost-model-validation": cost_model_validation,
    "cost-model-metrics": cost_model_metrics,
    "cost-model-set": cost_model_set,
    "cost-model-families": cost_model_families,
    "measured-counts": measured_counts,
    "readme-bench": readme_bench,
    "cost-model-workload": cost_model_workload,
    "cost-model-defaults": cost_model_defaults,
    "cost-model-twin": cost_model_twin,
    "api-json-vocabulary": api_json_vocabulary,
}


def regenerate(text: str, where: str = "") -> str:
    """``text`` with every block made again (ValueError for a block no function makes)."""
    def block(m):
        name = m.group(2)
        if name not in BLOCKS:
            raise ValueError(f"{where}: no generator for the block {name!r}; known: {', '.join(BLOCKS)}")
        return m.group(1) + BLOCKS[name]() + m.group(4)
    return _BLOCK.sub(block, text)


def blocks(text: str) -> dict:
    """``{name: text}`` of the blocks of ``text``."""
    return {m.group(2): m.group(3) for m in _BLOCK.finditer(text)}


def main(root=None) -> list[str]:
    """Rewrite the blocks of :data:`FILES` in the checkout at ``root`` (default: this package's
    own); returns the files that changed."""
    from .files import write_atomic

    root = Path(root) if root else Path(__file__).resolve().parents[1]
    changed = []
    for name in FILES:
        path = root / name
        old = path.read_text(encoding="utf-8")
        new = regenerate(old, name)
        if new != old:
            write_atomic(path, new)
            changed.append(name)
    return changed


if __name__ == "__main__":
    print("\n".join(f"rewrote {f}" for f in main()) or "every block is current")

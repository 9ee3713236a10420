"""`costsim acceptance`: measure p_u on recorded conversations with the weak and strong endpoints
(docs/live.md, "Measuring p_u"). The flags the live mode shares are calibrate's."""

from __future__ import annotations

import json
import sys
from typing import List, Optional

import typer

from costsim.config import SpecAgentOptions

from ._common import Progress, atomic_write, check_output, dumps, shown, warn, with_options, user_errors
from .live_cmd import LIVE_OPTIONS

#: calibrate's flags that name the endpoints, their keys and the requests.
_SHARED = ("weak_url", "strong_url", "local", "api_key_env", "weak_api_key_env", "strong_api_key_env", "timeout",
           "retries", "seed", "model_dir", "json_out")
OPTIONS = {k: LIVE_OPTIONS[k] for k in _SHARED}


@with_options(OPTIONS)
def acceptance(
    conversations: List[str] = typer.Argument(..., help="tau²-Bench results files (recorded conversations, with the "
                                                        "tool results in them)."),
    out: str = typer.Option("acceptance.jsonl", "--out", "-o", help="Trace to write: the conversations' steps with "
                                                                    "the verdicts measured (replay --verdicts recorded)."),
    K: int = typer.Option(SpecAgentOptions.K, "--K", "-K", help="Chunk size: most steps (model calls) the weak model "
                                                                 "drafts per chunk."),
    chunking: str = typer.Option(SpecAgentOptions.chunking, "--chunking", help="What ends a drafted chunk (docs/protocols.md): "
                                 "messages-end, messages-pass, writes-only, writes+final, hold-messages."),
    exact_match: bool = typer.Option(False, "--exact-match", help="Accept a drafted step only where it is the recorded "
                                     "step itself (the paper's exact-match ablation); no strong call."),
    structured: str = typer.Option("json-schema", "--structured", help="How the verdict is asked for: json-schema "
                                   "(response_format) or tool-call (a forced tool call)."),
    max_tasks: Optional[int] = typer.Option(None, "--max-tasks", help="Measure only the first N conversations [all]."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Measure only the first N model calls of each "
                                            "conversation [all]."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Tokens a draft or a verdict may decode [1024]."),
    tools: Optional[List[str]] = typer.Option(None, "--tools", help="Tool kinds (TOML name = \"read\"|\"write\") or an MCP "
                                              "tools/list JSON (readOnlyHint, and its inputSchema offered to the weak "
                                              "model); repeatable; over the built-in tau² table."),
    resume: bool = typer.Option(False, "--resume", help="Go on from the answers an interrupted run saved beside --out."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the requests (one JSON line each) and send nothing."),
    **o,
):
    """Measure p_u: the weak endpoint drafts on recorded conversations, the strong one reviews."""
    from costsim import api

    json_out = o.pop("json_out")
    probes = out + ".probes.jsonl"
    inputs = tuple(conversations) + tuple(tools or ())
    if not dry_run:
        for path in (out, probes):
            check_output(path, inputs)
    requests = []

    def on_request(req):
        requests.append(req)
        if not json_out:
            typer.echo(json.dumps(req, ensure_ascii=False))

    with user_errors(ValueError), Progress("measuring p_u", quiet=dry_run) as bar:
        res = api.measure_acceptance(conversations, K=K, chunking=chunking, exact_match=exact_match, structured=structured,
                                     max_tasks=max_tasks, max_steps=max_steps, max_tokens=max_tokens, tools=tools or (),
                                     dry_run=dry_run, resume=resume, probes=None if dry_run else probes,
                                     progress=lambda done, total: bar.advance(done - bar.done, total),
                                     on_warning=warn, on_request=on_request, **o)
    if dry_run:
        c = res["cost"]
        if json_out:
            typer.echo(dumps({"dry_run": True, "requests": requests, "weak_calls": c["weak_calls"],
                              "strong_calls": c["strong_calls"],
                              "estimated_prompt_tokens": c["weak_prompt_tokens"] + c["strong_prompt_tokens"]}))
        print(f"costsim: dry run: {c['weak_calls']} weak and {c['strong_calls']} strong requests printed, nothing sent "
              f"(about {c['weak_prompt_tokens'] + c['strong_prompt_tokens']:,} prompt tokens, ceil(chars/4)); a real run's "
              "later drafts and reviews depend on the models' answers: shown as if the weak model repeated the recorded "
              "steps and the strong one accepted them", file=sys.stderr)
        return
    atomic_write(out, res.trace_jsonl(), inputs=inputs)
    typer.echo(dumps({"out": out, **res.to_dict()}) if json_out else render(res.data, out))


def _p(r) -> str:
    if r["mean"] is None:
        return "-"
    ci = r["ci95"]
    return f"{r['mean']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def render(d: dict, out: str) -> str:
    c, v, b = d["cost"], d["verdicts"], d["beta_fit"]
    how = ("exact match with the recorded step" if d["mode"] == "exact-match"
           else f"semantic review by the strong model ({d['structured']})")
    lines = [f"p_u measured on {d['tasks']} recorded conversation(s), {d['recorded_calls']} model calls of the agent; "
             f"teacher-forced drafting, {how}; K = {d['K']}, {d['chunking']} chunking",
             f"  weak   {shown(d['urls']['weak'])} ({shown(d['models']['weak'])})"]
    if d["urls"].get("strong"):
        lines.append(f"  strong {shown(d['urls']['strong'])} ({shown(d['models']['strong'])})")
    lines += ["",
              f"  p_u = {_p(d['accept_rate'])}   (Wilson 95%: {d['accepted_steps']} of {d['judged_steps']} judged steps "
              "accepted, steps taken as independent)",
              f"        clustered over tasks {_p(d['clustered_accept_rate'])}   (cluster-robust 95%)",
              f"  {d['rejected_steps']} rejected ({d['rejected_unreadable_steps']} of them for an unreadable verdict), "
              f"{d['diverged_steps']} diverged (drafting stopped, not a rejection), {d['unjudged_steps']} drafted after a "
              f"rejection (not judged); {d['chunks']} chunks"]
    lines.append(f"  Beta fit across tasks: --p-dist {b['p_dist']} (mean {b['mean_accept_rate']:.3f}, {b['tasks']} tasks)"
                 if b["p_dist"] else f"  Beta fit across tasks: none ({b['note']})")
    if b["p_dist"] and b["note"]:
        lines.append(f"    note: {b['note']}")
    if d["by_kind"]:
        lines += ["", "  by step kind:  " + "   ".join(f"{k} {_p(x['accept_rate'])} ({x['judged_steps']})"
                                                   for k, x in d["by_kind"].items())]
    if d["by_tool"]:
        lines.append("  by tool:")
        lines += [f"    {shown(k):32s} {_p(x['accept_rate']):26s} {x['judged_steps']} judged, {x['rejected_steps']} rejected"
                  for k, x in d["by_tool"].items()]
    lines += ["", f"  {'task':24s} {'p_u [95%]':26s} judged rejected diverged"]
    for t in d["per_task"]:
        lines.append(f"  {shown(t['task_id'])[:24]:24s} {_p(t['accept_rate']):26s} {t['judged_steps']:6d} "
                     f"{t['rejected_steps']:8d} {t['diverged_steps']:8d}")
    if d["mode"] != "exact-match":
        mv = v["mean_verdict_tokens"]
        lines += ["", f"  verdicts: {v['reviews']} reviews, " + (f"{mv:.1f} tokens each (mean)" if mv is not None else
                                                                   "tokens not reported by the server")
                  + (f"; {v['alternative_steps']} rejections with an alternative, about {v['mean_repair_tokens']:.1f} "
                     "tokens each (estimated)" if v["mean_repair_tokens"] is not None else "")]
        if mv is not None:
            lines.append(f"    for calibrate: --verdict-tokens {round(mv)}"
                         + (f" --repair-tokens {round(v['mean_repair_tokens'])}" if v["mean_repair_tokens"] else ""))
    lines.append(f"  cost: weak {c['weak_calls']} calls ({c['weak_prompt_tokens']:,} prompt + {c['weak_completion_tokens']:,} "
                 f"completion tokens), strong {c['strong_calls']} calls ({c['strong_prompt_tokens']:,} + "
                 f"{c['strong_completion_tokens']:,}); {c['retried_calls']} retried, {c['reused_calls']} answers reused "
                 f"(probe file or an identical request); {d['elapsed_s']:.1f} s")
    lines.append(f"  trace with the verdicts: {out}   (costsim replay {out} --verdicts recorded)")
    return "\n".join(lines)

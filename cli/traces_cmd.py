"""`costsim traces ...`: import agent logs, list shipped traces, print what SpecAgent would see.

The library is imported inside the commands (start-up time of `costsim --help`).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import List, Optional

import typer

from costsim.config import WORKLOAD
from costsim.api import IMPORTERS

from ._common import UserError, atomic_write, check_output, dumps, shown, user_errors, warn

traces_app = typer.Typer(help="Trajectories: import agent logs, list shipped traces, statistics.",
                         no_args_is_help=True)
import_app = typer.Typer(help="Convert an agent log into costsim's trajectory JSONL.",
                         no_args_is_help=True)
traces_app.add_typer(import_app, name="import")

_KINDS = ("read", "write", "respond", "final")


def _import(fmt: str, files, out: str, tools, strict: bool, options=None):
    """Import ``files`` with ``fmt``'s importer (``options``: its own flags), write the JSONL
    atomically (never over an input), and say what was made."""
    from costsim.api import import_trace

    files = list(files)
    out = check_output(out, inputs=(*files, *(tools or ())))
    with user_errors(ValueError):
        res = import_trace(fmt, files, tools=tools, strict=strict, **{k: v for k, v in (options or {}).items() if v is not None})
    for w in res.result.warnings:
        warn(w)
    if not res.result.tasks:
        raise UserError(f"{files[0]}: no task could be imported ({res.result.records} records read)")
    with user_errors(ValueError):
        text = res.jsonl()
    atomic_write(out, text, inputs=(*files, *(tools or ())))
    print(_import_summary(res, files[0], out))


def _import_summary(res, src, out) -> str:
    result = res.result
    kinds = result.steps_by_kind()
    lines = [f"{src} -> {out}: {len(result.tasks)} tasks of {result.records} records, {sum(kinds.values())} steps "
             f"({', '.join(f'{k} {kinds[k]}' for k in _KINDS)})"]
    if isinstance(result.notes.get("task_grouping"), str):  # how the importer told one task from another
        lines.append(f"  tasks: {result.notes['task_grouping']}")
    defaulted = dict(sorted(result.defaulted_tools.items()))
    n_def = sum(defaulted.values())
    if n_def:
        names = ", ".join(f"{shown(k)} ({v})" for k, v in defaulted.items())
        lines.append(f"  {n_def} tool-call steps of {len(defaulted)} unknown tools defaulted to write (held): {names}")
    else:
        lines.append("  every tool found in the tool table (none defaulted to write)")
    left = {k: v for k, v in result.notes.items() if isinstance(v, int) and v}
    if left:
        lines.append("  left out: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in left.items()))
    est = result.estimated_share()
    if est:
        lines.append(f"  estimated ({res.importer.estimates}): " + ", ".join(f"{f} in {v:.0%} of steps" for f, v in est.items()))
    if result.warnings:
        lines.append(f"  {len(result.warnings)} warning(s) above (--strict makes a skipped or repaired record fatal)")
    return "\n".join(lines)


def _import_command(fmt: str, imp):
    """`costsim traces import FMT`, from its importer's record (costsim.traces.importers): its
    files, -o, --tools, --strict, and its own options (``imp.options``: keyword -> help)."""
    many = imp.many

    def command(files=typer.Argument(..., help=imp.files_help, metavar="FILE..." if many else "FILE"),
                out: str = typer.Option(..., "-o", "--out", help="Output trajectory JSONL."),
                tools: Optional[List[Path]] = typer.Option(None, "--tools", help=imp.tools_help),
                strict: bool = typer.Option(False, "--strict", help=imp.strict_help), **options):
        _import(fmt, files if many else [files], out, tools, strict, options)

    annotations = {"files": List[Path] if many else Path, "out": str, "tools": Optional[List[Path]], "strict": bool}
    params = [p.replace(annotation=annotations[p.name]) for p in inspect.signature(command).parameters.values()
              if p.kind is not p.VAR_KEYWORD]
    params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, annotation=Optional[str],
                                 default=typer.Option(None, "--" + k.replace("_", "-"), help=h))
               for k, h in imp.options.items()]
    command.__signature__ = inspect.Signature(params)  # typer reads the options from it
    command.__annotations__ = {**annotations, **{k: Optional[str] for k in imp.options}}
    command.__doc__, command.__name__ = imp.description, f"import_{fmt}_cmd"
    return command


for _fmt, _imp in IMPORTERS.items():
    import_app.command(_fmt)(_import_command(_fmt, _imp))


def _n(x, fmt=",.0f"):
    return "-" if x is None else format(x, fmt)


def _print_stats(name: str, s: dict, per_task: bool):
    k = s["kinds"]
    print(f"{shown(name)}: {s['tasks']} tasks, {s['steps']} steps in {s['calls']} model calls (K={s['K']} calls, "
          f"chunking {s['chunking']})")
    print("  steps by kind   " + "  ".join(f"{x} {k[x]}" for x in _KINDS))
    t = s["tokens"]
    print(f"  tokens          prompt {_n(t['prompt'])}  completion {_n(t['completion'])}  "
          f"observation {_n(t['observation'])}")
    if s["estimated_fraction"]:
        print("  estimated       " + ", ".join(f"{shown(f)} {v:.0%} of steps" for f, v in s["estimated_fraction"].items()))
    print(f"  context         first {_n(s['mean_context_first'])}  last {_n(s['mean_context_last'])}  "
          f"growth {_n(s['mean_context_growth_per_step'], ',.1f')} tokens/step (means over tasks)")
    c = s["chunk_lengths"]
    width = max(6, len(str(max(c["reviewed"] + c["unreviewed"] + [0]))) + 1)
    print("  chunk length    " + "".join(f"{i:>{width}}" for i in range(1, c["K"] + 1)) + "  (model calls)")
    print("    reviewed      " + "".join(f"{x:>{width}}" for x in c["reviewed"]))
    print("    unreviewed    " + "".join(f"{x:>{width}}" for x in c["unreviewed"]))
    print(f"    {c['chunks']} chunks, mean length {_n(c['mean_length'], '.2f')}; ended by "
          + ", ".join(f"{e} {n}" for e, n in c["ends"].items()))
    r = s["reviews_per_task"]
    print(f"  reviews/task    mean {_n(r['mean'], '.2f')} (min {r['min']}, max {r['max']}); "
          f"{_n(s['calls_per_review'], '.1f')} committed model calls per review, every draft accepted")
    for m, v in s["models"].items():
        print(f"  model {shown(m)}: {v['steps']} steps, {v['output_tokens']:,} output tokens"
              + (f", {v['timed_steps']} timed: {v['mean_duration_s']:.2f} s/step, "
                 f"{_n(v['output_tokens_per_s'], '.1f')} output tokens/s" if v["timed_steps"] else ""))
    tl = s.get("tool_latency")
    if tl:
        print(f"  tool latency    {tl['timed_tool_steps']} of {tl['tool_steps']} tool steps recorded: mean {tl['mean_s']:.3f} s, "
              f"median {tl['median_s']:.3f} s, p95 {tl['p95_s']:.3f} s (replay with --tool-latency recorded)")
    if s["verdict_fit"]:
        f = s["verdict_fit"]["pooled"]
        print(f"  verdicts        p_u = {_n(f['p_hat'], '.3f')} pooled from {f['passes']} passes, "
              f"{f['failures']} rejections; 95% Wilson {f['wilson']}, profile {f['profile']}")
    if per_task:
        print(f"  {'task':<14}{'steps':>6}{'read':>6}{'write':>6}{'resp':>6}{'final':>6}"
              f"{'prompt':>10}{'compl':>8}{'obs':>8}{'ctx first':>10}{'ctx last':>10}{'chunks':>7}{'reviews':>8}")
        for row in s["per_task"]:
            kk = row["kinds"]
            tt = row["tokens"]
            print(f"  {shown(row['task_id'])[:13]:<14}{row['steps']:>6}{kk['read']:>6}{kk['write']:>6}"
                  f"{kk['respond']:>6}{kk['final']:>6}{tt['prompt']:>10}{tt['completion']:>8}"
                  f"{tt['observation']:>8}{_n(row['context_first'], 'd'):>10}{_n(row['context_last'], 'd'):>10}"
                  f"{row['chunks']:>7}{row['reviews']:>8}")


@traces_app.command("stats")
def stats_cmd(
    traces: List[str] = typer.Argument(..., help="Trace files (JSONL) or shipped trace names (see `costsim traces list`)."),
    K: int = typer.Option(WORKLOAD.K, "--K", "-K", min=1, help="SpecAgent chunk size: at most K steps a chunk (unreviewed unless the chunking rule reviews it)."),
    chunking: Optional[str] = typer.Option(None, "--chunking", help="SpecAgent's chunking rule: messages-end, messages-pass, writes-only, writes+final or hold-messages (docs/protocols.md) [writes+final]."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    per_task: bool = typer.Option(True, "--per-task/--no-per-task", help="Per-task rows in the text output."),
    strict: bool = typer.Option(False, "--strict", help="Any malformed line is fatal (default: skip it with a warning)."),
):
    """Steps, tokens, context growth, SpecAgent chunk lengths and implied reviews per trace.

    Chunks end at a write (held, reviewed) or at K steps; what a message to the user does, and
    whether a chunk without a write is reviewed, is the chunking rule's (--chunking). Implied
    reviews assume every draft is accepted: each rejection would add one.
    """
    from costsim import api

    with user_errors(ValueError):
        res = api.trace_stats(traces, K=K, chunking=chunking, strict=strict, on_warning=warn)
    if as_json:
        print(dumps(res.to_dict()))
        return
    for i, f in enumerate(res["files"]):
        if i:
            print()
        _print_stats(f["trace"], f, per_task)


@traces_app.command("list")
def list_cmd(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")):
    """The traces shipped with costsim (usable by name in `stats`)."""
    from costsim import api

    rows = api.shipped_traces().to_dict()
    if as_json:
        print(dumps(rows))
        return
    if not rows:
        print("no shipped traces found")
        return
    print(f"{'name':<20}{'tasks':>6}{'steps':>7}  {'domain':<9}source")
    for r in rows:
        print(f"{r['name']:<20}{r['tasks']:>6}{r['steps']:>7}  {r['domain']:<9}{r['source']}")

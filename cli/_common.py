"""Helpers shared by the commands: user errors, JSON output, atomic writes."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

from costsim.config import COMMANDS, DEPLOYMENTS as D, OPTIONS, edge_cloud_setting

# Deployment options every command that costs a deployment takes.
ENGINE = typer.Option(None, "--engine", help=f"Serving engine profile (vllm, sglang, trtllm, llamacpp, ideal; or a TOML) [{D.engine}].")
WEAK_ENGINE = typer.Option(None, "--weak-engine", help="The weak model's engine, if not --engine's.")
EXPERT_PARALLEL = typer.Option(False, "--expert-parallel", help="Strong MoE experts placed whole on the GPUs (all-to-all) instead of tensor-sharded.")
GPU_MEMORY_UTILIZATION = typer.Option(None, "--gpu-memory-utilization", "--mem-fraction-static", min=0.0, max=1.0,
                                      help="Share of each GPU's memory the engine takes (vLLM's --gpu-memory-utilization, "
                                           "SGLang's --mem-fraction-static) [the engine's default: vLLM 0.9, SGLang's rule by "
                                           "GPU memory and TP; `costsim hardware show ENGINE`].")


def with_options(options: dict):
    """A command taking ``options`` (name -> (type, typer.Option)) as keyword parameters after
    its own, so that commands sharing options declare them once; the command gets them in its
    ``**kwargs``. Typer reads the signature and types this sets."""
    import functools
    import inspect

    def wrap(fn):
        sig = inspect.signature(fn, eval_str=True)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
                 for n, (ann, opt) in options.items()]

        flags = {p.name: (p.default.param_decls or ("--" + p.name.replace("_", "-"),))[0]
                 for p in own + extra if hasattr(p.default, "param_decls")}

        @functools.wraps(fn)
        def command(*args, **kwargs):
            for name, v in kwargs.items():  # "" would read as "the default" further on
                if isinstance(v, str) and not v.strip() and name in flags:
                    raise UserError(f"{flags[name]} is empty")
            return fn(*args, **kwargs)

        command.__signature__ = sig.replace(parameters=own + extra)
        command.__annotations__ = {p.name: p.annotation for p in own + extra}
        return command
    return wrap


def protocol_flag(name: str, *decls: str, default=..., shown: str | None = None):
    """The flag of protocol option ``name``: its default (``default``: the flag's own, e.g. None
    for "the protocol's") and help from its declaration in :mod:`costsim.config`; ``shown``:
    the default as the help gives it."""
    cls, f = OPTIONS[name]
    if shown is None:
        shown = "none" if f.default is None else f"{f.default:g}" if isinstance(f.default, float) else str(f.default)
    help = f.metadata["help"]
    return typer.Option(f.default if default is ... else default, *decls,
                        help=f"{cls.TITLE}: {help[0].upper()}{help[1:]} [{shown}].", show_default=False)


def edge_cloud_flag(setting: str, flag: str):
    """The flag of an API-backend setting, with its help, default and source from
    :data:`costsim.config.EDGE_CLOUD_SETTINGS`; none given: the default."""
    default, what, source = edge_cloud_setting(setting)
    return typer.Option(None, flag, help=f"Edge-cloud: {what} [{default}] ({source}).")


# The scenario options of simulate and replay (capacity takes most of them), declared once:
# name -> (type, option).
_S, _F, _I = Optional[str], Optional[float], Optional[int]
SCENARIO_OPTIONS = {
    "p_accept": (float, typer.Option(COMMANDS.p_accept, "--p-accept", "-p", help="Per-step acceptance rate p_u, in [0, 1].")),
    "K": (_I, protocol_flag("K", "--K", "-K", default=None)),
    "p_dist": (_S, typer.Option(None, "--p-dist", help="beta:a,b | markov:p_good,p_bad,switch_gb,switch_bg | recorded[:p].")),
    "protocols": (_S, typer.Option(None, "--protocols", help=(
        f"Comma-separated protocols [{','.join(COMMANDS.protocols)}]; `costsim protocols` lists every one "
        "(docs/protocols.md); edge-cloud adds its baseline cloud-strong-only."))),
    "sessions": (int, typer.Option(COMMANDS.sessions, "--sessions", help="Concurrent agent sessions (closed loop).")),
    "arrival_rate": (_F, typer.Option(None, "--arrival-rate", help="Open loop: tasks per second, Poisson arrivals.")),
    "seed": (int, typer.Option(0, "--seed", min=0, help="Seed of every random stream.")),
    "strong": (_S, typer.Option(None, "--strong", help=f"Strong model: profile name, TOML or HF config.json [{D.strong}].")),
    "weak": (_S, typer.Option(None, "--weak", help=f"Weak model: profile name, TOML or HF config.json [{D.weak}].")),
    "strong_device": (_S, typer.Option(None, "--strong-device", help=f"Device of a strong replica: a profile name (costsim hardware list) or a TOML file of your own (README, 'Your own hardware') [{D.device}].")),
    "weak_device": (_S, typer.Option(None, "--weak-device", help=f"Device of a weak replica: a profile name or a TOML file [{D.device}].")),
    "strong_gpus": (_I, typer.Option(None, "--strong-gpus", help="Devices of a strong replica [as many as hold it].")),
    "strong_dtype": (_S, typer.Option(None, "--strong-dtype", help=f"Strong weight precision [the checkpoint's own; {D.strong_dtype} for the default {D.strong}].")),
    "weak_dtype": (_S, typer.Option(None, "--weak-dtype", help="Weak weight precision [the checkpoint's own].")),
    "engine": (_S, ENGINE), "weak_engine": (_S, WEAK_ENGINE), "expert_parallel": (bool, EXPERT_PARALLEL),
    "gpu_memory_utilization": (_F, GPU_MEMORY_UTILIZATION),
    "strong_replicas": (int, typer.Option(1, "--strong-replicas", help="Strong replicas.")),
    "weak_replicas": (int, typer.Option(1, "--weak-replicas", help="Weak replicas.")),
    "rho": (_F, protocol_flag("rho", "--rho", default=None)),
    "strong_step_scale": (_F, protocol_flag("strong_step_scale", "--strong-step-scale", default=None,
                                            shown="the trace's per-model tokens where its steps name both models, else 1")),
    "weak_step_scale": (_F, protocol_flag("weak_step_scale", "--weak-step-scale", default=None,
                                          shown="as --strong-step-scale")),
    "verdict_tokens": (_I, protocol_flag("verdict_tokens", "--verdict-tokens", default=None)),
    "prefix_cache": (_S, typer.Option(None, "--prefix-cache", help=(
        "A session's prefix between its calls: hot (always resident, no room: the closed forms' assumption) [default], "
        "evict (the engine's prefix cache: LRU eviction from the KV pool, re-prefill of what was evicted) or off "
        "(no reuse). docs/cost-model.md, 'Prefix caching'."))),
    "routing": (_S, typer.Option(None, "--routing", help=(
        "Which replica a call goes to: session (each task's calls to one replica of each pool, tasks round-robin: "
        "session-affine) [default] or call (each call to the next replica: a stateless balancer; with "
        "--prefix-cache evict a session's prefix may be elsewhere)."))),
    "tool_latency": (str, typer.Option("0", "--tool-latency", help="Per tool call: a duration (0.5, 500ms), lognormal:median,sigma, or recorded[:fallback] (the trace's own tool times).")),
    "network_rtt": (str, typer.Option("0", "--network-rtt", help="Round trip to the strong model per call: a duration, 0.05, 50ms (edge-cloud).")),
    "out": (_S, typer.Option(None, "--out", "-o", help="Write the per-task table (.parquet or .csv).")),
    "json_out": (bool, typer.Option(False, "--json", help="Print one JSON object.")),
    "quiet": (bool, typer.Option(False, "--quiet", "-q", help="No progress bar.")),
    "calibration": (_S, typer.Option(None, "--calibration", help="Calibration TOML from `costsim calibrate`: measured endpoint times replace the roofline's.")),
    # The protocols beyond the paper's (docs/protocols.md).
    "false_accept": (_F, protocol_flag("false_accept", "--false-accept", default=None)),
    "false_reject": (_F, protocol_flag("false_reject", "--false-reject", default=None)),
    "escalate_p": (_F, protocol_flag("escalate_p", "--escalate-p", default=None)),
    "escalation_span": (_I, protocol_flag("escalation_span", "--escalation-span", default=None)),
    "spec_hit": (_F, protocol_flag("spec_hit_rate", "--spec-hit", "--spec-hit-rate", default=None)),
    "self_spec_hit": (_F, protocol_flag("self_spec_hit_rate", "--self-spec-hit", "--self-spec-hit-rate", default=None)),
    "api": (_S, edge_cloud_flag("api", "--api")),
    "api_ttft": (_F, edge_cloud_flag("api_ttft_s", "--api-ttft")),
    "api_tps": (_F, edge_cloud_flag("api_output_tps", "--api-tps")),
    "edge_device": (_S, edge_cloud_flag("edge_device", "--edge-device")),
    "option": (Optional[List[str]], typer.Option(None, "--option", help="Further protocol option NAME=VALUE, repeatable: `costsim protocols` lists each protocol's, with defaults.")),
}

class UserError(Exception):
    """Bad input from the user; printed as one line, exit code 2."""


#: Scenario options that may name a file the command reads (a calibration, a model's config.json,
#: a device or API profile): never an output.
FILE_OPTIONS = ("calibration", "strong", "weak", "strong_device", "weak_device", "api", "edge_device")


def inputs_of(o: dict, *paths) -> tuple:
    """The files a command reads: ``paths`` and those its options name (:data:`FILE_OPTIONS`)."""
    named = (o.get(k) for k in FILE_OPTIONS)
    return tuple(str(p) for p in (*paths, *named) if p and os.path.isfile(str(p)))


@contextmanager
def user_errors(*kinds):
    """Any of the exception ``kinds`` raised inside becomes a :class:`UserError` (its message)."""
    try:
        yield
    except kinds as e:
        raise UserError(str(e)) from None


def dumps(obj) -> str:
    """``obj`` (a result's ``to_dict()``, or plain values) as the JSON a command prints."""
    from costsim.api import to_jsonable

    return json.dumps(to_jsonable(obj), indent=2)


def check_output(path, inputs: tuple = (), directory: bool = False) -> Path:
    """Refuse, before any work is done, an output that cannot be written: an empty name, a
    directory where a file is wanted (or the reverse), a device, FIFO or socket, an input file,
    or a place where no file can be created (the check creates and removes a temporary file
    there)."""
    if path is None or not str(path).strip():
        raise UserError("the output path is empty")
    p = Path(path)
    name = str(p) if str(p).isprintable() else repr(str(p))  # an odd path, quoted
    try:
        return _check_output(p, name, inputs, directory)
    except OSError as e:  # a name too long, a component that is a file, ...
        raise UserError(f"{name}: cannot write there ({e.strerror or e})") from None


def _check_output(p: Path, name: str, inputs: tuple, directory: bool) -> Path:
    if directory and p.exists() and not p.is_dir():
        raise UserError(f"{name}: exists and is not a directory")
    if not directory and p.is_dir():
        raise UserError(f"{name}: is a directory; give a file name")
    if not directory and p.exists() and not p.is_file():  # the atomic rename would replace it
        raise UserError(f"{name}: not a regular file (a device, FIFO or socket); give a file name")
    from costsim.api import refuse_overwriting_input

    with user_errors(ValueError):
        refuse_overwriting_input(p, inputs, name=name)
    where = p if directory else p.parent
    made = [q for q in (where, *where.parents) if not q.exists()]  # created for the probe, removed after it
    probe = None
    try:
        where.mkdir(parents=True, exist_ok=True)
        # the name atomic_write's temporary file will have: too long a name fails here, not after the run
        fd, probe = tempfile.mkstemp(dir=where, prefix=".costsim-probe-" if directory else f".{p.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as e:
        file = next((q for q in where.parents if q.exists() and not q.is_dir()), where if where.is_file() else None)
        why = f"{file} is a file, not a folder" if file is not None else e.strerror or e
        raise UserError(f"{name}: cannot write there ({why})") from None
    except ValueError as e:  # a NUL in the name
        raise UserError(f"{name}: not a valid path ({e})") from None
    finally:  # whatever happened, an interrupt included, the probe and the folders made for it go
        from contextlib import suppress

        with suppress(OSError):
            if probe:
                os.unlink(probe)
            for q in made:  # deepest first
                q.rmdir()
    return p


def atomic_write(path: str | os.PathLike, data: str | bytes, inputs: tuple = ()) -> None:
    """Write ``data`` to ``path`` atomically (:func:`costsim.files.write_atomic`); refuse to
    overwrite an input."""
    from costsim.api import write_atomic

    write_atomic(check_output(path, inputs), data)


class Progress:
    """A progress bar on stderr when it is a terminal, nothing otherwise (no text in pipes and
    logs); none for fewer than ``min_total`` items. ``with Progress("label") as bar``: pass
    ``bar.advance`` as an API call's ``progress``: ``advance(k, total=None, label=None)`` adds
    ``k`` done (a new ``label`` starts a bar of its own)."""

    def __init__(self, label: str, total: int | None = None, quiet: bool = False, min_total: int = 0):
        self.label, self.total, self.done, self.bar = label, total, 0, None
        self.show, self.min_total = not quiet and sys.stderr.isatty(), min_total

    def __enter__(self):
        return self

    def advance(self, k: int, total: int | None = None, label: str | None = None):
        if label is not None and label != self.label:
            self.close()
            self.label, self.done, self.total = label, 0, None
        self.total = total or self.total
        if self.show and self.bar is None and (self.total or 0) >= self.min_total:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=self.total)
        self.done += k
        if self.bar is not None:
            self.bar.update(self.task, completed=self.done, total=self.total)

    def close(self):
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def __exit__(self, *exc):
        self.close()


#: The exit status of a plan or capacity that finds nothing meeting the target (its answer printed).
TARGET_MISSED = 3


def target_missed(line: str):
    """Say on stderr that nothing meets the target, why in ``line``, and exit with
    :data:`TARGET_MISSED` (the answer, printed already, says the rest)."""
    print(f"costsim: no configuration meets the target: {line}", file=sys.stderr)
    raise typer.Exit(TARGET_MISSED)


def shown(text) -> str:
    """Text from outside (a trace's task ids, field and tool names, a server's words, a file's
    values) as it may be printed: every control character, newlines included, as an escape, so
    that it can forge no line (a fake ``costsim: error:``) and send no terminal escape."""
    text = str(text)
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def warn(line: str) -> None:
    """Say ``line`` on stderr as a warning (an API call's ``on_warning``), on one line."""
    print(f"costsim: warning: {shown(line)}", file=sys.stderr)

"""Importer for tau²-Bench result files (github.com/sierra-research/tau2-bench).

Accepted shapes: a ``Results`` object ``{info, tasks, simulations}`` or a bare list of
simulations; messages as objects (or JSON strings of objects); assistant content as text, as
a list of content parts, or as a JSON string (``{"message": ...}`` is a response; an object with
``tool_calls`` supplies the calls when the message has none); ``usage``, ``raw_data`` (the
provider response, whose ``model`` names the serving model) and ``generation_time_seconds``
where present.

Assumptions, beyond the shared rules of :mod:`costsim.traces.convert`:

- tau²'s scripted opening line ("Hi! How can I help you today?", the first message, sent by the
  orchestrator without a model call) is context but not a step;
- tool kinds: the built-in table :data:`~costsim.traces.tools.TAU2_TOOL_KINDS`, overridden by
  a user mapping; unknown tools are writes and counted in the report;
- the system prompt (for estimated context) is ``info.environment_info.policy`` when present
  (tool schemas are not in the files, so estimated contexts are low by their size);
- a step's duration is ``generation_time_seconds`` when present, else (estimated) the time
  from the previous message's ``timestamp`` to this one's;
- a simulation's task id is its ``task_id``; when a task has several trials it becomes
  ``TASK_ID#TRIAL``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from . import _check as c
from .convert import ImportResult, Msg, bounded, estimate_tokens, parse_message, steps_from_messages
from .jsonl import TraceError, read_text
from .schema import Task
from .tools import TAU2_TOOL_KINDS, ToolKinds

GREETING = "Hi! How can I help you today?"


def _load_json(source, name: str | None):
    if isinstance(source, (str, Path)):
        path = Path(source)
        name = name or str(path)
        text = read_text(path)
        try:
            return json.loads(text), name
        except json.JSONDecodeError as e:
            raise TraceError(f"{name}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
        except RecursionError:
            raise TraceError(f"{name}: JSON nested too deeply") from None
        except ValueError:
            raise TraceError(f"{name}: invalid JSON: a number with too many digits") from None
    return source, name or "<tau2 results>"


def _info(data, warnings: list[str], name: str) -> dict:
    """Optional run metadata from ``Results.info``; wrong types are warned about and ignored."""
    out = {"domain": "", "policy": "", "agent_llm": "", "user_llm": ""}
    info = data.get("info")
    paths = {"domain": ("environment_info", "domain_name"), "policy": ("environment_info", "policy"),
             "agent_llm": ("agent_info", "llm"), "user_llm": ("user_info", "llm")}
    for key, (a, b) in paths.items():
        v = info.get(a) if isinstance(info, dict) else None
        v = v.get(b) if isinstance(v, dict) else None
        if isinstance(v, str):
            out[key] = v
        elif v is not None:
            warnings.append(f"{name}: field 'info.{a}.{b}': expected a string, ignored")
    return out


def _simulation(sim, at: str) -> tuple[str, object, float | None, list[Msg], dict]:
    sim = c.obj(sim, at)
    tid = sim.get("task_id")
    if isinstance(tid, bool) or not isinstance(tid, (str, int)) or tid == "":
        raise c.Bad(f"{at}.task_id", f"expected a task id, got {c.show(tid)}")
    trial = sim.get("trial")
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, int)):
        raise c.Bad(f"{at}.trial", f"expected an integer, got {c.show(trial)}")
    reward = None
    if sim.get("reward_info") is not None:
        reward = c.opt_number(c.obj(sim["reward_info"], f"{at}.reward_info"), "reward", f"{at}.reward_info")
    msgs, prev_t = [], None
    for k, raw in enumerate(c.lst(sim.get("messages"), f"{at}.messages")):
        msg, t = parse_message(raw, f"{at}.messages[{k}]")
        if (msg.role == "assistant" and msg.duration_s is None and t is not None
                and prev_t is not None and (t.tzinfo is None) == (prev_t.tzinfo is None)):
            dt = (t - prev_t).total_seconds()
            if dt >= 0:
                msg.duration_s, msg.duration_estimated = dt, True
        prev_t = t
        msgs.append(msg)
    if (msgs and msgs[0].role == "assistant" and not msgs[0].calls
            and msgs[0].text.strip() == GREETING and msgs[0].completion_tokens is None):
        msgs[0].skip = True
    meta = {"tau2_task_id": str(tid)}
    for key in ("trial", "termination_reason", "id"):
        v = sim.get(key)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            meta["simulation_id" if key == "id" else key] = v
    return str(tid), trial, reward, msgs, meta


def import_tau2(source, *, tool_kinds: dict[str, str] | None = None, strict: bool = False,
                name: str | None = None) -> ImportResult:
    """Import a tau² results file (path) or its parsed JSON. ``tool_kinds`` (name -> read|write)
    overrides the built-in table. A malformed simulation is skipped with a warning naming the
    file and the field's JSON path, or is fatal with ``strict``."""
    data, name = _load_json(source, name)
    warnings: list[str] = []
    if isinstance(data, dict) and "simulations" in data:
        sims = data["simulations"]
        if not isinstance(sims, list):
            raise TraceError(f"{name}: field 'simulations': expected a list")
        meta = _info(data, warnings, name)
        prefix = "simulations"
    elif isinstance(data, list):
        sims, meta, prefix = data, _info({}, warnings, name), ""
    else:
        raise TraceError(f"{name}: expected a tau² Results object (with 'simulations') "
                         "or a list of simulations")
    kinds = ToolKinds({**TAU2_TOOL_KINDS, **(tool_kinds or {})})
    system_tokens = estimate_tokens(meta["policy"])
    parsed = []
    for i, sim in enumerate(sims):
        at = f"{prefix}[{i}]"
        try:
            parsed.append(_simulation(sim, at))
        except c.Bad as e:
            msg = f"{name}: field '{e.field}': {e.what}"
            if strict:
                raise TraceError(msg) from None
            warnings.append(msg + "; simulation skipped")
    counts = Counter(p[0] for p in parsed)
    seen: Counter = Counter()
    used: set[str] = set()
    tasks = []
    for tid, trial, reward, msgs, tmeta in parsed:
        seen[tid] += 1
        uid = tid if counts[tid] == 1 else f"{tid}#{trial if trial is not None else seen[tid] - 1}"
        while uid in used:  # repeated trial numbers: number the repeats
            uid += "'"
        used.add(uid)
        for key in ("agent_llm", "user_llm"):
            if meta[key]:
                tmeta[key] = meta[key]
        steps = bounded(steps_from_messages(msgs, kinds, system_tokens), uid, name, warnings)
        tasks.append(Task(task_id=uid, steps=steps, domain=meta["domain"],
                          source=f"tau2:{Path(name).name}", reward=reward, meta=tmeta))
    greet = sum(1 for p in parsed if p[3] and p[3][0].skip)
    return ImportResult(tasks=tasks, warnings=warnings, records=len(sims),
                        defaulted_tools=kinds.defaulted,
                        notes={"scripted_greetings_dropped": greet, "domain": meta["domain"]})

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
from dataclasses import dataclass, field
from pathlib import Path

from . import _check as c
from .convert import Call, Msg, arguments_text, bounded, estimate_tokens, steps_from_messages
from .jsonl import TraceError, read_text
from .schema import STEP_KINDS, Task
from .tools import TAU2_TOOL_KINDS, ToolKinds

GREETING = "Hi! How can I help you today?"
_ROLES = ("system", "user", "assistant", "tool")


@dataclass
class ImportResult:
    """What an importer made: tasks, one warning per skipped record, and a report."""

    tasks: list[Task]
    warnings: list[str] = field(default_factory=list)
    records: int = 0  # simulations (tau²) or log lines (OpenAI) read
    defaulted_tools: Counter = field(default_factory=Counter)  # unknown tool -> steps
    notes: dict = field(default_factory=dict)

    def steps_by_kind(self) -> dict[str, int]:
        n = Counter(s.kind for t in self.tasks for s in t.steps)
        return {k: n.get(k, 0) for k in STEP_KINDS}

    def estimated_share(self) -> dict[str, float]:
        """Fraction of steps whose field was estimated, per estimable field."""
        steps = [s for t in self.tasks for s in t.steps]
        n = Counter(f for s in steps for f in s.estimated_fields)
        total = len(steps) or 1
        return {f: n[f] / total for f in sorted(n)}


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


def _raw_model(raw, at: str) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return ""
    if isinstance(raw, dict):
        m = raw.get("model")
        if m is None:
            return ""
        if not isinstance(m, str):
            raise c.Bad(f"{at}.raw_data.model", f"expected a string, got {c.show(m)}")
        return m
    return ""


def _calls(v, at: str) -> list[Call]:
    if v is None:
        return []
    out = []
    for k, tc in enumerate(c.lst(v, at)):
        a = f"{at}[{k}]"
        tc = c.obj(tc, a)
        fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc  # OpenAI shape
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise c.Bad(f"{a}.name", f"expected a tool name, got {c.show(name)}")
        args = fn.get("arguments")
        if args is not None and not isinstance(args, (str, dict, list)):
            raise c.Bad(f"{a}.arguments", f"expected an object or a JSON string, got {c.show(args)}")
        out.append(Call(name=name, arguments=arguments_text(args), id=c.opt_str(tc, "id", a)))
    return out


def _message(raw, at: str) -> tuple[Msg, object]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            raise c.Bad(at, "expected a message object (or its JSON string)") from None
    m = c.obj(raw, at)
    role = m.get("role")
    role = {"developer": "system", "function": "tool"}.get(role, role) if isinstance(role, str) else role
    if role not in _ROLES:
        raise c.Bad(f"{at}.role", f"{c.show(role)} is not one of {', '.join(_ROLES)}")
    text = c.content_text(m.get("content"), f"{at}.content")
    calls = _calls(m.get("tool_calls"), f"{at}.tool_calls")
    if role == "assistant" and not calls and text.lstrip().startswith("{"):
        try:
            j = json.loads(text)
        except (ValueError, RecursionError):
            j = None
        if isinstance(j, dict) and j.get("tool_calls"):
            calls = _calls(j["tool_calls"], f"{at}.content.tool_calls")
            inner = j.get("content", j.get("message"))
            text = inner if isinstance(inner, str) else ""
    usage = m.get("usage")
    prompt = completion = None
    if usage is not None:
        usage = c.obj(usage, f"{at}.usage")
        prompt = c.opt_count(usage, "prompt_tokens", f"{at}.usage")
        completion = c.opt_count(usage, "completion_tokens", f"{at}.usage")
    msg = Msg(role=role, text=text, calls=calls if role == "assistant" else [],
              tool_call_id=c.opt_str(m, "id", at) if role == "tool" else "",
              prompt_tokens=prompt, completion_tokens=completion,
              model=_raw_model(m.get("raw_data"), at),
              duration_s=c.opt_seconds(m, "generation_time_seconds", at))
    if role == "tool" and not msg.tool_call_id:
        msg.tool_call_id = c.opt_str(m, "tool_call_id", at)
    return msg, c.opt_time(m, "timestamp", at)


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
        msg, t = _message(raw, f"{at}.messages[{k}]")
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

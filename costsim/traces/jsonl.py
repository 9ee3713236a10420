"""costsim's trajectory JSONL: versioned, one task per line, validated line by line.

Layout (schema version :data:`~costsim.traces.schema.SCHEMA_VERSION`, documented in
``traces/README.md``)::

    {"format": "costsim-trace", "schema_version": 1, ...free header fields...}
    {"task_id": "13", "domain": "airline", "source": "...", "reward": 1.0, "meta": {...},
     "steps": [{"kind": "read", "tool": "get_user_details", "output_tokens": 113, ...}, ...]}
    ...

Every error names the file, the line and the field (``FILE:LINE: field 'steps[2].kind': ...``).
A bad task line never touches the other tasks: in non-strict mode it is skipped with a warning,
in strict mode it is fatal. A bad header (or a newer schema version) is always fatal, since
nothing after it can be interpreted.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..files import read_text_decompressed as _read  # a .gz / .zst log is read as its text
from ..config import MAX_SECONDS, MAX_TOKENS
from ._check import Bad as _Bad  # a field that does not validate (field path, what is wrong)
from ._check import finite, show
from .schema import ESTIMABLE_FIELDS, SCHEMA_VERSION, STEP_KINDS, Step, Task

FORMAT = "costsim-trace"
_TASK_KEYS = {"task_id", "steps", "domain", "source", "reward", "meta"}
_STEP_KEYS = {
    "kind", "tool", "output_tokens", "observation_tokens", "context_tokens", "model",
    "duration_s", "tool_duration_s", "verdict", "estimated", "estimated_fields", "call", "tool_calls",
}


class TraceError(ValueError):
    """A trajectory file (or imported log) that does not validate; the message is one line."""


@dataclass
class ReadResult:
    """Tasks read from one file, its header, and one warning per skipped line."""

    tasks: list[Task]
    header: dict
    warnings: list[str] = field(default_factory=list)
    name: str = ""


def _int(obj: dict, key: str, where: str, default=None, minimum: int = 0) -> int:
    if key not in obj:
        if default is None:
            raise _Bad(where + key, "missing")
        return default
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(where + key, f"expected an integer, got {show(v)}")
    if v < minimum:
        raise _Bad(where + key, f"must be >= {minimum}, got {v}")
    if v > MAX_TOKENS:
        raise _Bad(where + key, f"must be at most {MAX_TOKENS:.0e}, got {show(v)}")
    return v


def _str(obj: dict, key: str, where: str, required: bool = False) -> str:
    if key not in obj:
        if required:
            raise _Bad(where + key, "missing")
        return ""
    v = obj[key]
    if not isinstance(v, str):
        raise _Bad(where + key, f"expected a string, got {json.dumps(v)[:40]}")
    if required and not v:
        raise _Bad(where + key, "must not be empty")
    return _unicode(v, where + key)


def _unicode(v: str, field: str) -> str:
    """A JSON string with a lone surrogate (``"\\ud800"``) is not text: no file can hold it."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise _Bad(field, "not valid Unicode (a lone surrogate escape)") from None
    return v


def _opt_float(obj: dict, key: str, where: str, minimum: float | None = None,
               maximum: float = math.inf) -> float | None:
    v = obj.get(key)
    if v is None:
        return None
    f = finite(v)
    if f is None:
        raise _Bad(where + key, f"expected a finite number or null, got {show(v)}")
    if minimum is not None and f < minimum:
        raise _Bad(where + key, f"must be >= {minimum}, got {v}")
    if f > maximum:
        raise _Bad(where + key, f"must be at most {maximum:g}, got {show(v)}")
    return f


def step_from_dict(d, where: str = "") -> Step:
    """Validate one step object; raises ``_Bad`` naming the field."""
    if not isinstance(d, dict):
        raise _Bad(where.rstrip("."), "expected an object")
    unknown = sorted(set(d) - _STEP_KEYS)
    if unknown:
        raise _Bad(where + unknown[0], "unknown field")
    kind = d.get("kind")
    if kind not in STEP_KINDS:
        raise _Bad(where + "kind", f"{json.dumps(kind)[:40]} is not one of {', '.join(STEP_KINDS)}")
    verdict = d.get("verdict")
    if verdict is not None and not isinstance(verdict, bool):
        raise _Bad(where + "verdict", "expected true, false or null")
    estimated = d.get("estimated", False)
    if not isinstance(estimated, bool):
        raise _Bad(where + "estimated", "expected true or false")
    ef = d.get("estimated_fields", [])
    if not isinstance(ef, list) or not all(isinstance(x, str) for x in ef):
        raise _Bad(where + "estimated_fields", "expected a list of field names")
    bad = [x for x in ef if x not in ESTIMABLE_FIELDS]
    if bad:
        raise _Bad(where + "estimated_fields", f"{bad[0]!r} is not one of {', '.join(ESTIMABLE_FIELDS)}")
    if len(set(ef)) != len(ef):
        raise _Bad(where + "estimated_fields", "duplicate field name")
    if ef and not estimated:
        raise _Bad(where + "estimated", "must be true when estimated_fields is not empty")
    return Step(
        kind=kind,
        output_tokens=_int(d, "output_tokens", where),
        observation_tokens=_int(d, "observation_tokens", where, default=0),
        tool=_str(d, "tool", where),
        context_tokens=_int(d, "context_tokens", where, default=-1, minimum=-1),
        model=_str(d, "model", where),
        duration_s=_opt_float(d, "duration_s", where, 0.0, MAX_SECONDS),
        tool_duration_s=_opt_float(d, "tool_duration_s", where, 0.0, MAX_SECONDS),
        verdict=verdict,
        estimated=estimated,
        estimated_fields=tuple(ef),
        call=_int(d, "call", where) if d.get("call", None) is not None else None,
        tool_calls=_int(d, "tool_calls", where, default=1, minimum=1),
    )


def task_from_dict(d) -> Task:
    """Validate one task object; raises ``_Bad`` naming the field."""
    if not isinstance(d, dict):
        raise _Bad("(line)", "expected a JSON object (one task per line)")
    unknown = sorted(set(d) - _TASK_KEYS)
    if unknown:
        raise _Bad(unknown[0], "unknown field")
    steps = d.get("steps")
    if not isinstance(steps, list):
        raise _Bad("steps", "missing" if steps is None else "expected a list")
    meta = d.get("meta", {})
    if not isinstance(meta, dict):
        raise _Bad("meta", "expected an object")
    return Task(
        task_id=_str(d, "task_id", "", required=True),
        steps=tuple(step_from_dict(s, f"steps[{i}].") for i, s in enumerate(steps)),
        domain=_str(d, "domain", ""),
        source=_str(d, "source", ""),
        reward=_opt_float(d, "reward", ""),
        meta=meta,
    )


def step_to_dict(s: Step) -> dict:
    """The JSON object of a step: the five core fields always, the optional ones when set."""
    d = {
        "kind": s.kind, "tool": s.tool, "output_tokens": s.output_tokens,
        "observation_tokens": s.observation_tokens, "context_tokens": s.context_tokens,
    }
    if s.model:
        d["model"] = s.model
    if s.duration_s is not None:
        d["duration_s"] = s.duration_s
    if s.tool_duration_s is not None:
        d["tool_duration_s"] = s.tool_duration_s
    if s.verdict is not None:
        d["verdict"] = s.verdict
    if s.estimated:
        d["estimated"] = True
    if s.estimated_fields:
        d["estimated_fields"] = list(s.estimated_fields)
    if s.call is not None:
        d["call"] = s.call
    if s.tool_calls != 1:
        d["tool_calls"] = s.tool_calls
    return d


def task_to_dict(t: Task) -> dict:
    d = {"task_id": t.task_id, "domain": t.domain, "source": t.source, "reward": t.reward}
    if t.meta:
        d["meta"] = t.meta
    d["steps"] = [step_to_dict(s) for s in t.steps]
    return d


def dumps_jsonl(tasks, **header) -> str:
    """The JSONL text of ``tasks`` with a header line; ``header`` adds free fields to it."""
    head = {"format": FORMAT, "schema_version": SCHEMA_VERSION, **header}
    bad = _not_unicode(head)
    if bad:
        raise TraceError(f"the header's field {bad!r}: {_NOT_UNICODE}")
    lines = [json.dumps(head, ensure_ascii=False, allow_nan=False)]
    seen = set()
    for t in tasks:
        if t.task_id in seen:
            raise TraceError(f"task {t.task_id!r}: duplicate task_id")
        seen.add(t.task_id)
        d = task_to_dict(t)
        bad = _not_unicode(d)
        if bad:
            raise TraceError(f"task {t.task_id!r}: field {bad!r}: {_NOT_UNICODE}")
        try:
            lines.append(json.dumps(d, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
        except (TypeError, ValueError) as e:
            raise TraceError(f"task {t.task_id!r}: cannot be written as JSON: {e}") from None
    return "\n".join(lines) + "\n"


_NOT_UNICODE = "not valid Unicode (a lone surrogate: a JSON \\ud800-style escape, or a file name not in UTF-8)"


def _not_unicode(v, at: str = "") -> str | None:
    """The path of the first string in ``v`` (dicts, lists, keys) that UTF-8 cannot hold."""
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return at or "(value)"
        return None
    items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, (list, tuple)) else ()
    for k, x in items:
        where = f"{at}[{k}]" if isinstance(k, int) else f"{at}.{k}" if at else str(k)
        bad = _not_unicode(k, where) if isinstance(k, str) else None
        bad = bad or _not_unicode(x, where)
        if bad:
            return bad
    return None


def _header(obj, name: str, lineno: int) -> dict:
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise TraceError(f"{name}:{lineno}: field 'format': the first line must be the header "
                         f'{{"format": "{FORMAT}", "schema_version": {SCHEMA_VERSION}, ...}}')
    v = obj.get("schema_version")
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise TraceError(f"{name}:{lineno}: field 'schema_version': expected a positive integer")
    if v > SCHEMA_VERSION:
        raise TraceError(f"{name}:{lineno}: field 'schema_version': version {v} is newer than "
                         f"this costsim reads ({SCHEMA_VERSION}); upgrade costsim")
    return obj


def parse_jsonl(text: str, name: str, strict: bool = False) -> ReadResult:
    """Parse costsim JSONL ``text`` (``name`` is used in messages: a path or a trace name)."""
    header = None
    tasks: list[Task] = []
    warnings: list[str] = []
    first_line: dict[str, int] = {}
    # Lines end at "\n" only: str.splitlines() would also split inside strings at U+0085, U+2028.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as e:  # ValueError: also a number past Python's 4,300 digits
            what = (f"{e.msg} (column {e.colno})" if isinstance(e, json.JSONDecodeError) else
                    "nested too deeply" if isinstance(e, RecursionError) else "a number with too many digits")
            msg = f"{name}:{lineno}: invalid JSON: {what}"
            if header is None or strict:
                raise TraceError(msg) from None
            warnings.append(msg + "; line skipped")
            continue
        if header is None:
            header = _header(obj, name, lineno)
            continue
        try:
            task = task_from_dict(obj)
            if task.task_id in first_line:
                raise _Bad("task_id", f"duplicate of line {first_line[task.task_id]}")
        except _Bad as e:
            msg = f"{name}:{lineno}: field '{e.field}': {e.what}"
            if strict:
                raise TraceError(msg) from None
            warnings.append(msg + "; task skipped")
            continue
        first_line[task.task_id] = lineno
        tasks.append(task)
    if header is None:
        raise TraceError(f"{name}:1: field 'format': empty file, expected the {FORMAT} header")
    return ReadResult(tasks=tasks, header=header, warnings=warnings, name=name)


def read_text(path) -> str:
    """A file's UTF-8 text (gzip or Zstandard decompressed first), or a one-line
    :class:`TraceError` naming the file."""
    path = Path(path)
    shown = str(path) if str(path).isprintable() else repr(str(path))  # one line, always
    try:
        return _read(path)
    except FileNotFoundError:
        raise TraceError(f"{shown}: no such file") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{shown}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise TraceError(f"{shown}: cannot read: {e.strerror}") from None
    except ValueError:  # an embedded NUL: no file can have this name
        raise TraceError(f"{shown}: not a valid file name") from None


def read_jsonl(path, strict: bool = False) -> ReadResult:
    """Read and validate a trajectory file; see :func:`parse_jsonl`."""
    return parse_jsonl(read_text(path), str(path), strict=strict)

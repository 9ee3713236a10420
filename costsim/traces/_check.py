"""Small validators for importers of foreign JSON: every failure names the field's JSON path.

They raise :class:`Bad` (field path, what is wrong); an importer turns it into a one-line
:class:`~costsim.traces.jsonl.TraceError` with the file name (and line, for JSONL logs).
"""

from __future__ import annotations

import json
import math
from datetime import datetime

from ..config import MAX_SECONDS, MAX_TOKENS


class Bad(Exception):
    def __init__(self, field: str, what: str, line: int = 1):
        super().__init__(field, what)
        self.field, self.what = field, what
        self.line = line  # the line of a document spread over lines where it goes wrong (1: its first)


def json_line(text: str):
    """One line (or document) of JSON, or :class:`Bad` naming it as ``(line)``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise Bad("(line)", f"invalid JSON: {e.msg} (column {e.colno})", e.lineno) from None
    except RecursionError:
        raise Bad("(line)", "JSON nested too deeply") from None
    except ValueError:  # a number past Python's 4,300-digit limit
        raise Bad("(line)", "invalid JSON: a number with too many digits") from None


def show(v) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _at(at: str, key: str) -> str:
    """The JSON path of ``key`` under ``at`` (at the top level: the key itself)."""
    return f"{at}.{key}" if at else key


def obj(v, at: str) -> dict:
    if not isinstance(v, dict):
        raise Bad(at, f"expected an object, got {show(v)}")
    return v


def lst(v, at: str) -> list:
    if not isinstance(v, list):
        raise Bad(at, f"expected a list, got {show(v)}")
    return v


def opt_str(d: dict, key: str, at: str) -> str:
    v = d.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise Bad(_at(at, key), f"expected a string, got {show(v)}")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise Bad(_at(at, key), "not valid Unicode (a lone surrogate escape)") from None
    return v


def opt_count(d: dict, key: str, at: str) -> int | None:
    v = d.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_TOKENS:
        raise Bad(_at(at, key), f"expected an integer in [0, {MAX_TOKENS:.0e}], got {show(v)}")
    return v


def finite(v) -> float | None:
    """``v`` as a finite float, or None: not a number, a bool, NaN, infinite, or an integer too
    large for a float (JSON's 10**400)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def opt_number(d: dict, key: str, at: str, what: str = "a finite number", minimum: float = -math.inf,
               maximum: float = math.inf) -> float | None:
    v = d.get(key)
    if v is None:
        return None
    f = finite(v)
    if f is None or not minimum <= f <= maximum:
        raise Bad(_at(at, key), f"expected {what}, got {show(v)}")
    return f


def opt_seconds(d: dict, key: str, at: str) -> float | None:
    return opt_number(d, key, at, f"seconds in [0, {MAX_SECONDS:g}]", 0.0, MAX_SECONDS)


def opt_time(d: dict, key: str, at: str) -> datetime | None:
    v = d.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise Bad(_at(at, key), f"expected an ISO 8601 time, got {show(v)}")
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        raise Bad(_at(at, key), f"expected an ISO 8601 time, got {show(v)}") from None
    return t.replace(tzinfo=None) if t.tzinfo is None else t


def content_text(v, at: str) -> str:
    """Message content: a string, null, or a list of OpenAI content parts (text parts joined)."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        out = []
        for i, part in enumerate(v):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                t = part.get("text", "")
                if not isinstance(t, str):
                    raise Bad(f"{at}[{i}].text", f"expected a string, got {show(t)}")
                out.append(t)
            else:
                raise Bad(f"{at}[{i}]", f"expected a content part, got {show(part)}")
        return "".join(out)
    raise Bad(at, f"expected a string, a list of parts or null, got {show(v)}")

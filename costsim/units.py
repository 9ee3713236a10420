"""Rates and durations as people write them: '2/s', '120/min', '60s', '1.5min', '500ms'.

The one reader of a task rate (tasks per second) and of a duration (seconds: a latency target,
a tool's or a user's latency, a network round trip, a timeout); errors are one line naming the
flag.
"""

from __future__ import annotations

import math
import re

_RATE_UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hr": 3600.0,
               "hour": 3600.0, "day": 86400.0, "d": 86400.0}
_TIME_UNITS = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0, "hr": 3600.0}
_NUM = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


def parse_rate(text) -> float:
    """'2/s', '120/min', '7200/h', '2' (per second) -> tasks per second, in [1e-6, 1e6]."""
    m = re.fullmatch(rf"\s*{_NUM}\s*(?:/\s*([a-z]+))?\s*", str(text).lower())
    if not m or (m.group(2) and m.group(2) not in _RATE_UNITS):
        raise ValueError(f"--task-rate {text!r}: expected a number of tasks per unit, e.g. 2/s, 120/min, 7200/h")
    rate = float(m.group(1)) / _RATE_UNITS[m.group(2) or "s"]
    if not 1e-6 <= rate <= 1e6:  # one task in 11.6 days to a million a second
        raise ValueError(f"--task-rate must be in [1e-6, 1e6] tasks/s, got {text!r}")
    return rate


def parse_seconds(text, flag: str = "--latency-p95", zero: bool = False, at_most: float = math.inf) -> float:
    """'60s', '60', '1.5min', '500ms' (or a number of seconds) -> seconds: finite, > 0 (>= 0 where
    ``zero``), at most ``at_most``. The one reader of every duration flag and setting; the
    error names ``flag``."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        secs = float(text)
    else:
        m = re.fullmatch(rf"\s*{_NUM}\s*([a-z]*)\s*", str(text).lower())
        if not m or (m.group(2) and m.group(2) not in _TIME_UNITS):
            raise ValueError(f"{flag} {text!r}: expected a duration, e.g. 60s, 1.5min, 500ms")
        secs = float(m.group(1)) * _TIME_UNITS[m.group(2) or "s"]
    if not (0 <= secs if zero else 0 < secs) or not secs <= at_most or not math.isfinite(secs):
        raise ValueError(f"{flag} must be a finite duration {'>=' if zero else '>'} 0"
                         + (f" and at most {at_most:g} s" if math.isfinite(at_most) else "") + f", got {text!r}")
    return secs

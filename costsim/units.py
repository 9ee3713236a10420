"""Rates and durations as people write them: '2/s', '120/min', '60s', '1.5min', '500ms'.

The one reader of a task rate (tasks per second) and of a latency target (seconds); errors
are one line naming the flag.
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


def parse_seconds(text) -> float:
    """'60s', '60', '1.5min', '500ms' -> seconds, finite and > 0."""
    m = re.fullmatch(rf"\s*{_NUM}\s*([a-z]*)\s*", str(text).lower())
    if not m or (m.group(2) and m.group(2) not in _TIME_UNITS):
        raise ValueError(f"--latency-p95 {text!r}: expected a duration, e.g. 60s, 1.5min, 500ms")
    secs = float(m.group(1)) * _TIME_UNITS[m.group(2) or "s"]
    if not 0 < secs < math.inf:
        raise ValueError(f"--latency-p95 must be a finite duration > 0, got {text!r}")
    return secs

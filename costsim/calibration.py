"""Calibration files: measured ratios (written by `costsim calibrate`) that replace defaults.

Format (TOML)::

    [calibration]
    source = "costsim calibrate --weak http://... --strong http://... on 2026-11-29"
    [ratios]          # any subset; each replaces the default of the same name
    kappa = 0.41      # weak step time / strong step time
    v_over_d = 0.09   # strong verification / strong authored step
    rho = 1.1         # strong repair per rejection, in units of d
    [ratios_ci95]     # optional 95% intervals, [lo, hi]
    kappa = [0.38, 0.44]
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field

from .resources import read_text

RATIO_KEYS = ("kappa", "v_over_d", "rho")


class CalibrationError(ValueError):
    """A calibration file that cannot be read; one-line message naming the file."""


@dataclass(frozen=True)
class Calibration:
    path: str
    source: str
    ratios: dict
    ci95: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict, compare=False)


def endpoint_fits(cal: Calibration) -> tuple:
    """``((which, prefill_s_per_token, decode_s_per_token, overhead_s), ...)`` for the measured
    endpoints of a calibration file (its ``[weak]``/``[strong]`` tables), for the simulator."""
    out = []
    for which in ("strong", "weak"):
        t = cal.raw.get(which)
        if not isinstance(t, dict):
            continue
        try:
            vals = tuple(float(t[k]) for k in ("prefill_s_per_token", "decode_s_per_token", "overhead_s"))
        except (KeyError, TypeError, ValueError):
            raise CalibrationError(f"{cal.path}: [{which}] needs prefill_s_per_token, decode_s_per_token "
                                   "and overhead_s numbers") from None
        if vals[0] <= 0 or vals[1] <= 0 or vals[2] < 0 or not all(math.isfinite(v) for v in vals):
            raise CalibrationError(f"{cal.path}: [{which}] per-token times must be > 0 and the overhead >= 0")
        out.append((which, *vals))
    if not out:
        raise CalibrationError(f"{cal.path}: no [weak] or [strong] endpoint fits to simulate with")
    return tuple(out)


def load_calibration(path: str) -> Calibration:
    """Read and validate a calibration TOML file."""
    try:
        data = tomllib.loads(read_text(path))
    except FileNotFoundError:
        raise CalibrationError(f"{path}: no such calibration file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CalibrationError(f"{path}: not a readable TOML calibration file ({e})") from None
    ratios = data.get("ratios", {})
    if not isinstance(ratios, dict) or not ratios:
        raise CalibrationError(f"{path}: no [ratios] table with any of {', '.join(RATIO_KEYS)}")
    out = {}
    for k, v in ratios.items():
        if k not in RATIO_KEYS:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise CalibrationError(f"{path}: ratios.{k} must be a finite number >= 0, got {v!r}")
        out[k] = float(v)
    if not out:
        raise CalibrationError(f"{path}: [ratios] has none of {', '.join(RATIO_KEYS)}")
    meta = data.get("calibration", {})
    source = meta.get("source", "") if isinstance(meta, dict) else ""
    return Calibration(path=str(path), source=source or f"calibration file {path}", ratios=out,
                       ci95=data.get("ratios_ci95", {}) if isinstance(data.get("ratios_ci95"), dict) else {},
                       raw=data)

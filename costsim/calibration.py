"""Calibration files: measured ratios (written by `costsim calibrate`) that replace defaults.

This module is the one reader and writer of the format: :func:`load_calibration`,
:func:`endpoint_fits` (for the simulator), :func:`to_toml`; live runs read a file's fits through
:func:`costsim.live.fit.fits_from_calibration` and :func:`costsim.live.fit.ratios_for`.

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

import datetime as _dt
import json
import math
import tomllib
from dataclasses import dataclass, field

from .config import MAX_RATIO
from .files import read_text

RATIO_KEYS = ("kappa", "v_over_d", "rho")


class CalibrationError(ValueError):
    """A calibration file that cannot be read; one-line message naming the file."""


@dataclass(frozen=True)
class Calibration:
    """A calibration file as read: where it is, its ``source`` line, the fitted ``ratios``
    (kappa, v_over_d, rho; dimensionless), their 95% intervals, and the whole table."""

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
        # A prefill of 0 is what calibrate writes when its probes cannot resolve prefill (see
        # roofline.calibrated); decode must be measured.
        if vals[0] < 0 or vals[1] <= 0 or vals[2] < 0 or not all(math.isfinite(v) for v in vals):
            raise CalibrationError(f"{cal.path}: [{which}] needs decode_s_per_token > 0, and prefill_s_per_token "
                                   "and overhead_s >= 0")
        out.append((which, *vals))
    if not out:
        raise CalibrationError(f"{cal.path}: no [weak] or [strong] endpoint fits to simulate with")
    return tuple(out)


def load_calibration(path: str) -> Calibration:
    """Read and validate a calibration TOML file."""
    if not str(path).strip():
        raise CalibrationError("the calibration path is empty")
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
            raise CalibrationError(f"{path}: ratios.{k} is not a ratio costsim reads ({', '.join(RATIO_KEYS)})")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= MAX_RATIO:
            raise CalibrationError(f"{path}: ratios.{k} must be a finite number in [0, {MAX_RATIO:g}], got {v!r}")
        out[k] = float(v)
    if not out:
        raise CalibrationError(f"{path}: [ratios] has none of {', '.join(RATIO_KEYS)}")
    meta = data.get("calibration", {})
    source = meta.get("source", "") if isinstance(meta, dict) else ""
    return Calibration(path=str(path), source=source or f"calibration file {path}", ratios=out,
                       ci95=data.get("ratios_ci95", {}) if isinstance(data.get("ratios_ci95"), dict) else {},
                       raw=data)


# --- writing -----------------------------------------------------------------------------------


def _tv(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_tv(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def _table(name: str, d: dict) -> list[str]:
    lines = [f"[{name}]"]
    for k, v in d.items():
        if v is None or isinstance(v, dict):
            continue
        lines.append(f"{k} = {_tv(v)}")
    return lines + [""]


def to_toml(res: dict, source: str, urls: dict) -> str:
    """The calibration file of a `costsim calibrate` result (:func:`costsim.live.calibrate.run_plan`);
    ``urls``: the endpoints' URLs as the file may show them (no credentials:
    :func:`costsim.live.calibrate.calibration_file` gives their public forms)."""
    fits, rat, w = res["fits"], res["ratios"], res["workload"]
    out = ["# Written by `costsim calibrate`. [ratios] are in time (what the wall-time ratio L needs);",
           "# [ratios_passes] are the paper's pass counting. API keys are never written here.", ""]
    out += _table("calibration", {
        "source": source, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "currency": "time", "weak_url": urls["weak"], "strong_url": urls["strong"],
        "weak_model": res["models"]["weak"], "strong_model": res["models"]["strong"],
        "weak_api_key_env": res["api_key_env"]["weak"], "strong_api_key_env": res["api_key_env"]["strong"],
        "probes": res["n_probes"],
    })
    out += _table("ratios", rat["time"])
    out += _table("ratios_ci95", {k: list(v) for k, v in rat["time_ci95"].items()})
    out += _table("ratios_passes", rat["passes"])
    out += _table("workload", w)
    out += _table("seconds", {**rat["seconds"], "verify_prefill_pass_equivalents": rat["verify_prefill_pass_equivalents"]})
    out += _table("direct", res["direct"])
    for role in ("weak", "strong"):
        f = fits[role]
        out += _table(role, {**f.as_dict(), "forced_decode": res["forced_decode"].get(role)})
        out += _table(f"{role}.ci95", {k: list(v) for k, v in f.ci95.items()})
        if role in res["server"]:
            out += _table(f"{role}.server", res["server"][role])
    if res["warnings"]:
        out += ["# warnings:"] + [f"#   {x}" for x in res["warnings"]]
    return "\n".join(out) + "\n"

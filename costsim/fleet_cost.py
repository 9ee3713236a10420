"""Fleet cost: prices with their dates, GPU-hours and USD per 1,000 tasks.

A fleet is paid for by the hour whether busy or not (on-demand list prices from the device
profiles, each with its source and the date it was read, unless overridden per device).
`capacity` and `plan` both cost their fleets here.
"""

from __future__ import annotations

import datetime as _dt
import math

from .config import check_price
from .profiles import load_device


def price_per_gpu_hour(dev, override=None) -> tuple[float | None, str]:
    """``(USD per GPU-hour, where from)`` of a device: ``override`` (a flag), else its profile's
    list price, else (None, why not)."""
    if override is not None:
        return float(override), "flag"
    if dev.usd_per_gpu_hour is not None:
        return float(dev.usd_per_gpu_hour), f"hardware/{dev.name}.toml: {dev.price_source}"
    return None, f"no price in hardware/{dev.name}.toml"


def hours_per_1k_tasks(task_rate: float) -> float:
    """Hours a fleet takes to complete 1,000 tasks at ``task_rate`` tasks/s."""
    return 1000.0 / task_rate / 3600.0


def usd_per_1k_tasks(usd_per_hour: float, task_rate: float, api_usd_per_task: float = 0.0) -> float:
    """USD per 1,000 tasks of a fleet paid ``usd_per_hour`` whether busy or not, completing
    ``task_rate`` tasks/s, plus what each task pays an API."""
    return usd_per_hour * hours_per_1k_tasks(task_rate) + 1000.0 * api_usd_per_task


def costs(strong_dep, weak_dep, strong: int, weak: int, task_rate: float, api_cost_per_task=0.0,
          strong_price=None, weak_price=None) -> dict:
    """GPU-hours and USD per 1,000 tasks of a fleet running at ``task_rate`` tasks/s.

    The fleet is paid for by the hour whether busy or not: per task it costs the fleet's hourly
    price divided by the tasks it completes per hour. Unknown device prices give a cost of None.
    """
    gpus_s = strong * strong_dep.n_devices if strong else 0
    gpus_w = weak * weak_dep.n_devices if weak else 0
    hours_per_1k = hours_per_1k_tasks(task_rate)
    ps, src_s = price_per_gpu_hour(strong_dep.device, strong_price) if strong else (None, "no strong replicas")
    pw, src_w = price_per_gpu_hour(weak_dep.device, weak_price) if weak else (None, "no weak replicas")
    need = [(gpus_s, ps, strong_dep.device.name if strong else ""),
            (gpus_w, pw, weak_dep.device.name if weak else "")]
    missing = sorted({name for g, p, name in need if g and p is None})
    usd = None if missing else usd_per_1k_tasks(sum(g * p for g, p, _ in need if g), task_rate, api_cost_per_task)
    return {
        "fleet_gpus": gpus_s + gpus_w, "strong_fleet_gpus": gpus_s, "weak_fleet_gpus": gpus_w,
        "gpu_hours_per_1k_tasks": (gpus_s + gpus_w) * hours_per_1k,
        "cost_per_1k_tasks_usd": usd,
        "api_cost_per_1k_tasks_usd": 1000.0 * api_cost_per_task,
        "cost_note": ("cost unknown: no price per hour for " + ", ".join(missing)
                      + " (give --strong-price/--weak-price)") if missing else "",
        "strong_usd_per_gpu_hour": ps, "weak_usd_per_gpu_hour": pw,
        "price_sources": {"strong": src_s, "weak": src_w},
    }


def prices(devices, overrides: dict | None = None, today: _dt.date | None = None) -> dict:
    """``{device: {"usd_per_gpu_hour", "source", "date", "age_days"}}``: the profiles' on-demand
    list prices (``date``: when the price was read, the profile's ``price_date``), or an override
    (``--price DEV=USD``)."""
    today = today or _dt.date.today()
    out = {}
    for name in devices:
        dev = load_device(name)
        if overrides and dev.name in overrides:
            out[dev.name] = {"usd_per_gpu_hour": float(overrides[dev.name]), "source": "--price", "date": None,
                             "age_days": None}
            continue
        src = dev.price_source
        date = (dev.price_date or None) if dev.usd_per_gpu_hour is not None else None
        age = None
        if date:
            d = _dt.date.fromisoformat(date if len(date) == 10 else date + "-01")
            age = (today - d).days
        out[dev.name] = {"usd_per_gpu_hour": dev.usd_per_gpu_hour, "source": src or "no price in the profile",
                         "date": date, "age_days": age}
    return out


def usd_per_gpu_hour(price_table: dict) -> dict:
    """``{device: USD per GPU-hour}`` of a :func:`prices` table."""
    return {k: v["usd_per_gpu_hour"] for k, v in price_table.items()}


def parse_prices(items) -> dict:
    """``["h100-sxm=2.5", ...]`` -> ``{"h100-sxm": 2.5}`` (device names resolved through their
    profiles, so aliases work); ValueError (one line) for anything else."""
    out = {}
    for item in items or ():
        name, eq, val = str(item).partition("=")
        try:
            usd = float(val.strip().removesuffix("/h").removesuffix("/hr"))
        except ValueError:
            usd = math.nan
        if not eq or not name.strip() or not math.isfinite(usd):
            raise ValueError(f"--price {item!r}: expected DEVICE=USD per GPU-hour, e.g. h100-sxm=2.49")
        check_price(f"--price {name.strip()}", usd)
        dev = load_device(name.strip()).name
        if dev in out:
            raise ValueError(f"--price {dev} is given twice")
        out[dev] = usd
    return out

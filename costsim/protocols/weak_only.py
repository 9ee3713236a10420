"""Weak-only: the weak model authors every step (the quality floor; the cost floor)."""

from __future__ import annotations

from ..config import StepScales
from . import strong_only
from .schedule import process


def schedule(task, weak_step_scale: float = StepScales.weak_step_scale):
    return strong_only.schedule(task, weak_step_scale, _model="weak")


run = process(schedule)  # the simulator's process function

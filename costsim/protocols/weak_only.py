"""Weak-only: the weak model authors every step (the quality floor; the cost floor)."""

from . import strong_only
from .schedule import process


def schedule(task, weak_step_scale: float = 1.0):
    return strong_only.schedule(task, weak_step_scale=weak_step_scale, _model="weak")


run = process(schedule)  # the simulator's process function

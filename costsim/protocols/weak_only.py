"""Weak-only: the weak model authors every step (the quality floor; the cost floor)."""

from . import strong_only
from .schedule import process


def schedule(task):
    return strong_only.schedule(task, _model="weak")


run = process(schedule)  # the simulator's process function

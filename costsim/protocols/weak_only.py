"""Weak-only: the weak model authors every step (the quality floor; the cost floor)."""

from . import strong_only


def run(tr, task):
    return strong_only.run(tr, task, model="weak")

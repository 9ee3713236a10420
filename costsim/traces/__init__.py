"""Trajectories: schema, JSONL read/write, importers and the synthetic generator."""

from .schema import SCHEMA_VERSION, STEP_KINDS, Step, Task

__all__ = ["SCHEMA_VERSION", "STEP_KINDS", "Step", "Task"]

"""The SimPy engine: replicas with continuous batching (:mod:`.replica`), each task's driver
(:mod:`.agent`), a hosted API as a backend (:mod:`.hosted`), and runs of protocols over tasks
(:mod:`.run`). Only this package imports SimPy."""

from .agent import TaskRun
from .replica import Replica
from .run import simulate

__all__ = ["Replica", "TaskRun", "simulate"]

"""The SimPy engine: replicas with continuous batching, sessions running protocols, metrics."""

from .agent import Latency, TaskRun
from ..metrics import summarize
from .replica import Replica
from .run import Scenario, simulate

__all__ = ["Latency", "Replica", "Scenario", "TaskRun", "simulate", "summarize"]

"""One open-loop fleet simulated whole (the reference) and cell by cell, side by side in one run.
Run: python benchmarks/bench_cells.py [--tasks N] [--rate R] [--repeat N]

The fleet: the default deployments (costsim.sizing), 8 strong and 16 weak replicas, so
gcd(8, 16) = 8 independent cells, SpecAgent, tasks arriving as a Poisson process. Each way
runs ``--repeat`` times in turn; the fastest of each is kept (as timeit does: on a noisy
machine the minimum is the run least disturbed). Wall time, and CPU time of this process and
its children (the forked workers), in seconds; the ratios are the whole run's over each. The
rows of every way are checked equal to the whole run's, bit for bit, before any is printed.
"""

from __future__ import annotations

import argparse
import resource
import time

from costsim.scenario import Scenario
from costsim.sim.run import n_cells, simulate
from costsim.sizing import deployments
from costsim.traces.synthetic import generate

#: name -> simulate's keyword arguments
WAYS = {
    "whole fleet (reference)": {"cells": False},
    "cells, workers=1": {"workers": 1},
    "cells, workers=2": {"workers": 2},
}


def cpu_s() -> float:
    """User and system CPU seconds of this process and of its children that have ended."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(tasks, sc, kw) -> tuple[float, float, list]:
    """``(wall s, CPU s, rows)`` of one run."""
    w, c = time.perf_counter(), cpu_s()
    rows = simulate(tasks, sc, **kw)
    return time.perf_counter() - w, cpu_s() - c, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--rate", type=float, default=4.0, help="tasks per second over the whole fleet")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    s, w = deployments()
    sc = Scenario(strong=s, weak=w, strong_replicas=8, weak_replicas=16, arrival_rate=a.rate, sessions=1,
                  protocols=("specagent",), seed=1)
    tasks = generate(a.tasks, seed=1)
    best = {name: (float("inf"), float("inf")) for name in WAYS}
    reference = None
    for _ in range(a.repeat):
        for name, kw in WAYS.items():
            wall, cpu, rows = timed(tasks, sc, kw)
            if reference is None:
                reference = rows
            assert rows == reference and repr(rows) == repr(reference), f"{name}: rows differ from the whole run's"
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    r = reference[0]
    print(f"{a.tasks} SpecAgent tasks at {a.rate:g}/s on 8 strong + 16 weak replicas ({n_cells('specagent', sc)} cells): "
          f"arrivals over {a.tasks / a.rate:.0f} s, makespan {r['makespan_s']:.0f} s, strong mean batch {r['strong_mean_batch']:.1f}, "
          f"weak {r['weak_mean_batch']:.1f}; rows identical; best of {a.repeat}")
    w0, c0 = best["whole fleet (reference)"]
    print(f"{'':26} {'wall s':>8} {'CPU s':>8} {'whole/wall':>11} {'whole/CPU':>10}")
    for name, (wall, cpu) in best.items():
        print(f"{name:26} {wall:8.2f} {cpu:8.2f} {w0 / wall:10.2f}x {c0 / cpu:9.2f}x")


if __name__ == "__main__":
    main()

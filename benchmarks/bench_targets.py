"""The commands users wait for, against issue 35's targets, side by side in one run.
Run: python benchmarks/bench_targets.py [--repeat N] [--only NAME ...]

Each command runs as a user runs it (the installed ``costsim`` script, ``--json``, no progress
bar), ``--repeat`` times in turn; the fastest of each is kept (as timeit does: on a noisy
machine the minimum is the run least disturbed). Both clocks are printed: wall time, and CPU
time of the command and its children (capacity forks its searches, so on 2 cores its wall time
can be below its CPU time). Each target is in the clock issue 35 names for it; the last column
is the measured time over the target (<= 1 meets it). The targets are the issue's, not costsim's
defaults: the "defaults" capacity runs at a 120 s target, as the issue does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

#: name -> (argv after `costsim`, target seconds, the clock it is in)
TARGETS = {
    "predict": (["predict", "--p-accept", "0.8", "--K", "6"], 0.5, "wall"),
    "replay": (["replay", "tau2-airline", "-q"], 1.0, "wall"),
    "simulate --tasks 1000": (["simulate", "--tasks", "1000", "-q"], 2.0, "wall"),
    "capacity, 120 s target": (["capacity", "--task-rate", "1/s", "--latency-p95", "120s", "-q"], 5.0, "wall"),
    "capacity, 5 min target": (["capacity", "--task-rate", "1/s", "--latency-p95", "5min", "-q"], 15.0, "wall"),
    "plan at 8 tasks/s": (["plan", "--task-rate", "8/s", "--latency-p95", "120s", "-q"], 5.0, "wall"),
    "plan at 32 tasks/s": (["plan", "--task-rate", "32/s", "--latency-p95", "120s", "-q"], 10.0, "wall"),
    "plan at 100 tasks/s": (["plan", "--task-rate", "100/s", "--latency-p95", "120s", "-q"], 10.0, "wall"),
}


def costsim() -> str:
    exe = Path(sys.executable).with_name("costsim")
    return str(exe) if exe.exists() else (shutil.which("costsim") or "costsim")


def run_once(argv: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the command and its children, exit code) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run([costsim(), *argv, "--json"], capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode not in (0, 3):  # 3: an answer, nothing meets the target
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    json.loads(r.stdout)  # a whole answer, not a partial one
    return wall, cpu, r.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="names of TARGETS to run (default: all)")
    a = ap.parse_args()
    names = [n for n in TARGETS if not a.only or n in a.only]
    best = {n: (float("inf"), float("inf"), 0) for n in names}
    for _ in range(a.repeat):  # in turn, so that a noisy moment hits every command alike
        for n in names:
            wall, cpu, rc = run_once(TARGETS[n][0])
            best[n] = min(best[n], (wall, cpu, rc), key=lambda x: x[0])
    print(f"{os.cpu_count()} CPUs; fastest of {a.repeat}")
    print(f"{'command':<26}{'wall s':>8}{'CPU s':>8}{'target':>10}  {'ratio':>6}")
    for n in names:
        wall, cpu, rc = best[n]
        target, clock = TARGETS[n][1], TARGETS[n][2]
        took = wall if clock == "wall" else cpu
        note = "" if rc == 0 else "  (exit 3: nothing met the latency target)"
        print(f"{n:<26}{wall:>8.2f}{cpu:>8.2f}{target:>8.1f} s  {took / target:>6.2f}{note}")


if __name__ == "__main__":
    main()

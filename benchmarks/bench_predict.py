"""Cold start of `costsim predict` beside a bare `import numpy`, and the closed forms on a
10^6-point (p, K) grid. Run: python benchmarks/bench_predict.py [--repeat N]

Targets (issue 2): predict cold start at most 2x the bare numpy import; the grid under 0.1 s.
Both are measured side by side in one run (medians of interleaved repeats), since these
machines are noisy.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def wall(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    n = ap.parse_args().repeat
    py = sys.executable
    costsim = str(Path(py).with_name("costsim"))  # the console script users run
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "python -c 'import numpy'": [py, "-c", "import numpy"],
        "costsim predict --p-accept 0.8 --K 6": [costsim, "predict", "--p-accept", "0.8", "--K", "6"],
        "costsim --help": [costsim, "--help"],
    }
    times = {k: [] for k in cmds}
    for _ in range(n):  # interleaved, so drift hits all alike
        for k, c in cmds.items():
            times[k].append(wall(c))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c 'import numpy'"]
    print(f"cold start, median of {n} interleaved runs")
    for k, v in med.items():
        print(f"  {k:<40} {v * 1e3:8.1f} ms   {v / base:5.2f}x numpy import")
    ratio = med["costsim predict --p-accept 0.8 --K 6"] / base
    print(f"predict / numpy import = {ratio:.2f}  (target <= 2.0: {'met' if ratio <= 2.0 else 'NOT met'})")

    import numpy as np

    from costsim import formulas

    p = np.linspace(0.0, 1.0, 1000)[:, None]
    K = np.arange(1, 1001, dtype=float)[None, :]
    grid = []
    for _ in range(n):
        t = time.perf_counter()
        R, L = formulas.R_and_L(p, K, 0.1, 1.0, 0.3)
        grid.append(time.perf_counter() - t)
    assert R.shape == L.shape == (1000, 1000)
    g = statistics.median(grid)
    print(f"R and L on a 10^6-point (p, K) grid: {g * 1e3:.1f} ms (target < 100 ms: {'met' if g < 0.1 else 'NOT met'})")


if __name__ == "__main__":
    main()

"""The planner's screen against the simulator: its p95 task latency beside the simulated one,
for Strong-only and SpecAgent (2 or 4 weak replicas per strong one) on H20, H200 and B200, at
the task rates where the screen's p95 is 1.25, 1.5 and 2 times the uncontended p95. Each rate
is simulated with enough Poisson arrivals (the 200 tasks repeated) to span three of its p95s.

Run: python benchmarks/plan_screen_error.py   (about 10 s; the numbers docs/plan.md quotes;
tests/test_plan.py holds a subset of these cases within its stated bound)
"""

from costsim import planner as P
from costsim.sizing import deployments
from costsim.scenario import Scenario
from costsim.traces.synthetic import generate


def main():
    tasks = generate(200, seed=0)
    errs = []
    print(f"{'device':<6} {'protocol':<12} {'weak':>4} {'load':>5} {'rate/s':>7} {'screen p95':>10} {'sim p95':>8} {'error':>7}")
    for dev in ("h20", "h200", "b200"):
        s, w = deployments(strong_device=dev, weak_device=dev)
        base = Scenario(strong=s, weak=w, p=0.8, K=6)
        for proto, weak in (("strong-only", 0), ("specagent", 2), ("specagent", 4)):
            cfg = P.Config(proto, s, w if weak else None, 6)
            reps = {"strong": 1, "weak": weak} if weak else {"strong": 1}
            for mult in (1.25, 1.5, 2.0):
                lo, target, p95 = P.screen_against_simulator(tasks, base, cfg, reps, mult)
                errs.append(target / p95 - 1)
                print(f"{dev:<6} {proto:<12} {weak:>4} {mult:>5} {lo:>7.3f} {target:>10.1f} {p95:>8.1f} {errs[-1]:>+7.0%}")
    print(f"{len(errs)} cases: the screen's p95 is {min(errs):+.0%} to {max(errs):+.0%} of the simulator's")


if __name__ == "__main__":
    main()

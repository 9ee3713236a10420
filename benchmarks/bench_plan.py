"""The speed of `costsim plan`: its search over every configuration of the default space (at
least 200), beside the simulator's capacity search of one configuration, in one run.

Run: python benchmarks/bench_plan.py [--tasks N] [--repeat R]

Prints the plan's wall time (target: under 60 s on a 2-core machine), the time of one
`capacity` search (one protocol, one configuration: what planning by `capacity` costs per
configuration), and the ratio of a full search by `capacity` (configurations x that time)
to the plan's. CPU time of this process, fastest of --repeat (as timeit does).
"""

import argparse
import time

from costsim import fleet_cost
from costsim import capacity_search as cap
from costsim import planner as P
from costsim.sizing import deployments
from costsim.scenario import Scenario
from costsim.traces.synthetic import generate


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--target", type=float, default=60.0)
    args = ap.parse_args()
    tasks = generate(args.tasks, seed=0)
    s, w = deployments()
    base = Scenario(strong=s, weak=w, p=0.8, K=6)
    configs = P.configurations(s.model, w.model)
    prices = fleet_cost.prices(sorted({c.strong.device.name for c in configs if c.strong} | {c.weak.device.name for c in configs if c.weak}))
    plans, caps = [], []
    for _ in range(args.repeat):
        t = time.process_time()
        res = P.recommend(tasks, base, args.rate, args.target, configs, prices)
        plans.append(time.process_time() - t)
        # One configuration the plan searched, by the simulator's capacity search instead.
        c = res["screened"][0].config
        t = time.process_time()
        cap.size_for_rate(tasks, P.scenario_of(base, c), args.rate, (c.protocol,), cap.Search(latency_p95_s=args.target))
        caps.append(time.process_time() - t)
    plan_s, cap_s = min(plans), min(caps)
    n = len(configs)
    print(f"plan: {n} configurations screened, {len(res['confirmed'])} confirmed, in {plan_s:.2f} s "
          f"({'meets' if plan_s < 60 else 'misses'} the 60 s target; best of {args.repeat}, CPU time)")
    print(f"capacity: one configuration in {cap_s:.2f} s; all {n} by capacity would take {n * cap_s:.0f} s")
    print(f"ratio: a capacity search of the whole space / the plan = {n * cap_s / plan_s:.0f}x")


if __name__ == "__main__":
    main()

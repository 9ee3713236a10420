"""Simulated agent steps per second of wall time, one session and 256 concurrent sessions,
beside a bare SimPy timeout loop of the same event count (the engine's own overhead ratio).
Run: python benchmarks/bench_sim.py [--tasks N]

A call that finds its replica idle and ends before any event is due is run at once, with no
event (``Replica.run_or_submit``); each such call is counted as the one event it stands for,
so that the ratio per event compares like with like.

Targets: >= 200,000 simulated steps/s with one session and >= 100,000 with 64, on one core; no
more than 5x the bare loop's time per event. Measured side by side in one run: each simulation
and its bare loop are timed in turn, --repeat times, in CPU time of this process, and the
fastest of each is kept (as timeit does: on a noisy machine the minimum is the run least
disturbed). Events are counted in a run of their own, untimed: a counting environment slows
the simulation it counts by about a fifth. A last line gives a floor for the ratio: a loop
that only costs each call with the roofline (a prefill iteration and a decode run, as the
replica does for an uncontended call) and waits on two events. "A step costs N bare events" is
the same time per simulated step instead of per event: the ratio per event grows when the
simulator needs fewer events for the same work, this one does not.
"""

import argparse
import time

import simpy

from costsim.sizing import deployments
from costsim.roofline import coefficients
from costsim.scenario import Scenario
from costsim.sim import Replica, simulate
from costsim.traces.synthetic import generate


class CountingEnv(simpy.Environment):
    """Counts processed events, to size the bare loop."""

    events = 0

    def step(self):
        CountingEnv.events += bool(self._queue)  # the last call finds none: the run ends
        return super().step()


def counting_run_or_submit(orig):
    def run_or_submit(self, *args):
        out = orig(self, *args)
        CountingEnv.at_once += type(out) is tuple
        return out
    return run_or_submit


def bare_loop(n_events):
    env = simpy.Environment()

    def proc():
        for _ in range(n_events):
            yield env.timeout(1.0)

    env.process(proc())
    t = time.process_time()
    env.run()
    return time.process_time() - t


def roofline_only_loop(coef, n_calls):
    """n_calls calls of 300 prompt and 40 output tokens at a growing context, each costed by
    the roofline and waited on through a timeout and an event: no requests, no protocol."""
    env = simpy.Environment()
    total = [0.0]

    def ended(ev):
        secs, done = ev.value
        total[0] += secs
        done.succeed()

    def proc():
        ctx = 4000
        for _ in range(n_calls):
            done = simpy.Event(env)
            secs = coef.prefill_chunk(300, ctx)[0] + coef.decode_run(1, ctx + 300, 40)[0]
            simpy.Timeout(env, secs, (secs, done)).callbacks.append(ended)
            yield done
            ctx += 340

    env.process(proc())
    t = time.process_time()
    env.run()
    return time.process_time() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=1500)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    strong, weak = deployments()
    tasks = generate(args.tasks, seed=1)
    steps = sum(len(t.steps) for t in tasks)
    import costsim.sim.run as run_mod

    for sessions in (1, 64, 256):
        for proto in ("strong-only", "specagent"):
            sc = Scenario(strong=strong, weak=weak, p=0.8, K=6, sessions=sessions, protocols=(proto,),
                          weak_replicas=1)
            CountingEnv.events = CountingEnv.at_once = 0
            run_mod.simpy.Environment, orig = CountingEnv, run_mod.simpy.Environment
            Replica.run_or_submit, orig_call = counting_run_or_submit(Replica.run_or_submit), Replica.run_or_submit
            try:
                simulate(tasks, sc)
            finally:
                run_mod.simpy.Environment, Replica.run_or_submit = orig, orig_call
            ev = CountingEnv.events + CountingEnv.at_once
            sims, bares = [], []
            for _ in range(args.repeat):
                t = time.process_time()
                simulate(tasks, sc)
                sims.append(time.process_time() - t)
                bares.append(bare_loop(ev))
            el, bare = min(sims), min(bares)
            per_event = bare / ev
            print(f"{sessions:>3} session(s) {proto:<12} {steps / el:9.0f} steps/s  "
                  f"{ev / steps:4.1f} events/step ({CountingEnv.at_once / steps:4.2f} of them calls run at once)  "
                  f"{el / bare:4.1f}x a bare SimPy loop of {ev} events "
                  f"({per_event * 1e6:.2f} µs/event); a step costs {el / steps / per_event:4.1f} bare events "
                  f"(best of {args.repeat}, CPU time)")
    n = 20000
    floor = min(roofline_only_loop(coefficients(strong), n) for _ in range(args.repeat))
    bare = min(bare_loop(2 * n) for _ in range(args.repeat))
    print(f"floor: a loop that only costs each call by the roofline and waits on 2 events per call: "
          f"{floor / bare:.1f}x a bare SimPy loop of the same events")


if __name__ == "__main__":
    main()

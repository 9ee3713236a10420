"""The per-task handle a protocol acts through: model calls, tool calls, and the metrics row.

A protocol decides *which* calls happen; :class:`TaskRun` submits them to the replicas (which
decide what they cost) and adds every cost to the task's row.
"""

from __future__ import annotations

import itertools

from ..metrics import EMPTY_ROW, MODEL_KEYS, RECOMPUTED_KEYS
from ..protocols.schedule import Boundary, Call, Chance, Count, Execute, Redraw, Review, Stall
from ..scenario import Latency
from .replica import Replica

#: Sessions' keys in the replicas' prefix caches: one per task run, never reused in a process.
_SESSIONS = itertools.count()

class TaskRun:
    """One task being run by one protocol: wraps replicas, tools and the acceptance process."""

    def __init__(self, env, task, strong, weak, acceptance, rng, tool_latency=Latency(),
                 user_latency=Latency()):
        self.env, self.task, self.strong, self.weak = env, task, strong, weak
        self.acceptance, self.rng = acceptance, rng
        self.tool_latency, self.user_latency = tool_latency, user_latency
        self.row = EMPTY_ROW.copy()
        self.start = env.now
        self.answered_at = None  # when the task's answer was out, if background work outlives it
        # Whether the process that drives this task is resumed only by events it alone waits on
        # (its start, its calls', its tools'): the simulator's own processes are (run.py); then
        # a call may run at once (Replica.run_or_submit). Off for any other process.
        self.wakes_alone = False
        # Its key in the replicas' prefix caches (Replica.submit): one session, this task's calls.
        self.session = next(_SESSIONS)

    def call(self, who: str, prefill: int, context: int, decode: int):
        """Call the ``who`` ('strong' or 'weak') model; returns the finished request."""
        rep = self.strong if who == "strong" else self.weak
        if rep.rtt_s:
            yield self.env.timeout(rep.rtt_s)
        req = rep.submit(prefill, context, decode, self.session)
        yield req.done
        self.charge(who, req)
        return req

    def charge(self, who: str, req):
        """Add a finished call (request) of the ``who`` model to the task's row."""
        self.add(who, req.prefill_tokens, req.decode_tokens, req.hbm_bytes, req.flops, req.busy_s)
        recomputed = getattr(req, "recomputed", 0)
        if recomputed:
            self.row[RECOMPUTED_KEYS[who]] += recomputed

    def add(self, who: str, prefill_tokens, decode_tokens, hbm_bytes, flops, busy_s):
        """Add a call of the ``who`` model to the task's row, from its costs."""
        row, (calls, pre, dec, hbm, fl, busy) = self.row, MODEL_KEYS[who]
        row[calls] += 1
        row[pre] += prefill_tokens
        row[dec] += decode_tokens
        row[hbm] += hbm_bytes
        row[fl] += flops
        row[busy] += busy_s

    def drive(self, schedule, via=None):
        """Run ``schedule`` (:mod:`costsim.protocols.schedule`) on this task's replicas: the
        simulator's driver. ``via``: a wrapper of this task run (speculation, API billing) whose
        ``call`` and ``execute`` the commands go through."""
        h = via or self
        send, value, row, call, execute = schedule.send, None, self.row, h.call, h.execute
        direct = {k: r for k, r in (("strong", self.strong), ("weak", self.weak)) if type(r) is Replica} \
            if via is None else {}
        session = self.session
        timeless = via is None and not (self.tool_latency or self.user_latency)  # execute: ()
        alone = self.wakes_alone  # after this driver's own first wait it always is
        while True:
            try:
                cmd = send(value)
            except StopIteration:
                return
            kind = type(cmd)
            if kind is Call:
                rep = direct.get(cmd[0])
                if rep is None or rep.rtt_s:  # through the wrapper, or after the round trip
                    value = yield from call(*cmd)
                    continue
                # What self.call does, without a generator per call (the simulator's hot path);
                # at once where nothing else can happen first (Replica.run_or_submit), which
                # needs this process to have been resumed by an event it alone waits on.
                value = (rep.run_or_submit(cmd[1], cmd[2], cmd[3], session) if alone
                         else rep.submit(cmd[1], cmd[2], cmd[3], session))
                if type(value) is tuple:
                    secs, hbm, flops, recomputed = value
                    self.add(cmd[0], cmd[1], cmd[3], hbm, flops, secs)
                    if recomputed:
                        row[RECOMPUTED_KEYS[cmd[0]]] += recomputed
                    value = None
                else:
                    yield value.done
                    alone = True
                    self.charge(cmd[0], value)
            elif kind is Execute:
                if timeless:
                    value = None
                else:
                    events = execute(cmd.step)  # TaskRun.execute: its own timeout, or none
                    value = yield from events
                    alone = alone or bool(events)
            elif kind is Count:
                row[cmd.name] += cmd.n
                value = None
            elif kind is Boundary:  # only the twin merges states there
                value = None
            else:
                value = answer(h, cmd)

    def execute(self, step):
        """Run a step's side effect in the world: a tool call or a message to the user.
        Returns the events to ``yield from`` (none when it takes no time: a generator would cost
        as much as the rest of a step)."""
        kind = step.kind
        if kind == "read" or kind == "write":
            lat = self.tool_seconds(step)
        elif kind == "respond":
            lat = self.user_latency.sample(self.rng)
        else:
            return ()
        if not lat:
            return ()
        self.row["tool_s"] += lat
        return (self.env.timeout(lat),)

    def tool_seconds(self, step) -> float:
        """How long ``step``'s tool calls take (run together): their recorded time where the
        latency uses it."""
        rec = self.tool_latency.of(step)
        return rec if rec is not None else self.tool_latency.sample(self.rng, step.tool_calls)

    @property
    def end(self) -> float:
        """When the task ended for its user: its answer out (``answered_at``), else now."""
        return self.env.now if self.answered_at is None else self.answered_at

    def finish(self) -> dict:
        row = self.row
        row["wall_s"] = self.end - self.start
        for c in ("hbm_bytes", "flops"):
            row[c] = row[f"strong_{c}"] + row[f"weak_{c}"]
        return row


def answer(tr, cmd):
    """The answer to a command that takes no time: ``tr.acceptance`` answers reviews, ``tr.row``
    holds the counters, ``tr.rng`` is the task's random stream."""
    kind = type(cmd)
    if kind is Count:
        tr.row[cmd.name] += cmd.n
    elif kind is Review:
        return tr.acceptance.accepted(cmd.steps)
    elif kind is Chance:
        return cmd.p >= 1.0 or (cmd.p > 0.0 and tr.rng.random() < cmd.p)
    elif kind is Stall:
        return (tr.acceptance.accepted((cmd.step,)) == 0 if cmd.p is None
                else cmd.p > 0 and tr.rng.random() < cmd.p)
    elif kind is Redraw:
        return tr.task.meta["redraw"](tr.rng, cmd.start, cmd.count)
    elif kind is not Boundary:
        raise TypeError(f"a schedule yielded {cmd!r}, not a command")
    return None

"""A serving replica with continuous batching, simulated per engine iteration.

Requests queue for prefill; running requests decode one token per iteration. An iteration
takes every running decode plus prefill chunks from the queue (FIFO) up to the token budget,
like vLLM's chunked prefill. Its time, HBM bytes and FLOPs come from :mod:`costsim.roofline`.

While the batch does not change, consecutive decode iterations are identical up to their
growing contexts, so the replica plans an *epoch* — one iteration with prefill chunks (if any)
followed by the decode iterations until the first running request finishes — as one SimPy
timeout whose totals the roofline sums in closed form. An arrival cuts an epoch short at the
end of the iteration in flight. The replica is driven by event callbacks, not a process, so an
uncontended call costs two SimPy events (the epoch's end and the caller's wake-up).

Costs are attributed to requests exactly for FLOPs and KV bytes, and by token share for
weight bytes and busy time.
"""

from __future__ import annotations

from ..profiles import Deployment
from ..roofline import coefficients


class Request:
    """One model call: prefill ``prefill_tokens`` after ``context`` cached tokens, then decode
    ``decode_tokens``. ``done`` fires when the last token is out. Cost fields accumulate."""

    __slots__ = ("prefill_left", "context", "decode_left", "done", "submitted", "finished",
                 "prefill_tokens", "decode_tokens", "hbm_bytes", "flops", "busy_s")

    def __init__(self, env, prefill_tokens: int, context: int, decode_tokens: int):
        self.prefill_tokens, self.decode_tokens = prefill_tokens, decode_tokens
        self.prefill_left, self.context, self.decode_left = prefill_tokens, context, decode_tokens
        self.done = env.event()
        self.submitted, self.finished = env.now, None
        self.hbm_bytes = self.flops = self.busy_s = 0.0


class _Epoch:
    """A planned stretch of work: an optional mixed iteration, then ``m`` decode iterations."""

    __slots__ = ("start", "chunks", "mixed_s", "mixed_cost", "decoders", "ctx_sum", "m", "live", "run")

    def __init__(self, start):
        self.start, self.chunks, self.mixed_s, self.mixed_cost = start, [], 0.0, None
        self.decoders, self.ctx_sum, self.m, self.live = [], 0, 0, True
        self.run = (0.0, 0.0, 0.0)  # decode-run totals: seconds, HBM bytes, FLOPs


class Replica:
    """One deployment serving requests with continuous batching.

    ``token_budget``: most tokens per iteration (vLLM's max_num_batched_tokens);
    ``max_seqs``: most running sequences; ``rtt_s``: network round trip added to every call
    by the caller (edge-cloud). Totals over the run: ``busy_s``, ``hbm_bytes``, ``flops``,
    ``iterations``, and ``mean_batch`` (time-weighted running decode batch).
    """

    def __init__(self, env, deployment: Deployment, name: str = "", token_budget: int = 8192,
                 max_seqs: int = 256, rtt_s: float = 0.0):
        self.env, self.deployment, self.name = env, deployment, name or deployment.model.name
        self.coef = coefficients(deployment)
        self.token_budget, self.max_seqs, self.rtt_s = token_budget, max_seqs, rtt_s
        self.queue: list[Request] = []
        self.running: list[Request] = []
        self.busy_s = self.hbm_bytes = self.flops = self.batch_time = 0.0
        self.iterations = 0
        self._epoch: _Epoch | None = None

    @property
    def mean_batch(self) -> float:
        return self.batch_time / self.busy_s if self.busy_s else 0.0

    def submit(self, prefill_tokens: int, context: int, decode_tokens: int) -> Request:
        """Queue a call; wait on ``request.done``."""
        req = Request(self.env, prefill_tokens, context, decode_tokens)
        self.queue.append(req)
        ep = self._epoch
        if ep is None:
            self._plan()
        elif ep.start == self.env.now:  # nothing ran yet: plan again with everyone who came
            ep.live = False
            self._plan()
        elif ep.m and len(self.running) + len(ep.chunks) < self.max_seqs:
            self._cut_short(ep)
        return req

    # --- planning -------------------------------------------------------------------------

    def _plan(self):
        running = self.running
        if not running and not self.queue:
            self._epoch = None
            return
        env, coef = self.env, self.coef
        ep = _Epoch(env.now)
        queue = self.queue
        if not running and len(queue) == 1 and queue[0].prefill_left <= self.token_budget:
            # The uncontended call, the common case: its whole prefill, then all its decodes.
            r = queue[0]
            t = r.prefill_left
            c = coef.cost(t, t * (r.context + t / 2.0), r.context if t else 0)
            ep.chunks, ep.mixed_cost, ep.mixed_s = [(r, t)], c, float(c.seconds)
            if r.decode_left > 0:
                ep.decoders, ep.ctx_sum, ep.m = [r], r.context + t, r.decode_left
                ep.run = coef.decode_run(1, ep.ctx_sum, ep.m)
            self._epoch = ep
            self._schedule(ep, ep.mixed_s + ep.run[0])
            return
        if queue and len(running) < self.max_seqs:
            budget = max(self.token_budget - len(running), 1)
            seats = self.max_seqs - len(running)
            for req in self.queue:
                if budget <= 0 or seats <= 0:
                    break
                t = min(req.prefill_left, budget)
                ep.chunks.append((req, t))
                budget -= t
                seats -= 1
            B = len(running)
            ctx_run = sum(r.context for r in running)
            T = sum(t for _, t in ep.chunks)
            pairs = ctx_run + sum(t * (r.context + t / 2.0) for r, t in ep.chunks)
            kv_read = ctx_run + sum(r.context for r, t in ep.chunks if t > 0)
            c = coef.cost(B + T, pairs, kv_read)
            ep.mixed_cost, ep.mixed_s = c, float(c.seconds)
            # After this iteration: who decodes, and is anything left queued?
            done_prefill = [r for r, t in ep.chunks if t >= r.prefill_left]
            left_queued = len(self.queue) - len(done_prefill)
            decoders = [r for r in running if r.decode_left > 1]
            decoders += [r for r in done_prefill if r.decode_left > 0]
            # Fuse the decode run only if nobody finishes in the mixed iteration (they must be
            # released at its end) and nobody is left queued.
            if left_queued == 0 and decoders and len(decoders) == len(running) + len(done_prefill):
                ep.decoders = decoders
        else:
            ep.decoders = list(running)
        if ep.decoders:
            # Contexts after the mixed iteration, if any: +1 for a decode, +t for a prefill chunk.
            grow = {id(r): t for r, t in ep.chunks}
            ep.ctx_sum = sum(r.context + grow.get(id(r), 1 if ep.mixed_cost is not None else 0) for r in ep.decoders)
            ep.m = min(r.decode_left - (1 if (ep.mixed_cost is not None and id(r) not in grow) else 0)
                       for r in ep.decoders)
            ep.run = coef.decode_run(len(ep.decoders), ep.ctx_sum, ep.m)
        self._epoch = ep
        self._schedule(ep, ep.mixed_s + ep.run[0])

    def _schedule(self, ep, secs):
        t = self.env.timeout(max(secs - (self.env.now - ep.start), 0.0))
        t.callbacks.append(lambda _e, ep=ep: self._end(ep))

    def _cut_short(self, ep):
        """An arrival during ``ep``: stop after the iteration in flight, then replan."""
        elapsed = self.env.now - ep.start - ep.mixed_s
        if elapsed < 0:  # still in the mixed iteration: finish it, decode nothing more
            m = 0
        else:
            k = self.coef.decode_iterations_within(len(ep.decoders), ep.ctx_sum, ep.m, elapsed)
            m = min(k + 1, ep.m)
        if m == ep.m:
            return
        ep.live = False
        new = _Epoch(ep.start)
        new.chunks, new.mixed_s, new.mixed_cost = ep.chunks, ep.mixed_s, ep.mixed_cost
        new.decoders, new.ctx_sum, new.m = ep.decoders, ep.ctx_sum, m
        if m:
            new.run = self.coef.decode_run(len(new.decoders), new.ctx_sum, m)
        self._epoch = new
        self._schedule(new, new.mixed_s + new.run[0])

    # --- completion -----------------------------------------------------------------------

    def _end(self, ep):
        if not ep.live:
            return
        finished = []
        if ep.mixed_cost is not None:
            self._apply_mixed(ep, finished)
        if ep.m:
            self._apply_decode(ep, finished)
        now = self.env.now
        for r in finished:
            r.finished = now
            r.done.succeed(r)
        self._plan()

    def _apply_mixed(self, ep, finished):
        coef, c, secs = self.coef, ep.mixed_cost, ep.mixed_s
        running = self.running
        tokens = len(running) + sum(t for _, t in ep.chunks)
        self._account(secs, float(c.hbm_bytes), float(c.flops), len(running), 1)
        tokens = tokens or 1
        wshare = float(coef.weight_bytes(tokens)) / tokens
        kvb, fpt, fpp = coef.kv_bytes_per_token, coef.flops_per_token, coef.flops_per_pair
        still = []
        for r in running:
            r.hbm_bytes += wshare + kvb * (r.context + 1)
            r.flops += fpt + fpp * r.context
            r.busy_s += secs / tokens
            r.context += 1
            r.decode_left -= 1
            (finished if r.decode_left <= 0 else still).append(r)
        for r, t in ep.chunks:
            r.hbm_bytes += wshare * t + kvb * ((r.context if t else 0) + t)
            r.flops += fpt * t + fpp * t * (r.context + t / 2.0)
            r.busy_s += secs * t / tokens
            r.context += t
            r.prefill_left -= t
            if r.prefill_left <= 0:
                self.queue.remove(r)
                (still if r.decode_left > 0 else finished).append(r)
        self.running = still

    def _apply_decode(self, ep, finished):
        coef, m, B = self.coef, ep.m, len(ep.decoders)
        secs, hbm, flops = ep.run
        self._account(secs, hbm, flops, B, m)
        wshare = float(coef.weight_bytes(B)) / B * m
        kvb, fpt, fpp = coef.kv_bytes_per_token, coef.flops_per_token, coef.flops_per_pair
        tri = m * (m - 1) / 2.0
        still = []
        for r in self.running:
            r.hbm_bytes += wshare + kvb * (r.context * m + tri + m)
            r.flops += fpt * m + fpp * (r.context * m + tri)
            r.busy_s += secs / B
            r.context += m
            r.decode_left -= m
            (finished if r.decode_left <= 0 else still).append(r)
        self.running = still

    def _account(self, secs, hbm, flops, batch, iterations):
        self.busy_s += secs
        self.hbm_bytes += hbm
        self.flops += flops
        self.batch_time += secs * batch
        self.iterations += iterations

"""A serving replica with continuous batching, simulated per engine iteration.

Requests queue for prefill; running requests decode one token per iteration. An iteration
takes every running decode plus prefill chunks from the queue (FIFO) up to the token budget,
like vLLM's chunked prefill. Its time, HBM bytes and FLOPs come from :mod:`costsim.roofline`.

While the batch does not change, consecutive decode iterations are identical up to their
growing contexts, so the replica plans an *epoch* — one iteration with prefill chunks (if any)
followed by the decode iterations until the first running request finishes — as one SimPy
timeout whose totals the roofline sums in closed form. An arrival cuts an epoch short at the
end of the iteration in flight. The replica is driven by event callbacks, not a process, so an
uncontended call costs one SimPy event: its caller waits on the epoch's own timeout.

Memory caps the batch: a request is admitted (its first prefill chunk scheduled) only when its
whole footprint — KV for its context, prompt and output, plus its bounded state — fits in the
free KV pool (:mod:`costsim.memory`), and it holds that room until it finishes; requests that do
not fit wait in FIFO order, as vLLM's scheduler has them wait for blocks. Reserving the output's
room at admission means a running sequence is never preempted.

Between its calls a session's prefix (the ``context`` a call says is cached) is treated in one of
three ways (``prefix_cache``; :data:`costsim.config.PREFIX_CACHES`):

- ``"hot"`` (the default, and the exact twin's idealisation): always resident, holding no room;
- ``"evict"``: a modelled prefix cache, where the engine has one (its profile's
  ``prefix_caching``; else ``"off"``). When a call of session ``s`` ends, its whole sequence
  (context + prompt + output) stays in the pool as ``s``'s cached prefix, holding its room
  (:attr:`Replica.kv_cached_bytes`, beside :attr:`Replica.kv_used`, the room of the calls in
  flight) until it is evicted. At *admission* (when vLLM computes hits) the resident part of
  the call's context is a hit; the rest of the context is a miss and is prefilled again: the
  call's prompt grows by it, its cached context shrinks to the resident part. Admission takes
  room from the cache before it makes a call wait: it evicts the least recently used cached
  prefixes of other sessions, each from its tail in blocks of the engine's
  ``kv_block_tokens`` (0: whole prefixes), until the call fits; a call waits only where it
  would not fit with the whole cache evicted, which is today's rule, so where nothing of a
  live session is evicted every number is the ``"hot"`` one, to the bit;
- ``"off"``: no reuse: every call prefills its whole context.

The cache is keyed by session (``submit(..., session)``; None: a call of no session, whose
context is taken as cached and which leaves nothing behind). Counters per replica:
``prefix_queried_tokens`` / ``prefix_hit_tokens`` (context tokens looked up at admission, and
found resident), ``prefix_queried_calls`` / ``prefix_hit_calls`` (calls with a context, and
those whose whole context was resident), ``prefix_prompt_tokens`` (context + prompt of those
calls: vLLM's ``prefix_cache_queries`` counts these), ``prefill_recomputed_tokens`` (context
re-prefilled: evicted, or no cache) and ``prefix_evicted_tokens``; none is counted in
``"hot"`` mode, where every context is a hit by definition.

Costs are attributed to requests exactly for FLOPs and KV bytes, and by token share for
weight bytes and busy time. Running requests are settled when they finish (a heap keyed by
the iteration they finish in, and running sums), so an epoch costs O(1) whatever the batch.
A call that finds the replica idle (one session's every call) takes a shorter road to the same
numbers: its epoch is its own, so it is charged all of it (``Coefficients.solo_call``).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import OrderedDict

from simpy import Event, Timeout

from ..config import PREFIX_CACHE, PREFIX_CACHES
from ..memory import DoesNotFit, kv_pool_bytes, state_bytes
from ..profiles import Deployment
from ..roofline import attention_pairs, coefficients, context_sum


class Request:
    """One model call: prefill ``prefill_tokens`` after ``context`` cached tokens, then decode
    ``decode_tokens``. ``done`` fires when the last token is out (for a call that starts alone
    on an idle replica it is the timeout of its epoch: one event less; so what ``done`` carries
    as its value is not the request — read the request itself). ``first_token`` is the end of
    the iteration that finished its prefill (that iteration samples its first token), and
    ``finished`` the end of its last; both in simulated seconds. Cost fields accumulate.
    ``session``: the prefix cache's key (None: none); ``recomputed``: context tokens it
    prefilled again at admission because they were not resident (its ``prefill_tokens`` stay
    those it was given: what it prefilled is their sum; None where the context was not looked
    up: ``"hot"``, or not admitted yet)."""

    __slots__ = ("prefill_left", "context", "decode_left", "done", "finished", "first_token",
                 "prefill_tokens", "decode_tokens", "hbm_bytes", "flops", "busy_s", "_join", "kv_held",
                 "_solo", "_timeout", "session", "recomputed")

    def __init__(self, prefill_tokens: int, context: int, decode_tokens: int, session=None):
        self.prefill_tokens, self.decode_tokens = prefill_tokens, decode_tokens
        self.prefill_left, self.context, self.decode_left = prefill_tokens, context, decode_tokens
        self.session, self.recomputed = session, None  # None: not looked up (yet, or "hot": never)
        self.done = None  # set by Replica.submit
        self.finished = self.first_token = None
        self.hbm_bytes = self.flops = self.busy_s = 0.0
        self._join = None  # (iteration, weight share, busy share) when it started decoding
        self.kv_held = 0.0  # bytes of the KV pool it holds once admitted
        self._solo = self._timeout = None  # its solo epoch, while it runs one: (start, prefill, run), timeout


class _Epoch:
    """A planned stretch of work: an optional mixed iteration, then ``m`` decode iterations of
    ``B`` sequences whose contexts sum to ``ctx_sum`` at the first of them."""

    __slots__ = ("start", "chunks", "T", "mixed_s", "mixed_cost", "B", "ctx_sum", "m", "live", "run", "solo",
                 "kv_blocked")

    def __init__(self, start):
        self.start, self.chunks, self.T, self.mixed_s, self.mixed_cost = start, [], 0, 0.0, None
        self.B, self.ctx_sum, self.m, self.live = 0, 0, 0, True
        self.run = (0.0, 0.0, 0.0)  # decode-run totals: seconds, HBM bytes, FLOPs
        self.solo = None  # the request whose solo epoch this is (Replica._solo_epoch)
        self.kv_blocked = False  # a queued call waits for KV room during this epoch


class Replica:
    """One deployment serving requests with continuous batching.

    ``token_budget``: most tokens per iteration (vLLM's max_num_batched_tokens);
    ``max_seqs``: most running sequences; ``kv_pool_bytes``: the KV pool admissions must fit in
    (default: the deployment's, :func:`costsim.memory.kv_pool_bytes`; ``math.inf``: no cap); ``rtt_s``: network round trip (and any fixed per-call
    overhead) added to every call by the caller; ``coef``: cost coefficients other than the
    deployment's roofline (e.g. calibrated from measurements). Totals over the run: ``busy_s``, ``hbm_bytes``, ``flops``,
    ``iterations``, ``mean_batch`` (time-weighted running decode batch), ``kv_peak_bytes`` (the
    most of the pool held at once) and ``kv_blocked_s`` (busy time during which a queued call
    waited for KV room). ``iteration_log``: None, or a list the replica appends each stretch of
    iterations it ran to, as ``(running, mixed_s, B, context_sum, m)``: ``running`` sequences
    decoding through a first iteration of ``mixed_s`` seconds that also carried prefill chunks
    (0 and 0.0 if there was none), then ``m`` decode iterations of ``B`` sequences whose
    contexts summed to ``context_sum`` at the first (``Coefficients.decode_iteration_seconds``
    gives their times): the token gaps a benchmark client sees. ``prefix_cache``: how a
    session's prefix is kept between its calls, "hot", "evict" or "off" (module docstring;
    "evict" on an engine without prefix caching is "off"): :attr:`cache_mode` is what runs.
    """

    def __init__(self, env, deployment: Deployment, name: str = "", token_budget: int | None = None,
                 max_seqs: int | None = None, rtt_s: float = 0.0, coef=None, kv_pool_bytes: float | None = None,
                 prefix_cache: str = PREFIX_CACHE):
        self.env, self.deployment, self.name = env, deployment, name or deployment.model.name
        self.coef = coef or coefficients(deployment)  # or calibrated ones (roofline.calibrated)
        # None: the deployment's engine's limits on its device (one home: the engine profile)
        self.token_budget = deployment.token_budget if token_budget is None else token_budget
        self.max_seqs = deployment.max_seqs if max_seqs is None else max_seqs
        self.rtt_s = rtt_s
        self.queue: list[Request] = []
        self.busy_s = self.hbm_bytes = self.flops = self.batch_time = 0.0
        self.iterations = 0
        self._epoch: _Epoch | None = None
        self._deferred = False  # a plan is due at this instant (see _next)
        # Running requests: a heap of (iteration they finish in, tie-break, request), the sum
        # of their contexts, and running per-sequence shares of weight bytes and busy time.
        self._running: list = []
        self._ctx_sum = 0
        self._acc_w = self._acc_t = 0.0
        self._tie = itertools.count()
        self.kv_pool = _pool(deployment) if kv_pool_bytes is None else kv_pool_bytes
        self.kv_used = self.kv_peak_bytes = self.kv_blocked_s = 0.0
        self._kv_token, self._kv_seq = self.coef.kv_bytes_per_token, state_bytes(deployment)
        self.iteration_log = None
        if not isinstance(prefix_cache, str) or prefix_cache not in PREFIX_CACHES:
            raise ValueError(f"prefix_cache must be one of {', '.join(PREFIX_CACHES)}, got {prefix_cache!r}")
        eng = deployment.engine
        self.cache_mode = "off" if prefix_cache == "evict" and not eng.prefix_caching else prefix_cache
        self._cached = self.cache_mode != "hot"  # admission looks the context up (evict, off)
        self._evicts = self.cache_mode == "evict"  # and a finished call's sequence stays cached
        self._block = eng.kv_block_tokens  # eviction's unit from a prefix's tail, tokens (0: whole)
        # The cache: session -> [tokens its last sequence had, tokens of it still resident], least
        # recently used first, of sessions with no call admitted; the tokens and prefixes it holds
        # (its room: kv_cached_bytes); calls admitted and not finished, per session.
        self._prefixes: OrderedDict = OrderedDict()
        self._cache_tokens = self._cache_seqs = 0
        self._in_use: dict = {}
        self.prefix_queried_tokens = self.prefix_hit_tokens = self.prefix_prompt_tokens = 0
        self.prefix_queried_calls = self.prefix_hit_calls = 0
        self.prefill_recomputed_tokens = self.prefix_evicted_tokens = 0

    @property
    def kv_cached_bytes(self) -> float:
        """Room of the pool the cached prefixes hold (besides ``kv_used``, the calls in flight)."""
        return self._kv_token * self._cache_tokens + self._kv_seq * self._cache_seqs

    def cached_prefixes(self) -> dict:
        """``{session: resident tokens}`` of the cache, least recently used first."""
        return {s: e[1] for s, e in self._prefixes.items()}

    @property
    def mean_batch(self) -> float:
        return self.batch_time / self.busy_s if self.busy_s else 0.0

    def submit(self, prefill_tokens: int, context: int, decode_tokens: int, session=None) -> Request:
        """Queue a call of ``session`` (the prefix cache's key; None: none); wait on
        ``request.done``."""
        req = Request(prefill_tokens, context, decode_tokens, session)
        self.queue.append(req)
        ep = self._epoch
        if ep is None and not self._deferred:  # idle: admitted now
            if self._cached and not self._admit(req):  # its prompt grows by what is not resident
                self._never_fits(req)
            if req.prefill_left <= self.token_budget:
                self._start_solo(req)
                return req
        req.done = Event(self.env)
        if self._deferred:  # the plan at this instant is still to come: it takes this call too
            return req
        if type(ep) is Request:  # a solo epoch has company now: see it as a general one
            ep = self._epoch = self._solo_epoch(ep)
        if ep is None:
            self._plan()
        elif ep.start == self.env.now:  # nothing ran yet: plan again with everyone who came
            self._retire(ep)
            self._plan()
        elif ep.m and len(self._running) + len(ep.chunks) < self.max_seqs:
            self._cut_short(ep)
        return req

    def run_or_submit(self, prefill_tokens: int, context: int, decode_tokens: int, session=None):
        """A call by the process running now, which waits on it next and was resumed by an
        event it alone waits on (so no other callback of that event is still to run at this
        instant). If the replica is idle and no event is due before the call would end,
        nothing can reach the replica or the caller until then: the call is run to its end
        now, with the clock moved there (what waiting on its epoch's timeout does, without
        the event; SimPy has no public call for it), and ``(seconds, HBM bytes, FLOPs,
        context tokens prefilled again)`` it is charged are returned. Else it is submitted:
        its :class:`Request` is returned."""
        if self._epoch is not None or self._deferred:
            return self.submit(prefill_tokens, context, decode_tokens, session)
        if self._cached:
            return self._run_or_submit_cached(prefill_tokens, context, decode_tokens, session)
        if prefill_tokens > self.token_budget:
            return self.submit(prefill_tokens, context, decode_tokens, session)
        env = self.env
        pre, run = self.coef.solo(prefill_tokens, context, decode_tokens)
        end = env._now + (pre[0] + run[0])  # as a Timeout schedules it
        q = env._queue  # what env.peek() reads, without its exception when there is none
        if q and q[0][0] <= end:  # an event due at `end` too would come first
            req = Request(prefill_tokens, context, decode_tokens, session)
            self.queue.append(req)
            self._start_solo(req, (pre, run))
            return req
        # What _start_solo and _end_solo do to the replica, to the same bits: the KV room
        # taken and given back, the epoch's totals.
        need = self._kv_token * (context + prefill_tokens + decode_tokens) + self._kv_seq
        used = self.kv_used + need
        if used > self.kv_pool:
            self._never_fits(Request(prefill_tokens, context, decode_tokens))
        if used > self.kv_peak_bytes:
            self.kv_peak_bytes = used
        self.kv_used = used - need
        env._now = end
        if self.iteration_log is not None:
            self.iteration_log.append((0, pre[0], 1, context + prefill_tokens, max(decode_tokens, 0)))
        secs, hbm, flops = self._account_solo(pre, run, decode_tokens)
        return secs, hbm, flops, 0

    def _run_or_submit_cached(self, prefill_tokens, context, decode_tokens, session):
        """:meth:`run_or_submit` on an idle replica whose admission looks the context up
        (``"evict"``, ``"off"``): admitted now whichever road it takes, so looked up first (its
        prompt may grow past the token budget), then run at once as the hot road does."""
        env = self.env
        req = Request(prefill_tokens, context, decode_tokens, session)
        self.queue.append(req)
        if not self._admit(req):  # nothing runs: it would not fit with the whole cache evicted
            self._never_fits(req)
        pre_t, ctx, m = req.prefill_left, req.context, req.decode_left
        if pre_t > self.token_budget:  # prefilled in chunks: the general road
            req.done = Event(env)
            self._plan()
            return req
        pre, run = self.coef.solo(pre_t, ctx, m)
        end = env._now + (pre[0] + run[0])
        q = env._queue
        if q and q[0][0] <= end:
            self._start_solo(req, (pre, run))
            return req
        # What _start_solo and _end_solo do, to the same bits.
        del self.queue[-1]
        env._now = end
        m = m if m > 0 else 0
        if self.iteration_log is not None:
            self.iteration_log.append((0, pre[0], 1, ctx + pre_t, m))
        secs, hbm, flops = self._account_solo(pre, run, m)
        req.context = ctx + pre_t + m
        self._release(req)
        return secs, hbm, flops, req.recomputed

    # --- planning -------------------------------------------------------------------------

    def _plan(self):
        running, queue = self._running, self.queue
        B = len(running)
        if not B:
            if not queue:
                self._epoch = None
                return
            if len(queue) == 1:
                r = queue[0]
                if self._cached and not (r.kv_held or self._admit(r)):  # first: its prompt may grow
                    self._never_fits(r)
                if r.prefill_left <= self.token_budget:
                    self._start_solo(r)
                    return
        coef, ctx_run, it = self.coef, self._ctx_sum, self.iterations
        ep = _Epoch(self.env.now)
        chunks = ep.chunks
        seats = self.max_seqs - B
        if queue and seats > 0:
            budget = max(self.token_budget - B, 1)
            T = pairs = kv_read = 0
            # Whether the decode run can be fused: every queued call gets its whole prompt in
            # (nobody left queued) and has tokens to decode (nobody finishes in the mixed
            # iteration: they must be released at its end). Then: its batch, contexts, length.
            fuse, n_done, ctx_done, m = True, 0, 0, None
            for req in queue:
                if budget <= 0 or seats <= 0:
                    fuse = False
                    break
                if not (req.kv_held or self._admit(req)):
                    if not chunks and not B:
                        self._never_fits(req)
                    ep.kv_blocked = True  # it waits for room, and those behind it
                    fuse = False
                    break
                left, c = req.prefill_left, req.context
                t = left if left < budget else budget
                chunks.append((req, t))
                T += t
                pairs += attention_pairs(t, c)
                kv_read += c if t else 0
                budget -= t
                seats -= 1
                if t >= left and req.decode_left > 0:
                    n_done += 1
                    ctx_done += c + t
                    if m is None or req.decode_left < m:
                        m = req.decode_left
                else:
                    fuse = False
        if chunks:
            ep.T = T  # prompt tokens in the mixed iteration
            ep.mixed_cost = coef.terms(B + T, ctx_run + pairs, ctx_run + kv_read, B + len(chunks))
            ep.mixed_s = ep.mixed_cost[0]
            if fuse and (not B or running[0][0] > it + 1):
                ep.B, ep.ctx_sum = B + n_done, ctx_run + B + ctx_done
                ep.m = m if not B or m < running[0][0] - it - 1 else running[0][0] - it - 1
        else:  # nobody can join: decode until someone finishes (and frees KV room)
            ep.B, ep.ctx_sum, ep.m = B, ctx_run, running[0][0] - it
        if ep.m:
            ep.run = coef.decode_run(ep.B, ep.ctx_sum, ep.m)
        self._epoch = ep
        Timeout(self.env, ep.mixed_s + ep.run[0], ep).callbacks.append(self._end)

    def _start_solo(self, r, costs=None):
        """The uncontended call, the common case: one epoch of its whole prefill (one
        iteration) and then all its decode iterations. The request is its own epoch (and its
        epoch's timeout, when nobody waits on it yet, its ``done``: one event a call).
        ``costs``: the epoch's ``Coefficients.solo``, if computed already."""
        if not (r.kv_held or self._admit(r)):
            self._never_fits(r)
        pre, run = costs or self.coef.solo(r.prefill_left, r.context, r.decode_left)
        r._solo = (self.env.now, pre, run)
        self._epoch = r
        t = r._timeout = Timeout(self.env, pre[0] + run[0], r)
        t.callbacks.append(self._end)
        if r.done is None:
            r.done = t

    def _solo_epoch(self, r) -> "_Epoch":
        """The general :class:`_Epoch` equal to ``r``'s solo epoch (``r``'s timeout still ends
        it, unless it is retired)."""
        start, pre, run = r._solo
        ep = _Epoch(start)
        ep.chunks, ep.T, ep.solo, ep.mixed_cost, ep.mixed_s = [(r, r.prefill_left)], r.prefill_left, r, pre, pre[0]
        if r.decode_left > 0:
            ep.B, ep.ctx_sum, ep.m, ep.run = 1, r.context + r.prefill_left, r.decode_left, run
        return ep

    def _retire(self, ep):
        """``ep`` will not run to its planned end. A solo call waiting on the epoch's timeout
        gets an event of its own, which takes over those waiting (after our own ``_end``)."""
        ep.live = False
        r = ep.solo
        if r is not None:
            r._timeout = None  # its timeout now ends nothing (see _end)
            if type(r.done) is Timeout:
                t, r.done = r.done, Event(self.env)
                r.done.callbacks, t.callbacks = t.callbacks[1:], t.callbacks[:1]

    def _cut_short(self, ep):
        """An arrival during ``ep``: stop after the iteration in flight, then replan."""
        elapsed = self.env.now - ep.start - ep.mixed_s
        if elapsed < 0:  # still in the mixed iteration: finish it, decode nothing more
            m = 0
        else:
            k = self.coef.decode_iterations_within(ep.B, ep.ctx_sum, ep.m, elapsed)
            m = min(k + 1, ep.m)
        if m == ep.m:
            return
        self._retire(ep)
        new = _Epoch(ep.start)  # not solo: the arrival is settled with the general rule
        new.chunks, new.T, new.mixed_s, new.mixed_cost, new.kv_blocked = ep.chunks, ep.T, ep.mixed_s, ep.mixed_cost, ep.kv_blocked
        new.B, new.ctx_sum, new.m = ep.B, ep.ctx_sum, m
        if m:
            new.run = self.coef.decode_run(ep.B, ep.ctx_sum, m)
        self._epoch = new
        left = new.mixed_s + new.run[0] - (self.env.now - new.start)
        Timeout(self.env, max(left, 0.0), new).callbacks.append(self._end)

    # --- completion -----------------------------------------------------------------------

    def _end(self, event):
        ep = event.value
        if type(ep) is Request:  # a solo epoch (see _start_solo)
            if ep._timeout is event:  # else it was retired
                self._end_solo(ep)
            return
        if not ep.live:
            return
        finished = []
        if ep.kv_blocked:
            self.kv_blocked_s += self.env.now - ep.start
        if self.iteration_log is not None:
            mixed = ep.mixed_cost is not None
            self.iteration_log.append((len(self._running) if mixed else 0, ep.mixed_s if mixed else 0.0,
                                       ep.B, ep.ctx_sum, ep.m))
        if ep.mixed_cost is not None:
            self._apply_mixed(ep, finished)
        if ep.m:
            secs, hbm, flops = ep.run
            self._account(secs, hbm, flops, ep.B, ep.m)
            self._acc_w += float(self.coef.weight_bytes(ep.B)) / ep.B * ep.m
            self._acc_t += secs / ep.B
            self._ctx_sum += ep.B * ep.m
            self._settle(finished)
        now = self.env.now
        for r in finished:
            r.finished = now
            r.done.succeed(r)
        self._next()

    def _end_solo(self, r):
        """The end of an uncontended call's epoch: the request had the replica to itself, so it
        is charged the whole of it (what the general rule gives, without the bookkeeping)."""
        start, pre, run = r._solo
        m = r.decode_left if r.decode_left > 0 else 0
        r._solo = r._timeout = None
        r.first_token = start + pre[0]
        if self.iteration_log is not None:
            self.iteration_log.append((0, pre[0], 1, r.context + r.prefill_left, m))
        secs, hbm, flops = self._account_solo(pre, run, m)
        r.busy_s += secs  # += : a long prompt's first chunks may have been charged
        r.hbm_bytes += hbm
        r.flops += flops
        r.context += r.prefill_left + m
        r.prefill_left = r.decode_left = 0
        self._release(r)
        del self.queue[0]  # r: it was alone when planned; later arrivals queue behind it
        r.finished = self.env.now
        if type(r.done) is not Timeout:  # else it is the event being processed: it resumes them
            r.done.succeed(r)
        self._next()

    def _account_solo(self, pre, run, m) -> tuple:
        """Add a solo epoch (prefill ``pre``, ``m`` decode iterations costing ``run``) to the
        replica's totals; its ``(seconds, HBM bytes, FLOPs)``."""
        secs, hbm, flops = pre[0] + run[0], pre[1] + run[1], pre[2] + run[2]
        self.busy_s += secs
        self.hbm_bytes += hbm
        self.flops += flops
        self.batch_time += run[0]
        self.iterations += 1 + (m if m > 0 else 0)
        return secs, hbm, flops

    def _next(self):
        """After an epoch: plan the next one once the calls submitted at this same instant are
        in (a zero-time event behind the resumptions of the calls just finished, and behind the
        processes they start), instead of planning now and again for each of them."""
        self._epoch = None
        if self.queue or self._running:
            self._deferred = True
            Timeout(self.env, 0.0).callbacks.append(self._plan_deferred)

    def _plan_deferred(self, _):
        self._deferred = False
        self._plan()

    def _apply_mixed(self, ep, finished):
        coef, c, secs = self.coef, ep.mixed_cost, ep.mixed_s
        B = len(self._running)
        tokens = B + ep.T
        self._account(secs, c[1], c[2], B, 1)
        tokens = tokens or 1
        wshare = float(coef.weight_bytes(tokens)) / tokens
        self._acc_w += wshare
        self._acc_t += secs / tokens
        self._ctx_sum += B
        self._settle(finished)
        kvb, fpt, fpp, sqb = coef.kv_bytes_per_token, coef.flops_per_token, coef.flops_per_pair, coef.seq_bytes
        for r, t in ep.chunks:
            c0 = r.context
            r.hbm_bytes += wshare * t + kvb * ((c0 if t else 0) + t) + sqb
            r.flops += fpt * t + fpp * attention_pairs(t, c0)
            r.busy_s += secs * t / tokens
            r.context = c0 + t
            r.prefill_left -= t
            if r.prefill_left <= 0:
                r.first_token = ep.start + secs
                self.queue.remove(r)
                if r.decode_left > 0:
                    self._join(r)
                else:
                    self._release(r)
                    finished.append(r)

    def _join(self, r):
        """``r`` starts decoding with the next iteration."""
        r._join = (self.iterations, self._acc_w, self._acc_t)
        heapq.heappush(self._running, (self.iterations + r.decode_left, next(self._tie), r))
        self._ctx_sum += r.context

    def _settle(self, finished):
        """Release the requests whose last token came out in the iteration just counted; charge
        each its decode iterations: its own KV bytes and FLOPs (its context grew by one per
        iteration from c0), and its share of weights and busy time from the running sums."""
        running, now_it = self._running, self.iterations
        if not running or running[0][0] > now_it:
            return
        coef, acc_w, acc_t = self.coef, self._acc_w, self._acc_t
        kvb, fpt, fpp, sqb = coef.kv_bytes_per_token, coef.flops_per_token, coef.flops_per_pair, coef.seq_bytes
        while running and running[0][0] <= now_it:
            r = heapq.heappop(running)[2]
            it0, w0, t0 = r._join
            D, c0 = now_it - it0, r.context
            # KV read: contexts c0+1 .. c0+D (each iteration also writes its token); FLOPs: c0 .. c0+D-1.
            r.hbm_bytes += acc_w - w0 + kvb * context_sum(D, c0 + 1) + sqb * D
            r.flops += fpt * D + fpp * context_sum(D, c0)
            r.busy_s += acc_t - t0
            r.context = c0 + D
            r.decode_left = 0
            self._ctx_sum -= r.context
            self._release(r)
            finished.append(r)

    # --- memory ----------------------------------------------------------------------------

    def _footprint(self, r) -> float:
        return self._kv_token * (r.context + r.prefill_left + r.decode_left) + self._kv_seq

    def _admit(self, r) -> bool:
        """Reserve ``r``'s room in the KV pool if it fits now: beside the calls in flight, with
        as much of the cache evicted as it takes (the cache's room is never a reason to wait).
        Where the context is looked up (``"evict"``, ``"off"``), this is when: the part of it
        not resident is moved to the prompt (the footprint, its whole sequence, is the same)."""
        need = self._footprint(r)
        if self.kv_used + need > self.kv_pool:
            return False
        if self._cached and r.recomputed is None:
            self._look_up(r)
            if self._cache_seqs and self.kv_used + need + self.kv_cached_bytes > self.kv_pool:
                self._evict_for(need)
        r.kv_held = need
        self.kv_used += need
        if self.kv_used > self.kv_peak_bytes:
            self.kv_peak_bytes = self.kv_used
        return True

    def _release(self, r):
        self.kv_used -= r.kv_held
        r.kv_held = 0.0
        if self._evicts and r.session is not None:
            self._cache_put(r)

    # --- the prefix cache ("evict", "off") ---------------------------------------------------

    def _look_up(self, r):
        """``r`` is admitted: its context's resident part is a hit, the rest is prefilled again.
        Its session's cached prefix (if any) is taken out of the cache (its room is now in
        ``r``'s footprint, its tail past the context given back)."""
        r.recomputed = 0
        s, ctx = r.session, r.context
        if self.cache_mode == "off":
            miss = ctx
        elif s is None:  # a call of no session: its context is taken as cached
            miss = 0
        else:
            e = self._prefixes.pop(s, None)
            if e is not None:
                full, res = e
                self._cache_tokens -= res
                self._cache_seqs -= 1
                miss = (full if full < ctx else ctx) - res  # the evicted part of the context
                if miss < 0:
                    miss = 0
            elif s in self._in_use:  # a call of the session in flight holds its prefix
                miss = 0
            else:  # nothing of it resident: evicted whole, or never here
                miss = ctx
            self._in_use[s] = self._in_use.get(s, 0) + 1
        if ctx:
            self.prefix_queried_tokens += ctx
            self.prefix_prompt_tokens += ctx + r.prefill_left
            self.prefix_queried_calls += 1
            self.prefix_hit_tokens += ctx - miss
            if not miss:
                self.prefix_hit_calls += 1
            else:
                self.prefill_recomputed_tokens += miss
                r.recomputed = miss
                r.context = ctx - miss
                r.prefill_left += miss

    def _evict_for(self, need: float):
        """Evict cached prefixes, least recently used first, each from its tail in blocks of
        ``kv_block_tokens`` (0: whole), until ``need`` bytes fit beside the calls in flight and
        the cache. (The caller has checked that they fit with the whole cache evicted.)"""
        prefixes, kvt, kvs, bs = self._prefixes, self._kv_token, self._kv_seq, self._block
        base = self.kv_used + need - self.kv_pool
        while prefixes:
            over = base + (kvt * self._cache_tokens + kvs * self._cache_seqs)
            if over <= 0:
                return
            s, e = next(iter(prefixes.items()))
            res = e[1]
            keep = 0
            if bs and kvt > 0:
                left = res - math.ceil(over / kvt)
                keep = left // bs * bs if left > 0 else 0
            if keep > 0:  # its tail blocks go
                e[1] = keep
                self._cache_tokens -= res - keep
                self.prefix_evicted_tokens += res - keep
            else:  # all of it
                del prefixes[s]
                self._cache_tokens -= res
                self._cache_seqs -= 1
                self.prefix_evicted_tokens += res

    def _cache_put(self, r):
        """``r`` (of a session) is finished: its sequence, ``r.context`` tokens, stays in the
        pool as its session's cached prefix, the most recently used (in the room ``r`` held;
        with a prefix of the session still cached, the longer of the two)."""
        s = r.session
        n = self._in_use[s] - 1
        if n:
            self._in_use[s] = n
        else:
            del self._in_use[s]
        tokens = r.context
        e = self._prefixes.pop(s, None)
        if e is None:
            self._cache_seqs += 1
            self._cache_tokens += tokens
            e = [tokens, tokens]
        else:
            if tokens > e[1]:
                self._cache_tokens += tokens - e[1]
                e[1] = tokens
            if tokens > e[0]:
                e[0] = tokens
        self._prefixes[s] = e

    def _never_fits(self, r):
        raise DoesNotFit(f"a call of {r.context + r.prefill_left + r.decode_left:,.0f} tokens needs "
                         f"{self._footprint(r) / 1e9:.1f} GB of KV; the pool of {self.deployment.n_devices}x "
                         f"{self.deployment.device.name} ({self.name}) holds {self.kv_pool / 1e9:.1f} GB")

    def _account(self, secs, hbm, flops, batch, iterations):
        self.busy_s += secs
        self.hbm_bytes += hbm
        self.flops += flops
        self.batch_time += secs * batch
        self.iterations += iterations


def _pool(dep: Deployment) -> float:
    pool = kv_pool_bytes(dep)
    if pool <= 0:
        raise DoesNotFit(f"{dep.model.name} in {dep.weight_dtype} does not fit on {dep.n_devices}x {dep.device.name}")
    return pool

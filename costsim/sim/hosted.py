"""A hosted API as a serving backend, and the edge-cloud protocols that run on it.

``edge-cloud`` is SpecAgent's schedule with the weak drafter on a local GPU and every strong call
(review, repair) sent to an API profile (``hardware/api/*.toml``); ``cloud-strong-only``, its
baseline, is Strong-only's schedule on the same API (defaults: ``costsim.config.EDGE_CLOUD``).
Assumptions (docs/protocols.md, "Edge-cloud"): a call takes ``ttft_s + prefill / input_tps +
decode / output_tps`` seconds after the network round trip, from a provider of unlimited
capacity, whose HBM bytes and FLOPs count as 0 (``strong_busy_s`` is the remote call time); it
is billed as :func:`costsim.formulas.api_cost_ratio` has it (what the provider has received
before is cached input, the rest fresh input, decoded tokens output; a verdict is not re-sent),
at the profile's USD per million tokens.
"""

from __future__ import annotations

from ..protocols.schedule import Wrapper
from ..sizing import api_profile, api_speeds, edge_deployment
from .replica import Replica

class ApiRequest:
    __slots__ = ("done", "finished", "prefill_tokens", "decode_tokens", "hbm_bytes", "flops", "busy_s")

    def __init__(self, env, prefill, decode, seconds):
        self.done, self.finished = env.event(), None
        self.prefill_tokens, self.decode_tokens = prefill, decode
        self.hbm_bytes = self.flops = 0.0
        self.busy_s = seconds


class ApiServer:
    """A hosted model: every call answered after a fixed-rate latency, no contention."""

    def __init__(self, env, endpoint, ttft_s: float, output_tps: float, input_tps: float | None = None,
                 rtt_s: float = 0.0):
        if not (ttft_s >= 0 and output_tps > 0 and (input_tps is None or input_tps > 0)):
            raise ValueError("API TTFT must be >= 0 s and token rates > 0 tokens/s")
        self.env, self.endpoint, self.name = env, endpoint, endpoint.name
        self.ttft_s, self.output_tps, self.input_tps, self.rtt_s = ttft_s, output_tps, input_tps, rtt_s
        self.busy_s = self.hbm_bytes = self.flops = self.batch_time = 0.0
        self.iterations = 0
        self.mean_batch = 0.0

    def seconds(self, prefill, decode) -> float:
        return self.ttft_s + (prefill / self.input_tps if self.input_tps else 0.0) + decode / self.output_tps

    def submit(self, prefill_tokens, context, decode_tokens, session=None) -> ApiRequest:
        """A call; ``session`` is ignored (the provider's caching is in its prices)."""
        req = ApiRequest(self.env, prefill_tokens, decode_tokens, self.seconds(prefill_tokens, decode_tokens))

        def finish(_e):
            req.finished = self.env.now
            req.done.succeed(req)

        self.env.timeout(req.busy_s).callbacks.append(finish)
        return req


def replicas(env, sc):
    """``(strong, weak)`` for the edge-cloud protocols of scenario ``sc``: one API, local weak."""
    ep = api_profile(sc.api)
    (ttft, _), (tps, _) = api_speeds(ep, sc.api_ttft_s, sc.api_output_tps)
    strong = [ApiServer(env, ep, ttft, tps, rtt_s=sc.network_rtt_s)]
    pool = None if sc.kv_cap else float("inf")
    local = edge_deployment(sc.weak, sc.edge_device)
    weak = [Replica(env, local, f"edge{i}", *sc.limits(local), kv_pool_bytes=pool) for i in range(sc.weak_replicas)]
    return strong, weak


class BilledRun(Wrapper):
    """A task run whose strong calls are billed at the API's prices into the row."""

    def __init__(self, tr):
        super().__init__(tr)
        self._sent = 0  # tokens the provider has received as input so far

    def call(self, who, prefill, context, decode):
        tr = self._tr
        if who == "strong":
            ep = tr.strong.endpoint
            own = max(context - self._sent, 0)  # history the provider never received as input
            fresh, cached = prefill + own, context - own
            row = tr.row
            row["remote_calls"] += 1
            row["remote_input_tokens"] += fresh
            row["remote_cached_tokens"] += cached
            row["remote_output_tokens"] += decode
            row["api_cost_usd"] += (fresh * ep.price_input_per_mtok_usd + cached * ep.price_cached_input_per_mtok_usd
                                    + decode * ep.price_output_per_mtok_usd) / 1e6
            self._sent = context + prefill
        return (yield from tr.call(who, prefill, context, decode))


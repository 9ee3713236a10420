"""Prometheus ``/metrics`` text: a parser, and the server-side timing vLLM and llama.cpp report.

Live mode snapshots ``/metrics`` before and after a batch of probes; the difference of the
counters (and of histogram ``_sum``/``_count``) gives the server's own per-token prefill and
decode time, which :mod:`costsim.live.fit` cross-checks against client-side timing.

Metric names (a ``_total`` suffix, which prometheus_client adds to counters, is optional):

- vLLM: ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds`` (or the older
  ``vllm:time_per_output_token_seconds``), ``vllm:request_prefill_time_seconds``,
  ``vllm:request_decode_time_seconds`` (histograms), ``vllm:prompt_tokens``,
  ``vllm:generation_tokens``, ``vllm:prefix_cache_queries``, ``vllm:prefix_cache_hits``
  (counters).
- llama.cpp: ``llamacpp:prompt_tokens_total``, ``llamacpp:prompt_seconds_total``,
  ``llamacpp:tokens_predicted_total``, ``llamacpp:tokens_predicted_seconds_total``,
  ``llamacpp:prompt_tokens_cached_total``, ``llamacpp:n_decode_total``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VLLM = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "prefill_time": ("vllm:request_prefill_time_seconds",),
    "decode_time": ("vllm:request_decode_time_seconds",),
    "prompt_tokens": ("vllm:prompt_tokens",),
    "generation_tokens": ("vllm:generation_tokens",),
    "cache_queries": ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries"),
    "cache_hits": ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
}
LLAMACPP = {
    "prompt_tokens": ("llamacpp:prompt_tokens",),
    "prompt_seconds": ("llamacpp:prompt_seconds",),
    "generation_tokens": ("llamacpp:tokens_predicted",),
    "generation_seconds": ("llamacpp:tokens_predicted_seconds",),
    "cached_tokens": ("llamacpp:prompt_tokens_cached",),
    "n_decode": ("llamacpp:n_decode",),
}

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class MetricsError(ValueError):
    """Unparseable metrics text."""


@dataclass
class Metrics:
    """Samples of one scrape: ``samples[name]`` is a list of (labels dict, value)."""

    samples: dict = field(default_factory=dict)

    def flavor(self) -> str | None:
        """'vllm', 'llamacpp' or None (no metric of either)."""
        names = self.samples.keys()
        if any(n.startswith("vllm:") for n in names):
            return "vllm"
        if any(n.startswith("llamacpp:") for n in names):
            return "llamacpp"
        return None

    def value(self, *names: str, suffix: str = "") -> float | None:
        """Sum over label sets of the first of ``names`` present (with or without ``_total``)."""
        for n in names:
            for cand in (n + suffix, n + "_total" + suffix) if not n.endswith("_total") else (n + suffix,):
                if cand in self.samples:
                    return float(sum(v for _, v in self.samples[cand]))
        return None

    def histogram(self, *names: str) -> tuple[float, float] | None:
        """(sum, count) of the first histogram of ``names`` present."""
        for n in names:
            s, c = self.value(n, suffix="_sum"), self.value(n, suffix="_count")
            if s is not None and c is not None:
                return s, c
        return None

    def names(self) -> list[str]:
        return sorted(self.samples)


def parse(text: str) -> Metrics:
    """Parse the Prometheus text exposition format (comments skipped; NaN/Inf kept)."""
    out: dict = {}
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise MetricsError(f"line {i}: not a Prometheus sample: {line[:80]!r}")
        name, _, labels, value = m.group(1), m.group(2), m.group(3), m.group(4)
        try:
            v = float(value)
        except ValueError:
            raise MetricsError(f"line {i}: bad value {value!r}") from None
        lab = {k: v_.replace('\\"', '"').replace("\\\\", "\\") for k, v_ in _LABEL.findall(labels or "")}
        out.setdefault(name, []).append((lab, v))
    return Metrics(out)


@dataclass(frozen=True)
class ServerTiming:
    """What the server says happened between two scrapes."""

    flavor: str | None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    cached_tokens: float | None = None
    prefill_s: float | None = None       # total server time prefilling
    decode_s: float | None = None        # total server time decoding (after the first token)
    decode_intervals: float | None = None
    requests: float | None = None
    ttft_mean_s: float | None = None
    cache_hit_rate: float | None = None
    names_seen: tuple = ()

    @property
    def prefill_s_per_token(self) -> float | None:
        return _ratio(self.prefill_s, self.prompt_tokens)

    @property
    def decode_s_per_token(self) -> float | None:
        return _ratio(self.decode_s, self.decode_intervals)


def _ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def _d(after: Metrics, before: Metrics, names, suffix=""):
    a, b = after.value(*names, suffix=suffix), before.value(*names, suffix=suffix)
    if a is None:
        return None
    return a - (b or 0.0)


def server_timing(before: Metrics, after: Metrics, requests: int | None = None) -> ServerTiming:
    """Differences between two scrapes of one server, in the server's own accounting.

    ``requests`` is how many completions the client sent in between; llama.cpp does not count
    requests, and its generated-token counter includes each request's first token (produced by
    the prefill), so decode intervals = generated tokens - requests.
    """
    fl = after.flavor()
    seen = tuple(n for n in after.names() if n.startswith(("vllm:", "llamacpp:")))
    if fl == "llamacpp":
        L = LLAMACPP
        gen = _d(after, before, L["generation_tokens"])
        return ServerTiming(
            flavor=fl, prompt_tokens=_d(after, before, L["prompt_tokens"]), generation_tokens=gen,
            cached_tokens=_d(after, before, L["cached_tokens"]),
            prefill_s=_d(after, before, L["prompt_seconds"]), decode_s=_d(after, before, L["generation_seconds"]),
            decode_intervals=(gen - requests) if (gen is not None and requests is not None) else None,
            requests=requests, names_seen=seen)
    if fl == "vllm":
        V = VLLM

        def hist(key):
            a, b = after.histogram(*V[key]), before.histogram(*V[key])
            if a is None:
                return None, None
            b = b or (0.0, 0.0)
            return a[0] - b[0], a[1] - b[1]

        pf_s, pf_n = hist("prefill_time")
        dc_s, _ = hist("decode_time")
        itl_s, itl_n = hist("itl")
        tt_s, tt_n = hist("ttft")
        q, h = _d(after, before, V["cache_queries"]), _d(after, before, V["cache_hits"])
        # Decode time: the inter-token latency histogram counts exactly the decode intervals.
        dec_s, dec_n = (itl_s, itl_n) if itl_s is not None else (dc_s, None)
        return ServerTiming(
            flavor=fl, prompt_tokens=_d(after, before, V["prompt_tokens"]),
            generation_tokens=_d(after, before, V["generation_tokens"]), cached_tokens=h,
            prefill_s=pf_s, decode_s=dec_s, decode_intervals=dec_n,
            requests=pf_n if pf_n is not None else requests,
            ttft_mean_s=_ratio(tt_s, tt_n), cache_hit_rate=_ratio(h, q), names_seen=seen)
    return ServerTiming(flavor=None, requests=requests, names_seen=seen)


"""The probes: which calls calibration makes against each endpoint, in which order, at the
user's call shapes (:class:`CallShapes`).

The probes are a list of :class:`Probe` — one completion call each: a prompt of ``prompt_tokens``
fresh random tokens and ``max_tokens`` forced output tokens. It has four kinds of probe:

- ``prefill``: a sweep of prompt lengths with one output token (time ∝ prefill);
- ``decode``: a short prompt and a sweep of output lengths (time ∝ decode iterations);
- ``verdict``: verification-shaped, the chunk as prompt and a verdict as output;
- ``step``: agent-step-shaped, an observation as prompt and a step as output.

Each shape is repeated (the fit works from per-shape medians) and the whole list is shuffled
with a fixed seed, weak and strong interleaved, so that slow drift of the machine falls on
every shape and both endpoints alike. Probe ids are stable for a given workload and options,
which is what lets ``--resume`` skip the probes a previous run completed.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from ..config import LIVE, MAX_CALL_TOKENS, WORKLOAD
from ..formulas import MAX_K

#: The longest prompt or output a probe may ask for, in tokens: the most one call may prefill or
#: decode anywhere (config.MAX_CALL_TOKENS); an unbounded one sized a request, and a plan, without end.
MAX_PROBE_TOKENS = int(MAX_CALL_TOKENS)
#: The most probes per shape: the fit takes each shape's median, which 100 repeats pin down;
#: more only keep the endpoints busy.
MAX_REPEATS = 100

ROLES = ("weak", "strong")


@dataclass(frozen=True)
class CallShapes:
    """The user's typical shapes, in tokens: what kappa, v/d and rho are evaluated at."""

    step_tokens: int = int(WORKLOAD.step_tokens)        # d: tokens of one agent step
    obs_tokens: int = int(WORKLOAD.obs_tokens)          # o: tokens of one tool observation
    verdict_tokens: int = int(WORKLOAD.verdict_tokens)  # tokens of a verdict (j, short reason)
    K: int = WORKLOAD.K                                 # steps in a reviewed chunk
    chunk_tokens: int | None = None   # verification prefill; default K * (d + o)
    repair_tokens: int | None = None  # fused replacement step; default d

    def __post_init__(self):
        for k in ("step_tokens", "obs_tokens", "verdict_tokens", "K", "chunk_tokens", "repair_tokens"):
            v = getattr(self, k)
            lo, hi = (0 if k == "repair_tokens" else 1), (MAX_K if k == "K" else MAX_PROBE_TOKENS)
            if (v is not None or k in ("step_tokens", "obs_tokens", "verdict_tokens", "K")) and (
                    isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi):
                raise ValueError(f"--{k.replace('_', '-')} must be an integer in [{lo}, {hi:,}], got {v!r}")
        if self.chunk > MAX_PROBE_TOKENS:
            raise ValueError(f"the chunk K (d + o) = {self.chunk:,} tokens is past {MAX_PROBE_TOKENS:,}: "
                             "a smaller --K, --step-tokens or --obs-tokens")

    @property
    def chunk(self) -> int:
        return self.chunk_tokens if self.chunk_tokens is not None else self.K * (self.step_tokens + self.obs_tokens)

    @property
    def repair(self) -> int:
        return self.repair_tokens if self.repair_tokens is not None else self.step_tokens

    def as_dict(self) -> dict:
        d = asdict(self)
        d["chunk_tokens"], d["repair_tokens"] = self.chunk, self.repair
        return d


#: Small shapes for the generated local models on a 2-core CPU (config.LIVE, with their sources).
LOCAL_SHAPES = CallShapes(step_tokens=LIVE.local_step_tokens, obs_tokens=LIVE.local_obs_tokens,
                          verdict_tokens=LIVE.local_verdict_tokens)


def call_shapes(local: bool = False, K: int | None = None, step_tokens=None, obs_tokens=None, verdict_tokens=None,
             chunk_tokens=None, repair_tokens=None, trace=None) -> CallShapes:
    """The call shapes of a live run: the defaults (:data:`LOCAL_SHAPES` for generated local
    models), then a trace's typical step and observation (:func:`costsim.traces.stats.step_shape`),
    then the values given.
    ValueError (one line) for a bad value or an unreadable or empty trace."""
    base = LOCAL_SHAPES if local else CallShapes()
    vals = {"step_tokens": base.step_tokens, "obs_tokens": base.obs_tokens, "verdict_tokens": base.verdict_tokens}
    if trace:
        from ..traces import load
        from ..traces.stats import step_shape

        try:
            tasks = load(trace).tasks
        except OSError as e:
            raise ValueError(f"{trace}: {e.strerror or e}") from None
        if not any(t.calls for t in tasks):
            raise ValueError(f"{trace}: no steps in the trace")
        d, o, _ = step_shape(tasks)  # the one typical-step rule: means over the model calls
        vals["step_tokens"], vals["obs_tokens"] = max(1, round(d)), max(1, round(o))
    for k, v in (("step_tokens", step_tokens), ("obs_tokens", obs_tokens), ("verdict_tokens", verdict_tokens)):
        if v is not None:
            vals[k] = v
    return CallShapes(K=base.K if K is None else K, chunk_tokens=chunk_tokens, repair_tokens=repair_tokens, **vals)


@dataclass(frozen=True)
class Probe:
    id: str
    role: str            # "weak" | "strong"
    kind: str            # "prefill" | "decode" | "verdict" | "step"
    prompt_tokens: int
    max_tokens: int


def _levels(lo: int, hi: int, n: int, must=()) -> list[int]:
    """About ``n`` integers spread geometrically over [lo, hi], plus the ``must`` values."""
    lo, hi = max(1, int(lo)), max(1, int(hi))
    if hi < lo:
        lo, hi = hi, lo
    vals = {lo, hi, *(int(m) for m in must if m and m >= 1)}
    if n > 2 and hi > lo:
        r = (hi / lo) ** (1.0 / (n - 1))
        vals.update(int(round(lo * r**i)) for i in range(1, n - 1))
    return sorted(vals)


def make_probes(w: CallShapes, repeats: int = LIVE.repeats, seed: int = 0, max_prompt_tokens: int | None = None,
              max_output_tokens: int | None = None, levels: int = 5) -> list[Probe]:
    """The calibration plan for workload ``w`` on both endpoints, shuffled with ``seed``."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"--repeats must be an integer in [1, {MAX_REPEATS}], got {repeats!r}")
    for flag, v in (("--max-prompt-tokens", max_prompt_tokens), ("--max-output-tokens", max_output_tokens)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_PROBE_TOKENS):
            raise ValueError(f"{flag} must be an integer in [1, {MAX_PROBE_TOKENS:,}], got {v!r}")
    chunk = w.chunk
    pmax = max_prompt_tokens or chunk
    omax = max_output_tokens or max(2 * w.step_tokens, w.verdict_tokens + w.repair)
    short = max(1, min(w.obs_tokens, 16))
    shapes = []
    for P in _levels(16 if pmax >= 16 else 1, pmax, levels, must=(w.obs_tokens, min(chunk, pmax))):
        shapes.append(("prefill", P, 1))
    for N in _levels(min(4, omax), omax, levels, must=(w.verdict_tokens, w.step_tokens)):
        shapes.append(("decode", short, N))
    shapes.append(("verdict", min(chunk, pmax), w.verdict_tokens))
    shapes.append(("step", w.obs_tokens, w.step_tokens))
    probes = []
    for role in ROLES:
        for kind, P, N in dict.fromkeys(shapes):
            for r in range(repeats):
                probes.append(Probe(f"{role}/{kind}/{P}x{N}/{r}", role, kind, P, N))
    random.Random(seed).shuffle(probes)
    return probes

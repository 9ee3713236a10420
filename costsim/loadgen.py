"""What a serving benchmark's client sends: each request's prompt and output lengths and the
time it is sent, drawn as ``vllm bench serve`` draws them (its ``random`` and ``sharegpt``
datasets, its Poisson or gamma arrivals, its concurrency cap).

The draws are costsim's own (a numpy Generator seeded by ``seed``): the same distributions as
vLLM's, not the same numbers. Every request is assumed to produce exactly its output length,
as with ``--ignore-eos``.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from .config import COMMANDS
from .files import data_dir

DATASETS = ("random", "sharegpt")


#: ``vllm bench serve``'s defaults for the random dataset (``--random-input-len``,
#: ``--random-output-len``), in tokens.
RANDOM_DEFAULT_TOKENS = (COMMANDS.bench_input_tokens, COMMANDS.bench_output_tokens)
#: The mean input and output tokens the ShareGPT lengths are scaled to by default: the mean of
#: four published runs of vLLM's and SGLang's ShareGPT benchmarks (workloads/README.md).
SHAREGPT_MEAN_TOKENS = (227.6, 203.3)


#: The most requests one benchmark may send (a run of 10^6 requests is days of a real server's time).
MAX_PROMPTS = 10**6

@dataclass(frozen=True)
class Load:
    """One benchmark's load, in ``vllm bench serve``'s terms.

    - ``num_prompts`` requests of the ``dataset``:

      - 'random': ``input_len`` and ``output_len`` tokens (default 1,024 and 128, vLLM's), each
        drawn uniformly from the whole numbers in ``[floor(len·(1 - r)), ceil(len·(1 + r))]``
        for ``range_ratio`` r (an output at least 1), as vLLM draws them; a pair of ratios
        is the input's and the output's (vLLM's ``{"input": a, "output": b}``);
      - 'sharegpt': the shipped ShareGPT lengths (:func:`sharegpt_lengths`) scaled so their
        means are ``input_len`` and ``output_len`` (default :data:`SHAREGPT_MEAN_TOKENS`: a
        stated assumption, workloads/README.md); ``sharegpt_output_len``, if set, replaces
        every output length, as vLLM's ``--sharegpt-output-len`` does;
    - ``request_rate`` requests per second (``math.inf``: all sent at once), with gaps drawn
      from a gamma distribution of shape ``burstiness`` (1: a Poisson process; below 1
      burstier, above 1 more regular) and mean 1 / rate, then stretched so that the last is
      sent at exactly ``num_prompts / rate`` seconds, as vLLM's client does;
    - ``max_concurrency``: the most requests out at once (None: no cap). With an infinite
      rate this is a closed loop: the client starts ``max_concurrency`` requests together
      and sends the next as each one finishes.
    """

    num_prompts: int = 1000
    dataset: str = "random"
    input_len: float | None = None
    output_len: float | None = None
    range_ratio: float | tuple[float, float] = 0.0
    sharegpt_output_len: int | None = None
    request_rate: float = math.inf
    burstiness: float = 1.0
    max_concurrency: int | None = None
    seed: int = 0

    def __post_init__(self):
        if isinstance(self.num_prompts, bool) or not isinstance(self.num_prompts, int) or not 1 <= self.num_prompts <= MAX_PROMPTS:
            raise ValueError(f"num_prompts must be a whole number from 1 to {MAX_PROMPTS:,}, got {self.num_prompts!r}")
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {self.dataset!r}")
        for name, low in (("input_len", 0), ("output_len", 1)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not low <= v <= 10**7):
                raise ValueError(f"{name} must be a number of tokens from {low} to 10^7, got {v!r}")
        v = self.sharegpt_output_len
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 10**7):
            raise ValueError(f"sharegpt_output_len must be a whole number of tokens from 1 to 10^7, got {v!r}")
        if not all(isinstance(r, (int, float)) and not isinstance(r, bool) and 0.0 <= r < 1.0 for r in self.ratios):
            raise ValueError(f"range_ratio must be in [0, 1) (or an input and an output one), got {self.range_ratio!r}")
        if not (self.request_rate > 0):  # inf allowed; nan refused
            raise ValueError(f"request_rate must be > 0 requests/s (inf: all at once), got {self.request_rate!r}")
        if not (math.isfinite(self.burstiness) and self.burstiness > 0):
            raise ValueError(f"burstiness must be a finite number > 0, got {self.burstiness!r}")
        if self.max_concurrency is not None and (isinstance(self.max_concurrency, bool)
                                                 or not isinstance(self.max_concurrency, int) or self.max_concurrency < 1):
            raise ValueError(f"max_concurrency must be a whole number >= 1, got {self.max_concurrency!r}")

    @property
    def ratios(self) -> tuple:
        """The range ratios of the input and of the output lengths."""
        r = self.range_ratio
        return tuple(r) if isinstance(r, (tuple, list)) and len(r) == 2 else (r, r)

    @property
    def lengths(self) -> tuple[float, float]:
        """The (input, output) token lengths asked for: the nominal ones of 'random', the means
        of 'sharegpt'."""
        default = RANDOM_DEFAULT_TOKENS if self.dataset == "random" else SHAREGPT_MEAN_TOKENS
        return (default[0] if self.input_len is None else self.input_len,
                default[1] if self.output_len is None else self.output_len)


def draw(load: Load) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input_lens, output_lens, send_s)`` of the load's requests: whole token counts (an
    output at least 1) and send times in seconds from the benchmark's start (all 0 at an
    infinite rate)."""
    rng = np.random.default_rng(load.seed)
    n = load.num_prompts
    want_in, want_out = load.lengths
    if load.dataset == "random":
        r_in, r_out = load.ratios
        ins = rng.integers(math.floor(want_in * (1 - r_in)), math.ceil(want_in * (1 + r_in)) + 1, size=n)
        outs = rng.integers(max(math.floor(want_out * (1 - r_out)), 1), math.ceil(want_out * (1 + r_out)) + 1, size=n)
    else:  # the table shuffled, as many times over as n needs, each column scaled to its mean
        table = sharegpt_lengths()
        order = np.concatenate([rng.permutation(len(table)) for _ in range(-(-n // len(table)))])[:n]
        mean_in, mean_out = table.mean(axis=0)
        ins = np.rint(table[order, 0] * (want_in / mean_in))
        outs = np.rint(table[order, 1] * (want_out / mean_out))
        if load.sharegpt_output_len is not None:
            outs = np.full(n, load.sharegpt_output_len)
    if math.isinf(load.request_rate):
        send = np.zeros(n)
    else:  # as vLLM's client: a gap before each, their sum stretched to end exactly at n / rate
        send = np.cumsum(rng.gamma(load.burstiness, 1.0 / (load.request_rate * load.burstiness), size=n))
        send *= n / load.request_rate / send[-1]
    return ins.astype(np.int64), np.maximum(outs, 1).astype(np.int64), send


@cache
def sharegpt_lengths() -> np.ndarray:
    """The shipped ShareGPT request lengths, an ``(n, 2)`` array of (prompt, output) tokens
    (``workloads/sharegpt.csv``; its source and filter in ``workloads/README.md``)."""
    text = (data_dir("workloads") / "sharegpt.csv").read_text()
    rows = list(csv.reader(io.StringIO(text)))
    return np.array([[int(a), int(b)] for a, b in rows[1:]], dtype=np.int64)


#: The most bytes of a `vllm bench serve --save-detailed` result read for its requests: one of
#: 10^5 requests of 128 tokens, with their texts and token gaps, is about 200 MB.
MAX_ARRIVALS_BYTES = 256 << 20


def sent(path) -> tuple[Load, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The requests a `vllm bench serve --save-detailed` result file sent, to send again:
    ``(load, (input_lens, output_lens, send_s))``, the lengths each request had (an output at
    least 1) and its send time in seconds from the benchmark's start (vLLM's ``start_times``,
    when the client sent it, less the start: the last finish, ``start_times + latencies``, less
    the ``duration``; where the file lacks those, the first send). ``load`` carries the run's
    count, rate and burstiness. A closed loop (``max_concurrency`` set) is refused: its send
    times followed the server that answered, and are simulated by the loop itself
    (``--max-concurrency``)."""
    import json
    from pathlib import Path

    from .files import read_text

    where = f"--arrivals {Path(path).name}"
    try:
        r = json.loads(read_text(path, max_bytes=MAX_ARRIVALS_BYTES), parse_constant=lambda c: _refuse(where, c))
    except OSError as e:
        raise ValueError(f"{where}: cannot read it ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: not JSON ({e})") from None
    except RecursionError:
        raise ValueError(f"{where}: not JSON costsim reads (nested too deeply)") from None
    except ValueError as e:  # an integer of thousands of digits, or NaN/Infinity (_refuse's own)
        raise (e if str(e).startswith(where) else ValueError(f"{where}: not JSON costsim reads (a number too long)")) from None
    if not isinstance(r, dict) or not isinstance(r.get("start_times"), list):
        raise ValueError(f"{where}: no per-request send times (rerun vllm bench serve with --save-detailed)")
    if r.get("max_concurrency") is not None:
        raise ValueError(f"{where}: a closed loop (max_concurrency {r['max_concurrency']!r}) sent as its server "
                         "answered: simulate it with --max-concurrency instead")
    cols = {k: r.get(k) for k in ("start_times", "input_lens", "output_lens")}
    n = len(cols["start_times"])
    for k, v in cols.items():
        if not isinstance(v, list) or len(v) != n or not 1 <= n <= MAX_PROMPTS:
            raise ValueError(f"{where}: {k} must be a list of one entry per request (1 to {MAX_PROMPTS:,}), "
                             f"as start_times")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0 for x in v):
            raise ValueError(f"{where}: {k} must hold finite numbers >= 0")
    if not all(float(x).is_integer() and x <= 10**7 for k in ("input_lens", "output_lens") for x in cols[k]):
        raise ValueError(f"{where}: input_lens and output_lens must be whole numbers of tokens up to 10^7")
    order = np.argsort(cols["start_times"], kind="stable")
    start = np.asarray(cols["start_times"], float)[order]
    t0 = start[0]
    lat, dur = r.get("latencies"), r.get("duration")
    if (isinstance(lat, list) and len(lat) == n and isinstance(dur, (int, float)) and math.isfinite(dur)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in lat)):
        t0 = min(t0, float(np.max(np.asarray(cols["start_times"], float) + np.asarray(lat, float))) - dur)
    rate = r.get("request_rate", "inf")
    try:
        rate = float(rate)
        burst = float(r.get("burstiness", 1.0))
        load = Load(num_prompts=n, request_rate=rate, burstiness=burst,
                    input_len=float(np.mean(cols["input_lens"])), output_len=float(np.mean(cols["output_lens"])))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {e}") from None
    return load, (np.asarray(cols["input_lens"], np.int64)[order],
                  np.maximum(np.asarray(cols["output_lens"], np.int64)[order], 1), start - t0)


def _refuse(where: str, constant: str):
    raise ValueError(f"{where}: {constant} is not a number JSON allows")

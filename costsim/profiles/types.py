"""The profile types: frozen dataclasses with their units in their field names, and the one
check that builds each from a parsed table.

Memory bandwidth ``*_gb_per_s`` is in gigaBYTES per second (10^9 B/s), as datasheets print it;
``*_tflops`` are dense (not 2:4-sparse) tensor TFLOPS; ``*_gb`` are 10^9 bytes; ``*_b``
parameter counts are in billions. Every numeric field has one declared range (:data:`BOUNDS`,
with its reason), which :func:`build` applies, as it checks a model's fields against one another.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import reprlib
from dataclasses import MISSING, dataclass, field, fields
from typing import NamedTuple

from ..config import MAX_USD_PER_GPU_HOUR, SCHEDULER

#: Bytes per stored element. The 4-bit block formats carry their scales: MXFP4 one 8-bit scale per
#: 32 values (OCP Microscaling spec v1.0), NVFP4 one FP8 scale per 16 (NVIDIA Blackwell docs),
#: GGML Q4_0 one FP16 scale per 32 (18-byte blocks, ggml-common.h block_q4_0).
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5,
               "mxfp4": 4.25 / 8, "nvfp4": 4.5 / 8, "q4_0": 4.5 / 8}
#: Weight-only integer formats with a scale per group of G weights (AWQ, GPTQ, compressed-tensors'
#: pack-quantized): ``int{b}-g{G}`` keeps a 16-bit scale and a b-bit zero point a group (AWQ's
#: ``zero_point``; GPTQ's ``qzeros``, stored even when symmetric), ``int{b}-g{G}-sym`` the scale only
#: (compressed-tensors ``symmetric``). They compute in 16-bit: the kernels dequantise.
for _bits in (4, 8):
    for _g in (32, 64, 128):
        DTYPE_BYTES[f"int{_bits}-g{_g}"] = (_bits + (16 + _bits) / _g) / 8
        DTYPE_BYTES[f"int{_bits}-g{_g}-sym"] = (_bits + 16 / _g) / 8
WEIGHT_ONLY = tuple(k for k in DTYPE_BYTES if k.startswith("int") and "-g" in k)

def check_dtype(dtype: str) -> str:
    """``dtype`` if it is a precision costsim knows, else a one-line :class:`ProfileError`."""
    if dtype not in DTYPE_BYTES:
        raise ProfileError(f"unknown precision {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return dtype


#: GPU families an engine's achieved fractions are given for (``Device.family``).
FAMILIES = ("ampere", "ada", "hopper", "blackwell", "cdna3")
#: How an engine picks its share of a GPU's memory (:func:`costsim.memory.memory_fraction`).
MEMORY_RULES = ("", "sglang-0.5", "free-after-weights")
#: The engine fields its ``families`` tables may set per device family or device.
PER_DEVICE = ("bandwidth_fraction", "flops_fraction", "max_batched_tokens", "max_seqs", "reserve_gb")


class ProfileError(ValueError):
    """A profile that cannot be found or does not validate; the message is one line."""


@dataclass(frozen=True)
class Device:
    """One accelerator: datasheet peaks only. What a serving engine achieves of them is the
    engine's (:class:`Engine`), per device ``family``."""

    name: str
    display_name: str
    memory_gb: float
    hbm_bandwidth_gb_per_s: float
    bf16_dense_tflops: float
    source: str
    fp8_dense_tflops: float | None = None
    interconnect: str = ""
    interconnect_bandwidth_gb_per_s: float = 0.0
    gpus_per_node: int = 8            # the GPUs one interconnect domain (a node) joins
    internode_bandwidth_gb_per_s: float = 0.0  # GB/s per GPU, both directions, between nodes (its NIC)
    internode_latency_us: float = 0.0  # one small all-reduce or all-to-all across nodes, µs
    family: str = "hopper"
    usd_per_gpu_hour: float | None = None
    price_date: str = ""              # when that price was read: YYYY-MM-DD or YYYY-MM
    memory_reported_mib: float | None = None
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def memory_bytes(self) -> float:
        """Bytes of one GPU's memory as the driver reports them (NVML's total, what vLLM's
        ``gpu_memory_utilization`` is a fraction of): ``memory_reported_mib`` MiB where the
        profile has a reading, else the datasheet's ``memory_gb`` read as 10^9 bytes (the
        smaller reading: HBM parts report about 7% more)."""
        if self.memory_reported_mib:
            return self.memory_reported_mib * 2.0**20
        return self.memory_gb * 1e9

    @property
    def price_source(self) -> str:
        """Where the price per GPU-hour comes from ('' without a price)."""
        if self.usd_per_gpu_hour is None:
            return ""
        return str(self.sources.get("usd_per_gpu_hour", self.source))

    def can_span(self, n: int) -> bool:
        """Whether one replica can span ``n`` of these GPUs: within a node (``gpus_per_node``),
        or across nodes where the profile has the network to cost its collectives on."""
        return n <= self.gpus_per_node or (self.internode_bandwidth_gb_per_s > 0 and self.internode_latency_us > 0)

    def cannot_run(self, dtype: str) -> str:
        """Why this device cannot run weights in ``dtype`` ('' if it can). FP8 and MXFP4 run
        everywhere (weight-only kernels, BF16 compute, where a part lacks the tensor format:
        vLLM's Marlin); NVFP4 and FP4 need Blackwell's FP4 tensor cores."""
        if dtype in ("nvfp4", "fp4") and self.family != "blackwell":
            return f"{dtype} needs FP4 tensor cores (Blackwell); {self.name} is {self.family}"
        return ""

    def dense_tflops(self, dtype: str = "bf16") -> float:
        """Peak dense tensor TFLOPS for compute in ``dtype`` (fp8 falls back to bf16 if absent)."""
        if dtype == "fp8" and self.fp8_dense_tflops:
            return self.fp8_dense_tflops
        return self.bf16_dense_tflops


@dataclass(frozen=True)
class ApiEndpoint:
    """A hosted model behind an API: prices in USD per million tokens, typical speeds."""

    name: str
    display_name: str
    model: str
    provider: str
    price_input_per_mtok_usd: float
    price_cached_input_per_mtok_usd: float
    price_output_per_mtok_usd: float
    source: str
    date: str
    ttft_s: float | None = None
    output_tokens_per_s: float | None = None
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Engine:
    """A serving engine: what the datasheets do not say about an engine iteration.

    - ``iteration_overhead_ms``: fixed time of every iteration (scheduling, sampling, input
      preparation), CUDA graphs on.
    - ``layer_latency_us``: fixed kernel time of one transformer layer (launch gaps, small
      kernels, pipeline fill) on top of its bytes and FLOPs; ``moe_layer_latency_us`` the extra of
      an MoE layer (router top-k, token permutation, grouped-GEMM launch) with its experts whole
      on one GPU, ``moe_tp_layer_latency_us`` with them tensor-sharded over several,
      ``moe_ep_layer_latency_us`` with them placed whole over several (expert parallel): each
      engine runs different kernels in the three.
    - ``request_overhead_ms``: per request outside the iterations (HTTP, tokenisation, the
      scheduler's admission), paid once in the time to first token.
    - ``allreduce_latency_us`` / ``alltoall_latency_us``: one collective of a small message, by
      the number of GPUs (string keys "2", "4", "8"; interpolated in log2 between them).
    - ``bandwidth_fraction`` / ``flops_fraction``: achieved fractions of peak HBM bandwidth
      (decode) and of dense tensor peak (prefill); ``families`` overrides them per device family
      or per device (a profile name). ``int4_bandwidth_fraction``: the bandwidth its 4-bit
      weight-only kernels reach (vLLM's Marlin and Machete dequantise as they read), where it
      is known; 0: ``bandwidth_fraction``.
    - ``max_batched_tokens``: the token budget of one iteration (chunked prefill);
      ``max_seqs``: the most sequences running at once (vLLM's ``max_num_seqs``). Both are
      the engine's defaults, and ``families`` may set them per device (vLLM's depend on the
      GPU's memory).
    - ``memory_utilization``: the share of each GPU's memory the engine takes (weights, reserve,
      KV pool); ``reserve_gb``: of it, per GPU, what activations, CUDA graphs and communication
      buffers keep from the KV pool (``families`` may set it per device); ``memory_rule``: how the engine picks its share by default
      where it is not one number ('sglang-0.5', 'free-after-weights'; :func:`costsim.memory.memory_fraction`).
    - ``prefix_caching``: whether the engine, by default, keeps finished sequences' KV in the pool
      for later requests that share their prefix (vLLM's automatic prefix caching, SGLang's radix
      cache, TensorRT-LLM's block reuse); ``kv_block_tokens``: the tokens of one KV block, the
      unit in which a cached prefix is evicted from its tail (0: a prefix is evicted whole).
      The simulator's "evict" prefix cache reads both (:mod:`costsim.sim.replica`).
    """

    name: str
    display_name: str
    version: str
    source: str
    iteration_overhead_ms: float
    layer_latency_us: float
    bandwidth_fraction: float
    flops_fraction: float
    moe_layer_latency_us: float = 0.0
    moe_tp_layer_latency_us: float = 0.0
    moe_ep_layer_latency_us: float = 0.0
    int4_bandwidth_fraction: float = 0.0
    request_overhead_ms: float = 0.0
    # Tables take part in equality (the roofline's cache tells engines apart by it), not in the hash.
    allreduce_latency_us: dict = field(default_factory=dict, hash=False)
    alltoall_latency_us: dict = field(default_factory=dict, hash=False)
    families: dict = field(default_factory=dict, hash=False)
    max_batched_tokens: int = SCHEDULER.max_batched_tokens
    max_seqs: int = SCHEDULER.max_seqs
    memory_utilization: float = 0.9
    reserve_gb: float = 4.0
    memory_rule: str = ""
    prefix_caching: bool = True
    kv_block_tokens: int = 16
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    def fraction(self, kind: str, device: "Device") -> float:
        """``kind`` ('bandwidth_fraction' or 'flops_fraction') on ``device``: its own entry, else
        its family's, else the engine's."""
        return float(self.setting(kind, device))

    def setting(self, kind: str, device: "Device"):
        """A field that ``families`` may set per device (:data:`PER_DEVICE`) on ``device``: its
        own entry, else its family's, else the engine's."""
        for key in (device.name, device.family):
            if kind in self.families.get(key, {}):
                return self.families[key][kind]
        return getattr(self, kind)

    def collective_us(self, kind: str, gpus: int) -> float:
        """Latency (µs) of one all-reduce or all-to-all (``kind``) over ``gpus`` GPUs: the table's
        value, interpolated in log2(gpus) between its entries and held flat beyond them."""
        if gpus <= 1:
            return 0.0
        table = sorted((int(k), float(v)) for k, v in getattr(self, f"{kind}_latency_us").items())
        if not table:
            return 0.0
        xs = [math.log2(n) for n, _ in table]
        x = min(max(math.log2(gpus), xs[0]), xs[-1])
        for (x0, (_, y0)), (x1, (_, y1)) in zip(zip(xs, table), zip(xs[1:], table[1:])):
            if x <= x1:
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
        return table[-1][1]


@dataclass(frozen=True)
class ModelSpec:
    """A transformer's architecture, as far as cost is concerned.

    Layers by what they keep per sequence:
    - ``kv_layers`` keep a KV cache that grows with the context (full attention). With
      ``kv_lora_rank`` > 0 the cache is MLA's latent, ``kv_lora_rank + qk_rope_head_dim``
      values a token and layer, shared by all heads.
    - ``sliding_layers`` attend within ``sliding_window`` tokens: a bounded cache a sequence.
    - ``linear_layers`` (Gated DeltaNet, Mamba) keep a recurrent state of
      ``linear_state_elements`` values a sequence, read and written every iteration.

    For MoE models the routed-expert parameters are derived from total and active counts: per
    MoE layer and expert, (total - active) / (moe_layers · (num_experts - experts_per_token)).
    ``expert_dtype`` is the routed experts' own precision where a checkpoint ships them apart
    (gpt-oss: MXFP4 experts, BF16 attention); empty means the deployment's weight precision.
    ``head_16bit``: the embedding table(s) and the output head stay in 16-bit whatever the weights'
    precision, as quantized checkpoints keep them (AWQ, GPTQ and compressed-tensors leave
    ``lm_head`` out; DeepSeek's FP8 checkpoint keeps it in BF16).
    """

    name: str
    display_name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    total_params_b: float
    active_params_b: float
    source: str
    vocab_size: int = 0
    tie_word_embeddings: bool = False
    kv_layers: int | None = None
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    sliding_layers: int = 0
    sliding_window: int = 0
    linear_layers: int = 0
    linear_state_elements: float = 0.0
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    moe_layers: int | None = None
    default_dtype: str = "bf16"
    expert_dtype: str = ""
    head_16bit: bool = False
    hf_id: str = ""
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.experts_per_token > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def n_kv_layers(self) -> int:
        return self.num_layers - self.sliding_layers - self.linear_layers if self.kv_layers is None else self.kv_layers

    @property
    def n_moe_layers(self) -> int:
        return self.num_layers if self.moe_layers is None else self.moe_layers

    @property
    def expert_params(self) -> float:
        """Parameters of one routed expert in one MoE layer (0 for dense models)."""
        if not self.is_moe:
            return 0.0
        routed_inactive = (self.total_params_b - self.active_params_b) * 1e9
        return routed_inactive / (self.n_moe_layers * (self.num_experts - self.experts_per_token))

    @property
    def routed_params(self) -> float:
        """Parameters of all routed experts over all MoE layers (0 for dense models)."""
        return self.n_moe_layers * self.num_experts * self.expert_params if self.is_moe else 0.0

    @property
    def always_active_params(self) -> float:
        """Parameters every token touches: attention, embeddings, dense and shared experts."""
        return self.active_params_b * 1e9 - self.n_moe_layers * self.experts_per_token * self.expert_params

    @property
    def head_params(self) -> float:
        """The embedding table and output head (one table where they are tied)."""
        return float(self.vocab_size * self.hidden_size) * (1 if self.tie_word_embeddings else 2)

    @property
    def input_embedding_params(self) -> float:
        """The input embedding table when it is not tied to the output head: an iteration reads
        one row of it per token, not the table (a tied table is read whole as the head)."""
        return 0.0 if self.tie_word_embeddings else float(self.vocab_size * self.hidden_size)

    def kv_heads_stored(self, tp: int = 1) -> int:
        """KV heads held over ``tp`` tensor-parallel ranks: each rank needs at least one, so
        past tp = num_kv_heads they are replicated; MLA's one latent lives on every rank."""
        if self.is_mla:
            return tp
        return max(self.num_kv_heads, tp) if self.num_kv_heads else 0

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", tp: int = 1) -> float:
        """Bytes of cache one token adds over all context-growing layers and all ``tp`` ranks."""
        per_head = (self.kv_lora_rank + self.qk_rope_head_dim) if self.is_mla else 2.0 * self.head_dim
        return self.n_kv_layers * self.kv_heads_stored(tp) * per_head * DTYPE_BYTES[kv_dtype]

    def state_parts(self, kv_dtype: str = "bf16", state_dtype: str = "bf16", tp: int = 1) -> tuple[float, float]:
        """Bytes a sequence holds whatever its context: ``(recurrent state of the linear
        layers, full sliding windows)``, over all ``tp`` ranks."""
        state = self.linear_layers * self.linear_state_elements * DTYPE_BYTES[state_dtype]
        window = (self.sliding_layers * self.sliding_window * self.kv_heads_stored(tp)
                  * 2.0 * self.head_dim * DTYPE_BYTES[kv_dtype])
        return state, window

    def sequence_traffic_bytes(self, kv_dtype: str = "bf16", state_dtype: str = "bf16", tp: int = 1) -> float:
        """Bytes an iteration moves per sequence whatever its context: the recurrent state read
        and written, the sliding windows read."""
        state, window = self.state_parts(kv_dtype, state_dtype, tp)
        return 2.0 * state + window


def shown(v) -> str:
    """``v`` for a one-line message: a huge integer by its size (its digits may be past what
    ``str`` converts), anything else by a shortened repr."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**18:
        return f"{'a negative' if v < 0 else 'an'} integer of {int(abs(v).bit_length() * math.log10(2)) + 1} digits or so"
    return reprlib.repr(v)


class Bound(NamedTuple):
    """The range of a numeric profile field: ``lo`` to ``hi``, and 0 as well where ``zero`` (0
    meaning none: no link, no fixed latency, free). ``why``: the physics or datasheets behind it.
    A lower bound above 0 keeps out subnormal numbers (5e-324), whose quotients overflow."""

    lo: float
    hi: float
    why: str
    zero: bool = False

    def problem(self, name: str, v) -> str:
        """'' if the number ``v`` is in range, else one line naming ``name`` and the range."""
        if (v == 0 and self.zero) or self.lo <= v <= self.hi:  # NaN is neither
            return ""
        need = "a finite number >= 0, " if not v >= 0 or v == math.inf else "> 0, " if v == 0 else ""
        return (f"{name} must be {need}{'0 or ' if self.zero else ''}in [{self.lo:g}, {self.hi:g}] ({self.why}), "
                f"got {shown(v)}")


def _or_zero(b: Bound, none: str) -> Bound:
    return Bound(b.lo, b.hi, f"{b.why}; 0: {none}", zero=True)


_LAYERS = Bound(1, 1e4, "layers: the deepest published models have ~10^2 (Llama-3.1-405B: 126); 10^4 is past any")
_WIDTH = Bound(1, 1e6, "values across a layer (hidden, head, FFN, rank): the published reach ~10^4 (hidden 16,384, "
                       "FFN 53,248); 10^6 is past any")
_HEADS = Bound(1, 1e4, "heads of a layer: the published have up to ~10^2 (128); 10^4 is past any")
_EXPERTS = Bound(1, 1e5, "experts of an MoE layer: the published have up to ~10^3 (512); 10^5 is past any")
_PARAMS_B = Bound(1e-9, 1e5, "billions of parameters: from one parameter to 10^5 B (the largest published have ~10^3 B)")
_TOKENS = Bound(1, 1e8, "tokens: up to 10^8, past any context window (the longest published ~10^7)")
_TFLOPS = Bound(0.01, 1e12, "dense TFLOPS of one GPU: from 10 GFLOPS (a CPU core); datasheets reach ~10^4 (B300: 4,500 "
                            "FP8), and up to 10^12 takes the idealised device of the paper's pass counting, whose "
                            "compute is free")
_LINK = Bound(0.1, 1e5, "GB/s per GPU, both directions: from 0.1 (a slow network) to 100 TB/s (NVLink 5: 1,800)", True)
_GPUS = Bound(1, 1e5, "GPUs: an NVLink domain joins 8 to 576; 10^5 is a whole data centre")
_LATENCY_US = Bound(1e-3, 1e7, "a fixed latency, µs: from a nanosecond to 10 s, past any kernel, collective or "
                               "network hop (µs to ms); 0: none", True)
_LATENCY_MS = Bound(1e-6, 1e4, _LATENCY_US.why.replace("µs", "ms"), True)
_FRACTION = Bound(0.01, 1.0, "an achieved share of the datasheet peak, so it must be in (0, 1]; under 1% no engine "
                             "runs (a misread unit)")
_USD_PER_MTOK = Bound(1e-6, 1e4, "USD per million tokens: from 10^-6 to 10^4 (a cent a token); published prices are "
                                 "10^-3 to 10^2; 0: free", True)

#: The range of every numeric field of every profile kind, declared once with its reason: :func:`build`
#: applies it to the fields, to an engine's per-device ``families`` values and to its collective
#: tables' values; :mod:`.hf_config` to a config.json's sizes before it builds anything from them.
BOUNDS: dict[tuple[type, str], Bound] = {
    (Device, "memory_gb"): Bound(0.1, 1e6, "GB of one GPU's memory: from 0.1; datasheets give 16 to 288, and up to "
                                           "10^6 takes the paper's idealised device that holds any model"),
    (Device, "memory_reported_mib"): Bound(64, 1e9, "MiB of one GPU's memory as the driver reports it: memory_gb's "
                                                    "range, in MiB"),
    (Device, "hbm_bandwidth_gb_per_s"): Bound(1, 1e5, "a GPU's memory moves between 1 GB/s and 100 TB/s (datasheets: "
                                                      "300 to 8,000)"),
    (Device, "bf16_dense_tflops"): _TFLOPS,
    (Device, "fp8_dense_tflops"): _TFLOPS,
    (Device, "interconnect_bandwidth_gb_per_s"): _or_zero(_LINK, "no link in the profile"),
    (Device, "internode_bandwidth_gb_per_s"): _or_zero(_LINK, "no network in the profile"),
    (Device, "gpus_per_node"): _GPUS,
    (Device, "internode_latency_us"): _LATENCY_US,
    (Device, "usd_per_gpu_hour"): Bound(0.01, MAX_USD_PER_GPU_HOUR, "USD per GPU-hour, which divides: from a cent to "
                                                                    "10^4, as every price flag (rentals run 0.3 to 10)"),
    (ApiEndpoint, "price_input_per_mtok_usd"): _USD_PER_MTOK,
    (ApiEndpoint, "price_cached_input_per_mtok_usd"): _USD_PER_MTOK,
    (ApiEndpoint, "price_output_per_mtok_usd"): _USD_PER_MTOK,
    (ApiEndpoint, "ttft_s"): Bound(1e-6, 1e4, "seconds to a first token: from a microsecond to ~3 hours (APIs take "
                                              "0.1 to 10 s); 0: none", True),
    (ApiEndpoint, "output_tokens_per_s"): Bound(0.01, 1e6, "tokens a second of one stream, which divides: APIs stream "
                                                          "10 to 10^3; 10^6 is past any"),
    (Engine, "iteration_overhead_ms"): _LATENCY_MS,
    (Engine, "request_overhead_ms"): _LATENCY_MS,
    (Engine, "layer_latency_us"): _LATENCY_US,
    (Engine, "moe_layer_latency_us"): _LATENCY_US,
    (Engine, "moe_tp_layer_latency_us"): _LATENCY_US,
    (Engine, "moe_ep_layer_latency_us"): _LATENCY_US,
    (Engine, "allreduce_latency_us"): _LATENCY_US,  # the values of the table
    (Engine, "alltoall_latency_us"): _LATENCY_US,
    (Engine, "bandwidth_fraction"): _FRACTION,
    (Engine, "flops_fraction"): _FRACTION,
    (Engine, "int4_bandwidth_fraction"): _or_zero(_FRACTION, "bandwidth_fraction's"),
    (Engine, "max_batched_tokens"): _TOKENS,
    (Engine, "max_seqs"): Bound(1, 1e6, "sequences one replica runs at once: engines default to 256 to 2,048; 10^6 is "
                                        "past any KV pool"),
    (Engine, "memory_utilization"): Bound(0.01, 1.0, "a share of each GPU's memory, so it must be in (0, 1]; under 1% "
                                                     "holds no model"),
    (Engine, "reserve_gb"): Bound(1e-3, 1e6, "GB of each GPU kept from the KV pool: from a MB to memory_gb's most; "
                                             "0: none", True),
    (Engine, "kv_block_tokens"): Bound(1, 1e6, "tokens of one KV block: engines use 1 (SGLang's pages) to a few hundred "
                                               "(vLLM's hybrid-model blocks); 10^6 is past any; 0: a cached prefix is "
                                               "evicted whole", True),
    (ModelSpec, "num_layers"): _LAYERS,
    (ModelSpec, "hidden_size"): _WIDTH,
    (ModelSpec, "num_attention_heads"): _HEADS,
    (ModelSpec, "num_kv_heads"): _or_zero(_HEADS, "no KV cache"),
    (ModelSpec, "head_dim"): _WIDTH,
    (ModelSpec, "total_params_b"): _PARAMS_B,
    (ModelSpec, "active_params_b"): _PARAMS_B,
    (ModelSpec, "vocab_size"): Bound(1, 1e7, "tokens of a vocabulary: the published have 3*10^4 to 3*10^5; 10^7 is "
                                             "past any; 0: no embeddings counted", True),
    (ModelSpec, "kv_layers"): _or_zero(_LAYERS, "none"),
    (ModelSpec, "kv_lora_rank"): _or_zero(_WIDTH, "no MLA"),
    (ModelSpec, "qk_rope_head_dim"): _or_zero(_WIDTH, "no MLA"),
    (ModelSpec, "sliding_layers"): _or_zero(_LAYERS, "none"),
    (ModelSpec, "sliding_window"): _or_zero(_TOKENS, "no window"),
    (ModelSpec, "linear_layers"): _or_zero(_LAYERS, "none"),
    (ModelSpec, "linear_state_elements"): Bound(1, 1e10, "values of one linear layer's recurrent state a sequence: "
                                                         "Qwen3.5 keeps ~10^6; 10^10 (20 GB in BF16) is past any; 0: "
                                                         "none", True),
    (ModelSpec, "num_experts"): _or_zero(_EXPERTS, "a dense model"),
    (ModelSpec, "experts_per_token"): _or_zero(_EXPERTS, "a dense model"),
    (ModelSpec, "num_shared_experts"): _or_zero(_EXPERTS, "none"),
    (ModelSpec, "moe_layers"): _or_zero(_LAYERS, "none"),
}
#: The GPU counts an engine's collective-latency tables are keyed by (ASCII digits).
COLLECTIVE_GPUS = Bound(2, _GPUS.hi, f"a collective spans 2 GPUs or more (one GPU has none); {_GPUS.why}")
#: How deep a profile's tables and lists may nest (``families.<device>.<field>`` is 2; sources' 1).
MAX_NESTING = 8


def _kind(f) -> str:
    """A field's annotation, its first word: 'str', 'int', 'float', 'dict', 'tuple[str,', ..."""
    return str(f.type).split(" ")[0]


#: A profile field's annotation (its first word) -> the TOML values it takes, and their name.
_FIELD_KINDS = {"str": (str, "a string"), "bool": (bool, "true or false"), "dict": (dict, "a table"),
          "tuple[str,": ((list, tuple), "a list of strings")}


#: Profile fields renamed (old -> new), read under the old name for one release with a warning:
#: "gbps" reads as gigabits per second, and these hold gigabytes per second; a price is per GPU-hour,
#: as every command's JSON names it.
RENAMED_FIELDS = {"hbm_bandwidth_gbps": "hbm_bandwidth_gb_per_s", "interconnect_bandwidth_gbps": "interconnect_bandwidth_gb_per_s",
                  "internode_bandwidth_gbps": "internode_bandwidth_gb_per_s", "price_per_hour_usd": "usd_per_gpu_hour"}


def _key(k) -> str:
    """A TOML key for a one-line message: bare where it can be, else quoted and shortened."""
    return k if isinstance(k, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", k) else shown(k)


def _iso(v, where: str, depth: int = 0):
    """``v`` with TOML's bare dates and times, at any depth, as their ISO text (JSON has no date),
    refused where tables or lists nest past :data:`MAX_NESTING`."""
    if isinstance(v, (_dt.date, _dt.time)):  # a datetime is a date
        return v.isoformat()
    if isinstance(v, (dict, list)) and depth >= MAX_NESTING:
        raise ProfileError(f"{where} nests tables or lists more than {MAX_NESTING} deep")
    if isinstance(v, dict):
        return {k: _iso(x, where, depth + 1) for k, x in v.items()}
    return [_iso(x, where, depth + 1) for x in v] if isinstance(v, list) else v


def _number(cls, name: str, v, origin: str, label: str = ""):
    """``v`` as the numeric field ``name`` of ``cls``: a number within its :data:`BOUNDS`, whole
    where the field is an int (then returned as one); else a one-line ProfileError naming
    ``origin`` and ``label`` (default ``name``)."""
    label = label or name
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ProfileError(f"{origin}: {label} must be a number, got {shown(v)}")
    problem = BOUNDS[cls, name].problem(label, v)
    if problem:
        raise ProfileError(f"{origin}: {problem}")
    if _kind(next(f for f in fields(cls) if f.name == name)) == "int":
        if v != int(v):
            raise ProfileError(f"{origin}: {label} must be a whole number, got {shown(v)}")
        return int(v)
    return v


def build(cls, data: dict, origin: str):
    """A profile of ``cls`` from a parsed table, validated (ProfileError, one line naming ``origin``)."""
    known = {f.name for f in fields(cls)}
    data = {k: _iso(v, f"{origin}: {_key(k)}") for k, v in data.items()}
    for old, new in RENAMED_FIELDS.items():
        if old in data and new in known:
            if new in data:
                raise ProfileError(f"{origin}: {old} and {new} are one field (its old and new name): give {new} only")
            import warnings

            warnings.warn(f"{origin}: {old} is deprecated: name it {new} (the same value; the old name goes in the next "
                          "release)", FutureWarning, stacklevel=2)
            data[new] = data.pop(old)
        if isinstance(data.get("sources"), dict) and old in data["sources"]:
            data["sources"] = {RENAMED_FIELDS.get(k, k): v for k, v in data["sources"].items()}
    # Required: the fields without a default (in declaration order).
    missing = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
               and f.name not in data]
    if missing:
        raise ProfileError(f"{origin}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{origin}: unknown field(s) {', '.join(map(_key, unknown))}")
    for f in fields(cls):
        v, kind = data.get(f.name), _kind(f)
        if v is None:
            continue
        if kind in ("int", "float"):
            data[f.name] = _number(cls, f.name, v, origin)
            continue
        types, want = _FIELD_KINDS.get(kind, (None, ""))  # a word, names, a table, a flag
        if types and not (isinstance(v, types) and (kind != "tuple[str," or all(isinstance(x, str) for x in v))):
            raise ProfileError(f"{origin}: {f.name} must be {want}, got {shown(v)}")
        if cls is Engine and f.name.endswith("_latency_us"):  # GPU count -> µs
            for k, x in v.items():
                n = str(k)
                if not (re.fullmatch(r"[0-9]{1,6}", n) and COLLECTIVE_GPUS.lo <= int(n) <= COLLECTIVE_GPUS.hi):
                    raise ProfileError(f"{origin}: {f.name} maps GPU counts >= 2 (ASCII digits, at most "
                                       f"{COLLECTIVE_GPUS.hi:g}) to microseconds, got the key {shown(k)}")
                v[k] = _number(cls, f.name, x, origin, f'{f.name}."{n}"')
        if cls is Engine and f.name == "families":
            for fam, over in v.items():
                if not isinstance(over, dict) or not over or not set(over) <= set(PER_DEVICE):
                    raise ProfileError(f"{origin}: [families.{_key(fam)}] (a device family, {', '.join(FAMILIES)}, "
                                       f"or a device profile name) sets some of {', '.join(PER_DEVICE)}")
                for k, x in over.items():
                    over[k] = _number(cls, k, x, origin, f"[families.{_key(fam)}] {k}")
    data["aliases"] = tuple(data.get("aliases", ()))
    obj = cls(**data)
    problem = _model_problem(obj) if isinstance(obj, ModelSpec) else ""
    if problem:
        raise ProfileError(f"{origin}: {problem}")
    if isinstance(obj, ModelSpec):
        for k in ("default_dtype", "expert_dtype"):
            if getattr(obj, k) and getattr(obj, k) not in DTYPE_BYTES:
                raise ProfileError(f"{origin}: {k} must be one of {', '.join(DTYPE_BYTES)}")
    if isinstance(obj, Device) and obj.family not in FAMILIES:
        raise ProfileError(f"{origin}: family must be one of {', '.join(FAMILIES)}")
    if isinstance(obj, Device) and obj.price_date:
        try:
            _dt.date.fromisoformat(obj.price_date if len(obj.price_date) == 10 else obj.price_date + "-01")
        except ValueError:
            raise ProfileError(f"{origin}: price_date must be YYYY-MM-DD or YYYY-MM, got {shown(obj.price_date)}") from None
    if isinstance(obj, Engine) and obj.memory_rule not in MEMORY_RULES:
        raise ProfileError(f"{origin}: memory_rule must be one of {', '.join(map(repr, MEMORY_RULES))}")
    return obj


def _model_problem(m: ModelSpec) -> str:
    """'' if a model's fields agree with one another, else what does not (one line): parts
    that cannot exceed their whole, and what divides."""
    if m.active_params_b > m.total_params_b:
        return "active_params_b exceeds total_params_b"
    if m.num_kv_heads > m.num_attention_heads:
        return f"num_kv_heads ({m.num_kv_heads}) must be at most num_attention_heads ({m.num_attention_heads})"
    kv = f" + kv_layers ({m.kv_layers})" if m.kv_layers is not None else ""
    if m.n_kv_layers < 0 or m.n_kv_layers + m.sliding_layers + m.linear_layers > m.num_layers:
        return (f"sliding_layers ({m.sliding_layers}) + linear_layers ({m.linear_layers}){kv} must be at most num_layers "
                f"({m.num_layers})")
    if m.n_moe_layers > m.num_layers:
        return f"moe_layers ({m.moe_layers}) must be at most num_layers ({m.num_layers})"
    if m.is_moe and m.experts_per_token >= m.num_experts:
        return "experts_per_token must be below num_experts"
    if m.is_moe and m.n_moe_layers < 1:
        return ("moe_layers must be >= 1 where num_experts and experts_per_token are set (the routed experts live in "
                "those layers); a dense model has num_experts = 0")
    if m.head_params > m.always_active_params:  # else the bytes an iteration reads come out negative
        tied = "once: tie_word_embeddings" if m.tie_word_embeddings else "twice: not tied"
        touched = ("active_params_b less its experts_per_token routed experts in each of moe_layers layers, "
                   "(total_params_b - active_params_b) / (moe_layers x (num_experts - experts_per_token)) parameters "
                   "each" if m.is_moe else "active_params_b")
        return (f"the embeddings and head, vocab_size ({m.vocab_size}) x hidden_size ({m.hidden_size}) {tied}, "
                f"{m.head_params / 1e9:.4g} B parameters, exceed the {m.always_active_params / 1e9:.4g} B every token "
                f"touches ({touched})")
    return ""


def slug(name: str) -> str:
    """A profile name as looked up: lower case, dashes for spaces and underscores."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def weight_bytes(model: ModelSpec, weight_dtype: str = "bf16", expert_dtype: str = "") -> float:
    """Bytes of all weights: routed experts in ``expert_dtype`` (default: the model's own expert
    precision, else ``weight_dtype``), the embeddings and head in BF16 where the checkpoint
    keeps them so (``head_16bit``), everything else in ``weight_dtype``."""
    routed = model.routed_params
    b_exp = DTYPE_BYTES[expert_dtype or model.expert_dtype or weight_dtype]
    head = model.head_params if model.head_16bit else 0.0
    return ((model.total_params_b * 1e9 - routed - head) * DTYPE_BYTES[weight_dtype] + routed * b_exp
            + head * DTYPE_BYTES["bf16"])

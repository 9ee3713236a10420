"""Hardware, API and model profiles: TOML data loaded into frozen dataclasses.

Every numeric field carries its unit in its name. Memory bandwidth ``*_gbps`` is in gigaBYTES
per second (10^9 B/s), as datasheets print it; ``*_tflops`` are dense (not 2:4-sparse) tensor
TFLOPS; ``*_gb`` are 10^9 bytes; ``*_b`` parameter counts are in billions. Each profile file
carries a ``source`` line and a ``[sources]`` table naming where each figure comes from.

Profiles ship inside the package (``costsim/data/hardware``, ``.../models``) and are found by
name (case-insensitive, with aliases) or by path: ``--strong path/to/config.json`` accepts a
Hugging Face ``config.json`` as-is.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import tomllib
from dataclasses import MISSING, dataclass, field, fields
from functools import cache
from pathlib import Path

from .config import DEPLOYMENTS
from .resources import data_dir, read_text

#: Bytes per stored element. The 4-bit block formats carry their scales: MXFP4 one 8-bit scale per
#: 32 values (OCP Microscaling spec v1.0), NVFP4 one FP8 scale per 16 (NVIDIA Blackwell docs),
#: GGML Q4_0 one FP16 scale per 32 (18-byte blocks, ggml-common.h block_q4_0).
DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5,
               "mxfp4": 4.25 / 8, "nvfp4": 4.5 / 8, "q4_0": 4.5 / 8}

def check_dtype(dtype: str) -> str:
    """``dtype`` if it is a precision costsim knows, else a one-line :class:`ProfileError`."""
    if dtype not in DTYPE_BYTES:
        raise ProfileError(f"unknown precision {dtype!r}; known: {', '.join(DTYPE_BYTES)}")
    return dtype


#: GPU families an engine's achieved fractions are given for (``Device.family``).
FAMILIES = ("ampere", "ada", "hopper", "blackwell")


class ProfileError(ValueError):
    """A profile that cannot be found or does not validate; the message is one line."""


@dataclass(frozen=True)
class Device:
    """One accelerator: datasheet peaks only. What a serving engine achieves of them is the
    engine's (:class:`Engine`), per device ``family``."""

    name: str
    display_name: str
    memory_gb: float
    hbm_bandwidth_gbps: float
    bf16_dense_tflops: float
    source: str
    fp8_dense_tflops: float | None = None
    interconnect: str = ""
    interconnect_bandwidth_gbps: float = 0.0
    family: str = "hopper"
    price_per_hour_usd: float | None = None
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
        if self.price_per_hour_usd is None:
            return ""
        return str(self.sources.get("price_per_hour_usd", self.source))

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
      an MoE layer (router top-k, token permutation, grouped-GEMM launch).
    - ``request_overhead_ms``: per request outside the iterations (HTTP, tokenisation, the
      scheduler's admission), paid once in the time to first token.
    - ``allreduce_latency_us`` / ``alltoall_latency_us``: one collective of a small message, by
      the number of GPUs (string keys "2", "4", "8"; interpolated in log2 between them).
    - ``bandwidth_fraction`` / ``flops_fraction``: achieved fractions of peak HBM bandwidth
      (decode) and of dense tensor peak (prefill); ``families`` overrides them per device family
      or per device (a profile name).
    - ``max_batched_tokens``: the token budget of one iteration (chunked prefill).
    - ``memory_utilization``: the share of each GPU's memory the engine takes (weights, reserve,
      KV pool); ``reserve_gb``: of it, per GPU, what activations, CUDA graphs and communication
      buffers keep from the KV pool (:mod:`costsim.memory`).
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
    request_overhead_ms: float = 0.0
    # Tables take part in equality (the roofline's cache tells engines apart by it), not in the hash.
    allreduce_latency_us: dict = field(default_factory=dict, hash=False)
    alltoall_latency_us: dict = field(default_factory=dict, hash=False)
    families: dict = field(default_factory=dict, hash=False)
    max_batched_tokens: int = 8192
    memory_utilization: float = 0.9
    reserve_gb: float = 4.0
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    def fraction(self, kind: str, device: "Device") -> float:
        """``kind`` ('bandwidth_fraction' or 'flops_fraction') on ``device``: its own entry, else
        its family's, else the engine's."""
        for key in (device.name, device.family):
            if kind in self.families.get(key, {}):
                return float(self.families[key][kind])
        return float(getattr(self, kind))

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


#: Fields that must be > 0, not only >= 0: a rate or a size that divides.
_POSITIVE = {
    Device: ("memory_gb", "hbm_bandwidth_gbps", "bf16_dense_tflops", "memory_reported_mib"),
    ModelSpec: ("num_layers", "hidden_size", "num_attention_heads", "head_dim", "total_params_b", "active_params_b"),
    Engine: ("bandwidth_fraction", "flops_fraction", "max_batched_tokens"),
}


#: A profile field's annotation (its first word) -> the TOML values it takes, and their name.
_FIELD_KINDS = {"str": (str, "a string"), "bool": (bool, "true or false"), "dict": (dict, "a table"),
          "tuple[str,": ((list, tuple), "a list of strings")}


def _build(cls, data: dict, origin: str):
    known = {f.name for f in fields(cls)}
    # Required: the fields without a default (in declaration order).
    missing = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING
               and f.name not in data]
    if missing:
        raise ProfileError(f"{origin}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{origin}: unknown field(s) {', '.join(unknown)}")
    data = dict(data)
    for f in fields(cls):  # the kinds that are not numbers: a word, names, a table, a flag
        v, kind = data.get(f.name), str(f.type).split(" ")[0]
        if kind == "str" and isinstance(v, (_dt.date, _dt.time)):  # TOML's bare date = 2026-08-01
            v = data[f.name] = v.isoformat()
        types, want = _FIELD_KINDS.get(kind, (None, ""))
        if v is not None and types and not (isinstance(v, types) and (
                kind != "tuple[str," or all(isinstance(x, str) for x in v))):
            raise ProfileError(f"{origin}: {f.name} must be {want}, got {v!r}")
    data["aliases"] = tuple(data.get("aliases", ()))
    for f in fields(cls):
        v = data.get(f.name)
        numeric = str(f.type).split(" ")[0] in ("float", "int")
        if v is not None and numeric and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ProfileError(f"{origin}: {f.name} must be a number, got {v!r}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if not math.isfinite(v) or v < 0:
                raise ProfileError(f"{origin}: {f.name} must be a finite number >= 0, got {v}")
            if v == 0 and f.name in _POSITIVE.get(cls, ()):
                raise ProfileError(f"{origin}: {f.name} must be > 0, got {v}")
        if isinstance(v, dict) and f.name.endswith("_latency_us"):
            for k, x in v.items():
                if not (str(k).isdigit() and int(k) >= 2 and isinstance(x, (int, float)) and math.isfinite(x) and x >= 0):
                    raise ProfileError(f"{origin}: {f.name} maps GPU counts >= 2 to microseconds >= 0, got {k!r} = {x!r}")
    obj = cls(**data)
    if isinstance(obj, ModelSpec):
        if obj.active_params_b > obj.total_params_b:
            raise ProfileError(f"{origin}: active_params_b exceeds total_params_b")
        if obj.is_moe and obj.experts_per_token >= obj.num_experts:
            raise ProfileError(f"{origin}: experts_per_token must be below num_experts")
        for k in ("default_dtype", "expert_dtype"):
            if getattr(obj, k) and getattr(obj, k) not in DTYPE_BYTES:
                raise ProfileError(f"{origin}: {k} must be one of {', '.join(DTYPE_BYTES)}")
    if isinstance(obj, Device) and obj.family not in FAMILIES:
        raise ProfileError(f"{origin}: family must be one of {', '.join(FAMILIES)}")
    if isinstance(obj, Device) and obj.price_date:
        try:
            _dt.date.fromisoformat(obj.price_date if len(obj.price_date) == 10 else obj.price_date + "-01")
        except ValueError:
            raise ProfileError(f"{origin}: price_date must be YYYY-MM-DD or YYYY-MM, got {obj.price_date!r}") from None
    if isinstance(obj, Engine):
        for fam, over in obj.families.items():
            if not isinstance(over, dict) or not over or not set(over) <= {"bandwidth_fraction", "flops_fraction"}:
                raise ProfileError(f"{origin}: [families.{fam}] (a device family, {', '.join(FAMILIES)}, or a device "
                                   "profile name) sets bandwidth_fraction and/or flops_fraction")
            if not all(isinstance(x, (int, float)) and 0 < x <= 1 for x in over.values()):
                raise ProfileError(f"{origin}: [families.{fam}] fractions must be in (0, 1]")
        if not (obj.bandwidth_fraction <= 1 and obj.flops_fraction <= 1 and 0 < obj.memory_utilization <= 1):
            raise ProfileError(f"{origin}: bandwidth_fraction, flops_fraction and memory_utilization must be in (0, 1]")
    return obj


def _slug(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


_KINDS = {"devices": ("hardware", Device), "apis": ("hardware", ApiEndpoint), "models": ("models", ModelSpec),
          "engines": ("hardware", Engine)}
_SUBDIR = {"apis": "api", "engines": "engines"}


def _root(kind: str):
    pkg = _KINDS[kind][0]
    return data_dir(pkg) / _SUBDIR[kind] if kind in _SUBDIR else data_dir(pkg)


@cache
def _read(kind: str, filename: str):
    """One shipped profile file, parsed and validated (cached)."""
    pkg, cls = _KINDS[kind]
    try:
        data = tomllib.loads((_root(kind) / filename).read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{pkg}/{filename}: {e}") from None
    return _build(cls, data, f"{pkg}/{filename}")


@cache
def _catalogue(kind: str) -> dict:
    """name -> profile for every shipped profile of ``kind`` (devices/apis/models)."""
    out = {}
    for entry in sorted(_root(kind).iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            prof = _read(kind, entry.name)
            out[prof.name] = prof
    return out


def _index(kind: str) -> dict:
    idx = {}
    for name, prof in _catalogue(kind).items():
        for key in (name, *prof.aliases):
            idx[_slug(key)] = prof
            idx[_slug(key).replace("-", "")] = prof
    return idx


def names(kind: str) -> list[str]:
    """The shipped profile names of ``kind``: 'devices', 'apis' or 'models'."""
    return sorted(_catalogue(kind))


@cache
def _lookup(kind: str, name: str, label: str):
    key = _slug(name)
    if (_root(kind) / f"{key}.toml").is_file():  # a profile's name is its file's: read just that
        prof = _read(kind, f"{key}.toml")
        if prof.name == key:
            return prof
    idx = _index(kind)
    prof = idx.get(key) or idx.get(key.replace("-", ""))
    if prof is None:
        raise ProfileError(f"unknown {label} {name!r}; known: {', '.join(names(kind))}")
    return prof


def _load(cls, kind: str, label: str, name_or_path: str):
    """A profile of ``cls`` by name or alias (case-insensitive), or from a TOML file path."""
    if not name_or_path.strip():
        raise ProfileError(f"an empty {label} name; known: {', '.join(names(kind))}")
    if name_or_path.endswith(".toml"):
        return _build(cls, _read_toml(name_or_path), name_or_path)
    return _lookup(kind, name_or_path, label)


def load_device(name_or_path: str) -> Device:
    """A device by name or alias (case-insensitive), or from a TOML file path."""
    return _load(Device, "devices", "device", name_or_path)


def load_api(name_or_path: str) -> ApiEndpoint:
    """An API endpoint profile by name or alias, or from a TOML file path."""
    return _load(ApiEndpoint, "apis", "API profile", name_or_path)


def load_engine(name_or_path: str | None = None) -> Engine:
    """A serving engine profile by name or alias (default: vLLM), or from a TOML file path."""
    return _load(Engine, "engines", "engine", DEPLOYMENTS.engine if name_or_path is None else name_or_path)


def load_model(name_or_path: str) -> ModelSpec:
    """A model by name or alias, from a TOML profile path, or from a Hugging Face config.json."""
    if name_or_path.endswith(".json"):
        return model_from_hf_config(name_or_path)
    return _load(ModelSpec, "models", "model", name_or_path)


def _read_toml(path: str) -> dict:
    try:
        return tomllib.loads(read_text(path))
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except UnicodeDecodeError as e:
        raise ProfileError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ProfileError(f"{path}: {e}") from None


# --- Hugging Face config.json ----------------------------------------------------------------


def _first(cfg: dict, *keys, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def model_from_hf_config(path: str) -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json``, read as it is.

    Understood: dense and MoE MLPs (Llama, Qwen3-MoE, Mixtral, DeepSeek's dense-first layers and
    shared experts, gpt-oss), GQA and MLA attention (``kv_lora_rank``), gated attention
    (``attn_output_gate``), sliding-window layers (``layer_types``), Gated DeltaNet linear
    attention (``linear_*``, ``full_attention_interval``), Mamba-2 hybrids
    (``hybrid_override_pattern``), multimodal wrappers (``text_config``) and
    ``quantization_config`` (FP8 checkpoints; MXFP4 experts). Parameter counts are computed
    from the shapes (norms, biases and routers ignored): an estimate, said so in the source line.
    """
    try:
        cfg = json.loads(read_text(path))
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, ValueError, RecursionError) as e:  # ValueError: bad JSON, bad UTF-8, too many digits
        raise ProfileError(f"{path}: not a readable JSON config ({type(e).__name__}: {str(e)[:120]})") from None
    if not isinstance(cfg, dict):
        raise ProfileError(f"{path}: config.json must hold a JSON object")
    text = cfg.get("text_config")
    cfg = {**cfg, **(text if isinstance(text, dict) else {})}  # multimodal configs nest the language model
    try:
        return _build(ModelSpec, _hf_fields(cfg, path), path)
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, ProfileError):
            raise ProfileError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None
        raise ProfileError(f"{path}: a config value has the wrong type or range ({e})") from None


def _int(cfg, *keys, default=0) -> int:
    v = _first(cfg, *keys, default=default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or v > 1e12:
        raise ProfileError(f"{keys[0]} must be a number in [0, 1e12], got {v!r}")
    return int(v)


def _hf_fields(cfg: dict, path: str) -> dict:
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers")
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    heads = _int(cfg, "num_attention_heads", "n_head")
    if not (layers and hidden and heads):
        raise ProfileError(f"{path}: needs num_hidden_layers, hidden_size and num_attention_heads > 0")
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads", default=heads)
    if not kv_heads:
        raise ProfileError(f"{path}: num_key_value_heads must be >= 1, got 0")
    head_dim = _int(cfg, "head_dim", default=hidden // heads) or hidden // heads
    vocab = _int(cfg, "vocab_size")
    inter = _int(cfg, "intermediate_size", "ffn_dim", default=4 * hidden)
    experts = _int(cfg, "num_experts", "n_routed_experts", "num_local_experts")
    top_k = _int(cfg, "num_experts_per_tok", "moe_topk", "num_experts_per_token", "experts_per_token")
    if experts and top_k >= experts:
        raise ProfileError(f"{path}: num_experts_per_tok ({top_k}) must be below the number of experts ({experts})")
    moe_inter = _int(cfg, "moe_intermediate_size", default=inter)
    shared_inter = _int(cfg, "shared_expert_intermediate_size")
    n_shared = _int(cfg, "n_shared_experts", "num_shared_experts", default=1 if shared_inter else 0)
    shared_inter = shared_inter or moe_inter * n_shared

    # Which mixer each layer has: full attention, sliding-window attention, or linear/SSM.
    types = cfg.get("layer_types")
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        mixers = ["linear" if c == "M" else "full" for c in pattern if c in "M*"]
        mlp_layers = sum(c in "-E" for c in pattern)
    else:
        if isinstance(types, list) and len(types) == layers:
            mixers = ["linear" if ("linear" in str(t) or "mamba" in str(t)) else
                      "sliding" if "sliding" in str(t) else "full" for t in types]
        elif cfg.get("full_attention_interval"):
            every = _int(cfg, "full_attention_interval") or 1
            mixers = ["full" if (i + 1) % every == 0 else "linear" for i in range(layers)]
        else:
            mixers = ["full"] * layers
        mlp_layers = layers
    n_full, n_slide, n_lin = (mixers.count(k) for k in ("full", "sliding", "linear"))
    window = _int(cfg, "sliding_window") if n_slide else 0

    # Parameters per mixer.
    kv_lora, rope = _int(cfg, "kv_lora_rank"), _int(cfg, "qk_rope_head_dim")
    if kv_lora:  # MLA (DeepSeek-V2/V3): low-rank queries and a shared latent KV
        nope, v_dim, q_lora = _int(cfg, "qk_nope_head_dim"), _int(cfg, "v_head_dim"), _int(cfg, "q_lora_rank")
        head_dim = nope + rope  # a query head's width; the cache is the latent, not heads
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        attn = q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
    else:
        gate = 2 if cfg.get("attn_output_gate") else 1  # gated attention: the query projection also makes the gate
        attn = hidden * head_dim * (gate * heads + 2 * kv_heads) + heads * head_dim * hidden
    lin, state = 0, 0.0
    if n_lin and cfg.get("linear_num_value_heads"):  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        nv, nk = _int(cfg, "linear_num_value_heads"), _int(cfg, "linear_num_key_heads")
        dk, dv = _int(cfg, "linear_key_head_dim"), _int(cfg, "linear_value_head_dim")
        conv = _int(cfg, "linear_conv_kernel_dim", default=4)
        lin = hidden * (2 * nk * dk + 2 * nv * dv + 2 * nv) + nv * dv * hidden
        state = nv * dk * dv + (2 * nk * dk + nv * dv) * max(conv - 1, 0)
    elif n_lin:  # Mamba-2
        mh, md = _int(cfg, "mamba_num_heads"), _int(cfg, "mamba_head_dim")
        ds, groups = _int(cfg, "ssm_state_size", "state_size"), _int(cfg, "n_groups", default=1)
        conv = _int(cfg, "conv_kernel", "mamba_d_conv", default=4)
        inner = mh * md
        lin = hidden * (2 * inner + 2 * groups * ds + mh) + inner * hidden
        state = inner * ds + (inner + 2 * groups * ds) * max(conv - 1, 0)

    # MLPs: dense-first layers, MoE layers (routed + shared), or dense everywhere.
    gated = 2 if cfg.get("model_type") == "nemotron_h" else 3  # squared-ReLU MLP has no gate
    dense_first = _int(cfg, "first_k_dense_replace")
    dense_only = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_only, list):
        raise ProfileError(f"{path}: mlp_only_layers must be a list of layer indices, got {dense_only!r}")
    moe_layers = max(mlp_layers - dense_first - len(dense_only), 0) if experts else 0
    dense_layers = mlp_layers - moe_layers
    expert = 3 * hidden * moe_inter
    shared = 3 * hidden * shared_inter
    embed = vocab * hidden
    tied = bool(cfg.get("tie_word_embeddings", False))
    mixer_params = (n_full + n_slide) * attn + n_lin * lin
    total = embed * (1 if tied else 2) + mixer_params + dense_layers * gated * hidden * inter
    active = total
    if experts:
        total += moe_layers * (experts * expert + shared)
        active += moe_layers * (top_k * expert + shared)

    quant = cfg.get("quantization_config") if isinstance(cfg.get("quantization_config"), dict) else {}
    method = str(quant.get("quant_method", "")).lower()
    dtype = _dtype_of(cfg.get("torch_dtype") or cfg.get("dtype"))
    expert_dtype = ""
    if method in ("fp8", "fbgemm_fp8") or (method in ("compressed-tensors", "modelopt")
                                          and "fp8" in json.dumps(quant).lower()):
        dtype = "fp8"
    elif method == "mxfp4":
        expert_dtype = "mxfp4"  # the experts only: modules_to_not_convert keeps attention, router, embeddings
    elif method:  # AWQ, GPTQ, bitsandbytes, int4 compressed-tensors, ...
        raise ProfileError(f"{path}: quantization_config quant_method {method!r} is not modelled (FP8 and MXFP4 "
                           "are): give the unquantised config.json and the weights' precision with --strong-dtype "
                           "or --weak-dtype (int4 for 4-bit weights)")
    name = Path(path).parent.name or Path(path).stem
    label = str(cfg.get("_name_or_path") or name)
    return dict(
        name=_slug(label.split("/")[-1]) or "hf-config",
        display_name=f"{label} (from {path})",
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, tie_word_embeddings=tied,
        kv_layers=n_full, kv_lora_rank=kv_lora, qk_rope_head_dim=rope if kv_lora else 0,
        sliding_layers=n_slide, sliding_window=window,
        linear_layers=n_lin, linear_state_elements=float(state),
        num_experts=experts if top_k else 0, experts_per_token=top_k if experts else 0,
        num_shared_experts=n_shared, moe_layers=moe_layers or None,
        total_params_b=total / 1e9, active_params_b=active / 1e9,
        default_dtype=dtype, expert_dtype=expert_dtype,
        source=f"Hugging Face config.json at {path}; parameter counts estimated from the architecture",
    )


def _dtype_of(torch_dtype) -> str:
    t = str(torch_dtype)
    return "fp8" if t.startswith("float8") else {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(t, "bf16")


# --- Deployment --------------------------------------------------------------------------------


def weight_bytes(model: ModelSpec, weight_dtype: str = "bf16", expert_dtype: str = "") -> float:
    """Bytes of all weights: routed experts in ``expert_dtype`` (default: the model's own expert
    precision, else ``weight_dtype``), everything else in ``weight_dtype``."""
    routed = model.routed_params
    b_exp = DTYPE_BYTES[expert_dtype or model.expert_dtype or weight_dtype]
    return (model.total_params_b * 1e9 - routed) * DTYPE_BYTES[weight_dtype] + routed * b_exp


@dataclass(frozen=True)
class Deployment:
    """A model served on ``n_devices`` identical devices under a serving ``engine``.

    Attention and dense layers are tensor-parallel over all devices. Routed experts are
    tensor-sharded too, or with ``expert_parallel`` placed whole on the devices and reached by
    an all-to-all dispatch and combine. ``weight_dtype`` sets bytes per parameter and the
    tensor-core rate; ``expert_dtype`` the routed experts' (empty: the model's own, else
    ``weight_dtype``); ``kv_dtype`` the KV cache's.
    """

    model: ModelSpec
    device: Device
    n_devices: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    engine: Engine = field(default_factory=lambda: load_engine())
    expert_parallel: bool = False
    expert_dtype: str = ""

    @property
    def expert_precision(self) -> str:
        return self.expert_dtype or self.model.expert_dtype or self.weight_dtype

    @property
    def weight_bytes(self) -> float:
        return weight_bytes(self.model, self.weight_dtype, self.expert_dtype)

    @property
    def memory_bytes(self) -> float:
        return self.device.memory_bytes * self.n_devices

    def describe(self) -> str:
        exp = f", {self.expert_precision} experts" if self.model.is_moe and self.expert_precision != self.weight_dtype else ""
        ep = ", expert-parallel" if self.expert_parallel else ""
        return (f"{self.model.display_name} on {self.n_devices}x {self.device.display_name}, "
                f"{self.weight_dtype} weights{exp}{ep}, {self.engine.display_name}")

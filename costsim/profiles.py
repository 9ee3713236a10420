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

import json
import math
import tomllib
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path

from .resources import data_dir

DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5}


class ProfileError(ValueError):
    """A profile that cannot be found or does not validate; the message is one line."""


@dataclass(frozen=True)
class Device:
    """One accelerator. Peak figures are datasheet values; efficiencies turn them into rates."""

    name: str
    display_name: str
    memory_gb: float
    hbm_bandwidth_gbps: float
    bf16_dense_tflops: float
    source: str
    fp8_dense_tflops: float | None = None
    interconnect: str = ""
    interconnect_bandwidth_gbps: float = 0.0
    bandwidth_efficiency: float = 0.8
    flops_efficiency: float = 0.6
    iteration_overhead_s: float = 0.003
    price_per_hour_usd: float | None = None
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)

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
class ModelSpec:
    """A transformer's architecture, as far as cost is concerned.

    ``kv_layers`` counts the layers that keep a KV cache growing with context (hybrid models
    with linear attention have fewer than ``num_layers``). For MoE models the routed-expert
    parameters are derived from total and active counts: per MoE layer and expert,
    (total - active) / (moe_layers · (num_experts - experts_per_token)).
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
    kv_layers: int | None = None
    num_experts: int = 0
    experts_per_token: int = 0
    num_shared_experts: int = 0
    moe_layers: int | None = None
    default_dtype: str = "bf16"
    hf_id: str = ""
    aliases: tuple[str, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0 and self.experts_per_token > 0

    @property
    def n_kv_layers(self) -> int:
        return self.num_layers if self.kv_layers is None else self.kv_layers

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
    def always_active_params(self) -> float:
        """Parameters every token touches: attention, embeddings, dense and shared experts."""
        return self.active_params_b * 1e9 - self.n_moe_layers * self.experts_per_token * self.expert_params

    def kv_bytes_per_token(self, kv_dtype: str = "bf16") -> float:
        """Bytes of K and V cache one token adds, over all KV layers."""
        return 2.0 * self.n_kv_layers * self.num_kv_heads * self.head_dim * DTYPE_BYTES[kv_dtype]


_REQUIRED = {
    Device: ("name", "display_name", "memory_gb", "hbm_bandwidth_gbps", "bf16_dense_tflops", "source"),
    ApiEndpoint: ("name", "display_name", "model", "provider", "price_input_per_mtok_usd",
                  "price_cached_input_per_mtok_usd", "price_output_per_mtok_usd", "source", "date"),
    ModelSpec: ("name", "display_name", "num_layers", "hidden_size", "num_attention_heads",
                "num_kv_heads", "head_dim", "total_params_b", "active_params_b", "source"),
}


def _build(cls, data: dict, origin: str):
    known = {f.name for f in fields(cls)}
    missing = [k for k in _REQUIRED[cls] if k not in data]
    if missing:
        raise ProfileError(f"{origin}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{origin}: unknown field(s) {', '.join(unknown)}")
    data = dict(data)
    data["aliases"] = tuple(data.get("aliases", ()))
    for f in fields(cls):
        v = data.get(f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and f.name not in ("aliases",):
            if not math.isfinite(v) or v < 0:
                raise ProfileError(f"{origin}: {f.name} must be a finite number >= 0, got {v}")
    obj = cls(**data)
    if isinstance(obj, ModelSpec):
        if obj.active_params_b > obj.total_params_b:
            raise ProfileError(f"{origin}: active_params_b exceeds total_params_b")
        if obj.is_moe and obj.experts_per_token >= obj.num_experts:
            raise ProfileError(f"{origin}: experts_per_token must be below num_experts")
        if obj.default_dtype not in DTYPE_BYTES:
            raise ProfileError(f"{origin}: default_dtype must be one of {', '.join(DTYPE_BYTES)}")
    return obj


def _slug(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


_KINDS = {"devices": ("hardware", Device), "apis": ("hardware", ApiEndpoint), "models": ("models", ModelSpec)}


def _root(kind: str):
    pkg = _KINDS[kind][0]
    return data_dir(pkg) / "api" if kind == "apis" else data_dir(pkg)


@cache
def _read(kind: str, filename: str):
    """One shipped profile file, parsed and validated (cached)."""
    pkg, cls = _KINDS[kind]
    try:
        data = tomllib.loads((_root(kind) / filename).read_text(encoding="utf-8"))
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


def load_device(name_or_path: str) -> Device:
    """A device by name or alias (case-insensitive), or from a TOML file path."""
    if name_or_path.endswith(".toml"):
        return _build(Device, _read_toml(name_or_path), name_or_path)
    return _lookup("devices", name_or_path, "device")


def load_api(name_or_path: str) -> ApiEndpoint:
    """An API endpoint profile by name or alias, or from a TOML file path."""
    if name_or_path.endswith(".toml"):
        return _build(ApiEndpoint, _read_toml(name_or_path), name_or_path)
    return _lookup("apis", name_or_path, "API profile")


def load_model(name_or_path: str) -> ModelSpec:
    """A model by name or alias, from a TOML profile path, or from a Hugging Face config.json."""
    if name_or_path.endswith(".toml"):
        return _build(ModelSpec, _read_toml(name_or_path), name_or_path)
    if name_or_path.endswith(".json"):
        return model_from_hf_config(name_or_path)
    return _lookup("models", name_or_path, "model")


def _read_toml(path: str) -> dict:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ProfileError(f"{path}: {e}") from None


# --- Hugging Face config.json ----------------------------------------------------------------


def _first(cfg: dict, *keys, default=None):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return default


def model_from_hf_config(path: str) -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` (dense, MoE, hybrid attention).

    Parameter counts are computed from the architecture (embeddings, attention, MLP/experts;
    norms and biases ignored, linear-attention layers counted as full attention): an estimate,
    stated as such in the profile's source line.
    """
    try:
        cfg = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"{path}: no such file") from None
    except (OSError, json.JSONDecodeError) as e:
        raise ProfileError(f"{path}: not a readable JSON config ({e})") from None
    if not isinstance(cfg, dict):
        raise ProfileError(f"{path}: config.json must hold a JSON object")
    cfg = {**cfg, **cfg.get("text_config", {})}  # multimodal configs nest the language model
    try:
        layers = int(_first(cfg, "num_hidden_layers", "n_layer", "num_layers"))
        hidden = int(_first(cfg, "hidden_size", "n_embd", "d_model"))
        heads = int(_first(cfg, "num_attention_heads", "n_head"))
    except (TypeError, ValueError):
        raise ProfileError(f"{path}: needs num_hidden_layers, hidden_size and num_attention_heads") from None
    kv_heads = int(_first(cfg, "num_key_value_heads", "num_kv_heads", default=heads))
    head_dim = int(_first(cfg, "head_dim", default=hidden // heads))
    vocab = int(_first(cfg, "vocab_size", default=0))
    inter = int(_first(cfg, "intermediate_size", "ffn_dim", default=4 * hidden))
    experts = int(_first(cfg, "num_experts", "n_routed_experts", "num_local_experts", default=0) or 0)
    top_k = int(_first(cfg, "num_experts_per_tok", "moe_topk", "num_experts_per_token", default=0) or 0)
    moe_inter = int(_first(cfg, "moe_intermediate_size", default=inter))
    shared_inter = _first(cfg, "shared_expert_intermediate_size")
    n_shared = int(_first(cfg, "n_shared_experts", "num_shared_experts", default=1 if shared_inter else 0))
    shared_inter = int(shared_inter) if shared_inter else moe_inter * n_shared
    dense_first = int(_first(cfg, "first_k_dense_replace", default=0))
    moe_layers = layers - dense_first if experts else 0

    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        kv_layers = sum(1 for t in layer_types if "full" in str(t) or t == "attention")
    elif cfg.get("full_attention_interval"):
        kv_layers = layers // int(cfg["full_attention_interval"])
    else:
        kv_layers = layers

    attn = hidden * head_dim * (2 * heads + 2 * kv_heads)
    dense_mlp = 3 * hidden * inter
    expert = 3 * hidden * moe_inter
    shared = 3 * hidden * shared_inter
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    total = embed + layers * attn + dense_first * dense_mlp
    active = total
    if experts:
        total += moe_layers * (experts * expert + shared)
        active += moe_layers * (top_k * expert + shared)
    else:
        total += layers * dense_mlp
        active += layers * dense_mlp
    name = Path(path).parent.name or Path(path).stem
    return _build(ModelSpec, dict(
        name=_slug(cfg.get("_name_or_path", name).split("/")[-1]) or "hf-config",
        display_name=f"{cfg.get('_name_or_path', name)} (from {path})",
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, kv_layers=kv_layers,
        num_experts=experts, experts_per_token=top_k, num_shared_experts=n_shared,
        moe_layers=moe_layers or None,
        total_params_b=total / 1e9, active_params_b=active / 1e9,
        default_dtype=_dtype_of(cfg.get("torch_dtype") or cfg.get("dtype")),
        source=f"Hugging Face config.json at {path}; parameter counts estimated from the architecture",
    ), path)


def _dtype_of(torch_dtype) -> str:
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(str(torch_dtype), "bf16")


# --- Deployment --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deployment:
    """A model served on ``n_devices`` identical devices with tensor parallelism.

    ``weight_dtype`` sets bytes per parameter and the tensor-core rate used; ``kv_dtype`` the
    KV-cache bytes. Communication is modelled as two all-reduces of the activations per layer
    over the interconnect.
    """

    model: ModelSpec
    device: Device
    n_devices: int = 1
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"

    @property
    def weight_bytes(self) -> float:
        return self.model.total_params_b * 1e9 * DTYPE_BYTES[self.weight_dtype]

    @property
    def memory_bytes(self) -> float:
        return self.device.memory_gb * 1e9 * self.n_devices

    def describe(self) -> str:
        return (f"{self.model.display_name} on {self.n_devices}x {self.device.display_name}, "
                f"{self.weight_dtype} weights")


def devices_to_hold(model: ModelSpec, device: Device, weight_dtype: str = "bf16",
                    kv_reserve_fraction: float = 0.1, power_of_two: bool = True) -> int:
    """The fewest devices whose memory holds the weights and leaves ``kv_reserve_fraction`` of
    it for KV cache and activations; rounded up to a power of two (tensor parallelism)."""
    need = model.total_params_b * 1e9 * DTYPE_BYTES[weight_dtype]
    usable = device.memory_gb * 1e9 * (1.0 - kv_reserve_fraction)
    n = max(1, math.ceil(need / usable))
    return 1 << (n - 1).bit_length() if power_of_two else n

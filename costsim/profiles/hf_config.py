"""A Hugging Face ``config.json`` read as-is into a :class:`~.types.ModelSpec`."""

from __future__ import annotations

import json
from pathlib import Path

from ..files import read_text
from .types import BOUNDS, ModelSpec, ProfileError, build, shown, slug


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
    ``quantization_config`` (FP8, MXFP4 experts, AWQ, GPTQ, compressed-tensors: :func:`_quantization`).
    Parameter counts are computed
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
        return build(ModelSpec, _hf_fields(cfg, path), path)
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, ProfileError):
            raise ProfileError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None
        raise ProfileError(f"{path}: a config value has the wrong type or range ({e})") from None


def _int(cfg, *keys, default=0, like: str = "hidden_size") -> int:
    """A whole number >= 0 of the config (the first of ``keys`` it has), at most the bound of the
    :class:`ModelSpec` field ``like`` it is a count of (:data:`~.types.BOUNDS`; default: a width),
    so that nothing is built from a size past physics (a list of 10^12 layers). 0: absent;
    :func:`build` then holds the fields to their whole ranges."""
    key = next((k for k in keys if cfg.get(k) is not None), None)
    if key is None:
        return default  # made from sizes already checked
    v, b = cfg[key], BOUNDS[ModelSpec, like]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= b.hi or v != int(v):
        raise ProfileError(f"{key} must be a number, a whole one in [0, {b.hi:g}] ({b.why}), got {shown(v)}")
    return int(v)


def _bool(cfg: dict, key: str, default: bool = False) -> bool:
    """A JSON true or false (absent or null: ``default``); a string such as "false" is refused,
    not read as true."""
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ProfileError(f"{key} must be true or false (a JSON boolean), got {shown(v)}")
    return v


def _hf_fields(cfg: dict, path: str) -> dict:
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", like="num_layers")
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model")
    heads = _int(cfg, "num_attention_heads", "n_head", like="num_attention_heads")
    if not (layers and hidden and heads):
        raise ProfileError(f"{path}: needs num_hidden_layers, hidden_size and num_attention_heads > 0")
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads", default=heads, like="num_attention_heads")
    if not kv_heads:
        raise ProfileError(f"{path}: num_key_value_heads must be >= 1, got 0")
    head_dim = _int(cfg, "head_dim", default=hidden // heads) or hidden // heads
    vocab = _int(cfg, "vocab_size", like="vocab_size")
    inter = _int(cfg, "intermediate_size", "ffn_dim", default=4 * hidden)
    experts = _int(cfg, "num_experts", "n_routed_experts", "num_local_experts", like="num_experts")
    top_k = _int(cfg, "num_experts_per_tok", "moe_topk", "num_experts_per_token", "experts_per_token", like="num_experts")
    if experts and top_k >= experts:
        raise ProfileError(f"{path}: num_experts_per_tok ({top_k}) must be below the number of experts ({experts})")
    moe_inter = _int(cfg, "moe_intermediate_size", default=inter)
    shared_inter = _int(cfg, "shared_expert_intermediate_size")
    n_shared = _int(cfg, "n_shared_experts", "num_shared_experts", default=1 if shared_inter else 0, like="num_experts")
    shared_inter = shared_inter or moe_inter * n_shared

    # Which mixer each layer has: full attention, sliding-window attention, or linear/SSM.
    types = cfg.get("layer_types")
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:  # Nemotron-H: M mamba, * attention, - MLP, E MoE
        mixers = ["linear" if c == "M" else "full" for c in pattern if c in "M*"]
        mlp_layers = sum(c in "-E" for c in pattern)
    else:
        if types is not None and not (isinstance(types, list) and len(types) == layers):
            raise ProfileError(f"{path}: layer_types must list one mixer a layer, num_hidden_layers = {layers}, got "
                               f"{len(types) if isinstance(types, list) else shown(types)}")
        if types:
            kinds = [t if isinstance(t, str) else "" for t in types]
            mixers = ["linear" if ("linear" in t or "mamba" in t) else "sliding" if "sliding" in t else "full"
                      for t in kinds]
        elif cfg.get("full_attention_interval"):
            every = _int(cfg, "full_attention_interval", like="num_layers") or 1
            mixers = ["full" if (i + 1) % every == 0 else "linear" for i in range(layers)]
        else:
            mixers = ["full"] * layers
        mlp_layers = layers
    n_full, n_slide, n_lin = (mixers.count(k) for k in ("full", "sliding", "linear"))
    window = _int(cfg, "sliding_window", like="sliding_window") if n_slide else 0

    # Parameters per mixer.
    kv_lora, rope = _int(cfg, "kv_lora_rank"), _int(cfg, "qk_rope_head_dim")
    if kv_lora:  # MLA (DeepSeek-V2/V3): low-rank queries and a shared latent KV
        nope, v_dim, q_lora = _int(cfg, "qk_nope_head_dim"), _int(cfg, "v_head_dim"), _int(cfg, "q_lora_rank")
        head_dim = nope + rope  # a query head's width; the cache is the latent, not heads
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        attn = q + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * hidden
    else:
        gate = 2 if _bool(cfg, "attn_output_gate") else 1  # gated attention: the query projection also makes the gate
        attn = hidden * head_dim * (gate * heads + 2 * kv_heads) + heads * head_dim * hidden
    lin, state = 0, 0.0
    if n_lin and cfg.get("linear_num_value_heads"):  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
        nv, nk = (_int(cfg, k, like="num_attention_heads") for k in ("linear_num_value_heads", "linear_num_key_heads"))
        dk, dv = _int(cfg, "linear_key_head_dim"), _int(cfg, "linear_value_head_dim")
        conv = _int(cfg, "linear_conv_kernel_dim", default=4)
        lin = hidden * (2 * nk * dk + 2 * nv * dv + 2 * nv) + nv * dv * hidden
        state = nv * dk * dv + (2 * nk * dk + nv * dv) * max(conv - 1, 0)
    elif n_lin:  # Mamba-2
        mh, md = _int(cfg, "mamba_num_heads", like="num_attention_heads"), _int(cfg, "mamba_head_dim")
        ds, groups = _int(cfg, "ssm_state_size", "state_size"), _int(cfg, "n_groups", default=1, like="num_attention_heads")
        conv = _int(cfg, "conv_kernel", "mamba_d_conv", default=4)
        inner = mh * md
        lin = hidden * (2 * inner + 2 * groups * ds + mh) + inner * hidden
        state = inner * ds + (inner + 2 * groups * ds) * max(conv - 1, 0)

    # MLPs: dense-first layers, MoE layers (routed + shared), or dense everywhere.
    gated = 2 if cfg.get("model_type") == "nemotron_h" else 3  # squared-ReLU MLP has no gate
    dense_first = _int(cfg, "first_k_dense_replace", like="num_layers")
    dense_only = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_only, list):
        raise ProfileError(f"{path}: mlp_only_layers must be a list of layer indices, got {shown(dense_only)}")
    moe_layers = max(mlp_layers - dense_first - len(dense_only), 0) if experts else 0
    dense_layers = mlp_layers - moe_layers
    expert = 3 * hidden * moe_inter
    shared = 3 * hidden * shared_inter
    embed = vocab * hidden
    tied = _bool(cfg, "tie_word_embeddings")
    mixer_params = (n_full + n_slide) * attn + n_lin * lin
    total = embed * (1 if tied else 2) + mixer_params + dense_layers * gated * hidden * inter
    active = total
    if experts:
        total += moe_layers * (experts * expert + shared)
        active += moe_layers * (top_k * expert + shared)

    dtype, expert_dtype, head_16bit = _quantization(cfg, path)
    name = Path(path).parent.name or Path(path).stem
    label = cfg.get("_name_or_path") if isinstance(cfg.get("_name_or_path"), str) and cfg["_name_or_path"] else name
    return dict(
        name=slug(label.split("/")[-1]) or "hf-config",
        display_name=f"{label} (from {path})",
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, vocab_size=vocab, tie_word_embeddings=tied,
        kv_layers=n_full, kv_lora_rank=kv_lora, qk_rope_head_dim=rope if kv_lora else 0,
        sliding_layers=n_slide, sliding_window=window,
        linear_layers=n_lin, linear_state_elements=float(state),
        num_experts=experts if top_k else 0, experts_per_token=top_k if experts else 0,
        num_shared_experts=n_shared, moe_layers=moe_layers or None,
        total_params_b=total / 1e9, active_params_b=active / 1e9,
        default_dtype=dtype, expert_dtype=expert_dtype, head_16bit=head_16bit,
        source=f"Hugging Face config.json at {path}; parameter counts estimated from the architecture",
    )


def _quantization(cfg: dict, path) -> tuple[str, str, bool]:
    """``(weight precision, routed experts' precision or '', embeddings and head kept in 16-bit)``
    of a config's ``quantization_config``, read as the engines read it:

    - ``fp8`` (DeepSeek's block-scaled FP8), ``fbgemm_fp8``, ``modelopt`` FP8: FP8 weights; the
      embeddings and head stay BF16 (DeepSeek's ``inference/model.py``).
    - ``mxfp4`` (gpt-oss): MXFP4 experts, the rest in the config's dtype.
    - ``awq`` (AutoAWQ: ``bits``, ``group_size``, ``zero_point``) and ``gptq`` (``bits``,
      ``group_size``; its ``qzeros`` are stored even when ``sym``): integer weights with a 16-bit
      scale and a zero point a group (``int4-g128``); the decoder's linear layers only, the
      embeddings and ``lm_head`` in 16-bit (GPTQ's ``lm_head: true`` quantizes the head too).
    - ``compressed-tensors``: its ``config_groups``' weights (``type`` int or float,
      ``num_bits``, ``strategy`` group or channel, ``group_size``, ``symmetric``); ``lm_head``
      in 16-bit where ``ignore`` names it. Older compressed-tensors checkpoints name the block
      ``compression_config`` (vLLM's ``get_quant_config`` reads it there too).
    Anything else (bitsandbytes, GGUF, 2- and 3-bit formats, ...) is refused in one line."""
    quant = _first(cfg, "quantization_config", "compression_config", default={})  # compressed-tensors' older name
    if not isinstance(quant, dict):
        raise ProfileError(f"{path}: quantization_config must be a JSON object, got {shown(quant)}")
    method = str(quant.get("quant_method", "")).lower()
    dtype = _dtype_of(cfg.get("torch_dtype") or cfg.get("dtype"))
    if not method:
        return dtype, "", False
    if method in ("fp8", "fbgemm_fp8") or (method == "modelopt" and "fp8" in json.dumps(quant).lower()):
        return "fp8", "", True
    if method == "mxfp4":
        return dtype, "mxfp4", False  # modules_to_not_convert keeps attention, router, embeddings, head
    if method in ("awq", "gptq"):
        bits, group = quant.get("bits", quant.get("w_bit")), quant.get("group_size", quant.get("q_group_size"))
        asym = method == "gptq" or _bool(quant, "zero_point", True)
        head = not (method == "gptq" and _bool(quant, "lm_head"))
        return _int_dtype(bits, group, not asym, method, path), "", head
    if method == "compressed-tensors":
        groups = quant.get("config_groups")
        weights = [g.get("weights") for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
        weights = [w for w in weights if isinstance(w, dict)]
        if not weights:
            raise ProfileError(f"{path}: a compressed-tensors quantization_config without config_groups weights")
        w = weights[0]
        ignore = quant.get("ignore") if isinstance(quant.get("ignore"), list) else []
        head = any(str(x) in ("lm_head", "re:.*lm_head", "re:lm_head") for x in ignore)
        if w.get("type") == "float" and w.get("num_bits") == 8:
            return "fp8", "", head
        if w.get("type") == "int":
            group = w.get("group_size") if w.get("strategy") == "group" else -1
            return _int_dtype(w.get("num_bits"), group, _bool(w, "symmetric"), method, path), "", head
        raise ProfileError(f"{path}: compressed-tensors weights of type {shown(w.get('type'))} and "
                           f"{shown(w.get('num_bits'))} bits are not modelled (FP8, and 4- or 8-bit integers with group or channel scales, are)")
    raise ProfileError(f"{path}: quantization_config quant_method {shown(method)} is not modelled (FP8, MXFP4, AWQ, GPTQ "
                       "and compressed-tensors are): give the unquantised config.json and the weights' precision with "
                       "--dtype, --strong-dtype or --weak-dtype")


def _int_dtype(bits, group, symmetric: bool, method: str, path) -> str:
    """The weight-only integer precision of ``bits`` a weight with a scale a ``group`` (-1 or
    None: a scale a channel, whose bytes are negligible)."""
    if isinstance(bits, bool) or not isinstance(bits, int) or bits not in (4, 8):
        raise ProfileError(f"{path}: {method} with {shown(bits)}-bit weights is not modelled (4 and 8 bits are)")
    if group is None or (not isinstance(group, bool) and group in (-1, 0)):
        return f"int{bits}"
    if isinstance(group, bool) or not isinstance(group, int) or group not in (32, 64, 128):
        raise ProfileError(f"{path}: {method} with groups of {shown(group)} weights is not modelled (group_size 32, 64, 128 or -1 is)")
    return f"int{bits}-g{group}" + ("-sym" if symmetric else "")


def _dtype_of(torch_dtype) -> str:
    t = str(torch_dtype)
    return "fp8" if t.startswith("float8") else {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(t, "bf16")

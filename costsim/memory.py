"""Memory is a resource: what a replica's GPUs hold, and how many sequences fit beside it.

Per GPU an engine keeps ``memory_utilization`` of the memory for itself (vLLM's
``gpu_memory_utilization``), of which ``reserve_gb`` go to activations, CUDA graphs and
communication buffers; the weights (sharded over the GPUs by tensor or expert parallelism) take
their share, and what is left over all GPUs is the KV pool. A sequence at ``context`` tokens
holds its KV cache (over all ranks, replicated heads and MLA latents counted on each) plus its
bounded state: the linear-attention layers' recurrent state and the sliding windows.

All sizes are bytes (10^9 bytes a GB). A GPU's memory is what its driver reports
(:attr:`costsim.profiles.Device.memory_bytes`): an "80 GB" H100 reports 81,559 MiB, 85.5e9 bytes.
"""

from __future__ import annotations

import math
from dataclasses import replace

from .profiles import Deployment, Device, Engine, ModelSpec, load_engine, weight_bytes

#: The recurrent state of linear-attention layers is kept in the activation dtype (vLLM's
#: ``mamba_ssm_cache_dtype = "auto"``: the model dtype).
STATE_DTYPE = "bf16"


class DoesNotFit(ValueError):
    """A deployment or a batch that the GPUs' memory cannot hold; the message is one line."""


MIB = 2**20


def memory_fraction(device: Device, engine: Engine, n_devices: int = 1, model: ModelSpec | None = None) -> float:
    """The share of each GPU's memory the engine takes for weights, KV pool and its reserve.

    ``engine.memory_rule`` says how the engine picks it by default: '' a fixed share
    (``memory_utilization``: vLLM's ``gpu_memory_utilization``); 'sglang-0.5' SGLang's
    ``mem_fraction_static`` rule, which sets aside, from the GPU's memory, room for its prefill
    chunk, its CUDA graphs and the tensor-parallel buffers, by GPU memory and TP size
    (:func:`sglang_mem_fraction_static`); 'free-after-weights' TensorRT-LLM's, whose KV pool is
    ``memory_utilization`` of what the weights and reserve leave (:func:`usable_bytes_per_gpu`).
    A share the user gives (``--gpu-memory-utilization``) replaces the rule (``memory_rule = ''``)."""
    if engine.memory_rule == "sglang-0.5":
        return sglang_mem_fraction_static(device.memory_bytes / MIB, n_devices, bool(model and model.is_mla))
    return engine.memory_utilization


def sglang_mem_fraction_static(gpu_mib: float, tp: int, mla: bool) -> float:
    """SGLang's default ``mem_fraction_static`` (sglang 0.5.10.post1, ``server_args.py``
    ``_handle_gpu_memory_settings``; the same in 0.5.23's ``arg_groups/memory_hook.py``):
    (GPU MiB - reserved MiB) / GPU MiB, rounded to 3 places, where reserved = 512 + 1.5 x the
    prefill chunk (at least 2,048) + 2 x the largest CUDA-graph batch + TP/8 x 1,024 + the
    piecewise CUDA graphs (8 MiB for each captured size; 1.5 GiB on MLA models), at least
    10 GiB on GPUs above 60 GiB. No pipeline parallelism, data-parallel attention or
    speculative decoding (their terms are 0)."""
    big = tp >= 4
    if gpu_mib < 20 * 1024:
        chunk, graph_bs = 2048, 8
    elif gpu_mib < 35 * 1024:
        chunk, graph_bs = 2048, 80 if big else 24
    elif gpu_mib < 60 * 1024:
        chunk, graph_bs = 4096, 160 if big else 32
    elif gpu_mib < 160 * 1024:
        chunk, graph_bs = 8192, 512 if big else 256
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp / 8 * 1024
    if mla:
        reserved += 1.5 * 1024
    else:  # its piecewise CUDA graphs capture these token counts, up to the prefill chunk
        sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
                 *range(1280, 4097, 256), *range(4608, chunk + 1, 512)]
        reserved += 8 * sum(1 for t in sizes if t <= chunk)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


def reserve_bytes(device: Device, engine: Engine) -> float:
    """Bytes a GPU the engine keeps for activations, CUDA graphs and communication buffers:
    ``reserve_gb`` (10^9 bytes), the device's or its family's own where the profile has one
    (vLLM profiles its peak activations for its token budget, smaller on smaller GPUs)."""
    return float(engine.setting("reserve_gb", device)) * 1e9


def usable_bytes_per_gpu(device: Device, engine: Engine, n_devices: int = 1, model: ModelSpec | None = None,
                         weight_bytes_per_gpu: float = 0.0) -> float:
    """What the engine may fill on one GPU besides its reserve: weights and KV pool. Under the
    'free-after-weights' rule the KV pool is a share of what the weights (``weight_bytes_per_gpu``)
    and the reserve leave, so the weights are counted whole."""
    if engine.memory_rule == "free-after-weights":
        free = device.memory_bytes - reserve_bytes(device, engine) - weight_bytes_per_gpu
        return weight_bytes_per_gpu + engine.memory_utilization * max(free, 0.0)
    return device.memory_bytes * memory_fraction(device, engine, n_devices, model) - reserve_bytes(device, engine)


def share_taken(dep: Deployment) -> float:
    """The share of the replica's GPU memory its engine takes (weights, KV pool, reserve), as
    its rule makes it for this deployment."""
    return (kv_pool_bytes(dep) + dep.weight_bytes) / dep.memory_bytes + reserve_bytes(dep.device, dep.engine) / dep.device.memory_bytes


def kv_pool_bytes(dep: Deployment) -> float:
    """The KV pool over all of the replica's GPUs (negative: the weights do not fit)."""
    w = dep.weight_bytes
    return dep.n_devices * usable_bytes_per_gpu(dep.device, dep.engine, dep.n_devices, dep.model,
                                                w / dep.n_devices) - w


def state_bytes(dep: Deployment) -> float:
    """Bytes a sequence holds whatever its context: recurrent state and full sliding windows."""
    return sum(dep.model.state_parts(dep.kv_dtype, STATE_DTYPE, dep.n_devices))


def sequence_bytes(dep: Deployment, context: float) -> float:
    """Bytes one sequence of ``context`` tokens holds in the pool."""
    return dep.model.kv_bytes_per_token(dep.kv_dtype, dep.n_devices) * context + state_bytes(dep)


def kv_capacity_tokens(dep: Deployment) -> float:
    """Tokens of KV the pool holds (before any per-sequence state)."""
    per = dep.model.kv_bytes_per_token(dep.kv_dtype, dep.n_devices)
    return max(kv_pool_bytes(dep), 0.0) / per if per else math.inf


#: "As many as you like": what :func:`max_sequences` says when a sequence holds next to nothing.
UNBOUNDED = 1 << 62


def max_sequences(dep: Deployment, context: float) -> int:
    """How many sequences of ``context`` tokens the pool holds at once (at most :data:`UNBOUNDED`)."""
    need = sequence_bytes(dep, context)
    n = max(kv_pool_bytes(dep), 0.0) / need if need > 0 else math.inf
    return int(n) if n < UNBOUNDED else UNBOUNDED


def sequences_held(dep: Deployment, context: float) -> int | None:
    """:func:`max_sequences` as a command reports it: None where it is unbounded."""
    n = max_sequences(dep, context)
    return None if n >= UNBOUNDED else n


def sequences_text(n: int | None, context: float) -> str:
    """``n`` sequences of ``context`` tokens in words (:func:`sequences_held`)."""
    return (f"{n:,} sequences of {context:,.0f} tokens" if n is not None else
            f"sequences unbounded at {context:,.0f} tokens of context (one holds no KV)")


def devices_to_hold(model: ModelSpec, device: Device, weight_dtype: str = "bf16", engine: Engine | None = None,
                    kv_fraction: float = 0.1, max_devices: int = 1024) -> int:
    """The fewest devices, a power of two (tensor parallelism), whose usable memory holds the
    weights and leaves ``kv_fraction`` of it for the KV pool."""
    eng = engine or load_engine()
    need = weight_bytes(model, weight_dtype)
    n = 1
    while n <= max_devices:
        usable = usable_bytes_per_gpu(device, eng, n, model, need / n)
        if usable > 0 and n * usable * (1.0 - kv_fraction) >= need:
            return n
        n *= 2
    raise DoesNotFit(f"{model.name} in {weight_dtype} ({need / 1e9:.0f} GB) fits on no number of {device.name} "
                     f"up to {max_devices} under {eng.name}")


def require_fits(dep: Deployment, batch: float = 1, context: float = 0.0) -> None:
    """Raise :class:`DoesNotFit` unless the device runs the deployment's precisions, its
    weights fit, and ``batch`` sequences of ``context`` tokens fit in its KV pool; the message
    says the smallest GPU count, or the largest batch, that would fit."""
    for dt in {dep.weight_dtype, dep.expert_precision}:
        why = dep.device.cannot_run(dt)
        if why:
            raise DoesNotFit(f"{dep.device.name} cannot run {dt} weights: {why}")
    heads, n = dep.model.num_attention_heads, dep.n_devices
    if heads % n:  # tensor parallelism splits the attention heads evenly (vLLM, SGLang, TensorRT-LLM)
        ok = [k for k in (1, 2, 4, 8, 16, 32, 64) if heads % k == 0 and k <= heads]
        raise DoesNotFit(f"{n} GPUs cannot split {dep.model.name}'s {heads} attention heads evenly (tensor "
                         f"parallelism): give {', '.join(map(str, ok))} GPUs")
    pool = kv_pool_bytes(dep)
    if pool <= 0:
        try:
            n = devices_to_hold(dep.model, dep.device, dep.weight_dtype, dep.engine, kv_fraction=0.0)
            hint = f"; the smallest count that holds them is {n}"
        except DoesNotFit:
            hint = ""
        raise DoesNotFit(f"{dep.model.name} in {dep.weight_dtype} needs {dep.weight_bytes / 1e9:.0f} GB of weights; "
                         f"{dep.n_devices}x {dep.device.name} under {dep.engine.name} hold "
                         f"{(kv_pool_bytes(dep) + dep.weight_bytes) / 1e9:.0f} GB for weights and KV"
                         f"{hint}")
    fits = max_sequences(dep, context)
    if batch > fits:
        more = devices_for_batch(dep, batch, context)
        raise DoesNotFit(f"a batch of {batch:g} sequences at {context:g} tokens needs "
                         f"{batch * sequence_bytes(dep, context) / 1e9:.0f} GB of KV; the pool of {dep.n_devices}x "
                         f"{dep.device.name} holds {pool / 1e9:.0f} GB: at most {fits} sequences at that context"
                         + (f" ({more} GPUs hold them)" if more else ""))


def devices_for_batch(dep: Deployment, batch: float, context: float, max_devices: int = 1024) -> int | None:
    """The fewest devices, ``dep``'s count doubled as often as needed, whose KV pool holds
    ``batch`` sequences of ``context`` tokens beside the weights (None: none up to ``max_devices``)."""
    n = dep.n_devices
    while n <= max_devices:
        d = replace(dep, n_devices=n)
        if kv_pool_bytes(d) > 0 and max_sequences(d, context) >= batch:
            return n
        n *= 2
    return None

"""Sizing: how many GPUs each model gets, by one rule (:func:`replica_gpus`) for every command.

- :func:`deployments`: the strong and weak deployments of a scenario (predict, simulate,
  replay, capacity, sweep); the strong one on ``strong_gpus`` where given.
- :func:`deployment`: one model on a device, on ``gpus`` where given (roofline, bench,
  hardware show).
- :func:`strong_options` and :func:`weak_deployment`: what plan searches per device (the strong
  model on the rule's count and the larger ones of :data:`GPU_OPTIONS` that split its heads).
- :func:`edge_deployment`: the weak model moved to an edge device (edge-cloud), and the hosted
  API the strong model is then behind (:func:`api_profile`, :func:`api_speeds`).
- :func:`weight_dtype`: the precision policy.

What fits is :mod:`costsim.memory`'s; which deployment each command then gets is decided here.
"""

from __future__ import annotations

from dataclasses import replace

from .config import DEPLOYMENTS, EDGE_CLOUD, WORKLOAD
from .memory import DoesNotFit, devices_for_batch, devices_to_hold, require_fits
from .profiles import ApiEndpoint, Deployment, Device, Engine, ModelSpec, check_dtype, load_api, load_device, load_engine, load_model

#: GPUs a strong replica may span in plan's search: one node's worth, tensor parallel in powers of two.
GPU_OPTIONS = (1, 2, 4, 8)
#: The most GPUs the rule gives a replica for its batch's KV: one node (the weights alone may need more).
NODE_GPUS = 8


def replica_gpus(model: ModelSpec, device: Device, dtype: str, engine: Engine, batch: float | None = None,
                 context: float | None = None) -> int:
    """The sizing rule, one for every command: the fewest GPUs, a power of two (tensor
    parallelism), whose memory holds the weights with 10% left for KV and, within a node
    (:data:`NODE_GPUS`; more only where the weights alone need more), the KV of ``batch``
    sequences of ``context`` tokens: at least the deployment assumption's ``DEPLOYMENTS.batch``
    sessions at the workload's ``WORKLOAD.context_tokens`` (a command sizes for more where it
    simulates or costs more); and no more than split the attention heads evenly (a count that
    does not is refused where the weights need it)."""
    B, C = max(batch or 0, DEPLOYMENTS.batch), max(context or 0, WORKLOAD.context_tokens)
    hold = devices_to_hold(model, device, dtype, engine)
    n = devices_for_batch(Deployment(model, device, hold, dtype, engine=engine), B, C,
                          max_devices=max(NODE_GPUS, hold)) or max(NODE_GPUS, hold)
    heads = model.num_attention_heads
    split = heads & -heads  # the largest power of two dividing the heads
    if hold > split:
        raise DoesNotFit(f"{model.name} in {dtype} needs {hold} {device.name} GPUs for its weights, but tensor "
                         f"parallelism splits its {heads} attention heads evenly over at most {split}")
    return min(n, split)


def weight_dtype(model: ModelSpec, given: str | None = None, role: str = "") -> str:
    """The precision policy, one rule for every command: ``given`` (``--dtype``,
    ``--strong-dtype``, ``--weak-dtype``) where given; for the strong model of the default
    deployment (``role`` "strong"), its FP8 checkpoint (``DEPLOYMENTS.strong_dtype``); else the
    checkpoint's own (the model profile's ``default_dtype``, a config.json's)."""
    if given:
        return check_dtype(given)
    if role == "strong" and model.name == load_model(DEPLOYMENTS.strong).name:
        return DEPLOYMENTS.strong_dtype
    return model.default_dtype


def engine_profile(name: str | None = None, gpu_memory_utilization: float | None = None) -> Engine:
    """The engine profile ``name`` (default: the default engine's), taking
    ``gpu_memory_utilization`` of each GPU's memory where given (vLLM's
    ``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``) instead of its default."""
    eng = load_engine(name or DEPLOYMENTS.engine)
    if gpu_memory_utilization is None:
        return eng
    u = gpu_memory_utilization
    if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u <= 1:
        raise ValueError(f"--gpu-memory-utilization must be in (0, 1], got {u!r}")
    return replace(eng, memory_utilization=float(u), memory_rule="")



def deployments(strong=None, weak=None, strong_device=None, weak_device=None,
                strong_dtype=None, weak_dtype=None, strong_gpus=None, engine=None, weak_engine=None,
                expert_parallel=False, batch: float | None = None, context: float | None = None,
                gpu_memory_utilization=None):
    """The strong and weak deployments, each on :func:`replica_gpus` for ``batch`` sequences of
    ``context`` tokens (the strong one on ``strong_gpus`` where given); both under ``engine``
    (default vLLM) unless ``weak_engine`` names the weak model's own, each taking
    ``gpu_memory_utilization`` of a GPU where given."""
    if strong_gpus is not None and strong_gpus < 1:
        raise ValueError(f"--strong-gpus must be >= 1, got {strong_gpus}")
    d = DEPLOYMENTS
    sm, wm = load_model(strong or d.strong), load_model(weak or d.weak)
    sd, wd = load_device(strong_device or d.device), load_device(weak_device or d.device)
    se = engine_profile(engine, gpu_memory_utilization)
    we = engine_profile(weak_engine, gpu_memory_utilization) if weak_engine else se
    sdt, wdt = weight_dtype(sm, strong_dtype, "strong"), weight_dtype(wm, weak_dtype)
    n = replica_gpus(sm, sd, sdt, se, batch, context) if strong_gpus is None else strong_gpus
    out = (Deployment(sm, sd, n, sdt, engine=se, expert_parallel=expert_parallel),
           Deployment(wm, wd, replica_gpus(wm, wd, wdt, we, batch, context), wdt, engine=we))
    for dep in out:
        require_fits(dep)  # the weights (a --strong-gpus too few for them is refused here)
    return out


def deployment(model: str, device: str, gpus: int | None = None, dtype: str | None = None, engine: str | None = None,
               expert_parallel: bool = False, gpu_memory_utilization: float | None = None, batch: float | None = None,
               context: float | None = None) -> Deployment:
    """``model`` on ``gpus`` of ``device`` (where not given, :func:`replica_gpus` for ``batch``
    sequences of ``context`` tokens), in ``dtype`` (:func:`weight_dtype`), under ``engine``
    (taking ``gpu_memory_utilization`` of each GPU where given)."""
    m, d, eng = load_model(model), load_device(device), engine_profile(engine, gpu_memory_utilization)
    dt = weight_dtype(m, dtype)
    return Deployment(m, d, gpus or replica_gpus(m, d, dt, eng, batch, context), dt, engine=eng,
                      expert_parallel=expert_parallel)


def strong_options(model: ModelSpec, device: Device, dtype: str, engine: Engine, max_gpus: int | None = None) -> list:
    """The strong deployments plan searches on ``device``: :func:`replica_gpus`' count and each
    larger one of :data:`GPU_OPTIONS` (at most ``max_gpus``) that splits the attention heads,
    tensor parallel, and for MoE expert parallel too."""
    try:
        least = replica_gpus(model, device, dtype, engine)
    except DoesNotFit:
        return []
    return [Deployment(model, device, n, dtype, engine=engine, expert_parallel=ep)
            for n in sorted({least, *GPU_OPTIONS}) if n >= least and not (max_gpus and n > max_gpus)
            and model.num_attention_heads % n == 0 and device.can_span(n)
            for ep in ((False, True) if model.is_moe and n > 1 else (False,))]


def weak_deployment(model: ModelSpec, device: Device, dtype: str, engine: Engine) -> Deployment:
    """The weak model on :func:`replica_gpus` of ``device``."""
    return Deployment(model, device, replica_gpus(model, device, dtype, engine), dtype, engine=engine)


def edge_deployment(weak: Deployment, edge_device: str | None = None) -> Deployment:
    """The weak deployment moved to the edge device (``edge_device``, else the default): same
    model, precision and engine, on :func:`replica_gpus` of it."""
    dev = load_device(edge_device or EDGE_CLOUD.edge_device)
    return replace(weak, device=dev, n_devices=replica_gpus(weak.model, dev, weak.weight_dtype, weak.engine))


def api_profile(api: str | None = None) -> ApiEndpoint:
    """The API profile the strong model is behind (``api``, else the default)."""
    return load_api(api or EDGE_CLOUD.api)


def api_speeds(ep: ApiEndpoint, ttft_s: float | None = None,
               output_tps: float | None = None) -> tuple[tuple[float, str], tuple[float, str]]:
    """``((TTFT s, where from), (output tokens/s, where from))`` of calls to ``ep``: those given
    (--api-ttft, --api-tps), else the profile's, else costsim's assumption."""
    def pick(own, flag, profile, default):
        if own is not None:
            return float(own), flag
        if profile is not None:
            return float(profile), f"the profile {ep.name}"
        return float(default), "costsim's assumption in config.EDGE_CLOUD: the profile has none"

    return (pick(ttft_s, "--api-ttft", ep.ttft_s, EDGE_CLOUD.ttft_s),
            pick(output_tps, "--api-tps", ep.output_tokens_per_s, EDGE_CLOUD.output_tps))

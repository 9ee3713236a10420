"""Sizing: how many GPUs each model gets, in one place.

- :func:`deployments`: the strong and weak deployments of a scenario (predict, simulate,
  replay, capacity, sweep): each on as many devices (a power of two) as hold its weights and,
  within a node of 8, its batch; the strong one on ``strong_gpus`` where given.
- :func:`deployment`: one model on a device, on ``gpus`` or as many as hold its weights
  (roofline, hardware show).
- :func:`strong_options` and :func:`weak_deployment`: what plan searches per device.
- :func:`edge_deployment`: the weak model moved to an edge device (edge-cloud), and the hosted
  API the strong model is then behind (:func:`api_profile`, :func:`api_speeds`).

What fits is :mod:`costsim.memory`'s; which deployment each command then gets is decided here.
"""

from __future__ import annotations

from dataclasses import replace

from .config import DEPLOYMENTS, EDGE_CLOUD
from .memory import devices_for_batch, devices_to_hold, require_fits
from .profiles import ApiEndpoint, Deployment, Device, Engine, ModelSpec, check_dtype, load_api, load_device, load_engine, load_model

#: GPUs a strong replica may span in plan's search: one node's worth, tensor parallel in powers of two.
GPU_OPTIONS = (1, 2, 4, 8)


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


def engine(name: str | None = None, gpu_memory_utilization: float | None = None) -> Engine:
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


_engine = engine  # the name the functions below take a parameter by


def deployments(strong=None, weak=None, strong_device=None, weak_device=None,
                strong_dtype=None, weak_dtype=None, strong_gpus=None, engine=None, weak_engine=None,
                expert_parallel=False, batch: float = 1, context: float = 0.0, gpu_memory_utilization=None):
    """The strong and weak deployments: each on as many devices (a power of two) as hold its
    weights and, up to one node of 8, a KV pool for ``batch`` sequences of ``context`` tokens (the strong one on
    ``strong_gpus`` where given); both under ``engine`` (default vLLM) unless ``weak_engine``
    names the weak model's own, each taking ``gpu_memory_utilization`` of a GPU where given."""
    if strong_gpus is not None and strong_gpus < 1:
        raise ValueError(f"--strong-gpus must be >= 1, got {strong_gpus}")
    d = DEPLOYMENTS
    sm, wm = load_model(strong or d.strong), load_model(weak or d.weak)
    sd, wd = load_device(strong_device or d.device), load_device(weak_device or d.device)
    se = _engine(engine, gpu_memory_utilization)
    we = _engine(weak_engine, gpu_memory_utilization) if weak_engine else se
    sdt, wdt = weight_dtype(sm, strong_dtype, "strong"), weight_dtype(wm, weak_dtype)
    n = devices_to_hold(sm, sd, sdt, se) if strong_gpus is None else strong_gpus
    out = [Deployment(sm, sd, n, sdt, engine=se, expert_parallel=expert_parallel),
           Deployment(wm, wd, devices_to_hold(wm, wd, wdt, we), wdt, engine=we)]
    for i, dep in enumerate(out):
        require_fits(dep)  # the weights (a --strong-gpus too few for them is refused here)
        if i == 1 or strong_gpus is None:  # chosen here: room for the batch too, within a node of 8
            more = devices_for_batch(dep, batch, context, max_devices=max(8, dep.n_devices))
            if more and more != dep.n_devices:
                out[i] = replace(dep, n_devices=more)
    return tuple(out)


def deployment(model: str, device: str, gpus: int | None = None, dtype: str | None = None, engine: str | None = None,
               expert_parallel: bool = False, gpu_memory_utilization: float | None = None) -> Deployment:
    """``model`` on ``gpus`` of ``device`` (as many as hold the weights where not given), in
    ``dtype`` (the checkpoint's own where not given), under ``engine`` (taking
    ``gpu_memory_utilization`` of each GPU where given)."""
    m, d, eng = load_model(model), load_device(device), _engine(engine, gpu_memory_utilization)
    dt = weight_dtype(m, dtype)
    return Deployment(m, d, gpus or devices_to_hold(m, d, dt, eng), dt, engine=eng, expert_parallel=expert_parallel)


def strong_options(model: ModelSpec, device: Device, dtype: str, engine: Engine, max_gpus: int | None = None) -> list:
    """The strong deployments plan searches on ``device``: each GPU count of :data:`GPU_OPTIONS`
    (at most ``max_gpus``) that holds the weights, tensor parallel, and for MoE expert parallel too."""
    hold = devices_to_hold(model, device, dtype, engine)
    return [Deployment(model, device, n, dtype, engine=engine, expert_parallel=ep)
            for n in GPU_OPTIONS if n >= hold and not (max_gpus and n > max_gpus)
            for ep in ((False, True) if model.is_moe and n > 1 else (False,))]


def weak_deployment(model: ModelSpec, device: Device, dtype: str, engine: Engine) -> Deployment:
    """The weak model on as few GPUs of ``device`` as hold it."""
    return Deployment(model, device, devices_to_hold(model, device, dtype, engine), dtype, engine=engine)


def edge_deployment(weak: Deployment, edge_device: str | None = None) -> Deployment:
    """The weak deployment moved to the edge device (``edge_device``, else the default): same
    model, precision and engine, on as many devices as hold it."""
    dev = load_device(edge_device or EDGE_CLOUD.edge_device)
    return replace(weak, device=dev, n_devices=devices_to_hold(weak.model, dev, weak.weight_dtype, weak.engine))


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

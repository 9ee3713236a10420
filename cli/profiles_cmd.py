"""`costsim hardware list|show` and `costsim models list|show`."""

from __future__ import annotations

from typing import Optional

import typer

from costsim.config import COMMANDS, DEPLOYMENTS

from ._common import GPU_MEMORY_UTILIZATION, dumps, user_errors

hardware_app = typer.Typer(help="Device, engine and API profiles (hardware/*.toml, engines/, api/).", no_args_is_help=True)
models_app = typer.Typer(help="Model architecture profiles (models/*.toml).", no_args_is_help=True)


def _show(res, json_out: bool) -> None:
    d = dict(res.data)
    if json_out:
        typer.echo(dumps(d))
        return
    sources = d.pop("sources", {})
    width = max(len(k) for k in d)
    for k, v in d.items():
        if v in (None, "", ()):
            continue
        line = f"{k:<{width}}  {', '.join(v) if isinstance(v, tuple) else v}"
        if k in sources:
            line += f"    [{sources[k]}]"
        typer.echo(line)


@hardware_app.command("list")
def hardware_list(json_out: bool = typer.Option(False, "--json", help="Every profile's fields, as `hardware show --json` gives them.")):
    """List shipped device, serving-engine and API profiles."""
    from costsim import api

    hw = api.hardware()
    if json_out:
        typer.echo(dumps(hw.to_dict()))
        return
    typer.echo("devices:")
    for n, d in hw["devices"].items():
        typer.echo(f"  {n:<14} {d.display_name}: {d.memory_gb:g} GB, {d.hbm_bandwidth_gb_per_s:g} GB/s, "
                   f"{d.bf16_dense_tflops:g} BF16 dense TFLOPS")
    typer.echo("engines:")
    for n, e in hw["engines"].items():
        typer.echo(f"  {n:<14} {e.display_name}: {e.iteration_overhead_ms:g} ms/iteration, {e.layer_latency_us:g} us/layer, "
                   f"bandwidth {e.bandwidth_fraction:g} and FLOPs {e.flops_fraction:g} of peak")
    typer.echo("APIs:")
    for n, a in hw["apis"].items():
        typer.echo(f"  {n:<24} {a.display_name}: ${a.price_input_per_mtok_usd:g} in / "
                   f"${a.price_cached_input_per_mtok_usd:g} cached / ${a.price_output_per_mtok_usd:g} out per M tokens ({a.date})")


@hardware_app.command("show")
def hardware_show(
    name: str, json_out: bool = typer.Option(False, "--json"),
    model: Optional[str] = typer.Option(None, help="With a device: the KV capacity of this model on it."),
    gpus: Optional[int] = typer.Option(None, help="With --model: devices (tensor parallel) [as many as hold it]."),
    dtype: Optional[str] = typer.Option(None, help="With --model: weight precision [the model's default]."),
    engine: Optional[str] = typer.Option(None, help=f"With --model: serving engine [{DEPLOYMENTS.engine}]."),
    gpu_memory_utilization: Optional[float] = GPU_MEMORY_UTILIZATION,
    context: float = typer.Option(COMMANDS.roofline_context_tokens, help="With --model: tokens of context per sequence."),
):
    """Show one device, engine or API profile with the source of every figure; with --model,
    what that model leaves of the device's memory for KV, in tokens and in sequences."""
    from costsim import api

    if model:
        with user_errors(ValueError):
            _capacity(api.kv_capacity(name, model, gpus=gpus, dtype=dtype, engine=engine, context=context,
                                      gpu_memory_utilization=gpu_memory_utilization), json_out)
        return
    _show(api.hardware_show(name), json_out)


def _capacity(res, json_out):
    if json_out:
        typer.echo(dumps(res.data))
        return
    out, dep = res.data, res.deployment
    m, dev, eng = dep.model, dep.device, dep.engine
    typer.echo("\n".join([
        f"{m.display_name} on {dep.n_devices}x {dev.display_name}, {out['dtype']} weights, {eng.display_name}",
        f"  memory        {out['memory_bytes'] / 1e9:.0f} GB; the engine takes {out['memory_utilization']:.3g} of it, "
        f"keeps {out['reserve_bytes'] / dep.n_devices / 1e9:.3g} GB a GPU for activations and graphs",
        f"  weights       {out['weight_bytes'] / 1e9:.1f} GB",
        f"  KV pool       {out['kv_pool_bytes'] / 1e9:.1f} GB = {out['kv_capacity_tokens']:,.0f} tokens "
        f"at {out['kv_bytes_per_token'] / 1e3:.1f} kB a token"
        + (f" (+ {out['state_bytes_per_sequence'] / 1e6:.1f} MB of state a sequence)" if out["state_bytes_per_sequence"] else ""),
        f"  at once       {res.sequences_text}",
    ]))


@models_app.command("list")
def models_list(json_out: bool = typer.Option(False, "--json", help="Every profile's fields, as `models show --json` gives them.")):
    """List shipped model profiles."""
    from costsim import api

    if json_out:
        typer.echo(dumps(api.models().to_dict()))
        return
    for n, m in api.models().items():
        moe = f", MoE {m.num_experts} experts top-{m.experts_per_token}" if m.is_moe else ""
        typer.echo(f"  {n:<22} {m.total_params_b:g}B total / {m.active_params_b:g}B active, {m.num_layers} layers{moe}")


@models_app.command("show")
def models_show(name: str, json_out: bool = typer.Option(False, "--json")):
    """Show one model profile (name, TOML or Hugging Face config.json)."""
    from costsim import api

    _show(api.model(name), json_out)

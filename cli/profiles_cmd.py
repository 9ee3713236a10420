"""`costsim hardware list|show` and `costsim models list|show`."""

from __future__ import annotations

import typer

from ._common import dumps

hardware_app = typer.Typer(help="Device, engine and API profiles (hardware/*.toml, engines/, api/).", no_args_is_help=True)
models_app = typer.Typer(help="Model architecture profiles (models/*.toml).", no_args_is_help=True)


def _show(obj, json_out: bool) -> None:
    from dataclasses import asdict

    d = asdict(obj)
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
def hardware_list():
    """List shipped device, serving-engine and API profiles."""
    from costsim.profiles import load_api, load_device, load_engine, names

    typer.echo("devices:")
    for n in names("devices"):
        d = load_device(n)
        typer.echo(f"  {n:<14} {d.display_name}: {d.memory_gb:g} GB, {d.hbm_bandwidth_gbps:g} GB/s, "
                   f"{d.bf16_dense_tflops:g} BF16 dense TFLOPS")
    typer.echo("engines:")
    for n in names("engines"):
        e = load_engine(n)
        typer.echo(f"  {n:<14} {e.display_name}: {e.iteration_overhead_ms:g} ms/iteration, {e.layer_latency_us:g} us/layer, "
                   f"bandwidth {e.bandwidth_fraction:g} and FLOPs {e.flops_fraction:g} of peak")
    typer.echo("APIs:")
    for n in names("apis"):
        a = load_api(n)
        typer.echo(f"  {n:<24} {a.display_name}: ${a.price_input_per_mtok_usd:g} in / "
                   f"${a.price_cached_input_per_mtok_usd:g} cached / ${a.price_output_per_mtok_usd:g} out per M tokens ({a.date})")


@hardware_app.command("show")
def hardware_show(name: str, json_out: bool = typer.Option(False, "--json")):
    """Show one device, engine or API profile with the source of every figure."""
    from costsim.profiles import ProfileError, load_api, load_device, load_engine

    errors = []
    for load in (load_device, load_engine, load_api):
        try:
            _show(load(name), json_out)
            return
        except ProfileError as e:
            errors.append(e)
    raise errors[0]  # a device was the likeliest intent: list the known devices


@models_app.command("list")
def models_list():
    """List shipped model profiles."""
    from costsim.profiles import load_model, names

    for n in names("models"):
        m = load_model(n)
        moe = f", MoE {m.num_experts} experts top-{m.experts_per_token}" if m.is_moe else ""
        typer.echo(f"  {n:<22} {m.total_params_b:g}B total / {m.active_params_b:g}B active, {m.num_layers} layers{moe}")


@models_app.command("show")
def models_show(name: str, json_out: bool = typer.Option(False, "--json")):
    """Show one model profile (name, TOML or Hugging Face config.json)."""
    from costsim.profiles import load_model

    _show(load_model(name), json_out)

"""`costsim roofline`: the cost of one engine iteration for a model on a device."""

from __future__ import annotations

from typing import Optional

import typer

from ._common import UserError, dumps


def roofline(
    model: str = typer.Option(..., help="Model profile name, TOML or HF config.json."),
    device: str = typer.Option(..., help="Device profile name or TOML."),
    gpus: Optional[int] = typer.Option(None, help="Devices (tensor parallel) [as many as hold the weights]."),
    dtype: Optional[str] = typer.Option(None, help="Weight precision [the model's default]."),
    batch: int = typer.Option(1, help="Decode batch (sequences)."),
    context: float = typer.Option(4096, help="Context length per sequence, tokens."),
    prefill_tokens: Optional[float] = typer.Option(None, "--prefill", help="Also cost a prefill of this many new tokens."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Seconds, HBM bytes and FLOPs of one decode iteration (and a prefill) by the roofline."""
    from costsim import roofline as rl
    from costsim.profiles import DTYPE_BYTES, Deployment, devices_to_hold, load_device, load_model

    if batch < 1:
        raise UserError(f"--batch must be >= 1, got {batch}")
    if context < 0 or (prefill_tokens is not None and prefill_tokens < 0):
        raise UserError("--context and --prefill must be >= 0")
    if gpus is not None and gpus < 1:
        raise UserError(f"--gpus must be >= 1, got {gpus}")
    m, d = load_model(model), load_device(device)
    dt = dtype or m.default_dtype
    if dt not in DTYPE_BYTES:
        raise UserError(f"unknown precision {dt!r}; known: {', '.join(DTYPE_BYTES)}")
    n = gpus or devices_to_hold(m, d, dt)
    dep = Deployment(m, d, n, dt)
    if dep.weight_bytes > dep.memory_bytes:
        raise UserError(f"{m.name} in {dt} needs {dep.weight_bytes / 1e9:.0f} GB; {n}x {d.name} hold {dep.memory_bytes / 1e9:.0f} GB")
    dec = rl.decode_step(dep, batch, context)
    out = {
        "model": m.name, "device": d.name, "gpus": n, "dtype": dt, "batch": batch, "context": context,
        "decode_s_per_token": float(dec.seconds),
        "decode_tokens_per_s_per_sequence": float(1.0 / dec.seconds),
        "decode_tokens_per_s_total": float(batch / dec.seconds),
        "hbm_bytes_per_decode_step": float(dec.hbm_bytes),
        "flops_per_decode_step": float(dec.flops),
        "decode_compute_s": float(dec.compute_s), "decode_memory_s": float(dec.memory_s),
        "balance_batch": rl.balance_batch(dep, context),
        "balance_batch_paper": float(rl.balance_batch_paper(dep)),
        "regime": "compute-bound" if bool(dec.compute_bound) else "memory-bound",
        "prefill_tokens": prefill_tokens, "prefill_s": None,
    }
    if prefill_tokens:
        pre = rl.prefill(dep, prefill_tokens, context)
        out.update(prefill_s=float(pre.seconds), prefill_hbm_bytes=float(pre.hbm_bytes),
                   prefill_flops=float(pre.flops),
                   prefill_regime="compute-bound" if bool(pre.compute_bound) else "memory-bound")
    if json_out:
        typer.echo(dumps(out))
        return
    B = out["balance_batch"]
    lines = [
        f"{m.display_name} on {n}x {d.display_name}, {dt} weights; batch {batch}, context {context:g} tokens",
        f"  decode iteration   {out['decode_s_per_token'] * 1e3:.3f} ms  ({out['decode_tokens_per_s_per_sequence']:.1f} tok/s per sequence, {out['decode_tokens_per_s_total']:.0f} tok/s total)",
        f"  HBM bytes          {out['hbm_bytes_per_decode_step'] / 1e9:.3f} GB per iteration",
        f"  FLOPs              {out['flops_per_decode_step'] / 1e12:.3f} TFLOP per iteration",
        f"  compute {out['decode_compute_s'] * 1e3:.3f} ms vs memory {out['decode_memory_s'] * 1e3:.3f} ms -> {out['regime']}",
        f"  balance point B*   {'never (KV traffic grows as fast as FLOPs)' if B == float('inf') else f'{B:.0f} sequences'}"
        f" at this context; paper's form {out['balance_batch_paper']:.1f}",
        f"  assumptions: efficiencies bw {d.bandwidth_efficiency:g}, FLOPs {d.flops_efficiency:g}; "
        f"{d.iteration_overhead_s * 1e3:g} ms overhead per iteration; uniform expert routing",
    ]
    if prefill_tokens:
        lines.append(f"  prefill of {prefill_tokens:g} tokens   {out['prefill_s'] * 1e3:.1f} ms, {out['prefill_regime']}")
    typer.echo("\n".join(lines))

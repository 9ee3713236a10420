"""`costsim roofline`: one engine iteration, a serving-benchmark point, and the validation set."""

from __future__ import annotations

from typing import Optional

import typer

from costsim.config import COMMANDS

from ._common import ENGINE, EXPERT_PARALLEL, GPU_MEMORY_UTILIZATION, UserError, dumps, user_errors

roofline_app = typer.Typer(help="The roofline: one engine iteration, a serving point, the measured validation set.",
                           invoke_without_command=True)


@roofline_app.callback()
def roofline(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, help="Model profile name, TOML or HF config.json."),
    device: Optional[str] = typer.Option(None, help="Device profile name or a TOML file of your own (README, 'Your own hardware')."),
    gpus: Optional[int] = typer.Option(None, help="Devices (tensor parallel) [as many as hold the weights]."),
    dtype: Optional[str] = typer.Option(None, help="Weight precision [the checkpoint's own, as the model profile or config.json says; predict's default strong deployment is fp8]."),
    engine: Optional[str] = ENGINE,
    expert_parallel: bool = EXPERT_PARALLEL,
    gpu_memory_utilization: Optional[float] = GPU_MEMORY_UTILIZATION,
    batch: int = typer.Option(COMMANDS.roofline_batch, help="Decode batch (sequences)."),
    context: float = typer.Option(COMMANDS.roofline_context_tokens, help="Context length per sequence, tokens."),
    prefill_tokens: Optional[float] = typer.Option(None, "--prefill", help="Also cost a prefill of this many new tokens."),
    concurrency: Optional[float] = typer.Option(None, "--concurrency", help="Serving-benchmark view: concurrent requests (closed loop)."),
    input_len: float = typer.Option(COMMANDS.bench_input_tokens, "--input-len", help="Serving-benchmark view: prompt tokens per request."),
    output_len: float = typer.Option(COMMANDS.bench_output_tokens, "--output-len", help="Serving-benchmark view: output tokens per request."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Seconds, HBM bytes and FLOPs of one decode iteration (and a prefill) by the roofline, or
    with --concurrency what a serving benchmark reports (TTFT, TPOT, throughput)."""
    if ctx.invoked_subcommand:
        return
    if not model or not device:
        raise UserError("roofline needs --model and --device (or a subcommand: validate, fit)")
    from costsim import api

    with user_errors(ValueError):
        res = api.roofline(model, device, gpus=gpus, dtype=dtype, engine=engine, expert_parallel=expert_parallel,
                           gpu_memory_utilization=gpu_memory_utilization,
                           batch=batch, context=context, prefill=prefill_tokens, concurrency=concurrency,
                           input_len=input_len, output_len=output_len)
    if json_out:
        typer.echo(dumps(res.to_dict()))
        return
    out, dep = res.data, res.deployment
    m, d, eng, n = dep.model, dep.device, dep.engine, dep.n_devices
    title = f"{dep.describe()}"
    mem_line = (f"  memory             {dep.weight_bytes / 1e9:.1f} GB of weights; KV pool {out['kv_pool_bytes'] / 1e9:.1f} GB "
                f"({out['memory_utilization']:.3g} of {n}x {d.memory_bytes / 1e9:.1f} GB, {out['reserve_bytes'] / n / 1e9:.3g} GB a GPU reserved) = "
                f"{out['kv_capacity_tokens']:,.0f} tokens, {res.sequences_text()}")
    if concurrency is not None:
        typer.echo("\n".join([
            title,
            f"  serving benchmark, steady state: {concurrency:g} concurrent requests of {input_len:g} in / {output_len:g} out tokens",
            f"  TTFT               {out['ttft_s'] * 1e3:.1f} ms",
            f"  TPOT (= mean ITL)  {out['itl_s'] * 1e3:.2f} ms  ({1 / out['itl_s']:.1f} tok/s per request)" if out["itl_s"] else "  TPOT               -",
            f"  output throughput  {out['output_tokens_per_s']:.0f} tok/s over all requests",
            f"  request latency    {out['request_latency_s']:.2f} s",
            mem_line,
            f"  per iteration      {out['decode_batch']:.1f} sequences decoding; {out['prefill_iteration_fraction']:.0%} of iterations also carry a prefill chunk",
            f"  assumptions: closed loop in steady state (arrivals staggered: a benchmark's clients start together "
            "and run in waves, which `costsim bench` simulates), means (not medians); engine "
            f"{eng.name} ({eng.request_overhead_ms:g} ms a request, {eng.iteration_overhead_ms:g} ms/iteration, "
            f"{eng.layer_latency_us:g} us/layer" + (f", +{out['moe_layer_latency_us']:g} us/MoE layer" if m.is_moe else "") + ")",
        ]))
        return
    B = out["balance_batch"]
    lines = [
        f"{title}; batch {batch}, context {context:g} tokens",
        f"  decode iteration   {out['decode_s_per_token'] * 1e3:.3f} ms  ({out['decode_tokens_per_s_per_sequence']:.1f} tok/s per sequence, {out['decode_tokens_per_s_total']:.0f} tok/s total)",
        f"  HBM bytes          {out['hbm_bytes_per_decode_step'] / 1e9:.3f} GB per iteration",
        f"  FLOPs              {out['flops_per_decode_step'] / 1e12:.3f} TFLOP per iteration",
        f"  compute {out['decode_compute_s'] * 1e3:.3f} ms vs memory {out['decode_memory_s'] * 1e3:.3f} ms -> {out['regime']}"
        f"; + {out['fixed_latency_s_per_iteration'] * 1e3:.3f} ms fixed engine latency",
        f"  balance point B*   {'never (KV traffic grows as fast as FLOPs)' if B == float('inf') else f'{B:.0f} sequences'}"
        f" at this context; peak FLOPs/bandwidth {out['balance_batch_paper']:.1f}"
        + (f"; beyond the {out['kv_capacity_sequences']} sequences that fit" if out["kv_capacity_sequences"] is not None and B > out["kv_capacity_sequences"] else ""),
        mem_line,
        f"  assumptions: engine {eng.name}: bandwidth {out['bandwidth_fraction']:g} and FLOPs "
        f"{out['flops_fraction']:g} of peak, {eng.iteration_overhead_ms:g} ms per iteration, "
        f"{eng.layer_latency_us:g} us per layer" + (f" + {out['moe_layer_latency_us']:g} us per MoE layer" if m.is_moe else "")
        + ("; uniform expert routing" if m.is_moe else "") + "; no speculative decoding (MTP, EAGLE)"
        + ("; no data-parallel attention" if m.is_mla else ""),
    ]
    if prefill_tokens:
        lines.append(f"  prefill of {prefill_tokens:g} tokens   {out['prefill_s'] * 1e3:.1f} ms, {out['prefill_regime']}")
    typer.echo("\n".join(lines))


CASES = typer.Argument(None, help="Validation TOML, or a `vllm bench serve --save-result` JSON [the shipped set].")


@roofline_app.command("validate")
def validate_cmd(
    file: Optional[str] = CASES,
    engine: Optional[str] = typer.Option(None, "--engine", help="Cost every case with this engine profile instead of its own (e.g. ideal)."),
    model: Optional[str] = typer.Option(None, help="For vllm bench serve results: the model served [their metadata's]."),
    device: Optional[str] = typer.Option(None, help="For vllm bench serve results: the device [their metadata's]."),
    gpus: Optional[int] = typer.Option(None, help="For vllm bench serve results: GPUs, tensor parallel [metadata tp, else 1]."),
    dtype: Optional[str] = typer.Option(None, help="For vllm bench serve results: weight precision [metadata dtype, else bf16]."),
    expert_parallel: Optional[bool] = typer.Option(None, "--expert-parallel/--no-expert-parallel",
                                                   help="For vllm bench serve results: experts placed whole [metadata ep]."),
    split: Optional[str] = typer.Option(None, help="Only 'fit' or 'holdout' cases."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Predicted against measured for every case, with median |error| and worst factor per group."""
    from costsim import api

    with user_errors(ValueError):
        res = api.roofline_validate(file, engine=engine, model=model, device=device, gpus=gpus, dtype=dtype,
                                    expert_parallel=expert_parallel, split=split)
    if json_out:
        typer.echo(dumps(res.to_dict()))
        return
    rows, summ, pairs = res["cases"], res["summary"], res["pairs"]
    for run in res["runs"]:
        typer.echo(f"read as: {run}")
    typer.echo(f"{len(rows)} measured cases" + (f", every one costed with engine {engine}" if engine else ", each with its own engine profile")
               + "; under load (serving, rate), each run simulated as costsim bench runs it")
    typer.echo(f"  {'case':<52} {'split':<7} {'metric':<20} {'measured':>10} {'predicted':>10} {'error':>7}")
    for r in rows:
        metric = f"{r['statistic']} {r['metric']}".strip()
        typer.echo(f"  {r['id'][:52]:<52} {r['split']:<7} {metric:<20} {r['measured']:>10.4g} {r['predicted']:>10.4g} "
                   f"{r['error']:>+7.0%}" + ("" if r["fits_memory"] else "  (!)"))
    no_room = [r for r in rows if not r["fits_memory"]]
    if no_room:
        typer.echo(f"  (!) {len(no_room)} measured run(s) that costsim's memory model says could not hold their batch: "
                   "the model's reserve or KV sizes are larger than that engine's")
    typer.echo("per group (median |error|, worst factor):")
    for s in summ:
        typer.echo(f"  {s['split']:<7} {s['group']:<11} {s['cases']:>3} cases  {s['median_abs_error']:>5.0%}  x{s['worst_factor']:.2f}")
    typer.echo("per metric (ttft and tpot-itl: means and medians; p99: every 99th percentile):")
    for s in res["metric_summary"]:
        typer.echo(f"  {s['split']:<7} {s['metric_group']:<11} {s['cases']:>3} cases  {s['median_abs_error']:>5.0%}  x{s['worst_factor']:.2f}")
    if pairs:
        typer.echo("weak/strong step-time ratios measured in one harness (smaller model / largest, same device type):")
        for p in pairs:
            typer.echo(f"  {p['weak'][:44]:<44} / {p['strong'][:44]:<44} measured {p['measured_ratio']:.3f} predicted {p['predicted_ratio']:.3f} ({p['error']:+.0%})")
        errs = sorted(abs(p["error"]) for p in pairs)
        typer.echo(f"  {sum(e <= 0.2 for e in errs)} of {len(errs)} within 20%; median |error| {errs[len(errs) // 2]:.0%}")


@roofline_app.command("fit")
def fit_cmd(
    file: Optional[str] = CASES,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Fit the engines' parameters on the set's fit cases (kernel latencies shared, scheduler
    overhead and bandwidth per engine); print them as each engine profile's TOML lines."""
    from costsim import api

    with user_errors(ValueError):
        rep = api.roofline_fit(file).data
    if json_out:
        typer.echo(dumps(rep))
        return
    n = sum(len(c) for c in rep["cases"].values())
    typer.echo(f"# fitted on {n} cases; rms log error {rep['rms_log_before']:.3f} at the priors -> {rep['rms_log_after']:.3f}")
    for name, own in rep["per_engine"].items():
        typer.echo(f"# hardware/engines/{name}.toml ({len(rep['cases'][name])} of the cases)")
        values = {**rep["shared"], **own}
        for k, x in values.items():
            if "@" not in k:
                typer.echo(f"{k} = {x:.4g}")
        for fam in sorted({k.split("@")[1] for k in values if "@" in k}):  # a device family's own table
            typer.echo(f"[families.{fam}]")
            for k, x in values.items():
                if k.endswith("@" + fam):
                    typer.echo(f"{k.split('@')[0]} = {x:.4g}")

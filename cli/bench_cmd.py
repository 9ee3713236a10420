"""`costsim bench`: `vllm bench serve`, simulated. Its flags and result file are vLLM's; the
flags that say what is served (model, device, GPUs, engine, the server's limits) are costsim's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ._common import ENGINE, EXPERT_PARALLEL, GPU_MEMORY_UTILIZATION, UserError, atomic_write, check_output, dumps, user_errors


def bench(
    model: str = typer.Option(..., "--model", help="Model profile name, TOML or HF config.json."),
    device: str = typer.Option(..., "--device", help="Device profile name or a TOML file of your own (README, 'Your own hardware')."),
    gpus: Optional[int] = typer.Option(None, help="Devices (tensor parallel) [as many as hold the weights]."),
    dtype: Optional[str] = typer.Option(None, help="Weight precision [the checkpoint's own]."),
    engine: Optional[str] = ENGINE,
    expert_parallel: bool = EXPERT_PARALLEL,
    gpu_memory_utilization: Optional[float] = GPU_MEMORY_UTILIZATION,
    dataset_name: str = typer.Option("random", "--dataset-name", help="random or sharegpt (the shipped ShareGPT lengths, workloads/README.md)."),
    num_prompts: int = typer.Option(1000, "--num-prompts", help="Requests to send."),
    input_len: Optional[float] = typer.Option(None, "--random-input-len", "--input-len",
                                              help="Prompt tokens [random: 1024; sharegpt: the mean to scale to, 227.6]."),
    output_len: Optional[float] = typer.Option(None, "--random-output-len", "--output-len",
                                               help="Output tokens [random: 128; sharegpt: the mean to scale to, 203.3]."),
    range_ratio: str = typer.Option("0.0", "--random-range-ratio",
                                    help='Random lengths drawn from [len(1-r), len(1+r)]; a number, or {"input": a, "output": b}.'),
    sharegpt_output_len: Optional[int] = typer.Option(None, "--sharegpt-output-len", help="Every ShareGPT output this long."),
    request_rate: float = typer.Option(float("inf"), "--request-rate", help="Requests per second (inf: all at once)."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape of the gaps between requests (1: Poisson)."),
    max_concurrency: Optional[int] = typer.Option(None, "--max-concurrency", help="Most requests out at once (the client's cap)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the lengths, arrivals and overheads drawn."),
    arrivals: Optional[str] = typer.Option(None, "--arrivals",
                                           help="Send again the requests of a `vllm bench serve --save-detailed` result "
                                                "(its lengths, at its send times) instead of drawing a load."),
    percentile_metrics: str = typer.Option("ttft,tpot,itl,e2el", "--percentile-metrics",
                                           help="Latencies to report (vLLM's default leaves out e2el)."),
    metric_percentiles: str = typer.Option("99", "--metric-percentiles", help="Comma-separated percentiles, e.g. 50,90,99."),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="The server's most running sequences [the engine's on the device]."),
    max_num_batched_tokens: Optional[int] = typer.Option(None, "--max-num-batched-tokens",
                                                         help="The server's token budget of one iteration [the engine's on the device]."),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="Cost with an endpoint measured by costsim calibrate."),
    role: str = typer.Option("strong", "--role", help="Which endpoint of --calibration: strong or weak."),
    save_result: bool = typer.Option(False, "--save-result", help="Write the result JSON (vLLM's name in --result-dir)."),
    append_result: bool = typer.Option(False, "--append-result", help="Append the result to the file as one more line."),
    result_dir: Optional[str] = typer.Option(None, "--result-dir", help="Where --save-result writes [here]."),
    result_filename: Optional[str] = typer.Option(None, "--result-filename", help="The result file's name [vLLM's]."),
    label: Optional[str] = typer.Option(None, "--label", help="The result's label."),
    metadata: Optional[List[str]] = typer.Option(None, "--metadata", help="KEY=VALUE kept in the result (repeat it)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result JSON instead of the table."),
):
    """What `vllm bench serve` would report for a deployment, simulated: the same flags, the
    same result keys and table. Continuous batching with chunked prefill at the engine's token
    budget, KV admission and vLLM's scheduling order, request by request."""
    from costsim import api

    ratio = _range_ratio(range_ratio)
    target = None
    if save_result or append_result:
        name = result_filename or _default_name(label, request_rate, max_concurrency, model)
        target = check_output(Path(result_dir or ".") / name, inputs=tuple(f for f in (calibration, arrivals) if f))
    with user_errors(ValueError):
        res = api.bench(model, device, gpus=gpus, dtype=dtype, engine=engine, expert_parallel=expert_parallel,
                        gpu_memory_utilization=gpu_memory_utilization,
                        dataset=dataset_name, num_prompts=num_prompts, input_len=input_len, output_len=output_len,
                        range_ratio=ratio, sharegpt_output_len=sharegpt_output_len, request_rate=request_rate,
                        burstiness=burstiness, max_concurrency=max_concurrency, seed=seed,
                        percentile_metrics=percentile_metrics, metric_percentiles=metric_percentiles,
                        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        calibration=calibration, role=role, label=label, metadata=metadata or (),
                        arrivals=arrivals)
    out = res.to_dict()
    if target is not None:
        text = json.dumps(out)
        if append_result and target.exists() and target.stat().st_size:
            text = target.read_text() + "\n" + text  # vLLM's --append-result: a newline before each result
        atomic_write(target, text)
    if json_out:
        typer.echo(dumps(out))
        return
    typer.echo(render(out))
    if target is not None:
        typer.echo(f"result {'appended to' if append_result else 'written to'} {target}")


def _range_ratio(text: str):
    """vLLM's --random-range-ratio: one number, or a JSON object with "input" and "output"."""
    try:
        v = json.loads(text)
    except ValueError:
        raise UserError(f"--random-range-ratio: a number or a JSON object, got {text!r}") from None
    if isinstance(v, dict):
        if set(v) != {"input", "output"}:
            raise UserError('--random-range-ratio: a JSON object takes exactly "input" and "output"')
        return (v["input"], v["output"])
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise UserError(f"--random-range-ratio: a number or a JSON object, got {text!r}")
    return float(v)


def _default_name(label, rate, concurrency, model) -> str:
    """vLLM's result file name (its date stamp left out: a rerun replaces its own file)."""
    conc = f"-concurrency{concurrency}" if concurrency is not None else ""
    return f"{label or 'costsim'}-{rate}qps{conc}-{Path(model).stem}.json"


#: vLLM's table: each latency's short name and section title.
TITLES = {"ttft": ("TTFT", "Time to First Token"), "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
          "itl": ("ITL", "Inter-token Latency"), "e2el": ("E2EL", "End-to-end Latency")}


def _ms(v) -> str:
    """A latency as vLLM prints it, or 'n/a' where there is none (TPOT of one-token outputs)."""
    return "n/a" if v is None else f"{v:.2f}"


def render(out: dict) -> str:
    """The table `vllm bench serve` prints, for a simulated run, and costsim's notes under it."""
    c = out["costsim"]
    lines = [f"costsim bench: simulated, not measured: {c['deployment']}; costs from {c['costs_from']}",
             f"{'':<2}server limits: {c['max_num_seqs']} sequences, {c['max_num_batched_tokens']} tokens an iteration; "
             f"request overhead {c['request_overhead_ms']:.3g} ms (mean)",
             "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
             "{:<40} {:<10}".format("Successful requests:", out["completed"]),
             "{:<40} {:<10}".format("Failed requests:", out["failed"])]
    if out["max_concurrency"] is not None:
        lines.append("{:<40} {:<10}".format("Maximum request concurrency:", out["max_concurrency"]))
    if out["request_rate"] != "inf":
        lines.append("{:<40} {:<10.2f}".format("Request rate configured (RPS):", out["request_rate"]))
    lines += ["{:<40} {:<10.2f}".format("Benchmark duration (s):", out["duration"]),
              "{:<40} {:<10}".format("Total input tokens:", out["total_input_tokens"]),
              "{:<40} {:<10}".format("Total generated tokens:", out["total_output_tokens"]),
              "{:<40} {:<10.2f}".format("Request throughput (req/s):", out["request_throughput"]),
              "{:<40} {:<10.2f}".format("Output token throughput (tok/s):", out["output_throughput"]),
              "{:<40} {:<10.2f}".format("Peak concurrent requests:", out["max_concurrent_requests"]),
              "{:<40} {:<10.2f}".format("Total Token throughput (tok/s):", out["total_token_throughput"])]
    for m, (short, title) in TITLES.items():
        if f"mean_{m}_ms" not in out:
            continue
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        lines.append("{:<40} {:<10}".format(f"Mean {short} (ms):", _ms(out[f"mean_{m}_ms"])))
        lines.append("{:<40} {:<10}".format(f"Median {short} (ms):", _ms(out[f"median_{m}_ms"])))
        for k, v in out.items():
            if k.startswith("p") and k.endswith(f"_{m}_ms"):
                lines.append("{:<40} {:<10}".format(f"P{k[1:-len(m) - 4]} {short} (ms):", _ms(v)))
    lines.append("=" * 50)
    lines += [f"note: {n}" for n in c["notes"]]
    return "\n".join(lines)

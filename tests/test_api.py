"""costsim.api, the Python API: each function takes its command's options by their names, with
the same defaults and the same one-line errors, and gives what the command's ``--json`` prints;
a contract test holds the API's names to the CLI's flags."""

import inspect
import json
import subprocess
import sys

import pytest
import typer.main

from costsim import api
from costsim.cli.main import app, main


def cli_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def as_printed(result) -> dict:
    """What ``--json`` prints of a result: its to_dict() through JSON."""
    return json.loads(json.dumps(result.to_dict()))


# --- the command and the function agree ---------------------------------------------------------


def test_predict_is_the_command(capsys):
    assert as_printed(api.predict(p_accept=0.8, K=6)) == cli_json(capsys, "predict", "--p-accept", "0.8", "--K", "6")
    got = api.predict(0.7, strong_device="h100", write_rate=0.3)
    assert as_printed(got) == cli_json(capsys, "predict", "-p", "0.7", "--strong-device", "h100", "--write-rate", "0.3")
    assert got["K"] == 6 and got["L"] == pytest.approx(got.to_dict()["L"])  # K: SpecAgent's default


def test_simulate_and_replay_are_the_commands(capsys):
    sim = api.simulate(tasks=20, p_accept=0.7, sessions=2, protocols="strong-only,specagent", seed=3)
    assert as_printed(sim) == cli_json(capsys, "simulate", "--tasks", "20", "-p", "0.7", "--sessions", "2",
                                       "--protocols", "strong-only,specagent", "--seed", "3", "-q")
    frame = sim.to_frame()
    assert len(frame) == 2 * 20 and set(frame["protocol"]) == {"strong-only", "specagent"}
    rep = api.replay("tau2-airline", p_accept=0.85, protocols=["strong-only", "specagent"])
    assert as_printed(rep) == cli_json(capsys, "replay", "tau2-airline", "-p", "0.85", "--protocols",
                                       "strong-only,specagent", "-q")
    assert rep["scenario"]["tasks"] == 50 and not rep.warnings


def test_a_list_of_tasks_is_simulated_as_a_trace_is_replayed():
    tasks = api.load_trace("tau2-retail").tasks
    a = api.simulate(tasks=tasks, p_accept=0.85, protocols="strong-only,specagent")
    b = api.replay("tau2-retail", p_accept=0.85, protocols="strong-only,specagent")
    assert a.to_dict() == b.to_dict()


def test_capacity_and_plan_are_the_commands(capsys):
    # a target Strong-only meets (its uncontended p95 on the default deployment is about 128 s)
    cap = api.capacity("2/s", latency_p95="180s", tasks=30, tolerance=0.2, protocols="strong-only")
    assert as_printed(cap) == cli_json(capsys, "capacity", "--task-rate", "2/s", "--latency-p95", "180s", "--tasks",
                                       "30", "--tolerance", "0.2", "--protocols", "strong-only")
    assert list(cap.to_frame().index) == ["strong-only"] and set(cap.cells) == {"strong-only"}
    # The cells searched once size any other rate: the same answer as a fresh search.
    again = api.capacity(4.0, latency_p95=180, tasks=30, tolerance=0.2, protocols="strong-only", cells=cap.cells)
    assert as_printed(again)["protocols"] == as_printed(
        api.capacity("4/s", latency_p95="3min", tasks=30, tolerance=0.2, protocols="strong-only"))["protocols"]
    plan = api.plan(1.0, latency_p95=90, devices="h200", K="4", tasks=30, confirm=1)
    printed = cli_json(capsys, "plan", "--task-rate", "1/s", "--latency-p95", "90s", "--devices", "h200", "--K", "4",
                       "--tasks", "30", "--confirm", "1", "-q")
    mine = as_printed(plan)
    assert {k: v for k, v in mine.items() if k != "elapsed_s"} == {k: v for k, v in printed.items() if k != "elapsed_s"}
    assert len(plan.to_frame()) == len(mine["front"]) and len(plan.configs) == mine["configurations"]


def test_roofline_traces_and_protocols_are_the_commands(capsys, tmp_path):
    r = api.roofline("llama-3.1-8b", "h100", concurrency=8, input_len=512, output_len=64)
    assert as_printed(r) == cli_json(capsys, "roofline", "--model", "llama-3.1-8b", "--device", "h100",
                                     "--concurrency", "8", "--input-len", "512", "--output-len", "64")
    assert r.deployment.n_devices == r["gpus"] == 1
    stats = api.trace_stats(["tau2-airline"], K=4)
    assert as_printed(stats) == cli_json(capsys, "traces", "stats", "tau2-airline", "--K", "4")
    assert len(stats.to_frame()) == 50
    # The command adds each option's flag to what the API says of it.
    printed = cli_json(capsys, "protocols", "specagent", "edge-cloud")
    for d in printed.values():
        for o in (*d["options"].values(), *d.get("deployment", {}).values()):
            assert o.pop("flag").startswith("--")
    assert as_printed(api.protocols(["specagent", "edge-cloud"])) == printed
    valid = api.roofline_validate(split="holdout")
    assert as_printed(valid) == cli_json(capsys, "roofline", "validate", "--split", "holdout")
    assert {c["split"] for c in valid["cases"]} == {"holdout"} and len(valid.to_frame()) == len(valid["cases"])


def test_import_trace_is_the_command(capsys, tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"messages": [
        {"role": "user", "content": "Where is my order?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
        {"role": "assistant", "content": "It has shipped."}]}) + "\n")
    got = api.import_trace("openai", log)
    assert got["tasks"] == 1 and got["steps_by_kind"] == {"read": 0, "write": 1, "respond": 0, "final": 1}
    assert main(["traces", "import", "openai", str(log), "-o", str(tmp_path / "out.jsonl")]) == 0
    assert (tmp_path / "out.jsonl").read_text() == got.jsonl()
    assert list(got.to_frame()["kind"]) == ["write", "final"]


# --- the same errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("call,argv", [
    (lambda: api.predict(1.5), ["predict", "--p-accept", "1.5"]),
    (lambda: api.simulate(tasks=5, protocols="nosuch"), ["simulate", "--tasks", "5", "--protocols", "nosuch"]),
    (lambda: api.replay("nosuch-trace"), ["replay", "nosuch-trace"]),
    (lambda: api.capacity("fast"), ["capacity", "--task-rate", "fast"]),
    (lambda: api.plan(1.0, K="0"), ["plan", "--task-rate", "1", "--K", "0"]),
    (lambda: api.roofline("llama-3.1-70b", "rtx4090", gpus=1), ["roofline", "--model", "llama-3.1-70b", "--device",
                                                                "rtx4090", "--gpus", "1"]),
    (lambda: api.bench("llama-3.1-8b", "h100", burstiness=-1.0), ["bench", "--model", "llama-3.1-8b", "--device", "h100",
                                                                 "--burstiness", "-1"]),
])
def test_an_error_is_the_commands_one_line(capsys, call, argv):
    with pytest.raises(ValueError) as e:
        call()
    assert main(argv) == 2
    assert capsys.readouterr().err == f"costsim: error: {e.value}\n"


def test_an_option_no_command_takes_is_a_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'p'"):
        api.simulate(tasks=5, p=0.8)
    with pytest.raises(TypeError, match="'sessions'"):
        api.capacity(1.0, sessions=4)  # capacity sizes its own load


# --- the contract: the API's names are the CLI's ------------------------------------------------------

#: command path -> (API function, the options it takes as **options), and the CLI's own output flags.
COMMANDS = {
    "predict": (api.predict, ()), "simulate": (api.simulate, api.SCENARIO_OPTIONS),
    "replay": (api.replay, api.SCENARIO_OPTIONS), "capacity": (api.capacity, api.CAPACITY_OPTIONS),
    "plan": (api.plan, api.PLAN_OPTIONS), "roofline": (api.roofline, ()),
    "roofline validate": (api.roofline_validate, ()), "traces stats": (api.trace_stats, ()),
    "sweep": (api.sweep, ()), "figures": (api.figures, ()), "protocols": (api.protocols, ()),
    "calibrate": (api.calibrate, tuple(api.LIVE_OPTIONS)), "validate": (api.validate, tuple(api.LIVE_OPTIONS)),
    "serve-local": (api.serve_local, ()), "bench": (api.bench, ()),
    "acceptance": (api.measure_acceptance, tuple(api.ACCEPTANCE_OPTIONS)),
}
#: The CLI's parameters that are not options of the computation (output, display) and the few
#: named differently (the CLI's parameter -> the API's keyword).
OUTPUT = {"json_out", "quiet", "out", "output", "figure", "deploy_out", "as_json", "per_task", "ctx", "save_result", "append_result",
          "result_dir", "result_filename"}
RENAMED = {"traces": "trace", "prefill_tokens": "prefill", "ks": "K", "dataset_name": "dataset"}


def _command(path: str):
    cmd = typer.main.get_command(app)
    for part in path.split():
        cmd = cmd.commands[part]
    return cmd


@pytest.mark.parametrize("path", list(COMMANDS))
def test_every_flag_of_a_command_is_a_keyword_of_its_api_function(path):
    fn, extra = COMMANDS[path]
    takes = set(inspect.signature(fn).parameters) | set(extra)
    flags = {p.name for p in _command(path).params} - OUTPUT
    if path == "sweep":  # the table is the sweep's computation, not only its output
        flags |= {"out"}
        takes |= {"out"}
    missing = {f for f in flags if f not in takes and RENAMED.get(f) not in takes}
    assert not missing, f"{path}: the API lacks {sorted(missing)}"


def test_the_main_functions_import_from_costsim_without_loading_the_library():
    code = ("import sys, costsim; heavy = {'numpy', 'simpy', 'pandas'} & set(sys.modules); "
            "from costsim import predict, simulate, replay, capacity, plan, load_trace, import_trace; "
            "import costsim.api as api; print(sorted(heavy), predict is api.predict, plan is api.plan)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "True", "True"]


def test_docs_api_names_every_function_and_result():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    public = [n for n, v in vars(api).items() if not n.startswith("_") and getattr(v, "__module__", "") == "costsim.api"
              and (inspect.isfunction(v) or inspect.isclass(v)) and n not in ("to_jsonable", "Warnings")]
    missing = [n for n in public if f"{n}(" not in text and f"`{n}`" not in text and f"{n}:" not in text]
    assert not missing, missing


def test_every_command_sizes_a_replica_by_one_rule():
    # Before: predict sized Llama-3.1-70B in BF16 on H20 for its batch (4 GPUs), simulate for its
    # weights (2), roofline refused a batch of 16 on its 2, and plan searched 8 GPUs for a model
    # whose heads 8 cannot split. Now one rule (sizing.replica_gpus): the fewest GPUs holding the
    # weights and 16 sessions at the workload's context, within a node, splitting the heads.
    from costsim import api
    from costsim.measured import measured_path
    from costsim.planner.space import configurations
    from costsim.profiles import load_model

    flags = dict(strong="llama-3.1-70b", strong_device="h20")
    p = api.predict(0.8, 6, **flags).to_dict()["strong_deployment"]["n_devices"]
    s = api.deployments(**flags)["strong"].n_devices
    r = api.roofline("llama-3.1-70b", "h20", batch=16, context=7720).to_dict()["gpus"]
    cap = api.capacity(0.01, **flags, protocols="strong-only", tasks=20, tolerance=0.5, latency_p95="1h")["assumptions"][1]
    plan = min(x.strong.n_devices for x in configurations(load_model("llama-3.1-70b"), load_model("qwen3.5-4b"), ("h20",),
                                                          ("strong-only",), (6,)))
    assert p == s == r == plan == 4 and cap.startswith("strong: Llama 3.1 70B") and "on 4x NVIDIA H20" in cap
    qwen = str(measured_path().parent / "configs" / "Qwen2.5-7B-Instruct" / "config.json")  # 28 heads
    counts = {x.strong.n_devices for x in configurations(load_model(qwen), load_model("qwen3.5-4b"), ("h100",),
                                                         ("strong-only",), (6,))}
    assert counts == {1, 2, 4}

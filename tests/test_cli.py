"""The command line: values printed, JSON keys, one-line errors with exit code 2."""

import json

import pytest

from costsim.cli.main import main
from conftest import run_costsim as run, run_json


@pytest.mark.parametrize("args,phrase", [
    (["predict", "--p-accept", "1.5", "--K", "6"], "--p-accept must be in [0, 1]"),
    (["predict", "--p-accept", "-0.1"], "--p-accept must be in [0, 1]"),
    (["predict", "--p-accept", "0.8", "--K", "0"], "--K must be an integer in [1, 1024]"),
    (["predict", "--p-accept", "0.8", "--strong-device", "nosuch"], "unknown device 'nosuch'; known: a100-40gb, a100-80gb"),
    (["predict", "--p-accept", "0.8", "--strong", "nosuch"], "unknown model 'nosuch'; known:"),
    (["predict", "--p-accept", "0.8", "--rho", "-1"], "--rho must be a finite number >= 0"),
    (["predict", "--p-accept", "0.8", "--write-rate", "0"], "--write-rate must be in (0, 1]"),
    (["predict", "--p-accept", "0.8", "--calibration", "/nonexistent.toml"], "no such calibration file"),
    (["roofline", "--model", "llama-3.1-70b", "--device", "rtx4090", "--gpus", "1"], "needs 141 GB"),
    (["simulate", "--p-accept", "2"], "--p-accept must be in [0, 1]"),
    (["simulate", "--tasks", "0"], "'--tasks': 0 is not in the range"),
    (["simulate", "--protocols", "nosuch"], "unknown protocol 'nosuch'; known: strong-only"),
    (["simulate", "--p-dist", "beta:1"], "expected beta:a,b"),
    (["simulate", "--tool-latency", "soon"], "latency 'soon'"),
    (["hardware", "show", "nosuch"], "unknown device 'nosuch'"),
    (["predict", "--p-accept", "0.8", "--K", "abc"], "'abc' is not a valid integer"),
    (["predict"], "Missing option '--p-accept'"),
    (["nosuch"], "No such command 'nosuch'"),
    (["models", "show", "/no/such/config.json"], "no such file"),
])
def test_bad_input_is_one_line_and_exit_2(args, phrase):
    code, out, err = run(*args)
    assert code == 2
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert phrase in lines[0]


def test_roofline_json(capsys):
    r = run_json(capsys, "roofline", "--model", "llama-3.1-8b", "--device", "h100", "--batch", "1",
                 "--context", "1000", "--prefill", "2000")
    for key in ("decode_s_per_token", "prefill_s", "hbm_bytes_per_decode_step", "flops_per_decode_step",
                "balance_batch", "regime"):
        assert key in r
    assert r["regime"] == "memory-bound" and r["prefill_regime"] == "compute-bound"
    # 8.03B params less the untied input embedding (128256 x 4096: one row gathered per token)
    # in bf16, plus 1001 tokens of KV at 128 KiB each, read once
    assert r["hbm_bytes_per_decode_step"] == pytest.approx((8.03e9 - 128256 * 4096) * 2 + 1001 * 131072, rel=0.01)


def test_profiles_list_show_and_aliases(capsys):
    assert main(["hardware", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("h20", "h100-sxm", "h200", "b200", "a100-80gb", "l40s", "rtx-4090", "rtx-5090"):
        assert name in out
    for alias, name in (("H100", "h100-sxm"), ("a100", "a100-80gb"), ("rtx4090", "rtx-4090"), ("5090", "rtx-5090")):
        assert run_json(capsys, "hardware", "show", alias)["name"] == name
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("qwen3.5-4b", "qwen3.5-397b-a17b", "glm-5", "deepseek-v4-flash", "llama-3.1-8b", "qwen3-30b-a3b"):
        assert name in out


def test_hf_config_as_model_spec(tmp_path, capsys):
    from conftest import LLAMA_8B_CONFIG

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA_8B_CONFIG))
    r = run_json(capsys, "predict", "-p", "0.8", "--K", "6", "--weak", str(cfg))
    assert r["weak_deployment"]["model"] == "llama-3.1-8b"


def test_simulate_json_shape_and_bracket(capsys, tmp_path):
    out = tmp_path / "rows.csv"
    r = run_json(capsys, "simulate", "-p", "0.8", "--K", "6", "--tasks", "60", "--seed", "1", "--out", str(out))
    assert set(r) >= {"protocols", "closed_form"}
    spec = r["protocols"]["specagent"]
    for metric in ("R", "L", "hbm_ratio", "flops_ratio", "wall_ratio", "strong_calls_per_task"):
        m = spec[metric]
        assert m["ci95"][0] <= m["mean"] <= m["ci95"][1]
    assert spec["strong_calls_per_task"]["mean"] < r["protocols"]["strong-only"]["strong_calls_per_task"]["mean"]
    import pandas as pd

    df = pd.read_csv(out)
    assert len(df) == 3 * 60 and set(df["protocol"]) == {"strong-only", "weak-only", "specagent"}
    # the table holds what the summary was computed from
    assert df[df.protocol == "specagent"]["strong_calls"].mean() == pytest.approx(spec["strong_calls_per_task"]["mean"])


def test_the_default_simulation_brackets_its_closed_form(capsys):
    # Issue 3's "done when": SpecAgent's simulated R and L bracket the closed form (the exact
    # twin on the same fixed paths; the renewal form does not hold there).
    r = run_json(capsys, "simulate", "-p", "0.8", "--K", "6", "--tasks", "2000", "--seed", "1", "--quiet")
    cf, spec = r["closed_form"], r["protocols"]["specagent"]
    assert cf["method"] == "exact" and cf["protocol"] == "specagent"
    for metric in ("R", "L"):
        lo, hi = spec[metric]["ci95"]
        assert lo <= cf[metric] <= hi, (metric, cf[metric], lo, hi)
    assert cf["exact"]["specagent"]["strong_calls_per_task"] == pytest.approx(
        spec["strong_calls_per_task"]["mean"], abs=spec["strong_calls_per_task"]["ci95"][1] - spec["strong_calls_per_task"]["mean"])


@pytest.mark.parametrize("protocols", ["strong-only,weak-only", "agentcollab,specagent-self-spec",
                                       "specagent-hold-responses"])
def test_simulate_prints_a_closed_form_whatever_the_protocols(capsys, protocols):
    assert main(["simulate", "-p", "0.8", "--K", "3", "--tasks", "20", "--protocols", protocols]) == 0
    out = capsys.readouterr().out
    spec = "specagent-hold-responses" if "hold" in protocols else "specagent"
    assert f"closed form (exact twin, {spec}): R = " in out and "renewal form (costsim's" in out
    r = run_json(capsys, "simulate", "-p", "0.8", "--K", "3", "--tasks", "20", "--protocols", protocols,
                 "--p-dist", "markov:0.9,0.3,0.1,0.3")
    assert r["closed_form"]["method"] == "renewal" and r["closed_form"]["R"] == r["closed_form"]["renewal"]["R"]


def test_replay_shipped_trace_and_refuse_overwriting_it(capsys, tmp_path):
    r = run_json(capsys, "replay", "tau2-airline", "-p", "0.8", "--K", "6")
    so, spec = r["protocols"]["strong-only"], r["protocols"]["specagent"]
    # One strong call per recorded agent call (467 over 50 tasks), not per tool call (621 steps).
    assert so["strong_calls_per_task"]["mean"] == pytest.approx(467 / 50)
    assert spec["R"]["mean"] < 1 and spec["strong_calls_per_task"]["mean"] < so["strong_calls_per_task"]["mean"]
    # An output never replaces an input, even one that looks like a table.
    from costsim.files import data_dir

    src = tmp_path / "trace.csv"
    src.write_bytes((data_dir("traces") / "tau2-airline.jsonl").read_bytes())
    before = src.read_bytes()
    code, _, err = run("replay", str(src), "--out", str(src), "--protocols", "strong-only")
    assert code == 2 and "refusing to overwrite an input file" in err
    assert src.read_bytes() == before


@pytest.mark.parametrize("old,new", [("--weak", "--weak-url"), ("--strong", "--strong-url")])
def test_a_renamed_flag_keeps_its_old_spelling_for_one_release_with_a_warning(capsys, old, new):
    # Before 2026-12-02 --strong/--weak named a model in every command but calibrate and
    # validate, where they took a URL: now --strong-url/--weak-url there.
    other = "--strong-url" if new == "--weak-url" else "--weak-url"
    assert main(["calibrate", old, "ftp://a", other, "b"]) == 2
    err = capsys.readouterr().err
    assert f"{old} is deprecated in 'costsim calibrate': use {new}" in err
    assert f"{new} ftp://a: not an endpoint URL" in err or "not an endpoint URL" in err
    assert main(["traces", "stats", "tau2-airline", "--no-tasks"]) == 0
    out = capsys.readouterr()
    assert "--no-tasks is deprecated in 'costsim traces stats': use --no-per-task" in out.err
    assert main(["traces", "stats", "tau2-airline", "--no-per-task"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    # a model named --strong elsewhere is untouched
    assert main(["predict", "-p", "0.8", "--K", "6", "--strong", "llama-3.1-8b", "--json"]) == 0
    assert "deprecated" not in capsys.readouterr().err


def _keys(obj, out: dict, path=(), unitless=None) -> dict:
    """Every key of a JSON document with the JSON types it holds: key -> {types}; numeric keys
    that name no unit by costsim's one rule (:func:`costsim.config.unit_of`: declared, by their
    ending, or inside an object whose key names one) go into ``unitless``. A profile's
    ``sources`` table (field name -> where its value comes from) holds no values of its own."""
    from costsim.config import unit_of

    if isinstance(obj, dict):
        for k, v in obj.items():
            # a simulated estimate, {"mean": x, "ci95": [lo, hi]}, is the number it estimates
            estimate = isinstance(v, dict) and set(v) == {"mean", "ci95"}
            t = ("null" if v is None else "number" if estimate else "object" if isinstance(v, dict) else "array"
                 if isinstance(v, list) else "bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float))
                 else "string")
            out.setdefault(k, set()).add(t)
            if t == "number" and unitless is not None and not unit_of((*path, k)):
                unitless.add(".".join((*path, k)))
            if k != "sources":
                _keys(v, out, (*path, k), unitless)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _keys(v, out, (*path, str(i)), unitless)
    return out


def test_every_commands_json_speaks_one_vocabulary(capsys):
    # Before 2026-12-02 plan held cost_per_1k_tasks and cost_per_1k_tasks_usd in one object and
    # gpus was a number in plan, an object in capacity.
    from costsim.config import JSON_KEYS, RETIRED_JSON_KEYS

    commands = [["predict", "-p", "0.8", "--K", "6"], ["simulate", "--tasks", "20", "-q"],
                ["capacity", "--task-rate", "0.2/s", "--latency-p95", "400s", "--protocols", "strong-only,specagent",
                 "--strong-device", "h200", "--weak-device", "h200", "--tasks", "40", "-q"],
                ["plan", "--task-rate", "0.5/s", "--latency-p95", "120s", "--devices", "b200", "--K", "6", "--tasks", "20",
                 "--confirm", "1", "-q"],
                ["roofline", "--model", "llama-3.1-8b", "--device", "h100"], ["hardware", "show", "h20"],
                ["hardware", "list"], ["models", "list"], ["traces", "stats", "tau2-airline"],
                ["bench", "--model", "llama-3.1-8b", "--device", "h100", "--num-prompts", "20"]]
    seen: dict = {}
    unitless: set = set()
    for argv in commands:
        seen_here = _keys(run_json(capsys, *argv), {}, unitless=unitless)
        for k, types in seen_here.items():
            seen.setdefault(k, {}).setdefault(" ".join(argv[:2]), set()).update(types)
    assert not set(seen) & set(RETIRED_JSON_KEYS), {k: seen[k] for k in set(seen) & set(RETIRED_JSON_KEYS)}
    wrong = [(k, cmd, got) for k, (types, _) in JSON_KEYS.items() for cmd, got in seen.get(k, {}).items()
             if not got <= set(types.split("|"))]
    assert not wrong, "\n".join(map(str, wrong))
    assert {"fleet_gpus", "cost_per_1k_tasks_usd", "specagent_pays", "gpus"} <= set(seen)
    # Every number names its unit (44 of the keys above did not before 2026-12-02: roofline's
    # 'context', predict's 'n', plan's 'seconds' and its count 'feasible' beside capacity's bool).
    assert not unitless, "\n".join(sorted(unitless))


def test_every_renamed_flag_is_taken_by_its_command_and_its_old_spelling_by_none():
    """Each new spelling of cli.main.RENAMED_FLAGS is a flag of its command, and each old one is
    no longer (else the rename would shadow a live flag): the output flags are -o/--out (a
    file), --out-dir (a folder), --<what>-out (a second output); --trace runs a trace's tasks."""
    import click
    import typer

    from costsim.cli.main import RENAMED_FLAGS, app

    root = typer.main.get_command(app)
    for (cmd, old), new in RENAMED_FLAGS.items():
        c = root
        for word in cmd.split():
            c = c.commands[word]
        flags = {o for p in c.params if isinstance(p, click.Option) for o in (*p.opts, *p.secondary_opts)}
        assert new in flags and old not in flags, (cmd, old, new)


def test_the_old_output_flags_still_work_with_a_warning(tmp_path, capsys):
    fig = tmp_path / "front.txt"
    assert main(["plan", "--task-rate", "1/s", "--figure", str(fig)]) == 2  # reaches plan's own check
    err = capsys.readouterr().err
    assert "--figure is deprecated in 'costsim plan': use --figure-out" in err and "expected a .png" in err
    assert main(["calibrate", "--output", str(tmp_path / "c.toml"), "--shape-trace", "no-such-trace",
                 "--weak-url", "http://127.0.0.1:9", "--strong-url", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "--output is deprecated in 'costsim calibrate': use --out" in err and "no-such-trace" in err


def test_the_api_takes_the_live_modes_old_keyword_names_with_a_deprecation_warning():
    from costsim import api

    with pytest.warns(DeprecationWarning, match=r"calibrate\(weak=...\) is deprecated: use weak_url="):
        with pytest.raises(ValueError):
            api.calibrate(weak="ftp://x", strong_url="ftp://y")

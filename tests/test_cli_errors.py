"""Bad input is one line and exit 2, found before any work is done: the defects of a hostile
user's session (sizes, ranges, output paths, options, encodings), each kept fixed here."""

import json

import pytest

from costsim.cli.main import main as _main


def run(argv, capsys):
    code = _main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


BAD = [
    # sizes that would allocate without bound
    (["predict", "-p", "0.8", "--K", "1000000000"], "--K must be an integer in [1, 1024]"),
    (["simulate", "--K", "1000000000", "--tasks", "2", "-q"], "--K must be an integer in [1, 1024]"),
    (["replay", "tau2-airline", "--K", "1000000000", "-q"], "--K must be an integer in [1, 1024]"),
    (["traces", "stats", "tau2-airline", "--K", "1000000000"], "--K must be an integer in [1, 1024]"),
    # values out of range
    (["simulate", "--p-dist", "recorded:1.5", "--tasks", "2", "-q"], "recorded[:p] (p in [0, 1])"),
    (["simulate", "--seed", "-1", "--tasks", "2", "-q"], "'--seed': -1 is not in the range"),
    (["simulate", "--network-rtt", "inf", "--tasks", "2", "-q"], "--network-rtt 'inf': expected a duration"),
    (["simulate", "--tool-latency", "nan", "--tasks", "2", "-q"], "latency 'nan'"),
    (["simulate", "--arrival-rate", "nan", "--tasks", "2", "-q"], "--arrival-rate must be > 0"),
    (["simulate", "--arrival-rate", "inf", "--tasks", "2", "-q"], "--arrival-rate must be > 0"),
    (["simulate", "--tool-latency", "inf", "--tasks", "2", "-q"], "expected a duration in [0, 1e+06] s"),
    (["simulate", "--tool-latency", "1e308", "--tasks", "2", "-q"], "expected a duration in [0, 1e+06] s"),
    (["simulate", "--tool-latency", "lognormal:1,100", "--tasks", "2", "-q"], "(sigma at most 10)"),
    (["simulate", "--network-rtt", "1e308", "--tasks", "2", "-q"], "--network-rtt must be a finite duration >= 0 and at most 1e+06 s"),
    (["simulate", "--protocols", "edge-cloud", "--api-ttft", "inf", "--tasks", "2", "-q"],
     "--api-ttft must be a finite number >= 0"),
    (["simulate", "--protocols", "edge-cloud", "--api-tps", "inf", "--tasks", "2", "-q"],
     "--api-tps must be a finite number > 0"),
    (["simulate", "--strong-gpus", "0", "--tasks", "2", "-q"], "--strong-gpus must be >= 1, got 0"),
    # an option that is a field of the scenario is checked as the field is
    (["simulate", "--tasks", "2", "-q", "--protocols", "agentcollab", "--option", "escalate_p=1.5"],
     "--escalate-p must be in [0, 1], got 1.5"),
    (["simulate", "--tasks", "2", "-q", "--option", "K=1000000"], "--K must be an integer in [1, 1024]"),
    (["simulate", "--tasks", "2", "-q", "--option", "rho=5000"], "--rho must be a finite number in [0, 1000]"),
    (["simulate", "--tasks", "2", "-q", "--option", "false_reject=2"], "--false-reject must be in [0, 1], got 2"),
    (["simulate", "--tasks", "2", "-q", "--protocols", "speculative-actions", "--option", "spec_hit_rate=3"],
     "--spec-hit-rate must be in [0, 1], got 3"),
    (["simulate", "--tasks", "2", "-q", "--protocols", "agentcollab", "--escalation-span", "2", "--option",
      "escalation_span=3"], "--option escalation_span is given twice: by its own setting and by --option"),
    # an ablation's fixed option cannot be set
    (["simulate", "--tasks", "2", "-q", "--protocols", "specagent-hold-responses", "--option", "chunking=writes-only"],
     "(specagent-hold-responses fixes chunking=hold-messages)"),
    (["simulate", "--arrival-rate", "1", "--sessions", "4", "--tasks", "2", "-q"], "are exclusive"),
    (["predict", "-p", "0.8", "--K", "6", "--steps", "nan"], "--steps must be a finite number in (0, 1e+06]"),
    (["predict", "-p", "0.8", "--K", "6", "--step-tokens", "0"], "--step-tokens must be at least 1 token"),
    (["predict", "-p", "0.8", "--strong-step-scale", "0"], "--strong-step-scale must be a number in (0, 1000]"),
    (["predict", "-p", "0.8", "--step-tokens", "1e308"], "--step-tokens must be at most 1e+06 tokens"),
    (["predict", "-p", "0.8", "--obs-tokens", "1e308"], "--obs-tokens must be at most 1e+06 tokens"),
    (["predict", "-p", "0.8", "--verdict-tokens", "1e308"], "--verdict-tokens must be at most 1e+06 tokens"),
    (["replay", "tau2-airline", "--weak-step-scale", "nan", "-q"], "--weak-step-scale must be a number in (0, 1000]"),
    (["simulate", "--tasks", "2", "-q", "--strong-step-scale", "1e9"], "--strong-step-scale must be a number"),
    (["roofline", "--model", "llama-3.1-8b", "--device", "h100", "--context", "nan"], "--context must be a finite"),
    (["simulate", "--tasks", "2", "-q", "--protocols", "agentcollab", "--option", "escalation_growth=-1"],
     "expected a number >= 0"),
    (["simulate", "--tasks", "2", "-q", "--protocols", "agentcollab", "--option", "max_span=0"],
     "expected a whole number >= 1"),
    (["simulate", "--tasks", "2", "-q", "--protocols", "agentcollab", "--option", "max_span=x"],
     "expected a finite number"),
    (["simulate", "--tasks", "2", "-q", "--protocols", "agentcollab", "--option", "reflection=3"], "expected one of separate, inline"),
    # outputs that cannot be written, refused before the run
    (["simulate", "--tasks", "2", "-q", "--out", "/proc/x.parquet"], "cannot write there"),
    (["simulate", "--tasks", "2", "-q", "--out", ""], "--out is empty"),
    # an empty name is not "the default"
    (["predict", "-p", "0.8", "--strong", ""], "--strong is empty"),
    (["simulate", "--tasks", "2", "-q", "--engine", " "], "--engine is empty"),
    (["simulate", "--tasks", "2", "-q", "--protocols", ",,,"], "--protocols names no protocol"),
    (["hardware", "show", ""], "an empty device name; known: "),
    (["replay", "tau2-airline", "tau2-airline.jsonl", "-q"], "tau2-airline.jsonl: the same trace as tau2-airline, given twice"),
    (["simulate", "--tasks", "2", "-q", "--out", "out.txt"], "expected a .parquet or .csv file name"),
    (["replay", "tau2-airline", "-q", "--out", "/proc/x.csv"], "cannot write there"),
    (["figures", "--out-dir", "/proc/figs"], "cannot write there"),
]


@pytest.mark.parametrize("argv, msg", BAD)
def test_bad_input_is_one_line(argv, msg, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv, capsys)
    assert code == 2, err
    assert err.startswith("costsim: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert msg in err
    assert not list(tmp_path.iterdir())  # nothing was written


def test_output_that_is_a_directory_or_a_file(tmp_path, capsys):
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    code, _, err = run(["figures", "--out-dir", str(a_file)], capsys)
    assert code == 2 and "exists and is not a directory" in err
    code, _, err = run(["simulate", "--tasks", "2", "-q", "--out", str(tmp_path)], capsys)
    assert code == 2 and "is a directory; give a file name" in err


def test_a_failed_command_leaves_no_new_folders(tmp_path, capsys):
    out = tmp_path / "new" / "sub" / "x.csv"
    code, _, err = run(["simulate", "--tasks", "2", "-q", "-p", "2", "--out", str(out)], capsys)
    assert code == 2 and not (tmp_path / "new").exists()
    code, _, err = run(["figures", "--only", "nosuch", "--out", str(tmp_path / "figs" / "a")], capsys)
    assert code == 2 and not (tmp_path / "figs").exists()
    assert run(["simulate", "--tasks", "2", "-q", "--out", str(out)], capsys)[0] == 0 and out.is_file()


def test_utf8_bom_is_accepted(tmp_path, capsys):
    from costsim.traces import Step, Task, dumps_jsonl, load

    p = tmp_path / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + dumps_jsonl([Task("t", (Step("final", 5),))]).encode())
    assert [t.task_id for t in load(p).tasks] == ["t"]
    tools = tmp_path / "tools.toml"
    tools.write_bytes(b"\xef\xbb\xbf" + b'get = "read"\n')
    from costsim.traces.tools import load_tool_kinds

    assert load_tool_kinds(tools) == {"get": "read"}
    dev = tmp_path / "d.toml"
    dev.write_bytes(b"\xef\xbb\xbf" + b'name = "d"\ndisplay_name = "d"\nmemory_gb = 80\nhbm_bandwidth_gb_per_s = 2000\n'
                    b'bf16_dense_tflops = 400\nsource = "t"\n')
    from costsim.profiles import load_device

    assert load_device(str(dev)).memory_gb == 80


def test_bad_device_profile_values(tmp_path):
    from costsim.profiles import ProfileError, load_device

    dev = tmp_path / "d.toml"
    base = 'name = "d"\ndisplay_name = "d"\nbf16_dense_tflops = 400\nsource = "t"\n'
    dev.write_text(base + 'memory_gb = 80\nhbm_bandwidth_gb_per_s = 0\n')
    with pytest.raises(ProfileError, match="hbm_bandwidth_gb_per_s must be > 0"):
        load_device(str(dev))
    dev.write_text(base + 'memory_gb = "80"\nhbm_bandwidth_gb_per_s = 2000\n')
    with pytest.raises(ProfileError, match="memory_gb must be a number"):
        load_device(str(dev))


def test_a_task_without_steps_is_left_out_of_a_replay(tmp_path, capsys):
    from costsim.traces import Step, Task, dumps_jsonl

    p = tmp_path / "t.jsonl"
    p.write_text(dumps_jsonl([Task("empty", ()), Task("t", (Step("read", 30, 20), Step("final", 10)))]))
    code, out, err = run(["replay", str(p), "--json", "-q"], capsys)
    assert code == 0 and "1 task(s) without steps left out: empty" in err
    res = json.loads(out)
    assert res["protocols"]["specagent"]["L"]["mean"] == res["protocols"]["specagent"]["L"]["mean"]  # not nan


def test_count_intervals_do_not_go_below_zero():
    from costsim.metrics import mean_ci

    ci = mean_ci([0, 0, 0, 0, 0, 0, 0, 9])["ci95"]
    assert ci[0] == 0.0 and ci[1] > 1.125
    assert mean_ci([-1.0, 1.0, 2.0])["ci95"][0] < 0  # a signed quantity keeps its interval


def test_traces_with_huge_numbers_or_lone_surrogates(tmp_path, capsys):
    from costsim.traces import Step, Task, dumps_jsonl

    hdr = dumps_jsonl([Task("t", (Step("final", 5),))]).splitlines()[0]
    big, sur = tmp_path / "big.jsonl", tmp_path / "sur.jsonl"
    big.write_text(hdr + '\n{"task_id": "t", "steps": [{"kind": "final", "output_tokens": ' + "9" * 5000 + "}]}\n")
    sur.write_text(hdr + '\n{"task_id": "t", "steps": [{"kind": "read", "output_tokens": 3, "tool": "\\ud800"}]}\n')
    for path, msg in ((big, "a number with too many digits"), (sur, "not valid Unicode (a lone surrogate escape)")):
        code, _, err = run(["traces", "stats", str(path), "--strict"], capsys)
        assert code == 2 and err.count("\n") == 1 and msg in err and ":2:" in err


def _default_sigint():
    """In the child before exec: SIGINT delivered and fatal-by-default, whatever the parent had.
    A CI runner may start the tests with SIGINT ignored or blocked, and both are inherited."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_says_interrupted_and_exits_130(tmp_path):
    import signal
    import subprocess
    import time
    from pathlib import Path

    from conftest import costsim_argv

    out = tmp_path / "t.parquet"
    p = subprocess.Popen([*costsim_argv(), "simulate", "--tasks", "200000", "-q", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    time.sleep(2.5)
    status = Path(f"/proc/{p.pid}/status")
    signals = [ln for ln in status.read_text().splitlines() if ln.startswith("Sig")] if status.exists() else []
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError(f"still running 60 s after SIGINT; its signal masks then: {signals}; stderr: {err!r}")
    assert p.returncode == 130 and err.strip().endswith("costsim: interrupted"), err
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))  # no partial file


def test_an_output_never_replaces_a_file_the_command_reads(tmp_path, capsys):
    """Before 2026-12-02 simulate/replay --out wrote over the --calibration they had read."""
    cal = tmp_path / "calib.csv"  # a calibration file by any name
    cal.write_text('[calibration]\nsource = "t"\n[ratios]\nkappa = 0.5\nv_over_d = 0.1\nrho = 1.0\n')
    before = cal.read_bytes()
    for argv in (["simulate", "--tasks", "2", "-q"], ["replay", "tau2-airline", "-q"]):
        code, _, err = run([*argv, "--calibration", str(cal), "--out", str(cal)], capsys)
        assert code == 2 and "refusing to overwrite an input file" in err and cal.read_bytes() == before


def test_sigterm_is_handled_as_ctrl_c_is_and_exits_143(tmp_path):
    """kill, timeout, systemd, Docker and Slurm send SIGTERM: before 2026-12-02 it left the
    output's .NAME.XXXX.tmp file behind."""
    import signal
    import subprocess
    import time

    from conftest import costsim_argv

    out = tmp_path / "t.parquet"
    p = subprocess.Popen([*costsim_argv(), "simulate", "--tasks", "200000", "-q", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143 and err.strip() == "costsim: terminated", err
    assert not out.exists() and not list(tmp_path.glob(".*"))


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("after_s", [0.1, 0.25, 0.5])
def test_a_signal_during_start_up_is_one_line_and_leaves_nothing(tmp_path, sig, after_s):
    """An interrupt at any moment, the imports and the output check included (before 2026-12-02
    Ctrl-C during the imports printed a KeyboardInterrupt traceback)."""
    import signal
    import subprocess
    import time

    from conftest import costsim_argv

    out = tmp_path / "deep" / "t.csv"
    p = subprocess.Popen([*costsim_argv(), "simulate", "--tasks", "200000", "-q", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    time.sleep(after_s)
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    assert "Traceback" not in err and err.count("\n") <= 1, err
    assert p.returncode in (130, 143, -signal.SIGINT, -signal.SIGTERM), (p.returncode, err)
    assert list(tmp_path.iterdir()) == []  # no probe file, no folder made for it


def test_a_terminal_that_cannot_encode_a_character_gets_a_replacement_not_a_traceback():
    import os
    import subprocess

    from conftest import costsim_argv

    env = dict(os.environ, PYTHONIOENCODING="latin-1")
    r = subprocess.run([*costsim_argv(), "predict", "-p", "0.8", "--K", "6"], capture_output=True, env=env)
    assert r.returncode == 0 and b"Traceback" not in r.stderr and b"R_u" in r.stdout


@pytest.mark.parametrize("argv,said", [
    (["predict", "-p", "0.8", "--kappa", "1e308"], "--kappa must be at most 1000"),
    (["predict", "-p", "0.8", "--v-over-d", "1e308"], "--v-over-d must be at most 1000"),
    (["predict", "-p", "0.8", "--steps", "1e300"], "--steps must be a finite number in (0, 1e+06]"),
    (["predict", "-p", "0.8", "--calibration", ""], "--calibration is empty"),
    (["capacity", "--task-rate", "1e-300"], "--task-rate must be in [1e-6, 1e6] tasks/s"),
    (["capacity", "--task-rate", "0.5", "--strong-price", "inf"], "--strong-price must be a price in [0, 10000] USD"),
    # before 2026-12-02: plan recommended "USD inf"; 10^9 replicas hung, then ran out of memory
    (["plan", "--task-rate", "1/s", "--price", "h20=1e308"], "--price h20 must be a price in [0, 10000] USD"),
    (["simulate", "--tasks", "2", "--strong-replicas", "1000000000"], "--weak-replicas must be at most 100,000"),
    # calibrate's sizes, refused before any request (a plan of 10^9 probes, a 10^11-token prompt)
    (["calibrate", "--repeats", "1000000000", "--weak-url", "http://127.0.0.1:9", "--strong-url", "http://127.0.0.1:9"],
     "--repeats must be an integer in [1, 100]"),
    (["calibrate", "--K", "100000", "--weak-url", "http://127.0.0.1:9", "--strong-url", "http://127.0.0.1:9"],
     "--K must be an integer in [1, 1,024]"),
    (["calibrate", "--max-prompt-tokens", "100000000000", "--weak-url", "http://127.0.0.1:9", "--strong-url",
      "http://127.0.0.1:9"], "--max-prompt-tokens must be an integer in [1, 1,000,000]"),
])
def test_sizes_past_any_deployment_are_one_line_errors(argv, said, capsys):
    from costsim.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and said in err


@pytest.mark.parametrize("argv", [[], ["hardware"], ["traces"], ["traces", "import"]])
def test_a_group_alone_prints_its_help_and_no_empty_error(argv, capsys):
    assert _main(argv) == 2
    out, err = capsys.readouterr()
    assert "Usage:" in out + err and "error" not in err


def test_recorded_verdicts_on_a_trace_without_any_are_warned_of(capsys):
    code, out, err = run(["replay", "tau2-airline", "--verdicts", "recorded", "--protocols", "specagent", "-q",
                          "--json"], capsys)
    assert code == 0 and "no step of tau2-airline records a verdict" in err


def test_text_from_a_trace_is_printed_escaped_never_as_lines_or_terminal_escapes(tmp_path, capsys):
    """Before 2026-12-02 a task id or field name holding a newline forged a `costsim: error:`
    line, and an escape sequence cleared the screen."""
    import json

    from costsim.traces.jsonl import dumps_jsonl
    from costsim.traces.schema import Step, Task

    forged = "t1\ncostsim: error: forged\x1b[2J"
    step = {"kind": "read", "output_tokens": 10, "observation_tokens": 5, "context_tokens": 100}
    trace = tmp_path / "t.jsonl"
    trace.write_text(dumps_jsonl([Task(forged, (Step(**step),))]))
    code, out, err = run(["traces", "stats", str(trace), "--per-task"], capsys)
    assert code == 0 and "\x1b" not in out and not any(ln.startswith("costsim: error") for ln in out.splitlines())
    assert "t1\\ncostsim" in out  # the newline shown as an escape (the column holds 13 characters)
    bad = tmp_path / "bad.jsonl"
    lines = trace.read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1].replace('"read"', json.dumps("evil\nkind\x1b[2J"))]) + "\n")
    code, out, err = run(["traces", "stats", str(bad), "--strict"], capsys)
    assert code == 2 and err.count("\n") == 1 and "\x1b" not in err and "evil\\nkind" in err


def test_a_toml_date_anywhere_in_a_users_file_reaches_json_as_text(tmp_path, capsys):
    """Before 2026-12-02 a TOML date (`K = 2026-01-01`) in a calibration file reached json.dumps:
    a TypeError traceback."""
    import json

    cal = tmp_path / "c.toml"
    cal.write_text('[calibration]\nsource = 2026-01-01\n[ratios]\nkappa = 0.5\nv_over_d = 0.1\nrho = 1.0\n'
                   '[workload]\nK = 2026-01-01\nwhen = 12:30:00\n')
    code, out, err = run(["predict", "-p", "0.8", "--calibration", str(cal), "--json"], capsys)
    assert code == 0 and "2026-01-01" in json.dumps(json.loads(out))

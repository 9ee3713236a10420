"""A hostile user's fuzz, in-process through the console entry point: every numeric flag of
the commands that cost something, every file argument, every output path. Whatever comes in,
a command finishes with exit 0, or with exit 2 and one line on stderr: never a traceback, a
hang or a write where it was not asked to write. Derandomised in CI (conftest), and quick."""

import os
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costsim.cli.main import main as _main

from conftest import costsim_argv  # noqa: F401  (the same entry point the console script runs)

WEIRD = ["nan", "inf", "-inf", "-1", "0", "-0", "1e9", "1e308", "1e-300", "3.5", "2", "abc", "", "0x10",
         "99999999999999999999", "1_000", " 4", "1/s"]
NUMBERS = st.one_of(st.sampled_from(WEIRD), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.integers(-10**15, 10**15).map(str))

PREDICT = ["predict", "-p", "0.8", "--K", "6"]
ROOF = ["roofline", "--model", "llama-3.1-8b", "--device", "h100"]
SIM = ["simulate", "--tasks", "2", "-q"]
FLAGS = (
    [(["predict", "--K", "6", "-p"], None), (["predict", "-p", "0.8", "--K"], None)]
    + [(PREDICT + [f], None) for f in ("--batch", "--steps", "--step-tokens", "--obs-tokens", "--context-tokens",
                                        "--verdict-tokens", "--v-over-d", "--rho", "--kappa", "--write-rate",
                                        "--strong-gpus")]
    + [(ROOF + [f], None) for f in ("--batch", "--context", "--prefill", "--gpus", "--concurrency")]
    + [(ROOF + ["--concurrency", "4", f], None) for f in ("--input-len", "--output-len")]
    + [(SIM + [f], None) for f in ("--p-accept", "--K", "--sessions", "--arrival-rate", "--seed", "--rho",
                                    "--verdict-tokens", "--network-rtt", "--tool-latency", "--false-accept",
                                    "--spec-hit", "--escalation-span", "--p-dist", "--tasks")]
    + [(["traces", "stats", "tau2-airline", "--K"], None),
       (["hardware", "show", "h100", "--model", "llama-3.1-8b", "--context"], None)]
)


def run(argv, capsys):
    t = time.perf_counter()
    code = _main(argv)  # an exception here is the traceback a user would have seen
    elapsed = time.perf_counter() - t
    out = capsys.readouterr()
    return code, out.out, out.err, elapsed


def check(code, err, elapsed, argv):
    assert code in (0, 2), (argv, code, err)
    lines = err.splitlines()
    # Warnings about skipped records may come first; an error is one line, the last.
    assert all(x.startswith("costsim: warning: ") for x in lines[:-1]), (argv, err)
    if code == 2:
        assert lines and lines[-1].startswith("costsim: error: "), (argv, err)
    assert "Traceback" not in err
    assert elapsed < 30, (argv, elapsed)


@settings(max_examples=160, deadline=None, suppress_health_check=list(HealthCheck))
@given(flag=st.sampled_from(FLAGS), value=NUMBERS)
def test_numeric_flags(flag, value, capsys, tmp_path_factory):
    prefix, _ = flag
    if prefix[-1] == "--tasks" and value.strip().lstrip("-").isdigit() and int(value) > 50:
        value = "-5"  # a valid large count would only take long; the bound itself is tested below
    argv = [*prefix, value]
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("fuzz"))
    try:
        code, _, err, elapsed = run(argv, capsys)
        assert not os.listdir(".")  # none of these writes a file
    finally:
        os.chdir(cwd)
    check(code, err, elapsed, argv)


def test_counts_that_size_allocations_are_bounded(capsys):
    for argv in (SIM[:1] + ["--tasks", "10000000", "-q"], ["capacity", "--task-rate", "1/s", "--latency-p95", "60s",
                                                            "--tasks", "10000000"]):
        code, _, err, _ = run(argv, capsys)
        assert code == 2 and "is not in the range" in err


def _files(tmp):
    """Hostile inputs: empty, binary, a BOM and garbage, a deep nest, random bytes, huge, a
    directory, a FIFO."""
    out = {}
    for name, data in {"empty": b"", "binary": bytes(range(256)) * 4, "bom": b"\xef\xbb\xbf{[garbage",
                       "nested": b"[" * 200_000 + b"]" * 200_000, "huge": b"a" * (8 << 20),
                       "jsonish": b'{"simulations": [{"messages": 5}]}\n{"resourceSpans": [{"scopeSpans": 3}]}'}.items():
        for ext in (".jsonl", ".json", ".toml"):
            p = tmp / f"{name}{ext}"
            p.write_bytes(data)
            out[f"{name}{ext}"] = str(p)
    d = tmp / "adir.json"
    d.mkdir()
    out["dir"] = str(d)
    fifo = tmp / "fifo.toml"
    os.mkfifo(fifo)
    out["fifo"] = str(fifo)
    return out


FILE_COMMANDS = [
    lambda f, o: ["replay", f, "-q"],
    lambda f, o: ["traces", "stats", f],
    lambda f, o: ["traces", "import", "tau2", f, "-o", o],
    lambda f, o: ["traces", "import", "openai", f, "-o", o],
    lambda f, o: ["traces", "import", "otel", f, "-o", o],
    lambda f, o: PREDICT + ["--calibration", f],
    lambda f, o: PREDICT + ["--strong", f],
    lambda f, o: ["roofline", "validate", f],
    lambda f, o: ["hardware", "show", f],
    lambda f, o: ["sweep", f, "-o", o, "--serial", "-q"],
    lambda f, o: ["traces", "import", "tau2", "tau2-airline.json", "--tools", f, "-o", o],
]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cmd=st.sampled_from(FILE_COMMANDS), which=st.sampled_from(
    ["empty.jsonl", "empty.json", "empty.toml", "binary.jsonl", "binary.toml", "bom.json", "bom.toml",
     "nested.json", "nested.jsonl", "huge.jsonl", "huge.toml", "jsonish.json", "jsonish.jsonl", "dir", "fifo"]))
def test_file_arguments(cmd, which, capsys, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("files")
    files = _files(tmp)
    out = str(tmp / "out.jsonl")
    argv = cmd(files[which], out)
    code, _, err, elapsed = run(argv, capsys)
    check(code, err, elapsed, argv)
    assert code == 2 or which == "empty.toml"  # none of these is a valid input ... except an empty grid/TOML?


OUTPUT_COMMANDS = [
    lambda o: SIM + ["--out", o],
    lambda o: ["replay", "tau2-airline", "-q", "--out", o],
    lambda o: ["figures", "--out", o, "--only", "cost-model"],
    lambda o: ["traces", "import", "openai", "in.jsonl", "-o", o],
]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(cmd=st.sampled_from(OUTPUT_COMMANDS), where=st.sampled_from(
    ["", "adir", "/proc/x.parquet", "/proc/figs", "in.jsonl", "x" * 300 + ".csv", "sub/\x7f.csv"]))
def test_output_paths(cmd, where, capsys, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outs")
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        (tmp / "adir").mkdir()
        src = tmp / "in.jsonl"
        src.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}\n')
        before = src.read_bytes()
        argv = cmd(where)
        code, _, err, elapsed = run(argv, capsys)
        assert src.read_bytes() == before  # an input is never written over
    finally:
        os.chdir(cwd)
    check(code, err, elapsed, argv)
    wants_dir = argv[0] == "figures"
    if where in ("", "/proc/x.parquet", "/proc/figs", "in.jsonl") or len(where) > 255 or (where == "adir" and not wants_dir):
        assert code == 2

"""Malformed foreign traces: each gives one-line errors or warnings naming file, line and field,
never a traceback; nothing is lost or replaced silently. The files are an independent
review's repros (tests/data/bad_traces)."""

import os
import shutil
from pathlib import Path

import pytest

from costsim.cli.main import main

DATA = Path(__file__).parent / "data" / "bad_traces"


def run(capsys, *argv):
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def here(tmp_path, monkeypatch):
    for f in DATA.iterdir():
        shutil.copy(f, tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("argv,said", [
    # numbers too large for a float (10**400) and durations past any clock
    (["traces", "import", "tau2", "tau_huge.json", "-o", "o.jsonl"], "expected an integer in [0, 1e+09]"),
    (["traces", "import", "openai", "oa_huge.jsonl", "-o", "o.jsonl"], "expected an integer in [0, 1e+09]"),
    (["traces", "import", "openai", "oa_bigdur.jsonl", "-o", "o.jsonl"], "field 'duration_s': expected seconds in [0, 1e+06]"),
    (["traces", "import", "otel", "ot_bigts.json", "-o", "o.jsonl"], "expected unix nanoseconds"),
    (["traces", "stats", "t_huge.jsonl"], "must be at most 1e+09"),
    (["traces", "stats", "t_bigreward.jsonl"], "field 'reward': expected a finite number"),
    # OTel numbers written as strings that are not counts or times
    (["traces", "import", "otel", "ot_nanstr.json", "-o", "o.jsonl"], "expected a token count"),
    (["traces", "import", "otel", "ot_infstr.json", "-o", "o.jsonl"], "expected a token count"),
    (["traces", "import", "otel", "ot_tssup.json", "-o", "o.jsonl"], "expected unix nanoseconds"),
    # text UTF-8 cannot hold (a JSON "\ud800"): refused, naming the field
    (["traces", "import", "tau2", "tau_surr2.json", "-o", "o.jsonl"], "field 'task_id': not valid Unicode"),
    (["traces", "import", "otel", "ot_modelsurr.json", "-o", "o.jsonl"], "field 'meta.agent_llm': not valid Unicode"),
    (["traces", "import", "openai", "oa_tool_surr.jsonl", "-o", "o.jsonl"], "not valid Unicode"),
    (["traces", "import", "openai", "oa_ok.jsonl", "-o", "o.jsonl", "--tools", "k_date.toml"],
     "field 'get_order': expected \"read\" or \"write\""),
    # a call that reuses the id of a whole conversation does not replace it
    (["traces", "import", "openai", "oa_dupid3.jsonl", "-o", "o.jsonl", "--strict"],
     "'x' already used by line 1 (a whole conversation)"),
])
def test_bad_input_is_said_in_lines_naming_the_field(here, capsys, argv, said):
    code, out, err = run(capsys, *argv)
    assert code in (0, 2)
    lines = err.strip().splitlines()
    assert lines and all(x.startswith(("costsim: warning: ", "costsim: error: ")) for x in lines), err
    assert said in err


def test_an_argument_string_of_many_digits_is_compared_as_text(here, capsys):
    assert run(capsys, "traces", "import", "openai", "oa_digits_args.jsonl", "-o", "o.jsonl")[0] == 0


def test_replay_says_which_tasks_it_skipped(here, capsys):
    code, out, err = run(capsys, "replay", "t_partial.jsonl", "-q")
    assert code == 0
    assert err.count("costsim: warning: t_partial.jsonl:") == 2 and "task skipped" in err


def test_a_bad_first_line_of_json_lines_loses_only_itself(here, capsys):
    code, out, err = run(capsys, "traces", "import", "otel", "ot_lines_bad.jsonl", "-o", "o.jsonl")
    assert code == 0 and "ot_lines_bad.jsonl:1: field '(line)': invalid JSON" in err
    assert "1 tasks of 2 records" in out  # line 2's spans are read


def test_an_orphan_span_outside_every_agent_run_is_said_to_be_left_out(here, capsys):
    code, out, err = run(capsys, "traces", "import", "otel", "ot_orphan.json", "-o", "o.jsonl")
    assert code == 0 and "left out: taken as a root, it is outside every agent run of its trace" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_an_output_that_is_a_fifo_is_refused_not_replaced(here, capsys):
    os.mkfifo("out.fifo")
    code, _, err = run(capsys, "traces", "import", "tau2", "tau_ok.json", "-o", "out.fifo")
    assert code == 2 and "not a regular file" in err
    assert not Path("out.fifo").is_file()  # still the FIFO


@pytest.mark.parametrize("out,said", [("", "the output path is empty"),
                                      ("tau_ok.json/x.jsonl", "cannot write there (tau_ok.json is a file, not a folder)")])
def test_an_output_path_that_cannot_be_is_said_plainly(here, capsys, out, said):
    code, _, err = run(capsys, "traces", "import", "tau2", "tau_ok.json", "-o", out)
    assert code == 2 and said in err


@pytest.mark.parametrize("importer,src", [("tau2", "tau_gap.json"), ("otel", "ot_long.json")])
def test_an_imported_duration_past_any_call_is_left_unrecorded_not_written(here, capsys, importer, src):
    # A conversation resumed 19 days later, a tool span of 23 days: the reader refuses such
    # durations, so the import must not write them (else its own trace would not load).
    code, out, err = run(capsys, "traces", "import", importer, src, "-o", "o.jsonl")
    assert code == 0 and "is past 1e+06 s; left unrecorded" in err
    code, out, err = run(capsys, "traces", "stats", "o.jsonl")
    assert code == 0 and "task skipped" not in err

"""`costsim traces`: import, stats, list; one-line errors, no traceback, no overwritten inputs."""

import json

import pytest

from costsim.cli.main import main as _main


def run(argv):
    try:
        return _main(argv)
    except SystemExit as e:  # typer exits on success
        return e.code


def tau2_file(tmp_path):
    sims = [{"task_id": "1", "messages": [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "name": "mystery", "arguments": {}}]},
        {"role": "tool", "id": "a", "content": "done"},
        {"role": "assistant", "content": "All set."},
    ]}]
    p = tmp_path / "res.json"
    p.write_text(json.dumps(sims))
    return p


def test_import_stats_round_trip(tmp_path, capsys):
    src, out = tau2_file(tmp_path), tmp_path / "out" / "t.jsonl"
    assert run(["traces", "import", "tau2", str(src), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 tasks of 1 records, 2 steps (read 0, write 1, respond 0, final 1)" in printed
    assert "1 tool-call steps of 1 unknown tools defaulted to write (held): mystery (1)" in printed
    header = json.loads(out.read_text().splitlines()[0])
    assert header["tools_defaulted_to_write"] == {"mystery": 1} and header["schema_version"] == 1
    assert run(["traces", "stats", str(out), "--K", "6", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    f = s["files"][0]
    # the write is held and reviewed, the final answer sent (the paper's rule, writes-only)
    assert (s["K"], f["kinds"], f["chunk_lengths"]["reviewed"]) == (6, {"read": 0, "write": 1, "respond": 0, "final": 1}, [1, 0, 0, 0, 0, 0])


def test_tools_file_sets_kinds(tmp_path, capsys):
    src, out = tau2_file(tmp_path), tmp_path / "t.jsonl"
    tools = tmp_path / "tools.toml"
    tools.write_text('mystery = "read"\n')
    assert run(["traces", "import", "tau2", str(src), "-o", str(out), "--tools", str(tools)]) == 0
    assert "none defaulted" in capsys.readouterr().out
    assert json.loads(out.read_text().splitlines()[1])["steps"][0]["kind"] == "read"


def test_refuses_to_overwrite_input(tmp_path, capsys):
    src = tau2_file(tmp_path)
    before = src.read_text()
    assert run(["traces", "import", "tau2", str(src), "-o", str(src)]) == 2
    assert "refusing to overwrite an input file" in capsys.readouterr().err
    assert src.read_text() == before


@pytest.mark.parametrize("content, expected", [
    ('{"simulations": 5}', "res.json: field 'simulations': expected a list"),
    ('[{"task_id": "1", "messages": [{"role": "bot"}]}]',
     "res.json: field '[0].messages[0].role': \"bot\" is not one of system, user, assistant, tool"),
])
def test_strict_errors_are_one_line(tmp_path, capsys, content, expected):
    src = tmp_path / "res.json"
    src.write_text(content)
    out = tmp_path / "t.jsonl"
    assert run(["traces", "import", "tau2", str(src), "-o", str(out), "--strict"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"costsim: error: {src.parent}/{expected}"]
    assert "Traceback" not in err and not out.exists()


def test_non_strict_skips_and_warns(tmp_path, capsys):
    src = tmp_path / "res.json"
    good = json.loads(tau2_file(tmp_path).read_text())[0]
    src.write_text(json.dumps([good, {"task_id": "2", "messages": "nope"}]))
    assert run(["traces", "import", "tau2", str(src), "-o", str(tmp_path / "t.jsonl")]) == 0
    cap = capsys.readouterr()
    assert f"costsim: warning: {src}: field '[1].messages': expected a list" in cap.err
    assert "1 warning(s) above (--strict makes a skipped or repaired record fatal)" in cap.out


def test_stats_bad_file_and_options(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"format": "costsim-trace", "schema_version": 1}\n{"task_id": "x", "steps": [{"kind": "jump", "output_tokens": 1}]}\n')
    assert run(["traces", "stats", str(p), "--strict"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"costsim: error: {p}:2: field 'steps[0].kind': \"jump\" is not one of read, write, respond, final")
    assert run(["traces", "stats", str(p)]) == 2  # its one task skipped: nothing to count
    err = capsys.readouterr().err
    assert "task skipped" in err and err.strip().endswith(f"{p}: no valid task (1 malformed line(s) skipped)")
    assert run(["traces", "stats", "no-such-trace"]) == 2
    assert "not a shipped trace (shipped: " in capsys.readouterr().err
    assert run(["traces", "stats", "tau2-airline", "--chunking", "all"]) == 2
    assert "--chunking: expected one of messages-end, messages-pass, writes-only" in capsys.readouterr().err


def test_list_and_shipped_stats(capsys):
    assert run(["traces", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert (rows["tau2-airline"]["tasks"], rows["tau2-airline"]["steps"]) == (50, 621)
    assert (rows["tau2-retail"]["tasks"], rows["tau2-retail"]["steps"]) == (114, 1279)
    assert run(["traces", "stats", "tau2-airline", "--no-per-task"]) == 0
    out = capsys.readouterr().out
    assert "steps by kind   read 310  write 61  respond 200  final 50" in out
    assert "model claude-sonnet-4-5-20250929: 621 steps" in out


def test_openai_import(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"request": {"messages": [{"role": "user", "content": "hi"}]},
                               "response": {"choices": [{"message": {"role": "assistant", "content": "hello"}}],
                                            "usage": {"prompt_tokens": 8, "completion_tokens": 2}}}) + "\n")
    out = tmp_path / "o.jsonl"
    assert run(["traces", "import", "openai", str(log), "-o", str(out)]) == 0
    step = json.loads(out.read_text().splitlines()[1])["steps"][0]
    assert (step["kind"], step["output_tokens"], step["context_tokens"]) == ("final", 2, 8)

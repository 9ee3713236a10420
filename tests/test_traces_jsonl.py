"""costsim's trajectory JSONL: lossless round trip, line-by-line validation, clear errors."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim.traces import SCHEMA_VERSION, Step, Task, TraceError, dumps_jsonl, parse_jsonl, read_jsonl
from costsim.traces.schema import ESTIMABLE_FIELDS, STEP_KINDS

names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
counts = st.integers(min_value=0, max_value=10**7)
json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | names
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(names, c, max_size=3), max_leaves=8)


@st.composite
def steps(draw):
    fields = tuple(draw(st.lists(st.sampled_from(ESTIMABLE_FIELDS), unique=True, max_size=4)))
    return Step(
        kind=draw(st.sampled_from(STEP_KINDS)), output_tokens=draw(counts),
        observation_tokens=draw(counts), tool=draw(names),
        context_tokens=draw(st.integers(min_value=-1, max_value=10**7)), model=draw(names),
        duration_s=draw(st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False)),
        verdict=draw(st.none() | st.booleans()),
        estimated=bool(fields) or draw(st.booleans()), estimated_fields=fields,
    )


@st.composite
def tasks(draw):
    ids = draw(st.lists(names.filter(bool), unique=True, min_size=0, max_size=4))
    return [Task(task_id=i, steps=tuple(draw(st.lists(steps(), max_size=5))), domain=draw(names),
                 source=draw(names), reward=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
                 meta=draw(st.dictionaries(names, json_values, max_size=3)))
            for i in ids]


@settings(max_examples=200, deadline=None)
@given(tasks())
def test_round_trip_is_lossless(ts):
    text = dumps_jsonl(ts, source="test")
    res = parse_jsonl(text, "x.jsonl", strict=True)
    assert res.tasks == ts
    assert [t.meta for t in res.tasks] == [t.meta for t in ts]  # meta is compare=False
    assert res.header["schema_version"] == SCHEMA_VERSION and res.header["source"] == "test"
    assert dumps_jsonl(res.tasks, source="test") == text  # export again: same bytes


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes(text):
    for strict in (False, True):
        try:
            parse_jsonl(text, "f.jsonl", strict=strict)
        except TraceError as e:
            assert str(e).startswith("f.jsonl:") and "\n" not in str(e)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_arbitrary_task_lines_never_crash(value):
    text = dumps_jsonl([]) + json.dumps(value) + "\n"
    try:
        res = parse_jsonl(text, "f.jsonl", strict=False)
    except TraceError:  # pragma: no cover - only the header can be fatal here
        raise AssertionError("a bad task line must not be fatal in non-strict mode")
    assert len(res.tasks) + len(res.warnings) == 1


HEADER = json.dumps({"format": "costsim-trace", "schema_version": 1})
GOOD = json.dumps({"task_id": "a", "steps": [{"kind": "read", "output_tokens": 3}]})


def _file(tmp_path, *lines):
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("line, field, what", [
    ('{"task_id": "b", "steps": [{"kind": "reed", "output_tokens": 1}]}', "steps[0].kind", '"reed" is not one of'),
    ('{"task_id": "b", "steps": [{"kind": "read"}]}', "steps[0].output_tokens", "missing"),
    ('{"task_id": "b", "steps": [{"kind": "read", "output_tokens": -2}]}', "steps[0].output_tokens", "must be >= 0"),
    ('{"task_id": "b", "steps": [{"kind": "read", "output_tokens": true}]}', "steps[0].output_tokens", "expected an integer"),
    ('{"task_id": "b", "steps": [{}, {"kind": "write", "output_tokens": 1, "colour": 1}]}', "steps[0].kind", "is not one of"),
    ('{"task_id": "b", "steps": [{"kind": "write", "output_tokens": 1, "colour": 1}]}', "steps[0].colour", "unknown field"),
    ('{"task_id": "b", "steps": [{"kind": "write", "output_tokens": 1, "estimated_fields": ["output_tokens"]}]}', "steps[0].estimated", "must be true"),
    ('{"task_id": "", "steps": []}', "task_id", "must not be empty"),
    ('{"task_id": "b"}', "steps", "missing"),
    ('{"task_id": "b", "steps": [], "reward": "high"}', "reward", "expected a finite number"),
    ('{"task_id": "a", "steps": []}', "task_id", "duplicate of line 2"),
    ('[1, 2]', "(line)", "expected a JSON object"),
])
def test_errors_name_file_line_field(tmp_path, line, field, what):
    p = _file(tmp_path, HEADER, GOOD, line, GOOD.replace('"a"', '"c"'))
    res = read_jsonl(p)  # non-strict: the bad line is skipped, the others are intact
    assert [t.task_id for t in res.tasks] == ["a", "c"]
    assert len(res.warnings) == 1
    assert res.warnings[0].startswith(f"{p}:3: field '{field}': ")
    assert what in res.warnings[0]
    with pytest.raises(TraceError) as e:
        read_jsonl(p, strict=True)
    assert str(e.value).startswith(f"{p}:3: field '{field}': ") and "\n" not in str(e.value)


def test_invalid_json_line(tmp_path):
    p = _file(tmp_path, HEADER, "{not json", GOOD)
    res = read_jsonl(p)
    assert [t.task_id for t in res.tasks] == ["a"]
    assert res.warnings[0].startswith(f"{p}:2: invalid JSON: ")
    with pytest.raises(TraceError, match=r":2: invalid JSON"):
        read_jsonl(p, strict=True)


def test_header_problems_are_fatal(tmp_path):
    with pytest.raises(TraceError, match=r"t.jsonl:1: field 'format'"):
        read_jsonl(_file(tmp_path, GOOD))
    newer = json.dumps({"format": "costsim-trace", "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(TraceError, match=r":1: field 'schema_version': version 2 is newer"):
        read_jsonl(_file(tmp_path, newer, GOOD))
    with pytest.raises(TraceError, match=r"no such file"):
        read_jsonl(tmp_path / "missing.jsonl")
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(TraceError, match=r"e.jsonl:1: field 'format': empty file"):
        read_jsonl(tmp_path / "e.jsonl")


def test_defaults_and_blank_lines(tmp_path):
    res = read_jsonl(_file(tmp_path, HEADER, "", GOOD, ""), strict=True)
    s = res.tasks[0].steps[0]
    assert (s.observation_tokens, s.context_tokens, s.tool, s.duration_s, s.verdict) == (0, -1, "", None, None)


def test_writer_refuses_duplicate_ids():
    t = Task("x", ())
    with pytest.raises(TraceError, match="duplicate task_id"):
        dumps_jsonl([t, t])


def test_deeply_nested_line_is_an_error_not_a_crash():
    text = dumps_jsonl([]) + "[" * 100000 + "\n"
    res = parse_jsonl(text, "d.jsonl")
    assert res.warnings == ["d.jsonl:2: invalid JSON: nested too deeply; line skipped"]

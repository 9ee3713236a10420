"""Large runs in bounded memory: rows by column (costsim.metrics.Rows), synthetic tasks drawn as
they are read (SyntheticTasks), the closed forms on a sample: the same answers as before."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import api
from costsim.metrics import Rows, summarize
from costsim.traces.synthetic import Shape, SyntheticTasks, generate

value = st.one_of(st.floats(allow_nan=False), st.integers(-2**70, 2**70), st.booleans(), st.none(), st.text(max_size=3))


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True), data=st.data())
def test_rows_by_column_read_back_as_the_same_dicts_types_and_bits(keys, data):
    n = data.draw(st.integers(0, 12))
    rows = [{k: data.draw(value) for k in keys} for _ in range(n)]
    if n > 2 and data.draw(st.booleans()):  # a block of other keys, as another protocol's rows
        rows[n // 2:] = [{**r, "extra": 1.5} for r in rows[n // 2:]]
    table = Rows.of(rows)
    back = list(table)
    assert back == rows and [list(map(type, r.values())) for r in back] == [list(map(type, r.values())) for r in rows]
    assert all(repr(a) == repr(b) for a, b in zip(back, rows))  # the same bits (-0.0, big floats)
    assert len(table) == n and (not n or table[-1] == rows[-1]) and table == rows
    with pytest.raises(IndexError):
        table[n]


@settings(max_examples=60, deadline=None)
@given(g=st.integers(1, 6), n=st.integers(0, 30))
def test_cells_rows_interleave_back_in_task_order(g, n):
    rows = [{"task_index": i, "x": float(i) / 3, "k": i, "s": f"t{i}"} for i in range(n)]
    parts = [Rows.of(rows[c::g]) for c in range(g)]
    merged = Rows.interleaved(parts, n).with_columns({"makespan_s": 2.5, "count": 3})
    assert list(merged) == [{**r, "makespan_s": 2.5, "count": 3} for r in rows]


def test_synthetic_tasks_drawn_when_read_are_generates_tasks():
    for kw in ({}, {"seed": 7, "deterministic_length": True}, {"shape": Shape(steps_mean=4.0), "fresh_after_reject": True}):
        lazy, made = SyntheticTasks(40, **kw), generate(40, **kw)
        assert len(lazy) == 40 and [t.steps for t in lazy] == [t.steps for t in made]
        assert lazy[-1].task_id == made[-1].task_id and [t.steps for t in lazy[5:9]] == [t.steps for t in made[5:9]]
        assert lazy[3].meta.keys() == made[3].meta.keys()


def test_a_simulation_past_the_closed_forms_sample_gives_the_same_rows_and_says_so(monkeypatch):
    """Past ``closed_form_tasks`` the tasks are drawn as read and the closed forms read the first
    ones: the simulated rows are unchanged, the summary too, and the closed form says its sample."""
    from costsim import config, report

    opts = dict(p_accept=0.8, K=4, arrival_rate=0.5, strong_replicas=2, weak_replicas=4, protocols="strong-only,specagent",
                seed=3)
    whole = api.simulate(60, workers=1, **opts)
    small = dataclasses.replace(config.COMMANDS, closed_form_tasks=20)
    monkeypatch.setattr(api, "COMMANDS", small)
    monkeypatch.setattr(report, "COMMANDS", small)
    sampled = api.simulate(60, workers=1, **opts)
    assert sampled.rows == whole.rows and sampled["protocols"] == whole["protocols"]
    assert "(over the first 20 of 60 tasks)" in sampled["closed_form"]["assumption"]
    assert "over the first" not in whole["closed_form"]["assumption"]
    twin = report.closed_form(generate(20, seed=3), api._scenario(opts, None))
    assert math.isclose(sampled["closed_form"]["R"], twin["R"], rel_tol=1e-12)


def test_summaries_of_rows_by_column_are_those_of_dicts():
    res = api.simulate(80, workers=1, p_accept=0.7, K=4, seed=2)
    assert summarize(list(res.rows)) == summarize(res.rows) == res["protocols"]
    assert res.to_frame().equals(__import__("pandas").DataFrame(list(res.rows)))


def test_a_replayed_tau2_trace_with_no_review_gets_its_note_not_a_key_error():
    """Before 2026-12-02 the paper-comparison note read ``steps_per_review``, which a run with no
    review has not (found by costsim acceptance's tests)."""
    from costsim.traces import load

    tasks = load("tau2-airline").tasks[:6]
    reads = [dataclasses.replace(t, steps=tuple(dataclasses.replace(s, kind="read") for s in t.steps[:-1]) + t.steps[-1:])
             for t in tasks]
    res = api.simulate(reads, workers=1, p_accept=0.8, K=6)
    assert res["protocols"]["specagent"]["reviews_per_task"]["mean"] == 0.0
    assert any("none here (no chunk was reviewed)" in n for n in res["notes"])


table_value = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**53, 2**53), st.text(max_size=3))


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True), data=st.data(),
       chunk=st.integers(1, 5))
def test_a_table_written_by_parts_is_the_whole_frame(keys, data, chunk):
    # --out writes the rows a slice at a time: the same CSV text as the whole frame's, the same
    # frame read back from parquet, whatever the slices, blocks and mixed columns.
    import io

    import pandas as pd

    n = data.draw(st.integers(0, 11))
    rows = [{k: data.draw(table_value) for k in keys} for _ in range(n)]
    if n > 2 and data.draw(st.booleans()):  # a block of other keys, as another protocol's rows
        rows[n // 2:] = [{**r, "extra": 1.5} for r in rows[n // 2:]]
    table = Rows.of(rows)
    csv, parquet, whole = io.BytesIO(), io.BytesIO(), io.BytesIO()
    try:
        table.to_frame().to_parquet(whole, index=False)
    except Exception:  # a column of numbers and text together: parquet has no type for it
        whole = None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Rows, "WRITE_ROWS", chunk)
        table.write(csv, "csv")
        if whole:
            table.write(parquet, "parquet")
    assert csv.getvalue().decode() == table.to_frame().to_csv(index=False)
    if n and whole:
        parquet.seek(0)
        pd.testing.assert_frame_equal(pd.read_parquet(parquet), table.to_frame())


def test_a_table_cut_short_leaves_no_file(tmp_path):
    # Ctrl-C (or any error) while the table is written: neither the table nor a temporary file.
    from costsim.files import atomic_file

    out = tmp_path / "t.csv"
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(out) as f:
            f.write(b"a,b\n")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def test_simulate_out_writes_the_table_by_parts(tmp_path, monkeypatch):
    import pandas as pd

    res = api.simulate(tasks=30, sessions=3)
    monkeypatch.setattr(Rows, "WRITE_ROWS", 7)
    res.write_table(tmp_path / "t.parquet")
    res.write_table(tmp_path / "t.csv")
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "t.parquet"), res.to_frame())
    assert (tmp_path / "t.csv").read_text() == res.to_frame().to_csv(index=False)

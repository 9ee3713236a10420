"""`costsim report`: a result of predict, replay, capacity or plan as one self-contained HTML file
that holds the result's own verdict, numbers, inputs with their sources, a figure whose points
carry tooltips, and the roofline's errors against measurement; nothing it fetches."""

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from costsim import api, html_report
from costsim.cli.main import main
from costsim.html_report import KINDS, kind_of, num


@pytest.fixture(scope="module")
def results():
    """One real result of each kind, made with cheap settings (those tests/test_capacity.py and
    tests/test_plan.py use)."""
    return {
        "predict": api.predict(0.8, K=6),
        "replay": api.replay("tau2-airline", protocols="strong-only,specagent"),
        "capacity": api.capacity(1.0, latency_p95="300s", tasks=40, tolerance=0.3),
        "plan": api.plan(1.0, latency_p95=90, devices="h200,b200", K="2,4", tasks=30, confirm=1),
    }


@pytest.fixture(scope="module")
def pages(results):
    return {k: api.report(r) for k, r in results.items()}


@pytest.fixture(scope="module")
def validation():
    return api.roofline_validate()["summary"]


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Nesting(HTMLParser):
    """Every element closed, in order (SVG's self-closed ones included)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def parsed(text: str) -> Nesting:
    p = Nesting()
    p.feed(text)
    p.close()
    assert not p.errors, p.errors[:5]
    assert not p.stack, p.stack
    return p


def assert_offline(text: str) -> None:
    """No reference the page would fetch: no script, stylesheet link, image, frame, web font or
    CSS import; every src/href a fragment ('#...') or data: URL."""
    p = parsed(text)
    tags = {t for t, _ in p.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "image", "video", "audio"}, tags
    for tag, attrs in p.tags:
        for k, v in attrs.items():
            if k in ("src", "href", "xlink:href", "srcset", "action", "poster"):
                assert v is not None and (v.startswith("#") or v.startswith("data:")), (tag, k, v)
    assert "@import" not in text and "@font-face" not in text
    assert not re.search(r"url\((?!#)", text), re.search(r"url\((?!#).{0,40}", text).group(0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_kind_is_told_by_the_keys(results, kind):
    assert kind_of(results[kind].to_dict()) == kind
    assert kind_of(json.loads(json.dumps(results[kind].to_dict()))) == kind


def test_simulate_reads_as_replay():
    assert kind_of(api.simulate(tasks=5, protocols="strong-only,specagent").to_dict()) == "replay"


@pytest.mark.parametrize("data", [{}, [], 3, "plan", {"R": 1, "L": 1}, {"front": [], "prices": {}},
                                  {"protocols": {}, "notes": []}])
def test_anything_else_is_one_line_naming_what_was_expected(data):
    with pytest.raises(ValueError) as e:
        kind_of(data)
    msg = str(e.value)
    assert "\n" not in msg and "costsim predict|replay|simulate|capacity|plan --json" in msg
    for keys in KINDS.values():
        assert ", ".join(keys) in msg


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_page_parses_and_references_nothing_outside(pages, kind):
    text = pages[kind]
    assert text.startswith("<!DOCTYPE html>")
    assert_offline(text)
    assert "<style>" in text and 'id="uncertain"' in text and 'id="inputs"' in text


def _section(text: str, sid: str) -> str:
    """The HTML of the page's section ``sid``."""
    return text[text.index(f'<section id="{sid}">'):].split("</section>", 1)[0]


def _rows(html_text: str) -> dict:
    """The rows of the tables in ``html_text`` whose first cell is a key: key -> the other cells (text)."""
    out = {}
    for key, rest in re.findall(r"<tr><td><code>([^<]*)</code>[^<]*</td>(.*?)</tr>", html_text):
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td>(.*?)</td>", rest)]
        out.setdefault(html.unescape(key), [html.unescape(c) for c in cells])
    return out


def test_predict_page_has_its_verdict_numbers_sources_and_curve(results, pages):
    r, text = results["predict"], pages["predict"]
    assert html.escape(r["verdict"]) in text
    for k in ("R", "L", "kappa", "break_even_kappa", "v_over_d"):
        assert f">{r[k]:.4g}<" in text, k  # four significant digits, as the page shows numbers
    assert f">{r['roofline']['L_time']:.4g}<" in text
    for k, src in r["sources"].items():  # every input with its source
        assert f"<code>{k}</code>" in text and html.escape(src) in text, k
    assert "given (--p-accept" in text
    # the curve: the result's own point, with its values in the tooltip
    assert f'<g id="pred-this-L"><title>this result: p_u = 0.8, L_u = {r["L"]:.4g}</title>' in text
    assert f'<g id="pred-this-R"><title>this result: p_u = 0.8, R_u = {r["R"]:.4g}</title>' in text
    assert "costsim acceptance" in text


def test_predict_page_shows_each_input_with_its_value_and_unit(results, pages):
    # Before 2026-12-03 every input's value could read "0" and 31 tests passed.
    r, inputs = results["predict"], _rows(_section(pages["predict"], "inputs"))
    expected = {"p": "0.8", "K": "6", "step_tokens": "418", "obs_tokens": "181", "context_tokens": "8,219",
                "verdict_tokens": "24", "rho": "1", "v_over_d": "0.05981", "strong_step_scale": "1",
                "weak_step_scale": "1", "correction_rate": "0", "correction_rho": "1.5", "batch": "16",
                "kappa": f"{r['kappa']:.4g}"}
    assert set(expected) <= set(inputs), set(expected) - set(inputs)
    for k, shown in expected.items():
        assert inputs[k][0] == shown, (k, inputs[k])
    assert inputs["p"][1] == "the per-step acceptance rate p_u, a probability"
    assert inputs["context_tokens"][1] == "tokens" and inputs["K"][1] == "chunk size, steps"
    assert inputs["strong_deployment"][0] == "qwen3.5-397b-a17b on 8× h20, fp8 weights, vllm"


def test_a_result_out_of_predicts_bounds_draws_no_curve_at_once(results):
    """Before 2026-12-03 the curve was computed at the file's own K: K = 10^6 with a write rate
    took 22 s and 2.5 GB, K = 10^7 ended in a MemoryError. predict's own check now refuses it."""
    import time

    base = results["predict"].to_dict()
    for change, why in [({"K": 10**12, "write_rate": 0.1}, "K must be an integer in [1, 1024], got 1000000000000"),
                        ({"K": 2000}, "K must be an integer in [1, 1024], got 2000"),
                        ({"K": 6.5}, "K must be an integer in [1, 1024], got 6.5"),
                        ({"write_rate": 2.0}, "write_rate must be in (0, 1], got 2.0"),
                        ({"p": 1.5}, "p must be in [0, 1], got 1.5"),
                        ({"kappa": None}, "kappa must be a number >= 0, got None")]:
        start = time.perf_counter()
        text = api.report({**base, **change})
        assert time.perf_counter() - start < 30
        assert ("no curve is drawn: this result&#x27;s inputs are out of predict&#x27;s bounds ("
                + html.escape(why, quote=True) + ")") in text, change
        assert "pred-this-R" not in text
        assert_offline(text)


def test_a_calibrated_prediction_says_its_ratios_are_in_time(tmp_path, capsys):
    """Before 2026-12-03 the report labelled a calibrated R_u 'pass counting, strong weight
    passes' where the CLI said strong replica time: the rule lived in the CLI's text alone."""
    from conftest import run_json

    cal = tmp_path / "calib.toml"
    cal.write_text('[calibration]\nsource = "test rig"\n[ratios]\nkappa = 0.25\nv_over_d = 0.05\n')
    r = run_json(capsys, "predict", "-p", "0.8", "--K", "6", "--calibration", str(cal))
    assert r["ratios_measure"] == "time"
    text = api.report(r)
    cards = _section(text, "verdict")
    assert "R_u (calibrated: in time)" in cards and "strong replica time / Strong-only" in cards
    assert "pass counting" not in cards and "weight passes" not in cards
    assert _rows(_section(text, "tables"))["R"][1] == "strong replica time / Strong-only"
    assert "R_u: strong replica time / Strong-only" in text  # the curve's legend (a comment in the SVG)
    # kappa alone measured: R_u is still pass counting
    cal.write_text('[ratios]\nkappa = 0.25\n')
    r = run_json(capsys, "predict", "-p", "0.8", "--K", "6", "--calibration", str(cal))
    assert r["ratios_measure"] == "weight passes"
    cards = _section(api.report(r), "verdict")
    assert "R_u (pass counting)" in cards and "strong weight passes / Strong-only" in cards


def test_predict_draws_no_curve_that_is_not_the_results(results):
    data = results["predict"].to_dict()
    data["R"] *= 1.01  # not what the closed form gives at these parameters
    text = api.report(data)
    assert "no curve is drawn" in text and "pred-this-R" not in text
    assert_offline(text)


def test_plan_front_has_one_tooltip_per_point_and_the_recommendation(results, pages):
    d, text = results["plan"].to_dict(), pages["plan"]
    front = d["front"]
    assert len(front) >= 2
    titles = re.findall(r'<g id="plan-front-(\d+)"><title>([^<]*)</title>', text)
    assert [int(i) for i, _ in titles] == list(range(len(front)))
    for (_, tip), p in zip(titles, front):  # the expected text written from the JSON's own values
        assert p["cost_per_1k_tasks_usd"] < 1000 and p["latency_p95_s"] < 1000  # shown to 4 significant digits
        assert html.unescape(tip) == (f"{p['protocol']} K={p['K']}: {p['fleet']}; {p['fleet_gpus']} GPUs; USD "
                                      f"{p['cost_per_1k_tasks_usd']:.4g} per 1,000 tasks; p95 {p['latency_p95_s']:.4g} s "
                                      "(screen)")
        assert re.fullmatch(r"\d+× strong \(\d+× [\w-]+(, EP)?\)( \+ \d+× weak \(\d+× [\w-]+\))?", p["fleet"]), p["fleet"]
    rec = d["recommended"]
    s, r = rec["screen"], rec["simulated"]
    star = re.findall(r'<g id="plan-recommended"><title>([^<]*)</title>', text)
    assert len(star) == 1 and html.unescape(star[0]) == (
        f"recommended: {s['protocol']} K={s['K']}: {r['fleet']}; {r['fleet_gpus']} GPUs; USD "
        f"{r['cost_per_1k_tasks_usd']:.4g} per 1,000 tasks; p95 {r['latency_p95_s']:.4g} s (simulated)")
    assert html.escape(d["why"]) in text and html.escape(d["specagent_pays"]["text"]) in text
    for dev, p in d["prices"].items():  # each price with its source and date
        assert html.escape(p["source"]) in text and f"dated {p['date']}" in text, dev
    assert "USD per 1,000 tasks" in text
    # which cell the recommendation's simulation ran, in the plan's own words
    assert r["note"] is None and r["simulated"]["text"].endswith("tasks/s")
    assert html.escape(r["simulated"]["text"]) in _section(text, "verdict")


def test_a_confirmation_too_short_to_be_steady_keeps_its_caveat(results):
    """Before 2026-12-03 the CLI said a confirmation not steady 'may be low' and the report did
    not: the plan's JSON now carries the sentence (the core's), and both read it."""
    from costsim.cli.plan_cmd import render
    from costsim.planner.recommendation import not_steady

    res = results["plan"]
    note = not_steady(120, 3.0)
    assert note == ("on a run too short to be steady (120 tasks arrive in less than 3 of their p95s): its p95 may "
                    "be low")
    s, r = res.data["recommended"]
    shaky = {**r, "steady": False, "note": note}
    data = {**res.data, "recommended": (s, shaky), "confirmed": [(s, shaky)]}
    text = render(data)
    assert f"— meets the target {note}" in text and f"; {note})" in text
    d = res.to_dict()
    d["recommended"]["simulated"].update(steady=False, note=note)
    d["confirmed"][0]["simulated"].update(steady=False, note=note)
    page = api.report(d)
    assert f"<b>Caveat:</b> {html.escape(note)}." in _section(page, "verdict")
    assert html.escape(note) in _section(page, "tables")
    assert html.escape(note) in " ".join(re.findall(r'<g id="plan-recommended"><title>([^<]*)</title>', page))


def test_a_large_front_is_drawn_in_part_and_tabulated_whole(results):
    """Before 2026-12-03 each tooltip was one replace over the whole SVG: 5,000 front points took
    12.7 s. Now one pass, and at most MAX_POINTS points drawn, the caption saying so."""
    from costsim.html_report import MAX_POINTS

    d = results["plan"].to_dict()
    p0 = d["front"][0]
    d["front"] = [dict(p0, latency_p95_s=10 + i / 100, cost_per_1k_tasks_usd=100 - i / 100) for i in range(2000)]
    text = api.report(d)
    ids = [int(i) for i in re.findall(r'<g id="plan-front-(\d+)"><title>', text)]
    assert len(ids) == MAX_POINTS and ids[0] == 0 and ids[-1] == 1999 and ids == sorted(set(ids))
    assert f"{MAX_POINTS} of its 2,000 configurations drawn, evenly spaced along it; the table below holds all" in text
    assert len(_section(text, "tables").split("<h3>Confirmed")[0].split("<tr>")) - 2 == 2000  # less the head
    assert_offline(text)


def test_a_plan_that_meets_nothing_says_why_and_draws_no_point():
    res = api.plan(1.0, latency_p95="1s", devices="h200", K="4", tasks=30, confirm=1)
    assert res["recommended"] is None and not res["front"]
    text = api.report(res)
    assert_offline(text)
    assert "Recommended: none." in text and html.escape(res.to_dict()["why"]) in text
    assert "plan-front-" not in text and "plan-recommended" not in text


def test_capacity_page_has_each_protocols_answer_and_bar(results, pages):
    d, text = results["capacity"].to_dict(), pages["capacity"]
    for i, (name, r) in enumerate(d["protocols"].items()):
        assert r["meets_target"] and r["cost_per_1k_tasks_usd"] > 0
        assert f">{num(r['cost_per_1k_tasks_usd'])}<" in text
        tip = re.findall(rf'<g id="cap-bar-{i}"><title>([^<]*)</title>', text)
        assert tip == [html.escape(f"{name}: USD {num(r['cost_per_1k_tasks_usd'])} per 1,000 tasks; "
                                   f"{num(r['fleet_gpus'])} GPUs ({num(r['strong_replicas'])} strong + "
                                   f"{num(r['weak_replicas'])} weak replicas); p95 {num(r['latency_p95_s'])} s")]
        for role, src in r["price_sources"].items():
            if r.get(f"{role}_usd_per_gpu_hour") is not None:
                assert html.escape(src) in text
    pays = d["protocols"]["specagent"].get("specagent_pays")
    assert pays and html.escape(pays["text"]) in text
    for a in d["assumptions"]:
        assert html.escape(a) in text


def test_capacity_that_meets_nothing_says_why_and_draws_no_bar():
    res = api.capacity(1.0, latency_p95="5s", tasks=40, tolerance=0.3)
    text = api.report(res)
    assert_offline(text)
    for r in res["protocols"].values():
        assert html.escape(r["reason"]) in text
    assert "cap-bar-" not in text and "none meets the target" in text


def test_replay_page_has_its_notes_scenario_and_intervals(results, pages):
    d, text = results["replay"].to_dict(), pages["replay"]
    for n in d["notes"]:
        assert html.escape(n) in text
    L = d["protocols"]["specagent"]["L"]
    lo, hi = L["ci95"]
    assert f"{num(L['mean'])} <span class=ci>[{num(lo)}, {num(hi)}]</span>" in text
    assert html.escape(d["scenario"]["strong"]) in text
    assert html.escape(d["closed_form"]["assumption"]) in text


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_page_shows_the_roofline_errors_per_group(pages, validation, kind):
    text = pages[kind]
    rows = re.findall(r"<tr><td>(fit|hold-out)</td><td>([\w-]+)</td><td>(\d+)</td><td>(\d+)%</td>", text)
    assert len(rows) == len(validation) >= 4
    for (split, group, cases, med), v in zip(rows, validation):
        assert (split, group, int(cases)) == ("hold-out" if v["split"] == "holdout" else "fit", v["group"], v["cases"])
        assert int(med) == round(v["median_abs_error"] * 100)


def test_every_string_of_the_result_is_escaped(results):
    bad = '<script>alert("x")</script><img src="http://evil.example/x.png">'
    pred = results["predict"].to_dict()
    pred["verdict"] = bad
    pred["sources"] = {**pred["sources"], "kappa": bad}
    rep = results["replay"].to_dict()
    rep["notes"] = [bad]
    rep["scenario"]["strong"] = bad
    rep["protocols"] = {bad: v for v in rep["protocols"].values()}
    cap = results["capacity"].to_dict()
    cap["protocols"] = {f"spec$agent {bad}": v for v in cap["protocols"].values()}  # '$': matplotlib's mathtext
    plan = results["plan"].to_dict()
    plan["front"][0]["protocol"] = bad
    plan["prices"] = {bad: p for p in plan["prices"].values()}
    for data in (pred, rep, cap, plan):
        text = api.report(data)
        assert bad not in text and html.escape(bad) in text
        assert_offline(text)


# --- the command ----------------------------------------------------------------------------------


def _one_line_error(capsys, argv, phrase):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("costsim: error: ") and phrase in err[0], err
    return err[0]


def test_the_command_writes_the_apis_page_beside_the_result(results, tmp_path, capsys):
    src = tmp_path / "plan-result.json"
    src.write_text(json.dumps(results["plan"].to_dict()))
    assert main(["report", str(src)]) == 0
    out = tmp_path / "plan-result.html"
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    text = out.read_text(encoding="utf-8")
    assert text == api.report(src)  # what the API returns, byte for byte
    assert "read from plan-result.json" in text
    assert_offline(text)
    other = tmp_path / "sub" / "r.html"
    assert main(["report", str(src), "-o", str(other)]) == 0 and other.read_text(encoding="utf-8") == text
    assert api.report(src, out=tmp_path / "api.html") == (tmp_path / "api.html").read_text(encoding="utf-8")


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    _one_line_error(capsys, ["report", str(tmp_path / "missing.json")], "missing.json: no such file")
    (tmp_path / "x.json").write_text('{"hello": 1}')
    line = _one_line_error(capsys, ["report", str(tmp_path / "x.json")], "not a result of `costsim predict|replay")
    assert "x.json" in line and "verdict" in line and "front" in line
    (tmp_path / "bad.json").write_text("{not json")
    _one_line_error(capsys, ["report", str(tmp_path / "bad.json")], "bad.json: not JSON (")
    (tmp_path / "odd.json").write_text(json.dumps({"p": 0.8, "K": 6, "R": 1, "L": 1, "sources": "none", "verdict": "v"}))
    _one_line_error(capsys, ["report", str(tmp_path / "odd.json")], "the keys of `costsim predict --json`, but not its values")
    assert not list(tmp_path.glob("*.html"))


def test_the_output_never_goes_over_the_input(results, tmp_path, capsys):
    src = tmp_path / "r.json"
    body = json.dumps(results["predict"].to_dict())
    src.write_text(body)
    _one_line_error(capsys, ["report", str(src), "-o", str(src)], "refusing to overwrite an input file")
    assert src.read_text() == body
    page = tmp_path / "r.html"  # a result named .html: its default output would be itself
    page.write_text(body)
    _one_line_error(capsys, ["report", str(page)], "refusing to overwrite an input file")
    assert page.read_text() == body
    with pytest.raises(ValueError, match="refusing to overwrite an input file"):
        api.report(src, out=src)
    assert src.read_text() == body


def test_a_result_file_the_reader_cannot_take_is_one_line_naming_it(results, tmp_path, capsys):
    """Before 2026-12-03: a RecursionError, an OverflowError and Python's "Exceeds the limit (4300
    digits) ... sys.set_int_max_str_digits()" (no file named), tracebacks or worse."""
    pred = json.dumps(results["predict"].to_dict())
    cases = {
        "deep.json": ("[" * 100_000 + "]" * 100_000, "deep.json: not JSON costsim reads (nested too deeply to read"),
        "huge.json": (pred.replace('"K": 6', '"K": 1' + "0" * 400), "huge.json: not JSON costsim reads (a number of 401 digits"),
        "long.json": (pred.replace('"K": 6', '"K": ' + "9" * 5000), "long.json: not JSON costsim reads (a number of 5,000 digits"),
        "inf.json": (pred.replace('"K": 6', '"K": 1e400'), "inf.json: not JSON costsim reads (the number 1e400 is out of"),
        "nan.json": (pred.replace('"K": 6', '"K": NaN'), "nan.json: not JSON costsim reads (NaN is not a JSON number"),
    }
    for name, (body, phrase) in cases.items():
        (tmp_path / name).write_text(body)
        line = _one_line_error(capsys, ["report", str(tmp_path / name)], phrase)
        assert "Traceback" not in line and "set_int_max_str_digits" not in line
    # a K of 250 digits is a number a float holds: the page says why it draws no curve
    (tmp_path / "big.json").write_text(pred.replace('"K": 6', '"K": ' + "9" * 250))
    assert main(["report", str(tmp_path / "big.json"), "-o", str(tmp_path / "big.page")]) == 0
    assert "no curve is drawn" in (tmp_path / "big.page").read_text(encoding="utf-8")
    _one_line_error(capsys, ["report", "."], ".: is a directory, not a result file")
    _one_line_error(capsys, ["report", str(tmp_path)], f"{tmp_path}: is a directory, not a result file")
    _one_line_error(capsys, ["report", ""], "the result path is empty")
    assert not list(tmp_path.glob("*.html"))


def test_a_result_over_the_cap_is_refused_by_its_size_before_it_is_read(results, tmp_path, capsys, monkeypatch):
    """Before 2026-12-03 the cap was any input's, 1 GiB; a 99 MB result peaked at 2.4 GB parsed."""
    from costsim import files
    from costsim.config import MAX_RESULT_BYTES

    assert MAX_RESULT_BYTES == 16 << 20
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: the size says it all, nothing need be read
        f.truncate(MAX_RESULT_BYTES + 1)
    read = []
    real = files._read_bytes
    monkeypatch.setattr(files, "_read_bytes", lambda path, max_bytes=files.MAX_INPUT_BYTES: (read.append(max_bytes),
                                                                                            real(path, max_bytes))[1])
    _one_line_error(capsys, ["report", str(big)], "big.json: larger than 16 MiB, the most `costsim report` reads")
    assert read == [MAX_RESULT_BYTES]
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps(results["predict"].to_dict()))
    assert main(["report", str(ok)]) == 0
    # the one reader's cap, for any caller
    with pytest.raises(OSError, match="larger than 100 bytes"):
        files.read_text(ok, max_bytes=100)
    assert files.read_text(ok, max_bytes=1 << 20) == ok.read_text()


@pytest.mark.parametrize("kind,path,bad,phrase", [
    ("replay", ("notes",), "a note, not a list", "`notes` must be a list, got 'a note, not a list'"),
    ("replay", ("notes",), ["fine", 3], "`notes[1]` must be text, got 3"),
    ("capacity", ("latency_p95_target_s",), "ninety", "`latency_p95_target_s` must be a number, got 'ninety'"),
    ("plan", ("latency_p95_target_s",), "ninety", "`latency_p95_target_s` must be a number, got 'ninety'"),
    ("plan", ("front", 0, "latency_p95_s"), "fast", "`front[0].latency_p95_s` must be a number or null, got 'fast'"),
    ("plan", ("prices",), [], "`prices` must be an object, got a list"),
    ("predict", ("sources",), "none", "`sources` must be an object, got 'none'"),
    ("predict", ("R",), True, "`R` must be a number, got True"),
    ("predict", ("ratios_measure",), "furlongs", "`ratios_measure` must be one of 'weight passes', 'time', got 'furlongs'"),
    ("capacity", ("protocols", "specagent", "cost_per_1k_tasks_usd"), "3 USD",
     "`protocols.specagent.cost_per_1k_tasks_usd` must be a number or null, got '3 USD'"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_its_key(results, kind, path, bad, phrase, tmp_path, capsys):
    """Before 2026-12-03 replay's notes as text became a bullet per letter, and a target of
    "ninety" was drawn as a word."""
    d = results[kind].to_dict()
    at = d
    for k in path[:-1]:
        at = at[k]
    at[path[-1]] = bad
    with pytest.raises(ValueError) as e:
        api.report(d)
    assert f"the keys of `{html_report.COMMANDS[kind]} --json`, but not its values: {phrase}" == str(e.value)
    src = tmp_path / "r.json"
    src.write_text(json.dumps(d))
    _one_line_error(capsys, ["report", str(src)], phrase)


def test_no_control_character_of_a_result_reaches_the_page(results, tmp_path):
    """Before 2026-12-03 a NUL in a result's text was written raw into the HTML."""
    d = results["replay"].to_dict()
    d["notes"] = ["a\x00b\x1bc\ud800d\x7fe"]
    d["protocols"] = {"spec\x00agent": v for v in d["protocols"].values()}
    src = tmp_path / "r.json"
    src.write_text(json.dumps(d))  # JSON's escapes: \u0000, \ud800
    for text in (api.report(d), api.report(src)):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]", text)
        assert "<li>abcde</li>" in text and ">specagent<" in text
        text.encode("utf-8")  # writable
        assert_offline(text)


def test_an_output_that_is_the_input_by_another_name_is_refused(results, tmp_path, capsys):
    """One check (costsim.files.refuse_overwriting_input) for the CLI and the API: by file, not
    by name (a hard link overwrote the result before 2026-12-03)."""
    import os

    src = tmp_path / "r.json"
    body = json.dumps(results["predict"].to_dict())
    src.write_text(body)
    os.link(src, tmp_path / "same.html")
    _one_line_error(capsys, ["report", str(src), "-o", str(tmp_path / "same.html")], "refusing to overwrite an input file")
    with pytest.raises(ValueError, match="same.html: refusing to overwrite an input file"):
        api.report(src, out=tmp_path / "same.html")
    assert src.read_text() == body


# --- units: costsim's one rule (costsim.config.unit_of), on the pages --------------------------------


@pytest.mark.parametrize("path,expected", [
    ("wall_s_per_step", "seconds per committed step"),
    ("hbm_bytes_per_step", "bytes per committed step"),
    ("strong_calls_per_task", "model calls per task"),
    ("roofline.decode_s_per_token", "seconds per token"),
    ("cell.pool_rates_per_s.strong", "per second"),
    (("protocols", "specagent", "latency_p95_s"), "seconds"),
    (("front", "3", "cost_per_1k_tasks_usd"), "USD per 1,000 tasks"),
    ("latency_s.p95", "seconds"),
    ("ci95_s.0", "seconds"),
    ("arrival_rate", "tasks per second (null: a closed loop)"),
    ("max_task_rate_per_s", "per second"),  # '_rate' names no quantity to compose with
    ("hbm_bandwidth_gb_per_s", "GB/s"),
    ("output_tokens_per_s", "tokens per second"),
    ("step_scales.strong", "tokens decoded per recorded token"),
    ("K", "chunk size, steps"),
    ("verdict", ""),
])
def test_a_keys_unit_is_costsims_one_rule(path, expected):
    from costsim.config import unit_of

    assert unit_of(path) == expected


def test_every_number_declared_has_a_unit():
    from costsim.config import JSON_KEYS, JSON_UNITS

    assert not [k for k, (types, _) in JSON_KEYS.items() if "number" in types and not JSON_UNITS.get(k)]


def test_every_table_names_its_units(pages):
    """Before 2026-12-03 the page lost the base unit ('per committed step' for seconds per
    committed step), ignored an object's unit and cut its words out of prose."""
    rows = {kind: _rows(_section(pages[kind], "tables")) for kind in ("predict", "replay", "capacity")}
    assert rows["replay"]["wall_s_per_step"][0] == "seconds per committed step"
    assert rows["replay"]["hbm_bytes_per_step"][0] == "bytes per committed step"
    assert rows["replay"]["strong_calls_per_task"][0] == "model calls per task"
    assert rows["predict"]["roofline.decode_s_per_token"][1] == "seconds per token"
    assert rows["capacity"]["cell.pool_rates_per_s.strong"][0] == "per second"
    assert rows["capacity"]["cell.max_task_rate_per_s"][0] == "per second"
    inputs = _rows(_section(pages["replay"], "inputs"))
    assert inputs["arrival_rate"][1] == "tasks per second (null: a closed loop)"
    head = re.findall(r"<th>cost_per_1k_tasks_usd<br><span class=u>([^<]*)</span></th>", pages["plan"])
    assert head and set(head) == {"USD per 1,000 tasks"}


# --- in a browser, where one is installed -----------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Chromium at {CHROMIUM}")
def test_the_file_renders_its_figure_offline_in_chromium(pages, tmp_path):
    sync = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    path = tmp_path / "plan.html"
    path.write_text(pages["plan"], encoding="utf-8")
    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            page = browser.new_page()
            asked = []
            page.on("request", lambda r: asked.append(r.url))
            page.goto(path.as_uri())
            box = page.locator("#figure svg").bounding_box()
            assert box and box["width"] > 300 and box["height"] > 150
            point = page.locator("#plan-front-0")
            assert point.count() == 1 and point.locator("path, use").count() >= 1
            assert point.bounding_box()["width"] > 0  # drawn, inside the figure
            assert "per 1,000 tasks" in page.locator("#plan-front-0 > title").text_content()
            assert [u for u in asked if not u.startswith("file://")] == []
        finally:
            browser.close()


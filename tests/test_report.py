"""`costsim report`: a result of predict, replay, capacity or plan as one self-contained HTML file
that holds the result's own verdict, numbers, inputs with their sources, a figure whose points
carry tooltips, and the roofline's errors against measurement; nothing it fetches."""

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from costsim import api
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
    for (_, tip), p in zip(titles, front):
        assert f"USD {num(p['cost_per_1k_tasks_usd'])} per 1,000 tasks" in tip
        assert f"p95 {num(p['latency_p95_s'])} s" in tip and p["protocol"] in tip and p["strong"]["device"] in tip
    rec = d["recommended"]["simulated"]
    star = re.findall(r'<g id="plan-recommended"><title>([^<]*)</title>', text)
    assert len(star) == 1 and f"USD {num(rec['cost_per_1k_tasks_usd'])} per 1,000 tasks" in star[0]
    assert html.escape(d["why"]) in text and html.escape(d["specagent_pays"]["text"]) in text
    for dev, p in d["prices"].items():  # each price with its source and date
        assert html.escape(p["source"]) in text and f"dated {p['date']}" in text, dev
    assert "USD per 1,000 tasks" in text


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


"""One result of `costsim predict`, `replay` (or `simulate`), `capacity` or `plan` as one
self-contained HTML page to hand a colleague (`costsim report`, :func:`costsim.api.report`).

The page holds the result's verdict in its own words, its figure (an inline SVG whose points
carry tooltips), its tables, its inputs with the source of each, and what the model is unsure
of: the roofline's errors against measurement (``costsim roofline validate``) and the result's
own assumptions and notes. It opens offline: no script, no stylesheet, image or font to fetch.

Everything here is presentation. It computes no cost: every number is the result's, apart from
predict's R_u/L_u curve, drawn by :mod:`costsim.formulas` at the result's own parameters (and
drawn only where they are within predict's bounds and it reproduces the result's R_u and L_u at
its p_u). Units are costsim's one rule (:func:`costsim.config.unit_of`), a plan's fleet and
caveats the plan's own words. A result is held to :data:`SHAPES` before it is read (a value of
the wrong type is refused, naming its key); every string from it is escaped, its control
characters dropped (a trace name or a label is user text).
"""

from __future__ import annotations

import html
import math
import re
from contextlib import contextmanager

#: The keys by which a result says which command made it (all must be there): kind -> keys.
KINDS = {
    "predict": ("p", "K", "R", "L", "sources", "verdict"),
    "replay": ("protocols", "closed_form", "scenario", "notes"),
    "capacity": ("task_rate_per_s", "latency_p95_target_s", "protocols", "assumptions"),
    "plan": ("task_rate_per_s", "latency_p95_target_s", "front", "recommended", "prices"),
}
#: The command each kind is the ``--json`` of (simulate's JSON is replay's shape).
COMMANDS = {"predict": "costsim predict", "replay": "costsim replay (or simulate)", "capacity": "costsim capacity",
            "plan": "costsim plan"}
#: Shown where the result records no source for an input (a flag of the run, or its default).
NO_SOURCE = "—"


def kind_of(data) -> str:
    """Which command's ``--json`` ``data`` is (a key of :data:`KINDS`), told by its keys;
    ValueError, in one line naming what was expected, for anything else."""
    if isinstance(data, dict):
        found = [k for k, keys in KINDS.items() if all(x in data for x in keys)]
        if len(found) == 1:
            return found[0]
    expected = "; ".join(f"{COMMANDS[k]}: {', '.join(keys)}" for k, keys in KINDS.items())
    raise ValueError("not a result of `costsim predict|replay|simulate|capacity|plan --json` "
                     f"(expected an object with the keys of one of them: {expected})")


# --- what a result's values must be ------------------------------------------------------------------


class BadValue(ValueError):
    """A value of a result that is not what its command writes (one line, naming its key)."""


#: The deepest a result may nest (a command's --json: 5 levels at most).
MAX_DEPTH = 32
#: The most table cells (rows × columns) a page tabulates: a replay of 12 protocols has ~1,000.
MAX_CELLS = 100_000
#: The most points a figure draws, each with its tooltip (a plan's front has tens).
MAX_POINTS = 400
#: The most protocols capacity's figure draws a bar for.
MAX_BARS = 40
#: Control characters (tab and newline apart) and lone surrogates: never written into the page.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _text(x) -> str:
    """``x`` as text without control characters (a NUL would be written raw into the page)."""
    return _CONTROL.sub("", str(x))


def clean(data, where: str = "", depth: int = 0):
    """``data`` (a result, as JSON has it) with every text's control characters dropped, keys
    included; :class:`BadValue` (one line, naming the key) for a number that is not a finite
    one a float holds, or for nesting deeper than :data:`MAX_DEPTH`."""
    if depth > MAX_DEPTH:
        raise BadValue(f"nested more than {MAX_DEPTH} levels deep at `{where}` (a result is a few levels deep)")
    if isinstance(data, dict):
        return {_text(k): clean(v, f"{where}.{_text(k)}" if where else _text(k), depth + 1) for k, v in data.items()}
    if isinstance(data, list):
        return [clean(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(data)]
    if isinstance(data, str):
        return _text(data)
    if isinstance(data, bool) or data is None:
        return data
    if isinstance(data, (int, float)):
        try:
            ok = math.isfinite(float(data))
        except OverflowError:
            ok = False
        if not ok:
            raise BadValue(f"`{where}` is {_short(data)}: not a finite number")
        return data
    raise BadValue(f"`{where}` is a {type(data).__name__}, not a JSON value")


def _short(v) -> str:
    """A value as an error message shows it: short."""
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**20:
        return f"an integer of {len(str(abs(v)))} digits"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


_IS = {"number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "string": lambda v: isinstance(v, str),
       "boolean": lambda v: isinstance(v, bool), "object": lambda v: isinstance(v, dict),
       "array": lambda v: isinstance(v, list), "null": lambda v: v is None}
_A = {"number": "a number", "string": "text", "boolean": "true or false", "object": "an object", "array": "a list",
      "null": "null"}


def _point(at: str) -> dict:
    """What the page reads of a plan point (plan's JSON ``point``) at ``at``."""
    shape = {at: "object", f"{at}.protocol": "string|null", f"{at}.K": "number|null", f"{at}.api": "string|null",
             f"{at}.fleet": "string|null", f"{at}.strong": "object|null", f"{at}.weak": "object|null"}
    for role in ("strong", "weak"):
        shape.update({f"{at}.{role}.device": "string|null", f"{at}.{role}.gpus_per_replica": "number|null",
                      f"{at}.{role}.expert_parallel": "boolean|null"})
    for k in ("strong_replicas", "weak_replicas", "fleet_gpus", "cost_per_1k_tasks_usd", "latency_p95_s",
              "uncontended_latency_p95_s", "strong_batch", "weak_batch"):
        shape[f"{at}.{k}"] = "number|null"
    return shape


def _simulated(at: str) -> dict:
    """What the page reads of a plan confirmation's simulation at ``at``."""
    shape = {at: "object", f"{at}.fleet": "string|null", f"{at}.note": "string|null", f"{at}.meets_target": "boolean|null",
             f"{at}.simulated": "object|null", f"{at}.simulated.text": "string|null"}
    for k in ("strong_replicas", "weak_replicas", "fleet_gpus", "cost_per_1k_tasks_usd", "latency_p95_s", "latency_p50_s",
              "tasks_simulated", "grown"):
        shape[f"{at}.{k}"] = "number|null"
    return shape


#: What the page reads of each kind, and what each must be: a path (keys by dots; ``[]``: each
#: item of a list, ``{}``: each value of an object) -> its JSON types. A key that is absent is
#: the page's to miss; one that is there must be of its type (a note as text would be shown a
#: letter a line, a target of "ninety" drawn as a word).
SHAPES = {
    "predict": {
        "p": "number", "K": "number", "R": "number", "L": "number", "verdict": "string", "sources": "object",
        "sources{}": "string", "write_rate": "number|null", "v_over_d": "number|null",
        "rho_per_rejection": "number|null", "kappa": "number|null", "break_even_kappa": "number|null",
        "best_K": "number|null", "best_K_L": "number|null", "batch": "number|null", "tokens": "object|null",
        "step_scales": "object|null", "roofline": "object|null", "roofline.L_time": "number|null",
        "specagent_pays": "object|null", "specagent_pays.text": "string|null",
        "strong_deployment": "object|string|null", "weak_deployment": "object|string|null",
        "calibration": "string|null", "ratios_measure": "string|null", "paper_v_over_d": "object|null",
        "paper_v_over_d.source": "string|null", "over_p_dist": "object|null", "over_p_dist.p_dist": "string|null",
        "over_p_dist.assumption": "string|null",
    },
    "replay": {
        "protocols": "object", "protocols{}": "object", "notes": "array", "notes[]": "string", "closed_form": "object",
        "scenario": "object", "scenario.step_scales": "object|null", "scenario.step_scales.source": "string|null",
        "closed_form.protocol": "string|null", "closed_form.method": "string|null",
        "closed_form.assumption": "string|null", "closed_form.R": "number|null", "closed_form.L": "number|null",
        "closed_form.renewal": "object|null", "closed_form.renewal.R": "number|null",
        "closed_form.renewal.L": "number|null", "closed_form.renewal.assumption": "string|null",
        "closed_form.exact": "object|null", "closed_form.exact{}": "object|string|null",
    },
    "capacity": {
        "task_rate_per_s": "number", "latency_p95_target_s": "number", "protocols": "object", "protocols{}": "object",
        "assumptions": "array", "assumptions[]": "string", "protocols{}.reason": "string|null",
        "protocols{}.cost_note": "string|null", "protocols{}.specagent_pays": "object|null",
        "protocols{}.specagent_pays.text": "string|null", "protocols{}.price_sources": "object|null",
        "protocols{}.price_sources{}": "string|null", "protocols{}.meets_target": "boolean|null",
        **{f"protocols{{}}.{k}": "number|null" for k in ("strong_usd_per_gpu_hour", "weak_usd_per_gpu_hour",
                                                         "cost_per_1k_tasks_usd", "fleet_gpus", "strong_replicas",
                                                         "weak_replicas", "latency_p95_s")},
    },
    "plan": {
        "task_rate_per_s": "number", "latency_p95_target_s": "number", "front": "array", **_point("front[]"),
        "prices": "object", "prices{}": "object", "prices{}.source": "string|null", "prices{}.date": "string|null",
        "prices{}.age_days": "number|null", "prices{}.usd_per_gpu_hour": "number|null", "tasks": "number|null",
        "engine": "string|null", "api": "object|null", "api.name": "string|null", "api.source": "string|null",
        "api.date": "string|null", "why": "string|null", "specagent_pays": "object|null",
        "specagent_pays.text": "string|null", "assumptions": "array|null", "assumptions[]": "string",
        "confirmed": "array|null", "confirmed[]": "object", **_point("confirmed[].screen"),
        **_simulated("confirmed[].simulated"), "recommended": "object|null", **_point("recommended.screen"),
        **_simulated("recommended.simulated"),
    },
}


def _at(data, path: str):
    """``(where, value)`` of every value at ``path`` (:data:`SHAPES`' syntax) in ``data``."""
    found = [("", data)]
    for tok in re.findall(r"\[\]|\{\}|[^.\[\]{}]+", path):
        nxt = []
        for where, v in found:
            if tok == "[]" and isinstance(v, list):
                nxt += [(f"{where}[{i}]", x) for i, x in enumerate(v)]
            elif tok == "{}" and isinstance(v, dict):
                nxt += [(f"{where}.{k}" if where else k, x) for k, x in v.items()]
            elif tok not in ("[]", "{}") and isinstance(v, dict) and tok in v:
                nxt.append((f"{where}.{tok}" if where else tok, v[tok]))
        found = nxt
    return found


def check(kind: str, data: dict) -> dict:
    """``data``, the ``--json`` of the command ``kind``, cleaned (:func:`clean`) and held to
    :data:`SHAPES`: :class:`BadValue` (one line, naming the key and what it must be) for a value
    the page would misread."""
    data = clean(data)
    for path, types in SHAPES[kind].items():
        for where, v in _at(data, path):
            if not any(_IS[t](v) for t in types.split("|")):
                want = " or ".join(_A[t] for t in types.split("|"))
                raise BadValue(f"`{where}` must be {want}, got {_short(v)}")
    return data


# --- words and numbers ---------------------------------------------------------------------------


def e(x) -> str:
    """``x`` as HTML text: escaped (a result may hold user text), control characters dropped."""
    return html.escape(_text(x), quote=True)


def num(x) -> str:
    """A number as the page shows it: 4 significant digits (thousands grouped from 1,000 to
    10^6, scientific past them or under 0.001), whole numbers whole; None as an em dash (JSON's
    null: not applicable, or infinite), booleans as yes/no."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "∞" if x > 0 else "−∞" if x < 0 else "nan"
        a = abs(x)
        if a == 0:
            return "0"
        if a >= 1e6 or a < 1e-3:
            return f"{x:.4g}"
        if a >= 1000:
            return f"{x:,.0f}"
        return f"{x:.4g}"
    return str(x)


def unit(key) -> str:
    """The unit (or, for a ratio or a count, the meaning) of a key: a dotted path
    ('cell.pool_rates_per_s.strong') or a tuple of keys, by costsim's one rule
    (:func:`costsim.config.unit_of`)."""
    from .config import unit_of

    return unit_of(key)


def value(key: str, v) -> str:
    """``v`` as HTML text: a number formatted (:func:`num`), a simulated estimate
    ``{"mean", "ci95"}`` as 'mean [lo, hi]', a list joined, text escaped."""
    if isinstance(v, dict) and set(v) == {"mean", "ci95"}:
        ci = v["ci95"] if isinstance(v["ci95"], list) and len(v["ci95"]) == 2 else [None, None]
        return f"<span class=est>{e(num(v['mean']))} <span class=ci>[{e(num(ci[0]))}, {e(num(ci[1]))}]</span></span>"
    if isinstance(v, list):
        return e(", ".join(num(x) for x in v))
    return e(num(v))


def _flat(d: dict, skip=(), prefix: str = "") -> dict:
    """The values of ``d`` under dotted keys ('cell.max_task_rate_per_s'), nested objects
    flattened (but a simulated estimate kept whole); keys in ``skip`` (dotted) left out."""
    out = {}
    for k, v in d.items():
        name = prefix + str(k)
        if name in skip:
            continue
        if isinstance(v, dict) and set(v) != {"mean", "ci95"}:
            out.update(_flat(v, skip, name + "."))
        else:
            out[name] = v
    return out


def _table(head, rows, cls: str = "") -> str:
    """An HTML table; ``head``: column titles (HTML), ``rows``: lists of cells (HTML)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class=scroll><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'


def _col(key: str) -> str:
    """A column title: the key and its unit."""
    u = unit(key)
    return e(key) + (f"<br><span class=u>{e(u)}</span>" if u else "")


def _key_rows(items) -> list:
    """Rows (quantity, value, unit or meaning) of ``(key, value)`` pairs."""
    return [[f"<code>{e(k)}</code>", value(k, v), e(unit(k))] for k, v in items]


def _is_number(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, dict) and set(v) == {"mean", "ci95"})


def _sentences(lines) -> str:
    return "<ul>" + "".join(f"<li>{e(x)}</li>" for x in lines) + "</ul>" if lines else ""


def _quote(text) -> str:
    return f"<blockquote>{e(text)}</blockquote>"


def _cards(pairs) -> str:
    """Key numbers in boxes: ``(label (text), number (HTML), unit (text))``."""
    return "<div class=cards>" + "".join(
        f"<div class=card><div class=label>{e(label)}</div><div class=big>{v}</div><div class=u>{e(u)}</div></div>"
        for label, v, u in pairs) + "</div>"


# --- figures: matplotlib's SVG, inline, with a tooltip per point ---------------------------------


def _mpl(text) -> str:
    """Text for matplotlib from the result: a '$' would start its mathtext."""
    return str(text).replace("$", r"\$")


def _svg(fig, tips: dict, prefix: str, label: str) -> str:
    """``fig`` as inline SVG: no XML prologue or metadata, every id prefixed with ``prefix``
    (two figures on a page share none), each artist whose gid is a key of ``tips`` given a
    ``<title>`` child (its tooltip), scaled to the page's width."""
    import io

    from .figures.draw import _plt  # the figures' one style

    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    s = buf.getvalue()
    s = s[s.index("<svg"):]
    s = re.sub(r"<metadata>.*?</metadata>\s*", "", s, flags=re.S)
    s = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', s)
    s = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', s)
    s = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", s)
    titles = {f"{prefix}{gid}": tip for gid, tip in tips.items()}  # one pass over the SVG, whatever the points
    s = re.sub(r'<g id="([^"]+)">', lambda m: m.group(0) + (f"<title>{e(titles.pop(m.group(1)))}</title>"
                                                           if m.group(1) in titles else ""), s)
    s = re.sub(r'<svg ([^>]*?)width="[^"]*" height="[^"]*"', r'<svg \1', s, count=1)
    return s.replace("<svg ", f'<svg role="img" aria-label="{e(label)}" ', 1)


@contextmanager
def _quiet():
    """No numeric warnings while a figure is drawn: a result's extreme (but finite) values
    overflow matplotlib's scales, and the page draws what it can."""
    import warnings

    import numpy as np

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{caption}</figcaption></figure>"


def _config(p: dict, fleet) -> str:
    """A plan configuration in words: its protocol and K (of the plan point ``p``), and ``fleet``
    as the plan says it (plan's JSON ``fleet``, :meth:`costsim.planner.space.Config.fleet`: the
    point's own, or a confirmation's simulated one)."""
    return f"{p.get('protocol')}" + (f" K={num(p['K'])}" if p.get("K") else "") + ": " + (fleet or "(no fleet recorded)")


def _drawn(points: list) -> list:
    """The indices of ``points`` a figure draws: all, or :data:`MAX_POINTS` of them evenly spaced,
    the first and the last among them."""
    n = len(points)
    if n <= MAX_POINTS:
        return list(range(n))
    return sorted({round(i * (n - 1) / (MAX_POINTS - 1)) for i in range(MAX_POINTS)})


def plan_figure(d: dict) -> tuple[str, int, int]:
    """Plan's Pareto front (x: task latency p95 in s, y: USD per 1,000 tasks) as inline SVG: a
    tooltip on every front point drawn (:data:`MAX_POINTS` at most, evenly spaced) and every
    simulated confirmation, the recommendation a red star, the target a dashed line. Also
    returns the number of front points with a cost and a p95, and the number drawn."""
    from .figures.draw import COLORS, _plain_log, _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.4, 5.0))
    tips = {}
    front = [(i, p) for i, p in enumerate(d["front"])
             if p.get("latency_p95_s") is not None and p.get("cost_per_1k_tasks_usd") is not None]
    drawn = [front[j] for j in _drawn(front)]
    ax.plot([p["latency_p95_s"] for _, p in drawn], [p["cost_per_1k_tasks_usd"] for _, p in drawn], color="k", lw=1.0,
            marker="o", ms=7, mfc=COLORS[0], mec="k", zorder=2, label="Pareto front (screen)")
    for i, p in drawn:  # the gid is the point's row in the front table
        ax.plot([p["latency_p95_s"]], [p["cost_per_1k_tasks_usd"]], marker="o", ms=7, ls="", color=COLORS[0], mec="k",
                zorder=3, gid=f"front-{i}")
        tips[f"front-{i}"] = (f"{_config(p, p.get('fleet'))}; {num(p.get('fleet_gpus'))} GPUs; USD {num(p['cost_per_1k_tasks_usd'])} per "
                              f"1,000 tasks; p95 {num(p['latency_p95_s'])} s (screen)")
    rec = d.get("recommended")
    for i, c in enumerate((d.get("confirmed") or [])[:MAX_POINTS]):
        s, r = c["screen"], c["simulated"]
        if r.get("cost_per_1k_tasks_usd") is None or r.get("latency_p95_s") is None:
            continue
        if s.get("latency_p95_s") is not None and s.get("cost_per_1k_tasks_usd") is not None:
            ax.plot([s["latency_p95_s"], r["latency_p95_s"]], [s["cost_per_1k_tasks_usd"], r["cost_per_1k_tasks_usd"]],
                    color="0.5", lw=0.8, ls=":", zorder=1)
        ax.plot([r["latency_p95_s"]], [r["cost_per_1k_tasks_usd"]], marker="D", ms=7, mfc="none", mec="k", ls="",
                zorder=4, gid=f"confirmed-{i}", label="confirmed by simulation" if i == 0 else None)
        tips[f"confirmed-{i}"] = (f"{_config(s, r.get('fleet'))}; {num(r.get('fleet_gpus'))} GPUs; USD "
                                  f"{num(r['cost_per_1k_tasks_usd'])} per 1,000 tasks; p95 {num(r['latency_p95_s'])} s "
                                  f"(simulated; {'meets' if r.get('meets_target') else 'misses'} the target"
                                  + (f"; {r['note']}" if r.get("note") else "") + ")")
    if rec and rec["simulated"].get("cost_per_1k_tasks_usd") is not None and rec["simulated"].get("latency_p95_s") is not None:
        s, r = rec["screen"], rec["simulated"]
        ax.plot([r["latency_p95_s"]], [r["cost_per_1k_tasks_usd"]], marker="*", ms=18, color="#d62728", mec="k", ls="",
                zorder=5, gid="recommended", label="recommended (simulated)")
        tips["recommended"] = (f"recommended: {_config(s, r.get('fleet'))}; {num(r.get('fleet_gpus'))} GPUs; USD "
                               f"{num(r['cost_per_1k_tasks_usd'])} per 1,000 tasks; p95 {num(r['latency_p95_s'])} s "
                               "(simulated" + (f"; {r['note']}" if r.get("note") else "") + ")")
    target = d["latency_p95_target_s"]
    ax.axvline(target, color="0.4", ls="--", lw=1, label=f"target p95 {num(target)} s")
    costs = [p["cost_per_1k_tasks_usd"] for _, p in drawn]
    if costs and min(costs) > 0 and max(costs) / min(costs) > 10:
        ax.set_yscale("log")
        _plain_log(ax)
    if not front:
        ax.text(0.5, 0.5, "no configuration meets the target", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("task latency p95 (s)")
    ax.set_ylabel("USD per 1,000 tasks (GPUs paid by the hour)")
    ax.set_title(f"costsim plan: {num(d['task_rate_per_s'])} tasks/s, p95 ≤ {num(target)} s", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _svg(fig, tips, "plan-", "Pareto front: USD per 1,000 tasks against task latency p95"), len(front), len(drawn)


def capacity_figure(d: dict) -> str | None:
    """Capacity's cost per 1,000 tasks per protocol as horizontal bars (a tooltip on each; the
    first :data:`MAX_BARS` protocols); None where no protocol has a cost."""
    from .figures.draw import COLORS, _plt

    P = dict(list(d["protocols"].items())[:MAX_BARS])
    names = [n for n in P if P[n].get("cost_per_1k_tasks_usd") is not None]
    if not names:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.6, 0.6 + 0.55 * len(P)))
    tips = {}
    for i, n in enumerate(P):
        r = P[n]
        usd = r.get("cost_per_1k_tasks_usd")
        if usd is None:
            ax.text(0, i, f"  {_mpl(n)}: no cost (does not meet the target)", va="center", fontsize=9, color="0.35")
            continue
        ax.barh([i], [usd], color=COLORS[i % len(COLORS)], gid=f"bar-{i}")
        ax.text(usd, i, f" {num(usd)}", va="center", fontsize=9)
        tips[f"bar-{i}"] = (f"{n}: USD {num(usd)} per 1,000 tasks; {num(r.get('fleet_gpus'))} GPUs "
                            f"({num(r.get('strong_replicas'))} strong + {num(r.get('weak_replicas'))} weak replicas); "
                            f"p95 {num(r.get('latency_p95_s'))} s")
    ax.set_yticks(range(len(P)), [_mpl(n) for n in P])
    ax.invert_yaxis()
    ax.set_xlabel("USD per 1,000 tasks (GPUs paid by the hour)")
    ax.set_title(f"costsim capacity: {num(d['task_rate_per_s'])} tasks/s, p95 ≤ {num(d['latency_p95_target_s'])} s",
                 fontsize=10)
    ax.margins(x=0.15)
    return _svg(fig, tips, "cap-", "cost per 1,000 tasks per protocol")


#: What predict's R_u and L_u are ratios of, by its ``ratios_measure``
#: (:func:`costsim.prediction.ratios_measure`): (how, R_u's unit, L_u's unit).
MEASURES = {"weight passes": ("pass counting", "strong weight passes / Strong-only", "wall time / Strong-only"),
            "time": ("calibrated: in time", "strong replica time / Strong-only", "wall time / Strong-only")}


def measure_of(d: dict) -> str:
    """What a predict result's R and L measure (a key of :data:`MEASURES`): its own
    ``ratios_measure``, or, for a result written before it said so, the same rule applied to its
    sources (:func:`costsim.prediction.ratios_measure`)."""
    from .prediction import ratios_measure

    m = d.get("ratios_measure") or ratios_measure(d["sources"])
    if m not in MEASURES:
        raise BadValue(f"`ratios_measure` must be one of {', '.join(map(repr, MEASURES))}, got {_short(m)}")
    return m


def predict_curve(d: dict) -> tuple[str | None, str]:
    """R_u and L_u against p_u (:func:`costsim.prediction.closed_form_ratios`, the form predict
    reports: the paper's, or the renewal form with a write rate) at the result's K, v/d, repair per rejection and
    kappa, its p_u marked; ``(None, why)`` where the result's inputs are out of predict's bounds
    (:func:`costsim.prediction.check_closed_form`: a K of 10^6 would take gigabytes), or where
    the curve does not reproduce the result's R_u and L_u at its p_u (then it is not predict's
    curve). Neither is drawn then."""
    import numpy as np

    from . import formulas
    from .figures.draw import COLORS, _plt
    from .prediction import check_closed_form, closed_form_ratios

    K, vd, rho, kappa, p0, q = (d.get(k) for k in ("K", "v_over_d", "rho_per_rejection", "kappa", "p", "write_rate"))
    try:
        check_closed_form(p0, K, q, name=str)
        for k, v in (("v_over_d", vd), ("rho_per_rejection", rho), ("kappa", kappa)):
            if not _IS["number"](v) or v < 0:
                raise ValueError(f"{k} must be a number >= 0, got {_short(v)}")
    except ValueError as why:
        return None, f"no curve is drawn: this result's inputs are out of predict's bounds ({why})"
    ps = np.linspace(0.0, 1.0, 101)

    chunks = None if q is None else formulas.chunk_length_pmf_write_rate(q, K)

    def ratios(p):
        return closed_form_ratios(p, K, vd, rho, kappa, chunks)

    with np.errstate(all="ignore"):
        R, L = ratios(ps)
        R0, L0 = (float(np.asarray(x)) for x in ratios(np.float64(p0)))
    if not (math.isclose(R0, d["R"], rel_tol=1e-9) and math.isclose(L0, d["L"], rel_tol=1e-9)):
        return None, (f"the closed form at this result's parameters gives R_u = {num(R0)}, L_u = {num(L0)} at p_u = "
                      f"{num(p0)}, not the result's {num(d['R'])} and {num(d['L'])}: no curve is drawn")
    _, r_unit, l_unit = MEASURES[measure_of(d)]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    ax.plot(ps, R, color=COLORS[0], lw=1.6, label=f"R_u: {r_unit}", gid="curve-R")
    ax.plot(ps, L, color=COLORS[1], lw=1.6, label=f"L_u: {l_unit}", gid="curve-L")
    ax.axhline(1.0, color="0.4", ls="--", lw=1, label="Strong-only (1)")
    ax.axvline(p0, color="0.6", ls=":", lw=1)
    ax.plot([p0], [d["R"]], marker="o", ms=8, color=COLORS[0], mec="k", ls="", gid="this-R")
    ax.plot([p0], [d["L"]], marker="o", ms=8, color=COLORS[1], mec="k", ls="", gid="this-L")
    tips = {"this-R": f"this result: p_u = {num(p0)}, R_u = {num(d['R'])}",
            "this-L": f"this result: p_u = {num(p0)}, L_u = {num(d['L'])}",
            "curve-R": f"R_u against p_u at K = {K}, v/d = {num(vd)}, repair {num(rho)} strong steps per rejection",
            "curve-L": f"L_u against p_u at K = {K}, v/d = {num(vd)}, repair {num(rho)}, kappa = {num(kappa)}"}
    ax.set_xlabel("per-step acceptance rate p_u")
    ax.set_ylabel("ratio to Strong-only, per committed step")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_title(f"R_u and L_u against p_u (K = {K}" + (f", write rate {num(q)}" if q is not None else "") + ")",
                 fontsize=10)
    ax.legend(loc="upper right", frameon=False)
    return _svg(fig, tips, "pred-", "R_u and L_u against p_u"), ""


# --- the kinds ------------------------------------------------------------------------------------


def _p_note(p=None) -> str:
    """The line on p_u (HTML): an input of the run, and how to measure it."""
    return (e(f"p_u = {num(p)} is " if p is not None else "p_u, the per-step acceptance rate, is ")
            + "an input of this run, not a measurement: measure it on your own conversations with "
            "<code>costsim acceptance</code> (docs/live.md).")


def _deployment(dep) -> str:
    if not isinstance(dep, dict):
        return e(dep)
    return e(f"{dep.get('model')} on {num(dep.get('n_devices'))}× {dep.get('device')}, {dep.get('dtype')} weights, "
             f"{dep.get('engine')}" + (", expert parallel" if dep.get("expert_parallel") else ""))


def _predict(d: dict) -> dict:
    src = d["sources"]
    places = [d, d.get("tokens") or {}, d.get("step_scales") or {}]
    inputs = [["<code>p</code>", value("p", d["p"]), e(unit("p")), "given (--p-accept: predict has no default)"],
              ["<code>K</code>", value("K", d["K"]), e(unit("K")), NO_SOURCE]]
    if d.get("write_rate") is not None:
        inputs.append(["<code>write_rate</code>", value("write_rate", d["write_rate"]), e(unit("write_rate")), NO_SOURCE])
    for k, s in src.items():
        v = next((pl[k] for pl in places if k in pl), None)
        inputs.append([f"<code>{e(k)}</code>", value(k, v), e(unit(k)), e(s)])
    if "batch" in d:
        inputs.append(["<code>batch</code>", value("batch", d["batch"]), e(unit("batch")), NO_SOURCE])
    for role in ("strong", "weak"):
        if f"{role}_deployment" in d:
            inputs.append([f"<code>{role}_deployment</code>", _deployment(d[f"{role}_deployment"]), "", NO_SOURCE])
    inputs.append(["<code>calibration</code>", e(d.get("calibration") or "none: the roofline's and the defaults' ratios"),
                   "", NO_SOURCE])

    pays = d.get("specagent_pays") or {}
    rf = d.get("roofline") or {}
    how, r_unit, l_unit = MEASURES[measure_of(d)]  # the result says what its R and L measure
    verdict = _quote(d["verdict"]) + _cards([
        (f"R_u ({how})", e(num(d["R"])), r_unit),
        (f"L_u ({how})", e(num(d["L"])), l_unit),
        ("L in time (roofline)", e(num(rf.get("L_time"))), "wall time / Strong-only"),
        ("kappa", e(num(d.get("kappa"))), "weak step time / strong step time"),
        ("break-even kappa", e(num(d.get("break_even_kappa"))), "the kappa at which L_u = 1"),
        ("best K", e(num(d.get("best_K"))), f"L_u = {num(d.get('best_K_L'))} there"),
    ])
    skip = {"sources", "verdict", "tokens", "step_scales", "strong_deployment", "weak_deployment", "calibration",
            "calibration_workload", "paper_v_over_d", "specagent_pays.text", "over_p_dist"}
    flat = _flat(d, skip)
    figures = [(k, v) for k, v in flat.items() if v is None or _is_number(v) or isinstance(v, (str, bool))]
    _cells_at_most(len(figures) * 3)
    own = {"R": r_unit, "L": l_unit}  # R's and L's units are what this result's ratios measure
    rows = [[f"<code>{e(k)}</code>", value(k, v), e(own.get(k) or unit(k))] for k, v in figures]
    tables = "<h3>Every figure of the result</h3>" + _table(["quantity", "value", "unit / meaning"], rows)

    notes, extra = [], ""
    pv = d.get("paper_v_over_d")
    if pv:
        extra += ("<h3>At the v/d the paper's own numbers imply</h3><p>" + e(pv.get("source", "")) + "</p>"
                  + _table(["quantity", "value", "unit / meaning"],
                           _key_rows((k, v) for k, v in pv.items() if k != "source")))
    pd_ = d.get("over_p_dist")
    if pd_:
        extra += ("<h3>Over tasks whose p_u varies</h3>"
                  + _table(["quantity", "value", "unit / meaning"],
                           _key_rows((k, v) for k, v in pd_.items() if _is_number(v) or k == "p_dist")))
        if pd_.get("assumption"):
            notes.append(pd_["assumption"])
    notes += [f"{k}: {s}" for k, s in src.items() if "assumption" in str(s)]
    if d.get("calibration"):
        notes.append(f"calibration: {d['calibration']}")
    if pays.get("text") and pays.get("text") != d["verdict"]:
        notes.append(pays["text"])
    with _quiet():
        svg, why = predict_curve(d)
    figure = (_figure(svg, "R_u and L_u by the closed form (costsim.formulas, the form predict reports) at this "
                           "result's K, v/d, repair per rejection and kappa, against p_u; the result's p_u marked "
                           "(hover a point for its values).") if svg else f"<p>{e(why)}</p>")
    return {"title": f"p_u = {num(d['p'])}, K = {num(d['K'])}", "verdict": verdict, "figure": figure,
            "tables": tables, "inputs": inputs, "notes": notes, "extra": extra, "p_note": _p_note(d["p"])}


def _cells_at_most(n: int) -> None:
    """:class:`BadValue` where a table would have more than :data:`MAX_CELLS` cells."""
    if n > MAX_CELLS:
        raise BadValue(f"its tables would hold {n:,} cells, more than the {MAX_CELLS:,} a page shows (a command's "
                       "result holds a few thousand)")


def _replay(d: dict) -> dict:
    sc, cf, P = d["scenario"], d["closed_form"], d["protocols"]
    names = list(P)
    inputs = []
    scales = sc.get("step_scales") if isinstance(sc.get("step_scales"), dict) else {}
    for k, v in sc.items():
        if k == "step_scales":
            continue
        shown = value(k, v) if not isinstance(v, dict) else e(", ".join(f"{a} {num(b)}" for a, b in v.items()))
        inputs.append([f"<code>{e(k)}</code>", shown, e(unit(k)), NO_SOURCE])
    for k, v in scales.items():
        if k != "source":
            inputs.append([f"<code>step_scales.{e(k)}</code>", value(k, v), "tokens decoded per recorded token",
                           e(scales.get("source", NO_SOURCE))])
    verdict = _sentences(d["notes"]) if d["notes"] else "<p>The result holds no notes.</p>"
    metrics = list(dict.fromkeys(m for n in names for m in P[n]))
    _cells_at_most(len(metrics) * (len(names) + 2))
    rows, zero = [], []
    for m in metrics:
        cells = [P[n].get(m) for n in names]
        row = [f"<code>{e(m)}</code>", e(unit(m))] + [value(m, c) for c in cells]
        means = [c.get("mean") if isinstance(c, dict) else c for c in cells]
        (zero if all(x in (0, 0.0, None) for x in means) else rows).append(row)
    head = ["metric", "unit / meaning"] + [e(n) for n in names]
    tables = ("<h3>Per protocol: per-task means [95% interval]</h3>" + _table(head, rows)
              + (f"<details><summary>{len(zero)} metrics zero (or none) for every protocol</summary>"
                 + _table(head, zero) + "</details>" if zero else ""))
    spec = cf.get("protocol")
    sim = P.get(spec, {}) if spec else {}
    close = [["R", value("R", sim.get("R")), e(num(cf.get("R"))), e(num((cf.get("renewal") or {}).get("R")))],
             ["L", value("L", sim.get("L")), e(num(cf.get("L"))), e(num((cf.get("renewal") or {}).get("L")))]]
    tables += (f"<h3>The closed forms beside the simulation ({e(spec)})</h3>"
               + _table(["ratio to Strong-only", "simulated [95% interval]", f"closed form ({e(cf.get('method'))})",
                         "renewal form"], close))
    exact = cf.get("exact")
    if isinstance(exact, dict) and "unavailable" not in exact:
        keys = ("R", "R_time", "L", "strong_calls_ratio", "wall_s", "strong_calls_per_task")
        tables += ("<h3>The exact twin, per protocol (expected values on the tasks' fixed paths)</h3>"
                   + _table(["protocol"] + [_col(k) for k in keys],
                            [[e(n)] + [value(k, (exact[n] or {}).get(k)) for k in keys] for n in exact]))
    notes = [x for x in (cf.get("assumption"), (cf.get("renewal") or {}).get("assumption")) if x]
    if isinstance(exact, dict) and exact.get("unavailable"):
        notes.append(f"no exact twin: {exact['unavailable']}")
    recorded = str(sc.get("p_dist") or "").startswith("recorded")
    return {"title": f"{num(sc.get('tasks'))} tasks, {', '.join(map(str, names))}", "verdict": verdict, "figure": "",
            "tables": tables, "inputs": inputs, "notes": notes, "extra": "",
            "p_note": "" if recorded else _p_note(sc.get("p"))}


#: Capacity's per-protocol text (shown as the verdict) and sources (shown with the inputs).
_CAPACITY_WORDS = ("reason", "cost_note", "specagent_pays.text", "price_sources")


def _capacity(d: dict) -> dict:
    P = d["protocols"]
    names = list(P)
    inputs = [["<code>task_rate_per_s</code>", value("task_rate_per_s", d["task_rate_per_s"]), e(unit("task_rate_per_s")),
               NO_SOURCE],
              ["<code>latency_p95_target_s</code>", value("latency_p95_target_s", d["latency_p95_target_s"]),
               e(unit("latency_p95_target_s")), NO_SOURCE]]
    prices = {}
    for n in names:
        r = P[n]
        for role in ("strong", "weak"):
            usd = r.get(f"{role}_usd_per_gpu_hour")
            if usd is not None:
                key = (role, usd, (r.get("price_sources") or {}).get(role, NO_SOURCE))
                prices.setdefault(key, []).append(n)
    for (role, usd, src), who in prices.items():
        inputs.append([f"<code>{role}_usd_per_gpu_hour</code> ({e(', '.join(who))})", value("usd_per_gpu_hour", usd),
                       e(unit("usd_per_gpu_hour")), e(src)])
    parts = []
    for n in names:
        r = P[n]
        words = [x for x in (r.get("reason"), r.get("cost_note"), (r.get("specagent_pays") or {}).get("text")) if x]
        parts.append(f"<h3>{e(n)}</h3>" + _cards([
            ("meets the target", e(num(r.get("meets_target"))), f"p95 ≤ {num(d['latency_p95_target_s'])} s"),
            ("cost", e(num(r.get("cost_per_1k_tasks_usd"))), "USD per 1,000 tasks"),
            ("fleet", e(num(r.get("fleet_gpus"))), "GPUs"),
            ("latency p95", e(num(r.get("latency_p95_s"))), "s"),
        ]) + "".join(_quote(w) for w in words))
    flat = {n: _flat(P[n], _CAPACITY_WORDS) for n in names}
    keys = list(dict.fromkeys(k for n in names for k in flat[n]))
    _cells_at_most(len(keys) * (len(names) + 2))
    rows = [[f"<code>{e(k)}</code>", e(unit(k))] + [value(k, flat[n].get(k)) for n in names] for k in keys]
    tables = ("<h3>Per protocol</h3>" + _table(["quantity", "unit / meaning"] + [e(n) for n in names], rows)
              + "<h3>The strong replica</h3>"
              + _table(["quantity", "value", "unit / meaning"],
                       _key_rows((k, d.get(k)) for k in ("balance_batch", "balance_context_tokens", "kv_limit_sequences",
                                                         "kv_pool_bytes") if k in d)))
    with _quiet():
        svg = capacity_figure(d)
    more = (f" The first {MAX_BARS} of its {num(len(names))} protocols are drawn; the table below holds all."
            if len(names) > MAX_BARS else "")
    figure = (_figure(svg, "Cost per 1,000 tasks of each protocol's fleet (hover a bar for its fleet and latency)." + more)
              if svg else "<p>No protocol has a cost per 1,000 tasks (none meets the target): no figure.</p>")
    return {"title": f"{num(d['task_rate_per_s'])} tasks/s, p95 ≤ {num(d['latency_p95_target_s'])} s",
            "verdict": "".join(parts), "figure": figure, "tables": tables, "inputs": inputs,
            "notes": list(d["assumptions"]), "extra": "", "p_note": _p_note()}


#: The columns of plan's front table (plan's JSON ``point``; the pools are put in words).
_FRONT = ("strong_replicas", "weak_replicas", "fleet_gpus", "cost_per_1k_tasks_usd", "latency_p95_s",
          "uncontended_latency_p95_s", "strong_batch", "weak_batch")
_SIMULATED = ("strong_replicas", "weak_replicas", "fleet_gpus", "cost_per_1k_tasks_usd", "latency_p95_s",
              "latency_p50_s", "meets_target", "tasks_simulated", "grown")


def _plan(d: dict) -> dict:
    inputs = [[f"<code>{k}</code>", value(k, d.get(k)), e(unit(k)), NO_SOURCE]
              for k in ("task_rate_per_s", "latency_p95_target_s", "tasks") if k in d]
    if d.get("engine"):
        inputs.append(["<code>engine</code>", e(d["engine"]), "", NO_SOURCE])
    for dev, p in d["prices"].items():
        src = p.get("source") or NO_SOURCE
        dated = (f" (dated {p['date']}" + (f"; {num(p.get('age_days'))} days old when the plan ran" if
                                           p.get("age_days") is not None else "") + ")") if p.get("date") else ""
        inputs.append([f"<code>usd_per_gpu_hour</code> {e(dev)}", value("usd_per_gpu_hour", p.get("usd_per_gpu_hour")),
                       e(unit("usd_per_gpu_hour")), e(src + dated)])
    api = d.get("api")
    if isinstance(api, dict):
        for k, v in api.items():
            if _is_number(v):
                own = api.get(f"{k}_from") or api.get(f"{k.rsplit('_', 1)[0]}_from")  # a figure the profile lacks
                src = own or (f"{api['source']} (dated {api['date']})" if api.get("date") else api.get("source"))
                inputs.append([f"<code>api.{e(k)}</code> {e(api.get('name', ''))}", value(k, v), e(unit(k)),
                               e(src or NO_SOURCE)])
    rec = d.get("recommended")
    if rec:
        s, r = rec["screen"], rec["simulated"]
        cell = (r.get("simulated") or {}).get("text")
        verdict = (f"<p class=rec>Recommended: <b>{e(_config(s, r.get('fleet')))}</b></p>"
                   + (f"<p>Simulated: {e(num(r.get('tasks_simulated')))} tasks over {e(cell)}.</p>" if cell else "")
                   + (f"<p><b>Caveat:</b> {e(r['note'])}.</p>" if r.get("note") else "") + _cards([
            ("cost (simulated)", e(num(r.get("cost_per_1k_tasks_usd"))), "USD per 1,000 tasks"),
            ("latency p95 (simulated)", e(num(r.get("latency_p95_s"))), f"s; target {num(d['latency_p95_target_s'])} s"),
            ("fleet", e(num(r.get("fleet_gpus"))), "GPUs"),
            ("screen's estimate", e(num(s.get("cost_per_1k_tasks_usd"))), f"USD per 1,000 tasks, p95 {num(s.get('latency_p95_s'))} s"),
        ]))
    else:
        verdict = "<p class=rec>Recommended: none.</p>"
    verdict += "<p>Why:</p>" + _quote(d.get("why") or "")
    pays = d.get("specagent_pays") or {}
    if pays.get("text"):
        verdict += _quote(pays["text"])
    _cells_at_most(len(d["front"]) * (len(_FRONT) + 6) + len(d.get("confirmed") or []) * (len(_SIMULATED) + 5))
    front_rows = [[e(p.get("protocol")), e(num(p.get("K"))), e(p.get("fleet") or "—"), e(_pool(p, "strong")),
                   e(_pool(p, "weak")), e(p.get("api") or "—")] + [value(k, p.get(k)) for k in _FRONT] for p in d["front"]]
    tables = ("<h3>The Pareto front (the screen's estimates)</h3>"
              + _table(["protocol", "K", "fleet", "strong replica", "weak replica", "API"] + [_col(k) for k in _FRONT],
                       front_rows))
    conf = d.get("confirmed") or []
    if conf:
        rows = [[e(_config(c["screen"], c["simulated"].get("fleet"))),
                 value("cost_per_1k_tasks_usd", c["screen"].get("cost_per_1k_tasks_usd")),
                 value("latency_p95_s", c["screen"].get("latency_p95_s"))]
                + [value(k, c["simulated"].get(k)) for k in _SIMULATED]
                + [e((c["simulated"].get("simulated") or {}).get("text") or "—"), e(c["simulated"].get("note") or "—")]
                for c in conf]
        tables += ("<h3>Confirmed by simulation</h3>"
                   + _table(["configuration (simulated fleet)", "screen: " + _col("cost_per_1k_tasks_usd"),
                             "screen: " + _col("latency_p95_s")] + ["simulated: " + _col(k) for k in _SIMULATED]
                            + ["the cell simulated", "caveat"], rows))
    tables += "<h3>The search</h3>" + _table(["quantity", "value", "unit / meaning"], _key_rows(
        (k, d.get(k)) for k in ("configurations", "feasible_configurations", "tasks", "elapsed_s") if k in d))
    with _quiet():
        svg, n, drawn = plan_figure(d)
    shown = (f"{num(n)} configurations" if drawn == n else
             f"{num(drawn)} of its {num(n)} configurations drawn, evenly spaced along it; the table below holds all")
    figure = _figure(svg, f"The Pareto front of the screen ({shown}: cost per 1,000 tasks against task "
                          "latency p95), each simulated confirmation (◇) joined to its screen estimate, the "
                          "recommendation (★). Hover a point for its configuration, cost and latency.")
    return {"title": f"{num(d['task_rate_per_s'])} tasks/s, p95 ≤ {num(d['latency_p95_target_s'])} s",
            "verdict": verdict, "figure": figure, "tables": tables, "inputs": inputs,
            "notes": list(d.get("assumptions") or []), "extra": "", "p_note": _p_note()}


def _pool(p: dict, role: str) -> str:
    x = p.get(role)
    if not isinstance(x, dict):
        return "—"
    return f"{num(x.get('gpus_per_replica'))}× {x.get('device')}" + (", EP" if x.get("expert_parallel") else "")


_BUILD = {"predict": _predict, "replay": _replay, "capacity": _capacity, "plan": _plan}


# --- the page -------------------------------------------------------------------------------------

_CSS = """
:root{--ink:#1d2430;--mute:#5b6472;--line:#d9dee6;--bg:#fff;--soft:#f5f7fa;--accent:#1f5fa8}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--ink);background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:24px 28px 64px}
header h1{margin:0 0 4px;font-size:26px}
header .sub{color:var(--mute);margin:0}
nav{margin:14px 0 8px;display:flex;gap:14px;flex-wrap:wrap;font-size:14px}
nav a{color:var(--accent);text-decoration:none}
h2{font-size:19px;margin:34px 0 10px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:22px 0 8px}
blockquote{margin:10px 0;padding:10px 14px;background:var(--soft);border-left:4px solid var(--accent)}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:150px}
.card .label{font-size:12px;color:var(--mute)}
.card .big{font-size:21px;font-weight:600}
.card .u{font-size:12px;color:var(--mute)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td:not(:first-child){font-variant-numeric:tabular-nums}
th .u,.ci{color:var(--mute);font-weight:normal;font-size:12px}
.est{white-space:nowrap}
code{font-size:12.5px}
figure{margin:10px 0}
figure svg{width:100%;height:auto;max-width:860px}
figcaption{color:var(--mute);font-size:13px}
.rec{font-size:16px}
footer{margin-top:40px;color:var(--mute);font-size:12px}
@media print{nav{display:none}main{max-width:none}}
"""


def page(kind: str, data: dict, validation: list[dict], *, warnings=(), source: str | None = None) -> str:
    """The HTML page of ``data``, the ``--json`` of the command ``kind`` (:func:`kind_of`);
    ``validation``: the roofline's errors per group (``costsim.api.roofline_validate()["summary"]``);
    ``warnings``: what the command said on stderr, where known; ``source``: the file's name.
    One self-contained page: inline CSS and SVG, no script, nothing to fetch. ``data`` is held
    to :func:`check` first (:class:`BadValue`, one line, for a value the page would misread)."""
    if kind not in _BUILD:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(_BUILD)}")
    part = _BUILD[kind](check(kind, data))
    command = COMMANDS[kind]
    val_rows = [[e("hold-out" if v.get("split") == "holdout" else v.get("split")), e(v.get("group")), e(num(v.get("cases"))),
                 e(f"{v['median_abs_error']:.0%}" if isinstance(v.get("median_abs_error"), (int, float)) else "—"),
                 e(f"{num(v.get('worst_factor'))}×")] for v in validation]
    notes = [*part["notes"]]
    sections = [
        ("verdict", "The verdict, in the result's own words", part["verdict"]),
        ("figure", "Figure", part["figure"]) if part["figure"] else None,
        ("tables", "Tables", part["tables"]),
        ("inputs", "Inputs and their sources",
         _table(["input", "value", "unit / meaning", "source"], part["inputs"])
         + f"<p class=note>{e(NO_SOURCE)}: the result records no source for this input (a flag of the run, or "
           "its default).</p>"),
        ("uncertain", "What the model is uncertain about",
         (f"<p>{part['p_note']}</p>" if part["p_note"] else "")
         + "<h3>The roofline against measurement</h3><p>Per-iteration costs predicted against the public serving "
           "measurements shipped with costsim (benchmarks/measured, <code>costsim roofline validate</code>): "
           "<i>fit</i> cases set the engines' parameters, <i>hold-out</i> cases were kept out of the fit. Worst "
           "factor: the largest of measured/predicted and predicted/measured.</p>"
         + _table(["split", "group", "cases", "median |error|", "worst factor"], val_rows)
         + (("<h3>Warnings</h3>" + _sentences(warnings)) if warnings else "")
         + (("<h3>The result's assumptions and notes</h3>" + _sentences(notes)) if notes else "")
         + part["extra"]),
    ]
    sections = [s for s in sections if s]
    nav = "".join(f'<a href="#{sid}">{e(title)}</a>' for sid, title, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{e(title)}</h2>{content}</section>' for sid, title, content in sections)
    sub = f"{command} --json" + (f", read from {source}" if source else "")
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>{e(command)} — {e(part['title'])}</title><style>{_CSS}</style></head>"
            f"<body><main><header><h1>{e(command)}: {e(part['title'])}</h1><p class=sub>{e(sub)}</p></header>"
            f"<nav>{nav}</nav>{body}<footer>Made by <code>costsim report</code>: one file, no script, nothing "
            "fetched; the figures are inline SVG (hover a point for its values).</footer></main></body></html>\n")

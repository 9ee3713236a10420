"""Run a measurement plan against a weak and a strong endpoint, fit, and write a calibration file.

The probes a run completes are kept in ``<output>.probes.json`` (rewritten atomically after each
probe), so a run that an endpoint failure stops can go on with ``resume=True``. The calibration
TOML keeps the ``[ratios]`` table that :mod:`costsim.calibration` reads (in time: what the
wall-time ratio L needs) and adds the per-endpoint fits, the pass-counted ratios, the workload
the ratios are for, and the server-side cross-check. No API key is ever written: only the name
of the environment variable, and URLs without user:password.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from . import fit as _fit
from . import prometheus
from .client import Endpoint, EndpointError, public_url
from ..calibration import to_toml
from ..config import LIVE
from ..files import write_atomic
from .probes import CallShapes, Probe, make_probes

PROBES_VERSION = 1



def calibration_file(res: dict, source: str) -> str:
    """The calibration file (TOML) of a run's result, its endpoints' URLs without credentials."""
    return to_toml(res, source, {role: public_url(url) for role, url in res["urls"].items()})


class CalibrationRunError(RuntimeError):
    """A run that could not finish; one line, and the probes so far are saved."""


#: A saved probe's fields and what each holds ("?": or null, not reported): what the fits and
#: the analysis read from a row, so that a row of any other shape is refused before they do.
_ROW_FIELDS = {"id": "text", "role": "text", "kind": "text", "shape_prompt": "count", "shape_output": "count",
               "prompt_tokens": "count", "completion_tokens": "count", "requested_tokens": "count",
               "wall_s": "seconds", "ttft_s": "seconds?", "finish_reason": "text?", "cached_tokens": "count?",
               "server_prompt_s": "seconds?", "server_decode_s": "seconds?", "attempts": "count"}
_FIELD_KINDS = {
    "text": ("text", lambda v: isinstance(v, str)),
    "count": ("a count >= 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "seconds": ("a number of seconds >= 0", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                and math.isfinite(v) and v >= 0),
}


def _row_problem(i: int, row, plan_roles: dict, seen: set) -> str | None:
    """What makes ``row`` (the i-th) not a probe of this plan, or None."""
    if not isinstance(row, dict):
        return f"row {i} is not an object"
    for k, spec in _ROW_FIELDS.items():
        if k not in row:
            return f"row {i} has no {k}"
        what, ok = _FIELD_KINDS[spec.rstrip("?")]
        if not (ok(row[k]) or (row[k] is None and spec.endswith("?"))):
            return f"row {i}: {k} is not {what}"
    if plan_roles.get(row["id"]) != row["role"] or row["id"] in seen:
        return f"row {i} is not a probe of this run's plan, or repeats one"
    seen.add(row["id"])
    return None


def load_probes(path: Path, header: dict, plan_roles: dict) -> list:
    """The rows of a probes file this run may go on from. CalibrationRunError (one line) for a
    file that is not one costsim wrote (hand-edited, cut short, another program's) or that is
    for other endpoints or options: the fits would otherwise meet a row they cannot read."""
    def refuse(why):
        return CalibrationRunError(f"{path}: not a probes file costsim wrote ({why}); remove it or run without --resume")

    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CalibrationRunError(f"{path}: cannot resume from it ({e.strerror or type(e).__name__})") from None
    except (ValueError, RecursionError):
        raise refuse("not JSON") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("header"), dict) or not isinstance(saved.get("rows"), list):
        raise refuse("not an object with a header and a list of rows")
    if saved["header"] != header:
        raise CalibrationRunError(f"{path}: saved probes are for other endpoints or options; "
                                  "run without --resume to start over")
    seen = set()
    for i, row in enumerate(saved["rows"], 1):
        why = _row_problem(i, row, plan_roles, seen)
        if why:
            raise refuse(why)
    return saved["rows"]


@dataclass
class Run:
    """State of a calibration run: the plan, the rows measured so far, where they are kept."""

    plan: list
    header: dict
    rows: list = field(default_factory=list)
    probes_path: Path | None = None

    def done_ids(self) -> set:
        return {r["id"] for r in self.rows}

    def save(self):
        if self.probes_path is not None:
            write_atomic(self.probes_path, json.dumps({"header": self.header, "rows": self.rows}, indent=1))


def probe_prompt(ep: Endpoint, p: Probe, rng: random.Random, allow_cache: bool):
    if allow_cache:  # the same prompt for every repeat of a shape: repeats may hit the cache
        return ep.random_prompt(p.prompt_tokens, random.Random(f"{p.role}/{p.kind}/{p.prompt_tokens}"))
    return ep.random_prompt(p.prompt_tokens, rng)


def warm_up(ep: Endpoint, rng: random.Random, calls: int = 2) -> bool:
    """A few unrecorded calls (first calls are slow); returns whether forced decoding works."""
    forced = True
    for _ in range(calls):
        r = ep.complete(ep.random_prompt(16, rng), 8)
        forced = forced and r.forced
    ep.force_supported = forced
    return forced


def run_calibration(weak: Endpoint, strong: Endpoint, w: CallShapes, *, repeats=LIVE.repeats, seed=0, allow_cache=False,
             max_prompt_tokens=None, max_output_tokens=None, probes_path=None, resume=False,
             progress=None, local=False) -> dict:
    """Measure, fit and derive. Returns the result dict that :func:`to_toml` writes.

    ``progress(done, total)`` is called after each probe. On an endpoint failure the completed
    probes are saved (when ``probes_path`` is given) and :class:`CalibrationRunError` is raised.
    ``local``: the endpoints are local servers started for this run, known by their models (their
    ports change from run to run), not by their URLs, when probes are resumed.
    """
    plan = make_probes(w, repeats=repeats, seed=seed, max_prompt_tokens=max_prompt_tokens,
                     max_output_tokens=max_output_tokens)
    eps = {"weak": weak, "strong": strong}
    try:
        for ep in eps.values():
            ep.discover()
    except EndpointError as e:
        raise CalibrationRunError(str(e)) from None
    header = {"version": PROBES_VERSION, "workload": w.as_dict(), "repeats": repeats, "seed": seed,
              "allow_cache": allow_cache, "max_prompt_tokens": max_prompt_tokens,
              "max_output_tokens": max_output_tokens,
              **({"weak_model": weak.model, "strong_model": strong.model} if local else
                 {"weak_url": weak.url, "strong_url": strong.url})}
    run = Run(plan, header, probes_path=Path(probes_path) if probes_path else None)
    if resume and run.probes_path is not None and run.probes_path.exists():
        run.rows = load_probes(run.probes_path, header, {p.id: p.role for p in plan})
    rng = random.Random()  # fresh prefixes: not seeded, so no two runs share a prompt
    snap_before, calls = {}, {"weak": 0, "strong": 0}
    forced, notes = {}, []

    def snapshot(ep):
        """The server's own /metrics, parsed; None, with a note, where it cannot be read: the
        cross-check with them is optional, the probes are not lost for it."""
        try:
            txt = ep.metrics_text()
            return prometheus.parse(txt) if txt else None
        except (EndpointError, prometheus.MetricsError) as e:
            notes.append(f"{ep.url}/metrics unreadable ({e}): no cross-check with the server's own timings")
            return None

    try:
        for role, ep in eps.items():
            forced[role] = warm_up(ep, rng)
            snap_before[role] = snapshot(ep)
        done = run.done_ids()
        todo = [p for p in plan if p.id not in done]
        if progress:
            progress(len(plan) - len(todo), len(plan))
        for p in todo:
            ep = eps[p.role]
            r = ep.complete(probe_prompt(ep, p, rng, allow_cache), p.max_tokens)
            calls[p.role] += 1
            row = {"id": p.id, "role": p.role, "kind": p.kind, "shape_prompt": p.prompt_tokens,
                   "shape_output": p.max_tokens, **r.as_dict()}
            run.rows.append(row)
            run.save()
            if progress:
                progress(len(run.rows), len(plan))
        server = {}
        for role, ep in eps.items():
            after = snapshot(ep) if snap_before[role] is not None else None
            server[role] = (prometheus.server_timing(snap_before[role], after, requests=calls[role])
                            if after is not None else None)
    except EndpointError as e:
        where = ""
        if run.rows and run.probes_path is not None:
            run.save()
            where = f"; {len(run.rows)} probes saved to {run.probes_path}, rerun with --resume"
        raise CalibrationRunError(f"{e}{where}") from None
    return analyse(run.rows, w, weak, strong, forced, server, allow_cache, notes)


#: A fit poorer than this is written with a warning: the linear per-call model t = overhead +
#: prefill·P + decode·N then misses what the endpoint does (a loaded machine, a cache).
FIT_WARN_R2, FIT_WARN_RESIDUAL = 0.9, 0.5


def analyse(rows, w: CallShapes, weak: Endpoint, strong: Endpoint, forced: dict, server: dict, allow_cache: bool,
            notes=()) -> dict:
    fits = {}
    for role in ("weak", "strong"):
        rr = [r for r in rows if r["role"] == role]
        try:
            fits[role] = _fit.fit_endpoint(rr)
        except _fit.FitError as e:
            raise CalibrationRunError(f"{role} endpoint {(weak if role == 'weak' else strong).url}: {e}") from None
        if fits[role].decode_s_per_token <= 0:
            # The simulator and every ratio scale with decode: a file without it would be refused later.
            raise CalibrationRunError(f"{role} endpoint {(weak if role == 'weak' else strong).url}: decode time per "
                                      "token fitted at 0 (not resolved above timing noise): probe longer outputs "
                                      "(--max-output-tokens) on a quieter machine")
    ratios = _fit.derive_ratios(fits["weak"], fits["strong"], w)
    warnings = list(notes)
    for role, f in fits.items():
        if f.prefill_s_per_token <= 0:
            # A bounded fit at its bound: the probes' prompts are too short for this server's noise
            # (a tiny model on a CPU prefills in microseconds). Written as measured; see roofline.calibrated.
            hi = f.ci95["prefill_s_per_token"][1]
            warnings.append(f"{role}: prefill time per token not resolved above timing noise (fitted at 0; 95% "
                            f"interval up to {hi * 1e3:.3g} ms/token): longer probe prompts (--max-prompt-tokens) "
                            "resolve it; the simulator keeps the roofline's prefill rate where it is 0")
    for role, f in fits.items():
        if f.r2 < FIT_WARN_R2 or f.max_rel_residual > FIT_WARN_RESIDUAL:
            warnings.append(f"{role}: a poor fit (R² {f.r2:.3f}, worst shape off by {f.max_rel_residual:.0%}; "
                            f"warned below R² {FIT_WARN_R2} or past {FIT_WARN_RESIDUAL:.0%}): measure again on a "
                            "quiet machine, or with more --repeats")
    for role in ("weak", "strong"):
        rr = [r for r in rows if r["role"] == role]
        short = sum(1 for r in rr if r["completion_tokens"] < r["requested_tokens"])
        if short:
            warnings.append(f"{role}: {short} of {len(rr)} calls stopped before max_tokens "
                            "(the server ignores ignore_eos/min_tokens); fitted on the tokens it produced")
        prompt = sum(r["prompt_tokens"] for r in rr)
        cached = sum(r["cached_tokens"] or 0 for r in rr)
        if prompt and cached / prompt > 0.01 and not allow_cache:
            warnings.append(f"{role}: {cached / prompt:.0%} of prompt tokens came from the prefix cache "
                            "despite fresh random prefixes")
    cross = {}
    for role, st in (server or {}).items():
        if st is None or st.flavor is None:
            continue
        f = fits[role]
        c = {"flavor": st.flavor, "metric_names": len(st.names_seen)}
        for k, mine in (("prefill_s_per_token", f.prefill_s_per_token), ("decode_s_per_token", f.decode_s_per_token)):
            theirs = getattr(st, k)
            if theirs is not None and math.isfinite(theirs):
                c[k] = theirs
                c[f"{k}_rel_diff"] = (mine - theirs) / theirs if theirs else math.nan
        if st.cache_hit_rate is not None:
            c["prefix_cache_hit_rate"] = st.cache_hit_rate
            if st.cache_hit_rate > 0.01 and not allow_cache:
                warnings.append(f"{role}: server reports prefix-cache hit rate {st.cache_hit_rate:.1%}")
        if st.ttft_mean_s is not None:
            c["ttft_mean_s"] = st.ttft_mean_s
        cross[role] = c
    return {
        "workload": w.as_dict(),
        "fits": fits,
        "ratios": ratios,
        "direct": _fit.direct_ratios(rows, w),
        "server": cross,
        "forced_decode": forced,
        "models": {"weak": weak.model, "strong": strong.model},
        "urls": {"weak": weak.url, "strong": strong.url},
        "api_key_env": {"weak": weak.api_key_env, "strong": strong.api_key_env},
        "n_probes": len(rows),
        "warnings": warnings,
    }


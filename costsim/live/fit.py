"""Least-squares fits of per-call time, and the cost model's ratios derived from them.

Per endpoint, the time of one completion call with P prompt tokens and N output tokens is

    t(P, N) = overhead + prefill_s_per_token * P + decode_s_per_token * (N - 1)

(the first output token comes out of the prefill; each further token is one decode iteration).
The fit is weighted least squares (weights 1/t²: noise is relative) on the *median* time of each
probed shape (timing on shared machines is noisy and skewed: medians of repeated probes are
robust), with 95% intervals from the t distribution on the residual variance.

From the two fits and the user's shapes (see :class:`costsim.live.probes.CallShapes`):

- strong step  T_s = t_strong(o, d), weak step T_w = t_weak(o, d)   (an observation in, a step out)
- verification T_v = t_strong(chunk, verdict)                       (the chunk in, a verdict out)
- fused repair T_r = decode_s_per_token_strong * repair             (extra tokens in the verdict call)
- kappa = T_w / T_s,  v/d = T_v / T_s,  rho = T_r / T_s             (in time)

and the same v/d and rho by pass counting (the paper's currency: one weight pass per decoded
token, one for a prefill). Intervals of the ratios come from a parametric bootstrap of the two
fits' parameter distributions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import formulas
from ..calibration import RATIO_KEYS, CalibrationError, endpoint_fits, load_calibration

PARAMS = ("overhead_s", "prefill_s_per_token", "decode_s_per_token")


class FitError(ValueError):
    """Too few or degenerate probes to fit."""


@dataclass(frozen=True)
class EndpointFit:
    """One endpoint's measured call time, fitted by least squares on per-shape medians:
    ``seconds = overhead_s + prefill_s_per_token · prompt + decode_s_per_token · (output - 1)``
    (the first output token comes with the prefill), with the fit's 95% intervals, covariance,
    degrees of freedom, counts, R² and largest relative residual."""

    overhead_s: float
    prefill_s_per_token: float
    decode_s_per_token: float
    ci95: dict                 # name -> (lo, hi)
    cov: np.ndarray            # 3x3 covariance of (overhead, prefill, decode)
    dof: int
    n_shapes: int
    n_probes: int
    r2: float
    max_rel_residual: float

    @property
    def beta(self) -> np.ndarray:
        return np.array([self.overhead_s, self.prefill_s_per_token, self.decode_s_per_token])

    def time(self, prompt_tokens, output_tokens, beta=None):
        b = self.beta if beta is None else beta
        P, N = np.asarray(prompt_tokens, float), np.asarray(output_tokens, float)
        return b[..., 0] + b[..., 1] * P + b[..., 2] * np.maximum(N - 1.0, 0.0)

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in PARAMS}
        d.update(n_shapes=self.n_shapes, n_probes=self.n_probes, r2=self.r2,
                 max_rel_residual=self.max_rel_residual)
        return d


def medians_by_shape(rows: list[dict]) -> list[tuple[float, float, float, int]]:
    """(median prompt tokens, median output tokens, median wall seconds, count) per shape."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["kind"], r["shape_prompt"], r["shape_output"]), []).append(r)
    out = []
    for g in groups.values():
        out.append((float(np.median([r["prompt_tokens"] for r in g])),
                    float(np.median([r["completion_tokens"] for r in g])),
                    float(np.median([r["wall_s"] for r in g])), len(g)))
    return out


def fit_endpoint(rows: list[dict]) -> EndpointFit:
    """Fit t = overhead + a P + b (N - 1) to the per-shape medians of ``rows`` (relative weights)."""
    from scipy.stats import t as student_t

    med = medians_by_shape(rows)
    if len(med) < 4:
        raise FitError(f"need at least 4 distinct probe shapes to fit 3 parameters, got {len(med)}")
    P = np.array([m[0] for m in med])
    N = np.array([m[1] for m in med])
    y = np.array([m[2] for m in med])
    X = np.column_stack([np.ones_like(P), P, np.maximum(N - 1.0, 0.0)])
    if np.linalg.matrix_rank(X) < 3:
        raise FitError("probe shapes do not vary both prompt and output length; cannot separate prefill from decode")
    # Weighted least squares with weights 1/t²: timing noise is multiplicative (a busy machine
    # slows a call by a factor), so each shape's *relative* error counts alike.
    wt = 1.0 / np.maximum(y, 1e-12)
    Xw, yw = X * wt[:, None], y * wt
    # Times cannot be negative: bounded least squares (on a noisy machine a tiny prefill cost
    # can otherwise fit below zero). With no bound active this is ordinary least squares.
    from scipy.optimize import lsq_linear

    beta = lsq_linear(Xw, yw, bounds=(0.0, np.inf), method="bvls").x
    resid = y - X @ beta
    rw = yw - Xw @ beta
    dof = len(y) - 3
    s2 = float(rw @ rw) / dof if dof > 0 else 0.0
    cov = s2 * np.linalg.inv(Xw.T @ Xw)
    tq = float(student_t.ppf(0.975, dof)) if dof > 0 else float("inf")
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    ci = {k: (float(b - tq * s), float(b + tq * s)) for k, b, s in zip(PARAMS, beta, se)}
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(resid @ resid) / ss_tot if ss_tot > 0 else 1.0
    return EndpointFit(*map(float, beta), ci95=ci, cov=cov, dof=dof, n_shapes=len(med),
                       n_probes=len(rows), r2=r2, max_rel_residual=float(np.max(np.abs(resid) / y)))


def _ratios(weak_beta, strong_beta, w, fw: EndpointFit, fs: EndpointFit):
    d, o = w.step_tokens, w.obs_tokens
    Ts = fs.time(o, d, strong_beta)
    Tw = fw.time(o, d, weak_beta)
    Tv = fs.time(w.chunk, w.verdict_tokens, strong_beta)
    Tr = strong_beta[..., 2] * w.repair
    return {"kappa": Tw / Ts, "v_over_d": Tv / Ts, "rho": Tr / Ts}


def derive_ratios(fw: EndpointFit, fs: EndpointFit, w, draws: int = 4000, seed: int = 0) -> dict:
    """kappa, v/d, rho in time (with bootstrap 95% intervals) and v/d, rho by pass counting."""
    point = {k: float(v) for k, v in _ratios(fw.beta, fs.beta, w, fw, fs).items()}
    rng = np.random.default_rng(seed)

    def sample(f: EndpointFit):
        scale = 1.0
        if f.dof > 0:  # t-distributed parameters: normal / sqrt(chi2/dof)
            scale = np.sqrt(f.dof / rng.chisquare(f.dof, size=(draws, 1)))
        z = rng.multivariate_normal(np.zeros(3), f.cov, size=draws, method="eigh")
        return f.beta + z * scale

    bw, bs = sample(fw), sample(fs)
    with np.errstate(all="ignore"):
        boot = _ratios(bw, bs, w, fw, fs)
    ci = {}
    for k, v in boot.items():
        v = v[np.isfinite(v)]
        ci[k] = (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) if v.size else (math.nan, math.nan)
    d = w.step_tokens
    Ts = float(fs.time(w.obs_tokens, d))
    Tv = float(fs.time(w.chunk, w.verdict_tokens))
    prefill_s = fs.prefill_s_per_token * w.chunk
    return {
        "time": point,
        "time_ci95": ci,
        "passes": {"v_over_d": float(formulas.v_over_d_passes(w.verdict_tokens, d)), "rho": w.repair / d},
        "seconds": {"strong_step": Ts, "weak_step": float(fw.time(w.obs_tokens, d)), "verify": Tv,
                    "repair": fs.decode_s_per_token * w.repair},
        # How many weight-pass times (decode iterations) the verification prefill really costs:
        # pass counting says 1; a compute-bound prefill costs many.
        "verify_prefill_pass_equivalents": prefill_s / fs.decode_s_per_token if fs.decode_s_per_token > 0 else math.inf,
    }


def direct_ratios(rows: list[dict], w) -> dict:
    """Ratios straight from the medians of the step- and verdict-shaped probes (no model)."""
    def med(role, kind):
        v = [r["wall_s"] for r in rows if r["role"] == role and r["kind"] == kind]
        return float(np.median(v)) if v else math.nan

    ss, ws, sv = med("strong", "step"), med("weak", "step"), med("strong", "verdict")
    return {"kappa": ws / ss, "v_over_d_no_repair": sv / ss}


# --- a calibration file's fits, for live runs ---------------------------------------------------


def fits_from_calibration(raw: dict):
    """Rebuild the two endpoint fits (point values only) from a calibration file's tables."""
    out = {}
    for role in ("weak", "strong"):
        t = raw.get(role)
        if not isinstance(t, dict) or not all(isinstance(t.get(k), (int, float)) for k in PARAMS):
            return None
        out[role] = EndpointFit(*(float(t[k]) for k in PARAMS), ci95={}, cov=np.zeros((3, 3)), dof=0,
                                     n_shapes=int(t.get("n_shapes", 0)), n_probes=int(t.get("n_probes", 0)),
                                     r2=float(t.get("r2", math.nan)), max_rel_residual=float(t.get("max_rel_residual", math.nan)))
    return out


def ratios_for(path: str, workload) -> tuple[dict, str]:
    """``(kappa, v/d, rho; where from)`` for a live workload: from the file's endpoint fits,
    else its [ratios]. CalibrationError for a file that has neither."""
    cal = load_calibration(path)
    fits = fits_from_calibration(cal.raw)
    if fits:
        endpoint_fits(cal)  # the same checks as the simulator's: finite, per-token times > 0
        return derive_ratios(fits["weak"], fits["strong"], workload, draws=10)["time"], f"{path} (endpoint fits)"
    missing = [k for k in RATIO_KEYS if k not in cal.ratios]
    if missing:
        raise CalibrationError(f"{path}: [ratios] lacks {', '.join(missing)} and the file has no endpoint fits")
    return dict(cal.ratios), f"{path} ([ratios])"

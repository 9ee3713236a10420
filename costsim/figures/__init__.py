"""The committed figures, regenerated deterministically by `costsim figures`.

Each figure is an experiment (:mod:`.experiments`: a DataFrame of the numbers it plots) and a
drawing (:mod:`.draw`); :func:`generate` writes ``NAME.png``, ``NAME.csv`` (the DataFrame) and
the index ``README.md`` (:mod:`.readme`, every number in it computed here).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from ..files import write_atomic
from . import draw, experiments


@dataclass(frozen=True)
class Figure:
    name: str        # --only NAME
    file: str        # file stem in the output folder
    title: str
    experiment: object
    draw: object


FIGURES = tuple(Figure(name, file, title, getattr(experiments, fn), getattr(draw, fn)) for name, file, title, fn in (
    ("cost-model", "fig1_cost_model", "R_u and L_u against p_u", "cost_model"),
    ("paper-fit", "fig2_paper_fit", "costsim's model fitted to the paper's numbers", "paper_fit"),
    ("balance-point", "fig3_balance_point", "The balance point under contention", "balance_point"),
    ("capacity", "fig4_capacity", "Capacity curves", "capacity"),
    ("pass-counting", "fig5_pass_counting", "Pass counting versus roofline time", "pass_counting"),
    ("tau2-replay", "fig6_tau2_replay", "tau² replay: strong calls per task", "tau2_replay"),
    ("prefix-cache", "fig7_prefix_cache", "Prefix caching under contention", "prefix_cache"),
))


def names() -> list[str]:
    return [f.name for f in FIGURES]


def _csv(df) -> str:
    """The DataFrame as the figure's CSV: floats to 6 significant digits, non-finite ones empty."""
    def cell(v):
        if isinstance(v, float):
            return "" if not math.isfinite(v) else f"{v:.6g}"
        return str(v)
    lines = [",".join(df.columns)] + [",".join(cell(v) for v in r) for r in df.itertuples(index=False, name=None)]
    return "\n".join(lines) + "\n"


def generate(out="figures", only=None, log=None) -> dict:
    """Write the figures (all, or those named in ``only``) and the index ``README.md``.

    The index is rewritten only when every figure is generated (it embeds their numbers).
    Returns ``{name: {"seconds": s, "result": ..., "data": DataFrame}}``.
    """
    from .readme import index

    out = Path(out)
    only = list(only or [])
    unknown = [n for n in only if n not in names()]
    if unknown:
        raise ValueError(f"unknown figure {', '.join(unknown)}; known: {', '.join(names())}")
    done = {}
    for f in FIGURES:
        if only and f.name not in only:
            continue
        t = time.perf_counter()
        df = f.experiment()
        draw.save(f.draw(df), out / f"{f.file}.png")
        write_atomic(out / f"{f.file}.csv", _csv(df))
        done[f.name] = {"seconds": time.perf_counter() - t, "result": df.attrs["result"], "data": df,
                        "file": f"{f.file}.png"}
        if log:
            log(f"{f.file}.png  ({done[f.name]['seconds']:.1f} s)")
    if not only:
        write_atomic(out / "README.md", index(done))
    return done

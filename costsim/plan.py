"""Plan a deployment: the cheapest fleet that serves a task rate under a p95 latency target,
searched over strong device × GPUs per strong replica (tensor parallel, and expert parallel for
MoE) × weak device × K × protocol (and the edge–cloud option when an API profile is named).

Two stages, as serving planners do (the method, the screen's measured error, what is not
modelled: docs/plan.md). **The screen** (:class:`Screen`, :func:`search`) costs every
configuration in milliseconds: the exact twin's expected calls of each schedule, costed on each
deployment (:class:`Rows`), and each replica a batching server whose mean decode batch solves
Little's law (:class:`Pool`). **Confirmation** (:func:`confirm`) simulates the screen's cheapest
fleets at the task rate, grown until they meet the target; the recommendation (:func:`plan`) is
the cheapest the simulator confirms. Prices are the device profiles' dated list prices
(:func:`prices`) unless overridden per device.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import pickle
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import roofline
from .config import DEPLOYMENTS, EDGE_CLOUD, PLAN_SEARCH
from .memory import devices_to_hold, max_sequences
from .profiles import Deployment, load_device
from .files import code_digest, write_atomic
from .traces.stats import step_shape

#: GPUs a strong replica may span: one node's worth, tensor parallel in powers of two.
GPU_OPTIONS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Config:
    """One point of the search space."""

    protocol: str
    strong: Deployment | None      # None: no strong replicas (Weak-only, or the strong model behind an API)
    weak: Deployment | None        # None: no weak replicas (Strong-only); on the edge device for edge-cloud
    K: int
    api: str | None = None         # the API profile of the strong model (edge-cloud protocols)

    def describe(self) -> str:
        parts = [self.protocol + (f" K={self.K}" if self.K else "")]
        if self.strong is not None:
            parts.append(f"strong {self.strong.n_devices}x {self.strong.device.name}"
                         + (" EP" if self.strong.expert_parallel else ""))
        if self.api:
            parts.append(f"strong API {self.api}")
        if self.weak is not None:
            parts.append(f"weak {self.weak.n_devices}x {self.weak.device.name}")
        return ", ".join(parts)


def configurations(strong_model, weak_model, devices=PLAN_SEARCH.devices, protocols=PLAN_SEARCH.protocols,
                   Ks=PLAN_SEARCH.Ks, engine=None, strong_dtype=DEPLOYMENTS.strong_dtype,
                   weak_dtype=DEPLOYMENTS.weak_dtype, max_gpus=None, weak_devices=None, api=None,
                   edge_devices=(EDGE_CLOUD.edge_device,)) -> list[Config]:
    """Every configuration to screen: for each strong device, each GPU count of
    :data:`GPU_OPTIONS` that holds the strong model (both tensor- and expert-parallel for MoE),
    each weak device (its model on as few GPUs as hold it), each K for protocols with a weak
    drafter; Strong-only once per strong deployment, Weak-only once per weak one. With an
    ``api`` profile, the edge-cloud protocols too: ``edge-cloud`` (SpecAgent, the weak model on
    each of ``edge_devices``, the strong one behind the API) per K, and ``cloud-strong-only``."""
    from .profiles import load_engine

    eng = load_engine(engine)
    strong_deps, weak_deps = [], []
    Ks = tuple(dict.fromkeys(Ks))  # a K, or a device by two of its names, is searched once

    def resolved(names, dtype):  # the devices that can run weights in `dtype`, each once
        devs = {d.name: d for d in map(load_device, names)}
        return [d for d in devs.values() if not d.cannot_run(dtype)]

    for dev in resolved(devices, strong_dtype):
        hold = devices_to_hold(strong_model, dev, strong_dtype, eng)
        for n in GPU_OPTIONS:
            if n < hold or (max_gpus and n > max_gpus):
                continue
            for ep in ((False, True) if strong_model.is_moe and n > 1 else (False,)):
                strong_deps.append(Deployment(strong_model, dev, n, strong_dtype, engine=eng, expert_parallel=ep))
    for dev in resolved(weak_devices or devices, weak_dtype):
        n = devices_to_hold(weak_model, dev, weak_dtype, eng)
        if not max_gpus or n <= max_gpus:
            weak_deps.append(Deployment(weak_model, dev, n, weak_dtype, engine=eng))
    out = []
    for p in protocols:
        if p == "strong-only":
            out += [Config(p, s, None, 0) for s in strong_deps]
        elif p == "weak-only":
            out += [Config(p, None, w, 0) for w in weak_deps]
        elif p == "cloud-strong-only":
            out += [Config(p, None, None, 0, api)] if api else []
        elif p == "edge-cloud":
            edge = [Deployment(weak_model, d, devices_to_hold(weak_model, d, weak_dtype, eng), weak_dtype, engine=eng)
                    for d in resolved(edge_devices, weak_dtype)]
            out += [Config(p, None, w, K, api) for w in edge for K in Ks] if api else []
        else:
            out += [Config(p, s, w, K) for s in strong_deps for w in weak_deps for K in Ks]
    return out


# --- the screen ----------------------------------------------------------------------------------


@dataclass
class Pool:
    """What a task puts on one pool of replicas (strong or weak), and how its replicas batch.

    ``decode_s`` and ``prefill_s``: per task, seconds of its calls' decode and prefill at batch 1.
    Under load a decode iteration of B sequences takes ``f(B)`` times one of a single sequence,
    and the prefills of other calls take the replica ``u = rate · prefill_s`` of the time
    (iterations that carry a prefill chunk are longer), so decode time stretches by
    ``f(B) / (1 - u)``; a prefill runs as it would alone."""

    dep: Deployment
    decode_s: float
    prefill_s: float
    f: np.ndarray                  # f[B]: decode iteration time at batch B over batch 1 (f[0] = f[1] = 1)
    cap: int                       # most sequences a replica runs (max_seqs, KV pool at the median context)

    def batch(self, rate_per_replica: float) -> tuple[float, float] | None:
        """(mean decode batch, decode stretch) at ``rate_per_replica`` tasks/s (None: overloaded)."""
        u = rate_per_replica * self.prefill_s
        if u >= 1.0:
            return None
        load = rate_per_replica * self.decode_s
        B = load
        for _ in range(500):
            if B > self.cap:
                return None
            stretch = self.stretch(B) / (1.0 - u)
            nxt = load * stretch
            if abs(nxt - B) <= 1e-6 * max(B, 1.0):
                return (nxt, stretch) if nxt <= self.cap else None
            B = nxt
        return None

    def stretch(self, B: float) -> float:
        """f at a fractional batch (linear between whole batches)."""
        if B <= 1.0:
            return 1.0
        i = int(B)
        if i + 1 >= len(self.f):
            return float(self.f[-1]) * B / (len(self.f) - 1)
        return float(self.f[i] + (B - i) * (self.f[i + 1] - self.f[i]))


@dataclass
class Screened:
    """The screen's answer for one configuration at one task rate."""

    config: Config
    feasible: bool
    strong_replicas: int = 0
    weak_replicas: int = 0
    gpus: int = 0
    cost_per_1k: float | None = None
    p95_s: float = math.inf
    uncontended_p95_s: float = math.inf
    strong_batch: float | None = None
    weak_batch: float | None = None
    why: str = ""


def _pool(dep: Deployment, col: dict, who: str, context: float, max_seqs: int) -> Pool:
    """A pool from the twin's expected rows: its calls' mean prefill and decode tokens per task,
    costed at batch 1 at the median context (the busy seconds split in that proportion)."""
    cap = int(min(max_seqs, max_sequences(dep, context)))
    Bs = np.arange(0, cap + 2, dtype=float)
    t = np.asarray(roofline.decode_step(dep, np.maximum(Bs, 1.0), context).seconds, float)
    calls = float(col[f"{who}_calls"].mean())
    pre_tok, dec_tok = float(col[f"{who}_prefill_tokens"].mean()), float(col[f"{who}_decode_tokens"].mean())
    pre = calls * float(roofline.prefill(dep, pre_tok / calls, context).seconds) if calls else 0.0
    dec = dec_tok * float(t[1])
    busy = float(col[f"{who}_busy_s"].mean())
    share = pre / (pre + dec) if pre + dec > 0 else 0.0
    return Pool(dep, busy * (1.0 - share), busy * share, t / t[1], cap)


class Rows:
    """Expected per-task rows (:mod:`costsim.sim.twin` COLUMNS) of any configuration, from one
    run of each schedule's branches per (protocol, K): the calls' costs per pool and deployment
    are cached, so a search over deployments costs each deployment once."""

    def __init__(self, tasks, base):
        self.tasks, self.base = tasks, base
        self._weights, self._parts = {}, {}
        self.context = step_shape(tasks)[2]

    def __call__(self, c: Config) -> dict:
        from .sim.twin import COLUMNS, call_weights, cost_of_calls, rows_of_weights

        key = (c.protocol, c.K)
        sc = scenario_of(self.base, c)
        if c.api:  # billed per call in order (what the provider has cached): simulated, one task at a time
            from .sim.run import simulate

            rows = simulate(self.tasks, replace(sc, sessions=1, arrival_rate=None))
            return {name: np.array([r[name] for r in rows], float) for name in (*COLUMNS, "api_cost_usd")}
        if key not in self._weights:
            self._weights[key] = call_weights(self.tasks, sc, c.protocol)
        deps = {"strong": sc.strong, "weak": sc.weak}

        def cached(weights, who, coef, overhead, budget):  # each pool's deployment costed once
            pk = (key, who, deps[who])
            if pk not in self._parts:
                self._parts[pk] = cost_of_calls(weights, who, coef, overhead, budget)
            return self._parts[pk]
        rows = rows_of_weights(self._weights[key], sc, cached)
        return {name: rows[:, i] for i, name in enumerate(COLUMNS)}


class Screen:
    """The screen of one configuration: its expected rows once, then any task rate and target."""

    def __init__(self, rows: Rows, config: Config, max_seqs: int = 256):
        col = rows(config)
        self.config, self.wall, self.context = config, col["wall_s"], rows.context
        self.api_cost = float(col["api_cost_usd"].mean()) if "api_cost_usd" in col else 0.0  # USD per task
        self.pools = {}
        for who, dep in (("strong", config.strong), ("weak", config.weak)):
            if dep is not None and col[f"{who}_calls"].sum() > 0:
                self.pools[who] = _pool(dep, col, who, rows.context, max_seqs)
        self.uncontended_p95 = float(np.percentile(self.wall, 95))

    def latency(self, rate: float, replicas: dict) -> tuple[float, dict] | None:
        """(p95 seconds, {pool: batch}) at ``rate`` tasks/s over ``replicas`` per pool; None if a
        pool is overloaded."""
        mean0 = float(self.wall.mean())
        extra, batches = 0.0, {}
        for name, pool in self.pools.items():
            got = pool.batch(rate / replicas[name])
            if got is None:
                return None
            batches[name], stretch = got
            extra += pool.decode_s * (stretch - 1.0)
        return self.uncontended_p95 * (mean0 + extra) / mean0 if mean0 > 0 else 0.0, batches

    def cell_rate(self, target_s: float, weak_per_strong: int = 1) -> float:
        """The highest rate one strong and ``weak_per_strong`` weak replicas sustain under the
        target (bisection; 0 if the target is below the uncontended p95)."""
        if self.uncontended_p95 > target_s:
            return 0.0
        reps = {"strong": 1, "weak": weak_per_strong} if "strong" in self.pools else {"weak": 1}

        def ok(r):
            out = self.latency(r, reps)
            return out is not None and out[0] <= target_s
        lo, hi = 0.0, 1.0
        while ok(hi) and hi < 1e6:
            lo, hi = hi, hi * 2
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return lo

    def plan(self, rate: float, target_s: float, prices: dict) -> Screened:
        """The replica counts of least cost that meet ``target_s`` at ``rate`` tasks/s."""
        c = self.config
        out = Screened(c, False, uncontended_p95_s=self.uncontended_p95)
        if self.uncontended_p95 > target_s:
            out.why = f"uncontended p95 {self.uncontended_p95:.1f} s is above the target"
            return out
        names = list(self.pools)
        if not names:  # the provider's capacity: no replicas of ours, no contention
            out.feasible, out.p95_s = True, self.uncontended_p95
            out.cost_per_1k = 1000.0 * self.api_cost
            return out
        gpu = {k: self.pools[k].dep.n_devices for k in names}
        price = {k: prices.get(self.pools[k].dep.device.name) for k in names}
        if any(v is None for v in price.values()):
            out.why = "no price for " + ", ".join(sorted(self.pools[k].dep.device.name for k in names if price[k] is None))
            return out

        def least(name, fixed, bad=0, ok=None):
            """Fewest replicas of pool ``name`` meeting the target with the others at ``fixed``;
            ``bad``: a count known to miss it (0 at least), ``ok``: one known to meet it."""
            def good(n):
                r = self.latency(rate, {**fixed, name: n})
                return r is not None and r[0] <= target_s
            if ok is None:
                hi = max(bad * 2, 1)
                while not good(hi):
                    bad, hi = hi, hi * 2
                    if hi > 1 << 20:
                        return None
            else:
                hi = ok
            lo = bad
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if good(mid) else (mid, hi)
            return hi

        best = None
        if len(names) == 1:
            n = least(names[0], {})
            cands = [] if n is None else [{names[0]: n}]
        else:
            # Every strong count from the fewest that meets the target with the weak pool ample
            # to twice that, each with the fewest weak replicas that then meet it; the cheapest
            # pair wins (more strong replicas only pay while they save weak ones).
            n_s0 = least("strong", {"weak": 1 << 20})
            cands = []
            if n_s0 is not None:
                # Exact pruning (the scan was linear in the fleet: minutes at 200 tasks/s): no
                # strong count needs fewer weak replicas than an ample strong pool does, so a
                # count whose cost with those is no cheaper than the best found ends the scan,
                # as does the first count that already needs only those.
                n_w_min = least("weak", {"strong": 1 << 20}) or 1
                floor_w = n_w_min * gpu["weak"] * price["weak"]
                cheapest, prev = math.inf, None
                for n_s in range(n_s0, 2 * n_s0 + 1):
                    if n_s * gpu["strong"] * price["strong"] + floor_w >= cheapest:
                        break
                    # More strong replicas never need more weak ones: the last count bounds this one.
                    n_w = least("weak", {"strong": n_s}, bad=n_w_min - 1, ok=prev)
                    if n_w is not None:
                        prev = n_w
                        cands.append({"strong": n_s, "weak": n_w})
                        cheapest = min(cheapest, n_s * gpu["strong"] * price["strong"] + n_w * gpu["weak"] * price["weak"])
                        if n_w <= n_w_min:
                            break
        for reps in cands:
            usd_h = sum(reps[k] * gpu[k] * price[k] for k in reps)
            if best is None or usd_h < best[0]:
                best = (usd_h, reps)
        if best is None:
            out.why = "no replica count meets the target (a pool saturates)"
            return out
        usd_h, reps = best
        p95, batches = self.latency(rate, reps)
        out.feasible = True
        out.strong_replicas, out.weak_replicas = reps.get("strong", 0), reps.get("weak", 0)
        out.gpus = sum(reps[k] * gpu[k] for k in reps)
        from .capacity import usd_per_1k_tasks  # not at import: the screen's workers need no simulator

        out.cost_per_1k = usd_per_1k_tasks(usd_h, rate, self.api_cost)
        out.p95_s = p95
        out.strong_batch, out.weak_batch = batches.get("strong"), batches.get("weak")
        return out


def screen_against_simulator(tasks, base, config: Config, replicas: dict, load: float) -> tuple[float, float, float]:
    """``(rate, screen p95, simulated p95)`` of one strong replica's cell: the task rate at
    which the screen's p95 is ``load`` times the uncontended p95, simulated there with enough
    Poisson arrivals (the tasks repeated) to span three of those p95s. What the screen's stated
    error is measured on (``benchmarks/plan_screen_error.py``, ``tests/test_plan.py``)."""
    from . import capacity as cap

    scr = Screen(Rows(tasks, base), config)
    target = scr.uncontended_p95 * load
    lo, hi = 0.0, 50.0
    for _ in range(50):
        mid = (lo + hi) / 2
        r = scr.latency(mid, replicas)
        lo, hi = (mid, hi) if r is not None and r[0] <= target else (lo, mid)
    n = max(len(tasks), math.ceil(cap.Search().steady_spans * target * lo * 1.5))
    rows = cap._run(cap.repeated(tasks, n), base, config.protocol, lo, replicas.get("strong", 1),
                    replicas.get("weak") or cap.AMPLE)
    return lo, target, cap.latency_percentiles(rows)[1]


def pareto(points: list[Screened]) -> list[Screened]:
    """The feasible points not beaten on both cost per task and p95 latency, cheapest first."""
    feas = sorted((s for s in points if s.feasible), key=lambda s: (s.cost_per_1k, s.p95_s))
    front, best_p95 = [], math.inf
    for s in feas:
        if s.p95_s < best_p95:
            front.append(s)
            best_p95 = s.p95_s
    return front


# --- prices ----------------------------------------------------------------------------------------


def prices(devices, overrides: dict | None = None, today: _dt.date | None = None) -> dict:
    """``{device: {"usd_per_gpu_hour", "source", "date", "age_days"}}``: the profiles' on-demand
    list prices (``date``: when the price was read, the profile's ``price_date``), or an override
    (``--price DEV=USD``)."""
    today = today or _dt.date.today()
    out = {}
    for name in devices:
        dev = load_device(name)
        if overrides and dev.name in overrides:
            out[dev.name] = {"usd_per_gpu_hour": float(overrides[dev.name]), "source": "--price", "date": None,
                             "age_days": None}
            continue
        src = dev.price_source
        date = (dev.price_date or None) if dev.price_per_hour_usd is not None else None
        age = None
        if date:
            d = _dt.date.fromisoformat(date if len(date) == 10 else date + "-01")
            age = (today - d).days
        out[dev.name] = {"usd_per_gpu_hour": dev.price_per_hour_usd, "source": src or "no price in the profile",
                         "date": date, "age_days": age}
    return out


def _usd(price_table: dict) -> dict:
    """``{device: USD per GPU-hour}`` of a :func:`prices` table."""
    return {k: v["usd_per_gpu_hour"] for k, v in price_table.items()}


def parse_prices(items) -> dict:
    """``["h100-sxm=2.5", ...]`` -> ``{"h100-sxm": 2.5}`` (device names resolved through their
    profiles, so aliases work); ValueError (one line) for anything else."""
    out = {}
    for item in items or ():
        name, eq, val = str(item).partition("=")
        try:
            usd = float(val.strip().removesuffix("/h").removesuffix("/hr"))
        except ValueError:
            usd = math.nan
        if not eq or not name.strip() or not (math.isfinite(usd) and usd >= 0):
            raise ValueError(f"--price {item!r}: expected DEVICE=USD per GPU-hour, e.g. h100-sxm=2.49")
        dev = load_device(name.strip()).name
        if dev in out:
            raise ValueError(f"--price {dev} is given twice")
        out[dev] = usd
    return out


# --- the search, confirmed ---------------------------------------------------------------------------


def search(tasks, base, task_rate: float, target_s: float, configs, price_table: dict, progress=None,
           scheduler: str | None = None, workers: int | None = None, state=None) -> list[Screened]:
    """The screen of every configuration at ``task_rate`` under ``target_s`` (cheapest first),
    in chunks of one (protocol, K) each, which share the work of their schedule's branches: in
    this process, or, with a ``scheduler`` address or ``workers``, on Dask (a cluster, or a
    local one of that many workers). ``state``: a :class:`State`; chunks it holds are not
    screened again, and each one screened is kept in it."""
    usd = _usd(price_table)
    chunks: dict = {}
    for c in configs:
        chunks.setdefault((c.protocol, c.K, c.api), []).append(c)
    got: dict = {}
    todo = []
    for i, chunk in enumerate(chunks.values()):
        args = (tasks, base, task_rate, target_s, chunk, usd)
        kept = state.get("screen", (args, _apis(base, chunk))) if state else None
        if kept is not None:
            got[i] = kept
            if progress:
                progress(len(kept))
        else:
            todo.append((i, args))

    inputs = dict(todo)

    def finish(i, screened):
        got[i] = screened
        if state:
            state.put("screen", (inputs[i], _apis(base, inputs[i][4])), screened)

    if scheduler or workers:
        from .distributed import run_dask

        def counted(i, screened):
            finish(i, screened)
            if progress:
                progress(len(screened))
        run_dask(_screen_chunk, todo, counted, scheduler, workers)
    else:
        rows = Rows(tasks, base)  # one for every chunk: the pools' costs are shared
        for i, args in todo:
            finish(i, _screen_chunk(args, progress, rows))
    out = [s for i in range(len(chunks)) for s in got[i]]
    return sorted(out, key=lambda s: (not s.feasible, s.cost_per_1k if s.cost_per_1k is not None else math.inf,
                                      s.p95_s))


def _screen_chunk(args, progress=None, rows=None) -> list[Screened]:
    tasks, base, task_rate, target_s, configs, usd = args
    rows, out = rows or Rows(tasks, base), []
    for c in configs:
        out.append(Screen(rows, c, base.max_seqs).plan(task_rate, target_s, usd))
        if progress:
            progress(1)
    return out


def _apis(base, configs) -> tuple:
    """The API profiles a search reads, loaded: a profile given as a file counts by what is in it."""
    from .profiles import load_api

    return tuple(load_api(n) for n in sorted({c.api for c in configs if c.api} | ({base.api} if base.api else set())))


class State:
    """A folder that keeps a search's finished pieces (each chunk's screen, each confirmation),
    so that a search run again with the same inputs skips them: a cache, each piece a pickle
    named by the SHA-256 of its inputs' repr (tasks, scenario, configurations, the API profiles
    they read, rate, target, prices) and of costsim's code and shipped profiles, written
    atomically. A piece that does not load (cut short by an interruption) is computed again."""

    KINDS = ("screen", "confirm")  # the pieces, each a file KIND-DIGEST.pkl

    def __init__(self, folder):
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"--state {folder}: not a folder")
        self.hits = 0

    def _path(self, kind: str, inputs):
        # repr, not pickle: the same inputs pickle differently when they share objects differently
        text = repr((code_digest(), kind, inputs))
        if " at 0x" in text:  # an object without a value repr (a function): nothing to resume by
            text += f"{id(self)}"
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        return self.folder / f"{kind}-{digest}.pkl"

    def get(self, kind: str, inputs):
        path = self._path(kind, inputs)
        try:
            value = pickle.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except Exception:  # a piece cut short: compute it again
            path.unlink(missing_ok=True)
            return None
        self.hits += 1
        return value

    def clear(self):
        """Drop every piece kept (its own files only: anything else in the folder stays)."""
        for kind in self.KINDS:
            for p in self.folder.glob(f"{kind}-*.pkl"):
                p.unlink()

    def put(self, kind: str, inputs, value):
        write_atomic(self._path(kind, inputs), pickle.dumps(value, protocol=4))


def scenario_of(base, c: Config):
    """The base scenario with the configuration's deployments, K and protocol (for the
    edge-cloud protocols: its API, and its weak device as the edge device)."""
    if c.api:
        return replace(base, api=c.api, edge_device=c.weak.device.name if c.weak else base.edge_device,
                       K=c.K or base.K, protocols=(c.protocol,))
    return replace(base, strong=c.strong or base.strong, weak=c.weak or base.weak, K=c.K or base.K,
                   protocols=(c.protocol,))


def confirm(tasks, base, s: Screened, task_rate: float, target_s: float, price_table: dict, grow: int = 8) -> dict:
    """The screened fleet simulated at ``task_rate`` (Poisson arrivals over all its replicas,
    enough tasks — the given ones, repeated — that arrivals span as many targets as capacity's
    steady-state rule asks of a probe, ``Search.steady_spans``); while its p95 misses the
    target, each pool grows by a tenth (at least one replica), at most ``grow`` times. Returns
    the replicas it confirms, their p95 and cost; ``steady`` is False where capacity's longest
    probe, ``Search.max_probe_tasks`` tasks, arrives in less than that span."""
    from .capacity import Search, _run, latency_percentiles, repeated, usd_per_1k_tasks

    c, spans = s.config, Search().steady_spans
    n = max(len(tasks), min(math.ceil(spans * target_s * task_rate), Search().max_probe_tasks))
    work = repeated(tasks, n)
    reps = {"strong": s.strong_replicas, "weak": s.weak_replicas}
    for attempt in range(grow + 1):
        rows = _run(work, scenario_of(base, c), c.protocol, task_rate, max(reps["strong"], 1), max(reps["weak"], 1))
        p50, p95, _ = latency_percentiles(rows)
        if p95 <= target_s or attempt == grow:
            break
        reps = {k: v + max(1, math.ceil(v / 10)) if v else 0 for k, v in reps.items()}
    gpus = {k: reps[k] * d.n_devices for k, d in (("strong", c.strong), ("weak", c.weak)) if d is not None and reps[k]}
    usd_h = sum(gpus[k] * price_table[d.device.name]["usd_per_gpu_hour"]
                for k, d in (("strong", c.strong), ("weak", c.weak)) if k in gpus)
    api = float(np.mean([r.get("api_cost_usd", 0.0) for r in rows]))
    return {"strong_replicas": reps["strong"], "weak_replicas": reps["weak"], "gpus": sum(gpus.values()),
            "latency_p50_s": p50, "latency_p95_s": p95, "meets_target": p95 <= target_s,
            "cost_per_1k_tasks": usd_per_1k_tasks(usd_h, task_rate, api),
            "api_cost_per_1k_tasks": 1000.0 * api, "tasks_simulated": n,
            "steady": n >= spans * target_s * task_rate,
            "grown": attempt, "strong_batch": rows[0]["strong_mean_batch"] if reps["strong"] else None,
            "weak_batch": rows[0]["weak_mean_batch"] if reps["weak"] else None}


def where_specagent_stops_paying(base, s: Screened, tasks) -> str:
    """In plain words, for a SpecAgent plan: kappa at its operating batches against the
    break-even kappa, and the strong batch against the balance point B*."""
    from . import formulas

    c = s.config
    d, o, ctx = step_shape(tasks)
    sb, wb = max(s.strong_batch or 1.0, 1.0), max(s.weak_batch or 1.0, 1.0)
    pp = roofline.protocol_parameters(c.strong, c.weak, [c.K], d, o, base.verdict_tokens, base.rho, ctx,
                                      strong_batch=sb, weak_batch=wb, strong_step_scale=base.strong_step_scale,
                                      weak_step_scale=base.weak_step_scale)
    vd, rho = float(pp.v_over_d["time"][-1]), float(pp.rho["time"])
    bek = float(formulas.break_even_kappa(base.p, c.K, vd, rho))
    b_star = roofline.balance_batch(c.strong, ctx)
    pays = pp.kappa < bek
    b_txt = "∞" if not math.isfinite(b_star) else f"{b_star:.0f}"
    if bek <= 0:  # R alone >= 1: no weak model is fast enough (formulas.break_even_kappa)
        return (f"SpecAgent cannot pay in time here: at p_u = {base.p:g}, K = {c.K} its reviews and repairs alone take "
                f"at least as much strong time as Strong-only's steps (break-even kappa <= 0), however fast the weak "
                f"model (kappa {pp.kappa:.2f} at the operating batches). It needs a higher p_u.")
    return (f"SpecAgent {'pays' if pays else 'does not pay'} in time here: a weak step takes {pp.kappa:.2f} of a "
            f"strong one (kappa) at the operating mean running batches (strong {sb:.1f}, weak {wb:.1f} sequences), "
            f"{'below' if pays else 'above'} the break-even {bek:.2f} at p_u = {base.p:g}, K = {c.K}. "
            f"It stops paying when kappa passes {bek:.2f} (slower weak replicas, or busier ones) or when the strong "
            f"batch passes the balance point B* = {b_txt} at {ctx:,.0f} tokens of context, where its extra prefill "
            f"FLOPs become time.")


#: plan confirms at most this many times ``confirm_top`` candidates (see :func:`plan`).
CONFIRM_AT_MOST = 3


def plan(tasks, base, task_rate: float, target_s: float, configs, price_table: dict, confirm_top: int = 3,
         progress=None, scheduler: str | None = None, workers: int | None = None, state=None) -> dict:
    """Screen every configuration (on Dask with ``scheduler`` or ``workers``: :func:`search`),
    confirm the ``confirm_top`` cheapest screened ones by simulation (and further ones, up to
    ``CONFIRM_AT_MOST`` times as many, while one's screened cost is below the cheapest confirmed
    cost: a confirmation that grows its pools can leave a cheaper candidate unconfirmed), and
    recommend the cheapest that the simulator confirms meets the target. ``state``: a folder (:class:`State`) that
    keeps the finished pieces, so that an interrupted plan run again resumes."""
    if not task_rate > 0:
        raise ValueError(f"--task-rate must be > 0 tasks/s, got {task_rate}")
    if not target_s > 0:
        raise ValueError(f"--latency-p95 must be > 0 s, got {target_s}")
    state = State(state) if state is not None and not isinstance(state, State) else state
    screened = search(tasks, base, task_rate, target_s, configs, price_table, progress, scheduler, workers, state)
    front = pareto(screened)
    feasible = [s for s in screened if s.feasible]
    confirmed = []
    usd = _usd(price_table)  # the key of a confirmation: the prices, not their ages (they change daily)
    for i, s in enumerate(feasible[:CONFIRM_AT_MOST * confirm_top]):
        # Past the first confirm_top, go on while a candidate could still beat the best confirmed
        # one: a confirmation only adds replicas, so its screened cost bounds its cost from below.
        if i >= confirm_top and s.cost_per_1k >= min(
                (r["cost_per_1k_tasks"] for _, r in confirmed
                 if r.get("meets_target") and r.get("cost_per_1k_tasks") is not None), default=math.inf):
            break
        inputs = (tasks, base, s, task_rate, target_s, usd, _apis(base, [s.config]))
        res = state.get("confirm", inputs) if state else None
        if res is None:
            res = confirm(tasks, base, s, task_rate, target_s, price_table)
            if state:
                state.put("confirm", inputs, res)
        confirmed.append((s, res))
        if progress:
            progress(0)
    ok = [(s, r) for s, r in confirmed if r.get("meets_target") and r.get("cost_per_1k_tasks") is not None]
    rec = min(ok, key=lambda sr: sr[1]["cost_per_1k_tasks"]) if ok else None
    out = {"task_rate_per_s": task_rate, "latency_p95_target_s": target_s, "configurations": len(configs),
           "resumed": None if state is None else {"folder": str(state.folder), "pieces": state.hits},
           "feasible": len(feasible), "screened": screened, "front": front, "confirmed": confirmed,
           "recommended": rec, "prices": price_table}
    if rec is None:
        best_p95 = min((s.uncontended_p95_s for s in screened), default=math.inf)
        out["why_none"] = (
            f"no configuration meets a p95 of {target_s:g} s: the fastest uncontended p95 is {best_p95:.1f} s"
            if not feasible else
            "the simulator confirmed none of the screen's cheapest candidates (raise --confirm)")
    else:
        s, r = rec
        bits = [f"the cheapest of {len(confirmed)} candidates the simulator confirmed "
                f"(of {len(feasible)} the screen found feasible among {len(configs)})"]
        so = [x for x in feasible if x.config.protocol == "strong-only"]
        sa = [x for x in feasible if x.config.protocol.startswith("specagent")]
        other = so if s.config.protocol.startswith("specagent") else sa if s.config.protocol == "strong-only" else []
        if other:
            o = other[0]
            name = "Strong-only" if other is so else "SpecAgent"
            bits.append(f"the screen's cheapest {name} plan ({o.config.describe()}) costs "
                        + (f"{o.cost_per_1k / r['cost_per_1k_tasks']:.2f}x its cost" if r["cost_per_1k_tasks"] > 0
                           else f"USD {o.cost_per_1k:.3f} per 1,000 tasks"))
            if o.uncontended_p95_s > 0.8 * target_s:
                bits.append(f"its uncontended p95 is {o.uncontended_p95_s:.1f} s, within "
                            f"{1 - o.uncontended_p95_s / target_s:.0%} of the target, so its replicas must run nearly "
                            "empty")
        out["why"] = "; ".join(bits)
        if s.config.protocol.startswith("specagent"):
            out["specagent"] = where_specagent_stops_paying(base, s, tasks)
        elif sa:
            out["specagent"] = where_specagent_stops_paying(base, sa[0], tasks)
    return out

"""Plan's search space: one :class:`Config` per strong deployment × weak deployment × K ×
protocol, and the scenario each one runs (:func:`scenario_of`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..config import EDGE_CLOUD, PLAN_SEARCH
from ..formulas import MAX_K
from ..memory import DoesNotFit
from ..profiles import Deployment, load_device
from ..protocols import protocol
from ..sizing import engine_profile, strong_options, weak_deployment, weight_dtype


@dataclass(frozen=True)
class Config:
    """One point of the search space."""

    protocol: str
    strong: Deployment | None      # None: no strong replicas (Weak-only, or the strong model behind an API)
    weak: Deployment | None        # None: no weak replicas (Strong-only); on the edge device for edge-cloud
    K: int
    api: str | None = None         # the API profile of the strong model (edge-cloud protocols)

    def describe(self) -> str:
        """The configuration in words: 'specagent K=6: strong (8× h200, EP) + weak (1× h200)'."""
        return self.protocol + (f" K={self.K}" if self.K else "") + ": " + self.fleet()

    def fleet(self, strong: int | None = None, weak: int | None = None) -> str:
        """The fleet in words: '2× strong (8× h200, EP) + 4× weak (1× h200)', the strong model
        behind an API as 'strong via the NAME API'. ``strong``, ``weak``: the replicas of each
        pool (None: the pools alone, as :meth:`describe` says them); a pool of 0 replicas is
        left out. The one description of a fleet: plan's JSON ``fleet``, its text, `costsim report`."""
        def pool(role: str, dep: Deployment, n: int | None) -> str:
            return (f"{n}× {role}" if n is not None else role) + (
                f" ({dep.n_devices}× {dep.device.name}" + (", EP" if dep.expert_parallel else "") + ")")

        out = []
        if self.strong is not None and strong != 0:
            out.append(pool("strong", self.strong, strong))
        if self.api:
            out.append(f"strong via the {self.api} API")
        if self.weak is not None and weak != 0:
            out.append(pool("weak", self.weak, weak))
        return " + ".join(out)


def configurations(strong_model, weak_model, devices=PLAN_SEARCH.devices, protocols=PLAN_SEARCH.protocols,
                   Ks=PLAN_SEARCH.Ks, engine=None, strong_dtype=None, weak_dtype=None, max_gpus=None,
                   weak_devices=None, api=None,
                   edge_devices=(EDGE_CLOUD.edge_device,), gpu_memory_utilization=None) -> list[Config]:
    """Every configuration to screen: for each strong device, each GPU count of
    :data:`costsim.sizing.GPU_OPTIONS` that holds the strong model (both tensor- and expert-parallel for MoE),
    each weak device (its model on as few GPUs as hold it), each K for protocols with a weak
    drafter; Strong-only once per strong deployment, Weak-only once per weak one. With an
    ``api`` profile, the edge-cloud protocols too: ``edge-cloud`` (SpecAgent, the weak model on
    each of ``edge_devices``, the strong one behind the API) per K, and ``cloud-strong-only``."""
    eng = engine_profile(engine, gpu_memory_utilization)
    strong_dtype, weak_dtype = weight_dtype(strong_model, strong_dtype, "strong"), weight_dtype(weak_model, weak_dtype)
    strong_deps, weak_deps = [], []
    Ks = tuple(dict.fromkeys(Ks))  # a K, or a device by two of its names, is searched once

    def resolved(names, dtype):  # the devices that can run weights in `dtype`, each once
        devs = {d.name: d for d in map(load_device, names)}
        return [d for d in devs.values() if not d.cannot_run(dtype)]

    for dev in resolved(devices, strong_dtype):
        strong_deps += strong_options(strong_model, dev, strong_dtype, eng, max_gpus)
    for dev in resolved(weak_devices or devices, weak_dtype):
        try:
            w = weak_deployment(weak_model, dev, weak_dtype, eng)
        except DoesNotFit:  # its weights fit no head-splitting count of this device
            continue
        if (not max_gpus or w.n_devices <= max_gpus) and dev.can_span(w.n_devices):
            weak_deps.append(w)
    edge = None
    out = []
    for p in protocols:  # what each takes, from its record: the models it calls, its backend, K if it drafts
        rec = protocol(p)
        if rec.on_api and not api:
            continue
        if rec.on_api and "weak" in rec.models and edge is None:
            edge = [e for e in (weak_deployment(weak_model, d, weak_dtype, eng) for d in resolved(edge_devices, weak_dtype))
                    if e.device.can_span(e.n_devices)]
        strong = [None] if rec.on_api or "strong" not in rec.models else strong_deps
        weak = [None] if "weak" not in rec.models else edge if rec.on_api else weak_deps
        out += [Config(p, s, w, K, api if rec.on_api else None)
                for s in strong for w in weak for K in (Ks if rec.drafts else (0,))]
    return out


def parse_ks(text: str) -> tuple[int, ...]:
    """'2..12' (every K from 2 to 12), '2,4,6' or '6' -> the chunk sizes to search (ValueError, one line)."""
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            ks = tuple(range(lo, hi + 1))
        else:
            ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"--K {text!r}: expected a range 2..12 or a list 2,4,6") from None
    if not ks:
        raise ValueError(f"--K {text!r}: the range is empty")
    if any(not 1 <= k <= MAX_K for k in ks):
        raise ValueError(f"--K {text!r}: every K must be in [1, {MAX_K}]")
    return ks


def scenario_of(base, c: Config):
    """The base scenario with the configuration's deployments, K and protocol (for the
    edge-cloud protocols: its API, and its weak device as the edge device)."""
    if c.api:
        return replace(base, api=c.api, edge_device=c.weak.device.name if c.weak else base.edge_device,
                       K=c.K or base.K, protocols=(c.protocol,))
    return replace(base, strong=c.strong or base.strong, weak=c.weak or base.weak, K=c.K or base.K,
                   protocols=(c.protocol,))

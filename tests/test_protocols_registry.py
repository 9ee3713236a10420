"""The protocol registry (costsim.protocols.PROTOCOLS) is the one answer to "is it on an API",
"which models does it call", "is it SpecAgent", "does the twin cost it", "which counters does
it write", "is it a pure schedule": each test holds one of those fields to what the protocol
does."""

import ast
from pathlib import Path

import pytest

from costsim import protocols
from costsim.metrics import EXTRA_COUNTERS, summarize
from costsim.protocols.schedule import Call, Chance, Redraw, Review, Stall
from costsim.scenario import Latency, Scenario
from costsim.sim import simulate
from costsim.sizing import deployments
from costsim.traces.synthetic import generate

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "hardware" / "api" / "glm-5.toml"


class EnvTouched(Exception):
    pass


class PureRun:
    """A task run without an environment: it answers a schedule's commands itself, and raises
    if anything asks for its SimPy environment (only a timed protocol does)."""

    def __init__(self):
        self.calls = []

    @property
    def env(self):
        raise EnvTouched

    def drive(self, schedule, via=None):
        answer = None
        while True:
            try:
                cmd = schedule.send(answer)
            except StopIteration:
                return
            answer = None
            if isinstance(cmd, Call):
                self.calls.append(cmd.model)
            elif isinstance(cmd, Review):
                answer = len(cmd.steps) - 1  # reject the last drafted step: a repair too
            elif isinstance(cmd, (Stall, Chance)):
                answer = True
            elif isinstance(cmd, Redraw):
                answer = ()
        yield  # a generator, as the simulator's drive is


@pytest.mark.parametrize("name", list(protocols.PROTOCOLS))
def test_only_timed_protocols_touch_the_environment(name):
    rec, task = protocols.PROTOCOLS[name], generate(1, seed=3)[0]
    run = protocols.get(name)
    tr = PureRun()
    if rec.timed:
        with pytest.raises((EnvTouched, AttributeError)):
            list(run(tr, task))
    else:
        list(run(tr, task))
        assert tr.calls and set(tr.calls) <= set(rec.models), (name, set(tr.calls))


def test_the_schedules_never_import_simpy_or_a_random_generator():
    for name, rec in protocols.PROTOCOLS.items():
        if rec.timed:
            continue
        tree = ast.parse(Path(rec.schedule.__code__.co_filename).read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
        mods = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {"simpy", "random", "numpy"} & (names | mods) and "_rng" not in mods, name


def _rows(names):
    strong, weak = deployments()
    sc = Scenario(strong=strong, weak=weak, p=0.6, K=4, protocols=tuple(names), api=str(API), edge_device="rtx-5090",
                  tool_latency=Latency(0.5), user_latency=Latency(2.0), false_accept=0.2, false_reject=0.2,
                  spec_hit_rate=0.5, self_spec_hit_rate=0.5)
    return simulate(generate(12, seed=5), sc)


def test_each_protocol_writes_only_the_counters_its_record_declares_and_calls_only_its_models():
    rows = _rows(list(protocols.PROTOCOLS))
    for name, rec in protocols.PROTOCOLS.items():
        rs = [r for r in rows if r["protocol"] == name]
        written = {c for c in EXTRA_COUNTERS if any(r[c] for r in rs)}
        assert written <= set(rec.counters), (name, written - set(rec.counters))
        for model in ("strong", "weak"):
            calls = sum(r[f"{model}_calls"] for r in rs)
            assert (calls > 0) == (model in rec.models), (name, model, calls)
        if rec.on_api:
            assert sum(r["remote_calls"] for r in rs) == sum(r["strong_calls"] for r in rs) > 0  # every one billed


def test_ratios_are_taken_against_each_records_baselines():
    res = summarize(_rows(["strong-only", "specagent", "edge-cloud", "cloud-strong-only"]))
    assert res["strong-only"]["R"]["mean"] == pytest.approx(1.0)
    assert "R" in res["specagent"] and "api_cost_ratio" not in res["specagent"]
    assert res["edge-cloud"]["api_cost_ratio"]["mean"] < 1.0  # against cloud-strong-only
    assert res["cloud-strong-only"]["api_cost_ratio"]["mean"] == pytest.approx(1.0)


def test_an_api_protocol_brings_its_api_baseline_into_the_run():
    from costsim.scenario import build_scenario

    sc = build_scenario({"protocols": "edge-cloud", "api": str(API)})
    assert sc.protocols == ("edge-cloud", "cloud-strong-only")


def test_no_module_outside_the_registry_names_a_protocol_to_decide_what_it_is():
    """The questions the record answers are not asked by name: no `startswith("specagent")`,
    no comparison with an API protocol's name, outside costsim/protocols."""
    bad = []
    for path in sorted((ROOT / "costsim").rglob("*.py")):
        if "protocols" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        for i, line in enumerate(text.splitlines(), 1):
            if 'startswith("specagent")' in line or any(f'{q}{n}{q}' in line and ("==" in line or " in " in line)
                                                         for n in ("edge-cloud", "cloud-strong-only") for q in "\"'"):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)

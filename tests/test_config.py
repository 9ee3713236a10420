"""The one declaration of each protocol option (costsim.config): the protocols' signatures,
the scenario, the CLI's flags and `costsim protocols` all take it from there."""

import dataclasses
import json

import pytest

from costsim import config, protocols
from costsim.config import OPTIONS, check_option
from costsim.scenario import build_scenario, parse_options


def test_every_option_a_protocol_takes_is_declared_once_with_the_default_it_has():
    taken = set()
    for name, rec in protocols.PROTOCOLS.items():
        for opt, (default, annotation) in protocols.option_defaults(rec.run).items():
            assert opt in OPTIONS, f"{name} takes {opt}, which costsim.config does not declare"
            f = OPTIONS[opt][1]
            assert default == f.default and type(default) is type(f.default), (name, opt)
            assert annotation == f.type, (name, opt)
            taken.add(opt)
    assert taken == set(OPTIONS)  # and nothing is declared that no protocol takes
    for cls, f in OPTIONS.values():
        assert f.metadata["help"] and cls.TITLE
        assert not f.metadata["choices"] or f.default in f.metadata["choices"]


def test_the_scenario_defaults_its_protocol_options_to_their_declarations():
    from costsim.scenario import Scenario
    from costsim.scenario import PROTOCOL_OPTIONS

    fields = {f.name: f.default for f in dataclasses.fields(Scenario)}
    for opt in PROTOCOL_OPTIONS:
        if fields[opt] is not None:  # None: the protocol's own default (escalate_p, rho)
            assert fields[opt] == OPTIONS[opt][1].default, opt


@pytest.mark.parametrize("name,value,error", [
    ("chunking", "hold-messages", None), ("chunking", "writes", "expected one of messages-end, messages-pass"),
    ("lookahead", False, None), ("lookahead", 1, "expected true or false"),
    ("spec_depth", 3, None), ("spec_depth", 2.5, "expected a whole number >= 1"), ("spec_depth", 0, "whole number"),
    ("max_span", None, None), ("max_span", 4, None), ("escalate_p", 0.2, None),
    ("escalate_p", -0.1, "expected a number >= 0"), ("escalate_p", float("nan"), "expected a finite number"),
    ("escalate_p", "high", "expected a finite number"), ("nonsense", 1, "unknown protocol option 'nonsense'; known: "),
])
def test_check_option_takes_what_the_declaration_says(name, value, error):
    if error is None:
        check_option(name, value)
    else:
        with pytest.raises(ValueError, match=error.replace("(", r"\(")):
            check_option(name, value)


def test_protocols_command_lists_each_option_with_its_declared_default_and_flag(capsys):
    from conftest import run_costsim

    from costsim.cli.main import main

    assert main(["protocols", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert list(shown) == list(protocols.PROTOCOLS)
    for name, d in shown.items():
        assert d["description"] == protocols.PROTOCOLS[name].description
        assert set(d["options"]) == protocols.option_names(protocols.PROTOCOLS[name].run) - set(d["fixed"])
        for opt, o in d["options"].items():
            f = OPTIONS[opt][1]
            assert (o["default"], o["help"], o["choices"]) == (f.default, f.metadata["help"], list(f.metadata["choices"]))
    assert shown["speculative-actions"]["options"]["spec_hit_rate"]["flag"] == "--spec-hit"
    assert shown["speculative-actions"]["options"]["adopt"]["flag"] == "--option adopt="
    assert shown["specagent-hold-responses"]["fixed"] == {"chunking": "hold-messages"}
    # The API backend's settings: edge-cloud reads all four, its baseline all but the edge device.
    edge = shown["edge-cloud"]["deployment"]
    assert {k: (o["flag"], o["default"]) for k, o in edge.items()} == {
        "api": ("--api", config.EDGE_CLOUD.api), "api_ttft_s": ("--api-ttft", config.EDGE_CLOUD.ttft_s),
        "api_output_tps": ("--api-tps", config.EDGE_CLOUD.output_tps),
        "edge_device": ("--edge-device", config.EDGE_CLOUD.edge_device)}
    assert set(shown["cloud-strong-only"]["deployment"]) == set(edge) - {"edge_device"}
    assert "deployment" not in shown["specagent"]
    code, out, err = run_costsim("protocols", "specagent", "nope")
    assert code == 2 and out == "" and err.count("\n") == 1 and "known: strong-only, weak-only" in err


def test_the_cli_flags_of_protocol_options_show_their_declared_help(capsys):
    from costsim.cli.main import main

    main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for opt in ("false_accept", "escalation_span", "self_spec_hit_rate"):
        cls, f = OPTIONS[opt]
        help = f.metadata["help"]
        assert f"{cls.TITLE}: {help[0].upper()}{help[1:]} [{f.default:g}]." in text, opt
    assert config.WORKLOAD.K == OPTIONS["K"][1].default


def test_a_default_as_costsim_protocols_prints_it_is_taken_by_option(capsys):
    from costsim.cli.main import main

    assert main(["protocols", "speculative-actions", "agentcollab"]) == 0
    lines = {line.split()[1]: line.split()[2] for line in capsys.readouterr().out.splitlines()
             if line.startswith("  --option ")}
    assert (lines["lookahead="], lines["final_speculation="], lines["max_span="]) == ("[true]", "[false]", "[none]")
    assert parse_options(["max_span=none", "lookahead=true", "final_speculation=False"]) == \
        (("max_span", None), ("lookahead", True), ("final_speculation", "False"))
    check_option("max_span", None)
    with pytest.raises(ValueError, match="expected true or false"):
        check_option("final_speculation", "False")  # TOML's is false, as the listing prints it


def test_an_option_that_is_a_scenario_field_sets_that_field():
    # One value, checked and reported as the field is: --option K=3 is --K 3.
    assert build_scenario({"options": ["K=3"]}) == build_scenario({"K": 3})
    assert build_scenario({"options": ["K=3.0", "false_accept=0.25"]}) == \
        build_scenario({"K": 3, "false_accept": 0.25})
    with pytest.raises(ValueError, match="given twice"):
        build_scenario({"K": 3, "options": ["K=4"]})
    with pytest.raises(ValueError, match=r"--escalate-p must be in \[0, 1\]"):
        build_scenario({"protocols": "agentcollab", "options": ["escalate_p=1.5"]})


def test_an_ablations_fixed_option_cannot_be_set():
    with pytest.raises(ValueError, match="specagent-hold-responses fixes chunking=hold-messages"):
        build_scenario({"protocols": "specagent-hold-responses", "options": ["chunking=writes-only"]})
    # SpecAgent itself takes it, beside the ablation that fixes it.
    sc = build_scenario({"protocols": "specagent,specagent-hold-responses", "options": ["chunking=writes-only"]})
    assert sc.options == (("chunking", "writes-only"),)


def test_a_whole_number_given_as_a_float_is_read_as_the_count_it_is():
    assert parse_options(["spec_depth=2.0", "escalation_growth=2.0"]) == (("spec_depth", 2), ("escalation_growth", 2.0))
    assert type(parse_options(["spec_depth=2.0"])[0][1]) is int


def test_options_as_a_table_or_pairs_follow_the_same_rules():
    assert build_scenario({"options": {"K": 4.0}}).K == 4
    assert build_scenario({"options": (("K", 4.0),)}).K == 4
    assert build_scenario({"options": ["K=none"]}).K == config.SpecAgentOptions.K  # none: the default
    assert parse_options({"spec_depth": 2.0}) == (("spec_depth", 2),)


# --- every default in costsim.config -------------------------------------------------------------------

#: The settings whose defaults costsim.config declares (Commands, Live, Scheduler, Synthetic, Workload,
#: Deployments): a parameter, field or flag of these names elsewhere takes its default from there.
#: (A seed is left out: 0 everywhere is a name for a random stream, not a modelled quantity.)
_DECLARED = {"p", "p_accept", "max_seqs", "token_budget", "max_batched_tokens", "protocols", "latency_p95",
             "latency_p95_s", "tasks", "confirm", "confirm_top", "repeats", "timeout", "timeout_s", "retries", "steps",
             "output_median", "tool_obs_median", "tolerance", "rel_tol", "sessions", "K", "rho", "verdict_tokens",
             "step_tokens", "obs_tokens", "input_len", "output_len", "strong", "weak", "device", "engine"}
# (Not "batch" or "context": a pure function's batch of 1 or context of 0 is one sequence or none,
# a unit, not a setting.)


def _literal(node) -> bool:
    """A default written as a value (a number, a word, a tuple of them): not a name, not None, not
    required (``...``), not a switch (a bool)."""
    import ast

    if isinstance(node, ast.Constant):
        return node.value is not None and node.value is not ... and not isinstance(node.value, bool)
    if isinstance(node, (ast.Tuple, ast.List)):
        return bool(node.elts) and all(_literal(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    return False


def _literal_defaults() -> list[str]:
    """Every default literal of a :data:`_DECLARED` setting outside costsim/config.py: function
    parameters, dataclass fields and typer options (by their flag's name), as 'file:line what'."""
    import ast
    from pathlib import Path

    root, out = Path(__file__).resolve().parents[1], []
    for f in sorted([*root.glob("costsim/**/*.py"), *root.glob("cli/*.py")]):
        if f.name == "config.py" and f.parent.name == "costsim":
            continue
        where = f.relative_to(root)
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                pos = a.posonlyargs + a.args
                pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults), *zip(a.kwonlyargs, a.kw_defaults)]
                out += [f"{where}:{d.lineno} {node.name}({arg.arg}={ast.unparse(d)})" for arg, d in pairs
                        if d is not None and arg.arg in _DECLARED and _literal(d)]
            elif isinstance(node, ast.ClassDef):
                out += [f"{where}:{st.lineno} {node.name}.{st.target.id} = {ast.unparse(st.value)}" for st in node.body
                        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None
                        and st.target.id in _DECLARED and _literal(st.value)]
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("Option") and node.args:
                flags = {a.value.lstrip("-").replace("-", "_") for a in node.args[1:]
                         if isinstance(a, ast.Constant) and isinstance(a.value, str)}
                if flags & _DECLARED and _literal(node.args[0]):
                    out.append(f"{where}:{node.lineno} Option({ast.unparse(node.args[0])}, {sorted(flags)})")
    return out


def test_no_module_but_config_holds_a_default_literal_of_a_declared_setting():
    # Before 2026-12-02: p_u 0.8 in three places, max_seqs 256 in two, the default protocols in
    # four, the 60 s target in five, the live mode's repeats/timeout/retries, plan's confirmations
    # and the synthetic generator's 340/175 tokens, each a bare literal.
    assert _literal_defaults() == []


def test_every_declared_default_has_a_source():
    for cls, sources in ((config.Workload, config.WORKLOAD_SOURCES), (config.Deployments, config.DEPLOYMENT_SOURCES),
                         (config.Commands, config.COMMAND_SOURCES), (config.Live, config.LIVE_SOURCES),
                         (config.Scheduler, config.SCHEDULER_SOURCES), (config.Synthetic, config.SYNTHETIC_SOURCES),
                         (config.EdgeCloud, config.EDGE_CLOUD_SOURCES)):
        assert set(sources) == {f.name for f in dataclasses.fields(cls)}, cls.__name__
        assert all(isinstance(v, str) and len(v) > 10 for v in sources.values()), cls.__name__


def test_the_commands_take_their_defaults_from_config():
    from costsim.capacity_search import Search
    from costsim.live.client import Endpoint
    from costsim.profiles.types import Engine
    from costsim.scenario import Scenario
    from costsim.sizing import deployments
    from costsim.traces.synthetic import Shape

    s, w = deployments()
    sc = Scenario(strong=s, weak=w)
    assert (sc.p, sc.protocols, sc.sessions) == (config.COMMANDS.p_accept, config.COMMANDS.protocols,
                                                 config.COMMANDS.sessions)
    assert Search().latency_p95_s == config.COMMANDS.latency_p95_s
    assert (Shape().output_median, Shape().tool_obs_median) == (config.SYNTHETIC.output_median,
                                                                config.SYNTHETIC.tool_obs_median)
    assert Endpoint("http://127.0.0.1:1").timeout_s == config.LIVE.timeout_s
    e = {f.name: f.default for f in dataclasses.fields(Engine)}
    assert (e["max_seqs"], e["max_batched_tokens"]) == (config.SCHEDULER.max_seqs, config.SCHEDULER.max_batched_tokens)

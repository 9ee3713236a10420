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
    for name, (fn, _, _) in protocols.PROTOCOLS.items():
        for opt, (default, annotation) in protocols.option_defaults(fn).items():
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
        assert d["description"] == protocols.PROTOCOLS[name][2]
        assert set(d["options"]) == protocols.option_names(protocols.PROTOCOLS[name][0]) - set(d["fixed"])
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

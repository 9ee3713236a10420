"""Calibration files drive the simulator: measured per-token times replace the roofline's."""

import json

import pytest

from costsim import roofline
from costsim.cli.main import main
from costsim.profiles import Deployment, load_device, load_model
from costsim.scenario import Scenario
from costsim.sim import simulate
from costsim.traces.schema import Step, Task

CALIB = """[calibration]
source = "test rig"
[ratios]
kappa = 0.06
[weak]
overhead_s = 0.008
prefill_s_per_token = 0.0003
decode_s_per_token = 0.006
[strong]
overhead_s = 0.06
prefill_s_per_token = 0.017
decode_s_per_token = 0.09
"""


def test_calibrated_coefficients_reproduce_the_measured_times():
    dep = Deployment(load_model("llama-3.1-8b"), load_device("h100"), 1)
    coef = roofline.calibrated(roofline.coefficients(dep), 0.017, 0.09)
    # batch-1 decode at no context: one weight read (the KV of one token is ~1e-5 of it)
    assert float(coef.cost(1, 0, 0).seconds) == pytest.approx(0.09, rel=1e-4)
    # a long prefill is compute bound: tokens x the measured per-token time (+ attention)
    pre = coef.cost(2000, 2000 * 1000, 0)
    assert float(pre.seconds) == pytest.approx(2000 * 0.017, rel=0.05)
    assert float(pre.seconds) >= 2000 * 0.017


def test_an_unresolved_prefill_keeps_the_rooflines_compute_rate():
    dep = Deployment(load_model("llama-3.1-8b"), load_device("h100"), 1)
    coef = roofline.coefficients(dep)
    cal = roofline.calibrated(coef, 0.0, 0.09)
    assert cal.compute_rate == coef.compute_rate and float(cal.cost(1, 0, 0).seconds) == pytest.approx(0.09, rel=1e-4)
    with pytest.raises(ValueError, match="decode > 0"):
        roofline.calibrated(coef, 0.017, 0.0)


def test_simulated_call_time_follows_the_calibration(tmp_path):
    from costsim.calibration import endpoint_fits, load_calibration

    path = tmp_path / "calib.toml"
    path.write_text(CALIB)
    fits = endpoint_fits(load_calibration(str(path)))
    assert ("strong", 0.017, 0.09, 0.06) in fits
    dep = Deployment(load_model("llama-3.1-8b"), load_device("h100"), 1)
    task = Task("t", (Step("read", output_tokens=40, observation_tokens=10, context_tokens=100),))
    rows = simulate([task], Scenario(strong=dep, weak=dep, protocols=("strong-only", "weak-only"), calibration=fits))
    walls = {r["protocol"]: r["wall_s"] for r in rows}
    # overhead + prefill of 100 tokens + 40 decode iterations (context effects are small here)
    assert walls["strong-only"] == pytest.approx(0.06 + 100 * 0.017 + 40 * 0.09, rel=0.02)
    assert walls["weak-only"] == pytest.approx(0.008 + max(100 * 0.0003, 0.006) + 40 * 0.006, rel=0.05)


def test_cli_calibration_flag(tmp_path, capsys):
    path = tmp_path / "calib.toml"
    path.write_text(CALIB)
    assert main(["simulate", "--tasks", "5", "--calibration", str(path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["protocols"]["specagent"]["L"]["mean"] < 1  # weak steps at 0.06 of strong ones
    path.write_text('[ratios]\nkappa = 0.1\n')
    assert main(["simulate", "--tasks", "5", "--calibration", str(path)]) == 2
    assert "no [weak] or [strong] endpoint fits" in capsys.readouterr().err

"""`costsim predict`: the closed form's values as printed, flags and calibration files that
override them, and the text's units and sources."""

import pytest
from conftest import run_costsim as run, run_json

from costsim import formulas


def test_predict_default_values_are_the_formulas(capsys):
    r = run_json(capsys, "predict", "--p-accept", "0.8", "--K", "6")
    for key in ("R", "L", "commits_per_review", "weak_steps_per_commit", "strong_calls_per_task", "v_over_d",
                "rho", "kappa", "mean_chunk_steps", "balance_batch", "regime", "break_even_kappa", "best_K"):
        assert key in r
    vd, rho, kappa = r["v_over_d"], r["rho"], r["kappa"]
    assert vd == pytest.approx((1 + 24) / 418)  # default: 1 prefill pass + 24 verdict tokens / 418-token step
    assert r["R"] == pytest.approx(float(formulas.R(0.8, 6, vd, rho)))
    assert r["L"] == pytest.approx(float(formulas.L(0.8, 6, vd, rho, kappa)))
    assert r["commits_per_review"] == pytest.approx((1 - 0.8**6) / 0.2)
    assert r["strong_calls_per_task"] == pytest.approx(13.8 / r["commits_per_review"])
    assert r["break_even_kappa"] == pytest.approx(float(formulas.break_even_kappa(0.8, 6, vd, rho)))
    assert r["best_K"] == int(formulas.best_K(0.8, vd, rho, kappa)[0])
    assert r["regime"] in ("memory-bound", "compute-bound")
    assert r["strong_deployment"] == {"model": "qwen3.5-397b-a17b", "device": "h20", "n_devices": 8, "dtype": "fp8",
                                      "engine": "vllm", "expert_parallel": False}
    assert r["weak_deployment"]["engine"] == "vllm"
    # The verdict says in words which side of break-even kappa this is.
    side = "faster" if r["specagent_pays"]["pays"] else "slower"
    assert r["verdict"].startswith(f"SpecAgent is {side} than Strong-only here")
    assert r["balance_batch_paper"] == pytest.approx(37.0)
    assert r["sources"]["kappa"].startswith("roofline")


def test_predict_flags_override_and_say_so(capsys):
    r = run_json(capsys, "predict", "-p", "0.5", "--K", "4", "--v-over-d", "0.2", "--rho", "1.5", "--kappa", "0.1")
    assert r["R"] == pytest.approx(float(formulas.R(0.5, 4, 0.2, 1.5)))
    assert r["L"] == pytest.approx(float(formulas.L(0.5, 4, 0.2, 1.5, 0.1)))
    assert r["sources"]["v_over_d"] == r["sources"]["rho"] == r["sources"]["kappa"] == "flag"


def test_predict_write_rate_uses_the_renewal_form(capsys):
    r = run_json(capsys, "predict", "-p", "0.9", "--K", "6", "--write-rate", "0.2", "--v-over-d", "0.1",
                 "--rho", "1", "--kappa", "0.2")
    R, L = formulas.renewal_R_L(0.9, 6, 0.2, 0.1, 1.0, 0.2)
    assert r["R"] == pytest.approx(float(R)) and r["L"] == pytest.approx(float(L))
    assert r["L"] == pytest.approx(r["R"] + 0.2 * r["weak_steps_per_commit"])
    # break-even kappa makes L = 1 in the renewal form too
    R2, L2 = formulas.renewal_R_L(0.9, 6, 0.2, 0.1, 1.0, r["break_even_kappa"])
    assert float(L2) == pytest.approx(1.0)
    # Steps per review count every commit, as strong calls do; fewer of them lie in the reviewed chunk.
    assert r["commits_per_review"] == pytest.approx(r["steps_per_task"] / r["strong_calls_per_task"])
    assert 1 <= r["reviewed_commits_per_review"] < r["commits_per_review"]


def test_predict_calibration_file(tmp_path, capsys):
    cal = tmp_path / "calib.toml"
    cal.write_text('[calibration]\nsource = "test rig"\n[ratios]\nkappa = 0.25\nv_over_d = 0.05\n')
    r = run_json(capsys, "predict", "-p", "0.8", "--K", "6", "--calibration", str(cal))
    assert r["kappa"] == 0.25 and r["v_over_d"] == 0.05
    assert "test rig" in r["sources"]["kappa"]
    r = run_json(capsys, "predict", "-p", "0.8", "--K", "6", "--calibration", str(cal), "--kappa", "0.3")
    assert r["kappa"] == 0.3  # a flag beats the calibration file
    # The header says where each ratio not measured comes from.
    cal.write_text('[ratios]\nv_over_d = 0.2\n')
    code, out, _ = run("predict", "-p", "0.8", "--calibration", str(cal))
    assert code == 0 and "measured time ratios: v/d; rho by default; kappa from the roofline)" in out
    cal.write_text('[ratios]\nkapa = 0.2\n')  # a misspelt ratio is an error, not ignored
    code, _, err = run("predict", "-p", "0.8", "--calibration", str(cal))
    assert code == 2 and "ratios.kapa is not a ratio costsim reads" in err


def test_the_result_says_what_its_ratios_measure_and_the_text_reads_it(tmp_path, capsys):
    """Before 2026-12-03 the rule (a calibrated v/d or rho puts R_u in time) lived in the text
    alone, and the report labelled a calibrated R_u in weight passes."""
    cal = tmp_path / "calib.toml"
    assert run_json(capsys, "predict", "-p", "0.8", "--K", "6")["ratios_measure"] == "weight passes"
    for ratios, measure in (("v_over_d = 0.05", "time"), ("rho = 1.2", "time"), ("kappa = 0.25", "weight passes")):
        cal.write_text(f"[ratios]\n{ratios}\n")
        assert run_json(capsys, "predict", "-p", "0.8", "--K", "6", "--calibration", str(cal))["ratios_measure"] == measure
        code, out, err = run("predict", "-p", "0.8", "--K", "6", "--calibration", str(cal))
        assert code == 0, err
        in_time = "R_u  strong replica time / Strong-only" in out
        assert in_time == (measure == "time") and ("strong weight passes" in out) == (measure != "time")


def test_the_closed_forms_bounds_are_one_check():
    from costsim.prediction import check_closed_form, predict

    with pytest.raises(ValueError, match=r"^--K must be an integer in \[1, 1024\], got 2000$"):
        predict(0.8, 2000)
    with pytest.raises(ValueError, match=r"^--write-rate must be in \(0, 1\], got 2$"):
        predict(0.8, 6, write_rate=2)
    with pytest.raises(ValueError, match=r"^--kappa must be at most 1000, got 2000$"):
        predict(0.8, 6, kappa=2000.0)
    with pytest.raises(ValueError, match=r"^K must be an integer in \[1, 1024\], got 10000000$"):
        check_closed_form(0.8, 10**7, 0.1, name=str)  # the report's words: the result's keys
    with pytest.raises(ValueError, match=r"^p must be in \[0, 1\], got ninety$"):
        check_closed_form("ninety", 6, name=str)


def test_predict_text_names_units_and_sources():
    code, out, err = run("predict", "--p-accept", "0.8", "--K", "6")
    assert code == 0, err
    for phrase in ("R_u", "L_u", "weight passes", "calls", "balance point", "memory-bound", "sequences",
                   "default:", "roofline (vllm strong, vllm weak):", "fp8 weights, vllm", "8x h20", "compute-bound"):
        assert phrase in out


@pytest.mark.parametrize("write_rate", [None, 0.3, 1.0])
def test_the_limits_printed_are_those_of_the_form_reported(write_rate):
    # R(p=0) and R(p=1) of the reported form are its R at p = 0 and p = 1 (the renewal form
    # commits unreviewed reads, so its limits are not the paper's v/d + rho and v/(n d)).
    from costsim.prediction import predict

    at0, at1 = predict(0.0, 6, write_rate=write_rate), predict(1.0, 6, write_rate=write_rate)
    assert at0["R_limit_p0"] == pytest.approx(at0["R"], rel=1e-9)
    assert at1["R_limit_p1"] == pytest.approx(at1["R"], rel=1e-9)


def test_the_best_K_is_searched_up_to_the_K_asked_for():
    from costsim.prediction import predict

    # p = 1: L falls with K all the way; the best is the largest K searched, said so.
    r = predict(p=1.0, K=128)
    assert (r["best_K"], r["best_K_searched"]) == (128, 128) and r["best_K_L"] == pytest.approx(r["L"])
    # The optimum past 64 (found by a scan of every K): never worse than the K asked for.
    r = predict(p=0.999, K=200, kappa=0.01)
    scan = [float(formulas.L(0.999, k, r["v_over_d"], r["rho"], 0.01)) for k in range(1, 201)]
    assert r["best_K"] == 1 + scan.index(min(scan)) > 64 and r["best_K_L"] <= r["L"]


def test_when_slower_the_verdict_names_a_K_that_pays_if_there_is_one():
    from costsim.prediction import predict

    r = predict(p=0.8, K=6, kappa=0.6)
    assert r["L"] > 1 and r["best_K_L"] < 1  # K = 1 pays at this kappa, K = 6 does not
    assert f"Or K = {r['best_K']}: " in r["verdict"] and f"L_u = {r['best_K_L']:.2f}" in r["verdict"]
    r = predict(p=0.8, K=6, kappa=2.0)  # no K pays: no such advice
    assert r["L"] > 1 and r["best_K_L"] >= 1 and "Or K =" not in r["verdict"]


def test_the_strong_gpus_chosen_hold_the_batch_not_only_the_weights():
    from costsim.memory import DoesNotFit, max_sequences
    from costsim.prediction import predict
    from costsim.sizing import deployments

    # FP8 weights fit one H20; 16 sessions' KV do not
    r = predict(p=0.8, K=6, strong="llama-3.1-70b", strong_dtype="fp8")
    assert r["strong_deployment"]["n_devices"] == 2
    one, _ = deployments(strong="llama-3.1-70b", strong_gpus=1, strong_dtype="fp8")
    assert max_sequences(one, 8219) < 16
    with pytest.raises(DoesNotFit, match=r"at most \d+ sequences at that context \(2 GPUs hold them\)"):
        predict(p=0.8, K=6, strong="llama-3.1-70b", strong_gpus=1, strong_dtype="fp8")


def test_a_correction_turn_mixes_into_rho_and_adds_its_call():
    from costsim import formulas
    from costsim.prediction import predict

    base, mixed = predict(p=0.8, K=6), predict(p=0.8, K=6, correction_rate=0.5, correction_rho=1.5)
    d = 418.0  # the default strong step, tokens: a correction turn is 1 prefill pass + 1.5 steps
    assert mixed["rho_per_rejection"] == pytest.approx(0.5 * 1.0 + 0.5 * (1.5 + 1 / d))
    assert mixed["R"] == pytest.approx(float(formulas.R(0.8, 6, mixed["v_over_d"], mixed["rho_per_rejection"])))
    # one more strong call per corrected rejection: (1 - p) rejections per committed step
    assert mixed["strong_calls_per_task"] - base["strong_calls_per_task"] == pytest.approx(13.8 * 0.5 * 0.2)
    with pytest.raises(ValueError, match="--correction-rate must be in"):
        predict(p=0.8, K=6, correction_rate=1.2)


def test_beside_a_default_verdict_predict_shows_the_papers_vitabench_reading():
    from costsim.prediction import predict

    r = predict(p=0.8, K=6)
    pv = r["paper_v_over_d"]
    # half the published strong share (0.28) over VitaBench's strong calls ratio (8.2 / 21.9): its
    # verdicts' half of the share, per review (the fit meets the calls ratio exactly).
    assert pv["v_over_d"] == pytest.approx(0.14 * 21.9 / 8.2, rel=1e-9)
    assert pv["verdict_tokens"] == pytest.approx(pv["v_over_d"] * 418 - 1)
    assert pv["L"] > r["L"] and pv["best_K"] >= r["best_K"]  # dearer reviews: longer chunks pay
    assert predict(p=0.8, K=6, v_over_d=0.3)["paper_v_over_d"] is None  # a v/d given is not second-guessed


def test_one_precision_policy_in_every_command():
    # Given, else the default strong model's FP8 checkpoint, else the checkpoint's own: before,
    # predict and simulate ran any strong model in FP8 while roofline ran it in its own BF16.
    from costsim import api
    from costsim.sizing import weight_dtype
    from costsim.profiles import load_model

    assert weight_dtype(load_model("qwen3.5-397b-a17b"), None, "strong") == "fp8"
    assert weight_dtype(load_model("qwen3.5-397b-a17b")) == "bf16"  # as a model of its own: its checkpoint
    assert weight_dtype(load_model("llama-3.1-70b"), None, "strong") == "bf16"
    assert weight_dtype(load_model("llama-3.1-70b"), "fp8", "strong") == "fp8"
    p = api.predict(0.8, 6, strong="llama-3.1-70b").to_dict()["strong_deployment"]
    r = api.roofline("llama-3.1-70b", "h20", batch=1, context=1000).to_dict()
    d = api.deployments(strong="llama-3.1-70b")["strong"]
    assert p["dtype"] == r["dtype"] == d.weight_dtype == "bf16"
    # and --strong-dtype / --weak-dtype on every command that costs a deployment
    assert api.deployments(strong="qwen3-235b-a22b", strong_dtype="fp8", weak_dtype="fp8")["weak"].weight_dtype == "fp8"
    code, out, err = run("simulate", "--tasks", "2", "--strong", "qwen3-235b-a22b", "--strong-dtype", "fp8",
                         "--weak-dtype", "fp8", "--protocols", "strong-only")
    assert code == 0 and "Qwen3-235B-A22B" in out and out.count("fp8 weights") == 2, (out, err)
    import inspect
    from costsim.api import CAPACITY_OPTIONS, PLAN_OPTIONS, SCENARIO_OPTIONS
    for opts in (SCENARIO_OPTIONS, CAPACITY_OPTIONS, PLAN_OPTIONS):
        assert {"strong_dtype", "weak_dtype"} <= set(opts)
    assert "strong_dtype" in inspect.signature(api.predict).parameters


def test_predict_over_a_beta_of_p_u_is_the_mean_of_the_per_task_ratios():
    """--p-dist beta:a,b (what costsim acceptance fits): R_u and L_u averaged over tasks' p_u,
    against a midpoint-rule integral of the same formulas over the Beta density."""
    import math

    import numpy as np

    from costsim import api, formulas

    r = api.predict(0.8, 6, p_dist="beta:8,2").data
    pd = r["over_p_dist"]
    q = (np.arange(200_000) + 0.5) / 200_000
    dens = q**7 * (1 - q) ** 1 / (math.gamma(8) * math.gamma(2) / math.gamma(10))
    R = float(np.mean(formulas.R(q, 6, r["v_over_d"], r["rho_per_rejection"]) * dens))
    L = float(np.mean(formulas.L(q, 6, r["v_over_d"], r["rho_per_rejection"], r["kappa"]) * dens))
    assert math.isclose(pd["R"], R, rel_tol=1e-6) and math.isclose(pd["L"], L, rel_tol=1e-6)
    assert pd["mean_p_accept"] == 0.8 and math.isclose(pd["R_at_mean_p"], r["R"], rel_tol=1e-12)
    assert pd["L"] > pd["L_at_mean_p"]  # L_u is convex in p_u here: spread costs
    tight = api.predict(0.8, 6, p_dist="beta:80000,20000").data["over_p_dist"]  # no spread: the point value
    assert math.isclose(tight["R"], r["R"], rel_tol=1e-4) and math.isclose(tight["L"], r["L"], rel_tol=1e-4)
    with pytest.raises(ValueError, match="expected beta:a,b"):
        api.predict(0.8, 6, p_dist="markov:0.9,0.5,0.1,0.1")

"""Hostile profiles: every numeric field is held to a declared physical range, the fields of a
model to one another, and a TOML or config.json that breaks either is one line naming the file
and the field (never a traceback, a hang, a NaN answer or a memory blow-up)."""

import dataclasses
import datetime as dt
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costsim import roofline
from costsim.profiles import (ApiEndpoint, Deployment, Device, Engine, ModelSpec, ProfileError, load_api, load_device,
                              load_engine, load_model, model_from_hf_config)
from costsim.profiles.types import BOUNDS

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "benchmarks" / "measured" / "configs").glob("*/config.json"))


def _set(text: str, key: str, value: str) -> str:
    """A profile's TOML text with ``key = value`` in place of its own line (or added)."""
    new, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
    return new if n else f"{key} = {value}\n" + text


def _refused(loader, path, *said):
    with pytest.raises(ProfileError) as e:
        loader(str(path))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for s in said:
        assert s in msg, msg
    return msg


# 1. Every numeric field has a declared range, with a reason, applied by build.

def test_every_numeric_field_of_every_profile_kind_has_one_declared_bound():
    for cls in (Device, Engine, ModelSpec, ApiEndpoint):
        for f in dataclasses.fields(cls):
            if str(f.type).split(" ")[0] in ("int", "float") or f.name.endswith("_latency_us"):
                b = BOUNDS[cls, f.name]
                assert 0 <= b.lo <= b.hi < 1e15 and b.why, (cls.__name__, f.name)
                assert b.lo > 0 or str(f.type).startswith("int"), f"{f.name}: a float needs a floor above 0"


def test_moe_layers_zero_in_a_model_with_experts_is_refused(tmp_path):
    # Before: loaded, and expert_params divided by zero in every cost.
    p = tmp_path / "m.toml"
    p.write_text(_set((ROOT / "models" / "qwen3-30b-a3b.toml").read_text(), "moe_layers", "0"))
    _refused(load_model, p, "moe_layers must be >= 1")


@pytest.mark.parametrize("field,value,range_", [
    ("hidden_size", "1" + "0" * 400, "[1, 1e+06]"),       # before: OverflowError from math.isfinite
    ("num_layers", "1" + "0" * 400, "[1, 10000]"),
    ("total_params_b", "1e308", "[1e-09, 100000]"),
    ("vocab_size", "20000000", "[1, 1e+07]"),
    ("sliding_window", "1e9", "in [1, 1e+08]"),
    ("active_params_b", "5e-324", "[1e-09, 100000]"),      # before: loaded
    ("linear_state_elements", "5e-324", "0 or in [1, 1e+10]"),
])
def test_model_numbers_past_physics_are_refused_with_their_range(tmp_path, field, value, range_):
    p = tmp_path / "m.toml"
    p.write_text(_set((ROOT / "models" / "qwen3-30b-a3b.toml").read_text(), field, value))
    _refused(load_model, p, f"{field} must be", range_)


def test_a_toml_integer_past_pythons_digit_limit_is_one_line(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text(_set((ROOT / "models" / "llama-3.1-8b.toml").read_text(), "hidden_size", "9" * 5000))
    _refused(load_model, p, "more than 4,300 digits")


@pytest.mark.parametrize("text,field,said", [
    ("hardware/h200.toml", "hbm_bandwidth_gb_per_s", "in [1, 100000]"),
    ("hardware/h200.toml", "bf16_dense_tflops", "in [0.01, 1e+12]"),
    ("hardware/h200.toml", "memory_gb", "in [0.1, 1e+06]"),
    ("hardware/h200.toml", "interconnect_bandwidth_gb_per_s", "0 or in [0.1, 100000]"),
    ("hardware/h200.toml", "usd_per_gpu_hour", "in [0.01, 10000]"),
    ("hardware/engines/vllm.toml", "bandwidth_fraction", "in [0.01, 1]"),
    ("hardware/engines/vllm.toml", "layer_latency_us", "0 or in [0.001, 1e+07]"),
    ("hardware/api/glm-5.toml", "price_output_per_mtok_usd", "0 or in [1e-06, 10000]"),
])
def test_a_subnormal_number_is_refused_not_answered_with_nan(tmp_path, text, field, said):
    # Before: 5e-324 passed "> 0" and the costs came out NaN or infinite with exit 0.
    loader = load_engine if "engines" in text else load_api if "api" in text else load_device
    p = tmp_path / "p.toml"
    p.write_text(_set((ROOT / text).read_text(), field, "5e-324"))
    _refused(loader, p, f"{field} must be", said)


def test_the_ideal_devices_of_the_paper_still_load(tmp_path):
    # The idealised edge device the edge-cloud tests write (compute free, memory without end).
    p = tmp_path / "ideal.toml"
    p.write_text('name = "i"\ndisplay_name = "i"\nmemory_gb = 1e6\nhbm_bandwidth_gb_per_s = 2.0\n'
                 'bf16_dense_tflops = 1e12\nsource = "t"\n')
    assert load_device(str(p)).bf16_dense_tflops == 1e12


# 2. Collective tables: GPU counts in ASCII digits, within range.

@pytest.mark.parametrize("key", ["²", "８", "1", "0", "9999999", "2.0", " 2"])
def test_collective_latency_keys_are_ascii_gpu_counts(tmp_path, key):
    # Before: "²".isdigit() passed and int("²") raised ValueError; "８" (full width) read as 8.
    text = (ROOT / "hardware" / "engines" / "vllm.toml").read_text().replace('{ "2" = 4.5', f'{{ "{key}" = 4.5')
    p = tmp_path / "e.toml"
    p.write_text(text)
    _refused(load_engine, p, "allreduce_latency_us maps GPU counts >= 2 (ASCII digits, at most 100000)")


def test_a_collective_latency_past_its_range_names_its_entry(tmp_path):
    text = (ROOT / "hardware" / "engines" / "vllm.toml").read_text().replace('"8" = 5.2', '"8" = 1e300')
    p = tmp_path / "e.toml"
    p.write_text(text)
    _refused(load_engine, p, 'allreduce_latency_us."8" must be 0 or in [0.001, 1e+07]')


# 3. Hugging Face configs.

def _cfg(name="Qwen2.5-7B-Instruct"):
    return json.loads((ROOT / "benchmarks" / "measured" / "configs" / name / "config.json").read_text())


def test_an_hf_layer_count_past_physics_is_refused_before_any_list_is_built(hf_config):
    # Before: ["full"] * 10**12 (8 TB).
    _refused(model_from_hf_config, hf_config({**_cfg(), "num_hidden_layers": 1e12}), "num_hidden_layers",
             "[0, 10000]")
    _refused(model_from_hf_config, hf_config({**_cfg(), "num_hidden_layers": 28.5}), "num_hidden_layers",
             "a whole one")
    _refused(model_from_hf_config, hf_config({**_cfg(), "intermediate_size": 10**30}), "intermediate_size",
             "[0, 1e+06]")


def test_hf_layer_types_of_the_wrong_length_are_refused(hf_config):
    # Before: silently ignored (every layer read as full attention).
    cfg = {**_cfg(), "layer_types": ["sliding_attention", "full_attention"] * 5}
    _refused(model_from_hf_config, hf_config(cfg), "layer_types must list one mixer a layer, num_hidden_layers = 28")
    _refused(model_from_hf_config, hf_config({**_cfg(), "layer_types": "full_attention"}), "layer_types")
    ok = model_from_hf_config(hf_config({**_cfg(), "layer_types": ["full_attention"] * 28}))
    assert ok.kv_layers == 28


@pytest.mark.parametrize("key", ["tie_word_embeddings", "attn_output_gate"])
@pytest.mark.parametrize("value", ["false", "true", 0, 1, [False]])
def test_hf_booleans_are_json_booleans(hf_config, key, value):
    # Before: "false" (a string) read as true.
    _refused(model_from_hf_config, hf_config({**_cfg(), key: value}), f"{key} must be true or false")


def test_hf_booleans_read_as_given(hf_config):
    untied = model_from_hf_config(hf_config({**_cfg(), "tie_word_embeddings": False}))
    tied = model_from_hf_config(hf_config({**_cfg(), "tie_word_embeddings": True}))
    assert (untied.tie_word_embeddings, tied.tie_word_embeddings) == (False, True)
    assert untied.total_params_b - tied.total_params_b == pytest.approx(152064 * 3584 / 1e9)
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": "false"}
    _refused(model_from_hf_config, hf_config({**_cfg(), "quantization_config": awq}), "zero_point must be true or false")


#: RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic's block, as llm-compressor writes it: FP8
#: weights a channel, FP8 activations a token, dynamic.
FP8_DYNAMIC = {
    "config_groups": {"group_0": {
        "input_activations": {"actorder": None, "block_structure": None, "dynamic": True, "group_size": None,
                              "num_bits": 8, "observer": None, "observer_kwargs": {}, "strategy": "token",
                              "symmetric": True, "type": "float"},
        "output_activations": None, "targets": ["Linear"],
        "weights": {"actorder": None, "block_structure": None, "dynamic": False, "group_size": None, "num_bits": 8,
                    "observer": "minmax", "observer_kwargs": {}, "strategy": "channel", "symmetric": True,
                    "type": "float"}}},
    "format": "float-quantized", "global_compression_ratio": 1.2405, "ignore": ["lm_head"],
    "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed",
}


def test_a_compressed_tensors_fp8_checkpoint_is_fp8(hf_config):
    from conftest import LLAMA_8B_CONFIG

    m = model_from_hf_config(hf_config({**LLAMA_8B_CONFIG, "quantization_config": FP8_DYNAMIC}))
    assert (m.default_dtype, m.head_16bit) == ("fp8", True)
    # Older compressed-tensors checkpoints name the block compression_config (vLLM reads it there too).
    old = model_from_hf_config(hf_config({**LLAMA_8B_CONFIG, "compression_config": FP8_DYNAMIC}))
    assert (old.default_dtype, old.head_16bit) == ("fp8", True)
    # Float weights of another width are refused, naming what is modelled.
    fp4 = json.loads(json.dumps(FP8_DYNAMIC))
    fp4["config_groups"]["group_0"]["weights"]["num_bits"] = 4
    _refused(model_from_hf_config, hf_config({**LLAMA_8B_CONFIG, "quantization_config": fp4}),
             "compressed-tensors weights of type 'float' and 4 bits are not modelled")


# 4. A model's fields agree with one another.

@pytest.mark.parametrize("name,edits,said", [
    ("llama-3.1-8b", {"vocab_size": "5000000"}, "the embeddings and head, vocab_size (5000000) x hidden_size (4096)"),
    ("qwen3-30b-a3b", {"total_params_b": "1000"}, "every token touches (active_params_b less its experts_per_token"),
    ("gpt-oss-20b", {"sliding_layers": "30"}, "sliding_layers (30) + linear_layers (0) + kv_layers (12) must be at most "
                                              "num_layers (24)"),
    ("llama-3.1-8b", {"sliding_layers": "40", "sliding_window": "128"}, "must be at most num_layers (32)"),
    ("qwen3-30b-a3b", {"moe_layers": "49"}, "moe_layers (49) must be at most num_layers (48)"),
    ("llama-3.1-8b", {"num_kv_heads": "64"}, "num_kv_heads (64) must be at most num_attention_heads (32)"),
    ("qwen3-30b-a3b", {"experts_per_token": "128"}, "experts_per_token must be below num_experts"),
    ("qwen3-30b-a3b", {"active_params_b": "40"}, "active_params_b exceeds total_params_b"),
])
def test_a_model_whose_parts_exceed_their_whole_is_refused(tmp_path, name, edits, said):
    # Before: a negative KV pool (sliding_layers past num_layers) or negative weight bytes (a
    # vocabulary past the active parameters), answered with exit 0.
    text = (ROOT / "models" / f"{name}.toml").read_text()
    for k, v in edits.items():
        text = _set(text, k, v)
    p = tmp_path / "m.toml"
    p.write_text(text)
    _refused(load_model, p, said)


# 5. TOML dates.

def test_a_toml_date_in_any_field_never_reaches_json_as_a_date(tmp_path):
    # Before: a bare date in [sources] (or any table) loaded as a datetime.date, and `show --json`
    # crashed on it.
    text = (ROOT / "hardware" / "h200.toml").read_text().replace("[sources]\n", "[sources]\nchecked = 2026-08-01\n"
                                                                "read_at = 2026-08-01T12:00:00\nat = 12:00:00\n")
    p = tmp_path / "d.toml"
    p.write_text(text)
    d = load_device(str(p))
    assert (d.sources["checked"], d.sources["read_at"], d.sources["at"]) == ("2026-08-01", "2026-08-01T12:00:00",
                                                                          "12:00:00")
    json.dumps(dataclasses.asdict(d))
    p.write_text(_set(text, "memory_gb", "2026-08-01"))
    _refused(load_device, p, "memory_gb must be a number, got '2026-08-01'")
    p.write_text((ROOT / "hardware" / "engines" / "vllm.toml").read_text().replace('"8" = 5.2', '"8" = 2026-08-01'))
    _refused(load_engine, p, 'allreduce_latency_us."8" must be a number')


def test_nesting_past_a_profiles_shape_is_one_line(tmp_path):
    p = tmp_path / "d.toml"
    base = (ROOT / "hardware" / "h200.toml").read_text()
    p.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n" + base)
    _refused(load_device, p, "nested too deep")
    p.write_text('extra = ' + "{a = " * 10 + "1" + "}" * 10 + "\n" + base)
    _refused(load_device, p, "extra nests tables or lists more than 8 deep")
    p.write_text("a" + ".b" * 20000 + " = 1\n" + base)  # tomllib would take ~1.6 GB
    _refused(load_device, p, "a key of more than 64 dotted parts")


# 6. Fuzz: mutate shipped profiles and configs; a load either succeeds within every bound and
# costs finitely, or is one line naming the field.

TOMLS = [("hardware/h200.toml", load_device), ("hardware/l40s.toml", load_device),
         ("hardware/engines/vllm.toml", load_engine), ("hardware/engines/sglang.toml", load_engine),
         ("models/qwen3-30b-a3b.toml", load_model), ("models/gpt-oss-20b.toml", load_model),
         ("models/qwen3.5-397b-a17b.toml", load_model), ("models/deepseek-v3.toml", load_model),
         ("models/llama-3.1-8b.toml", load_model), ("hardware/api/glm-5.toml", load_api)]
EXTREMES = [0, -1, 5e-324, 1e-300, 1e308, math.inf, -math.inf, math.nan, 10**400, -(10**400), "12", "", True, False,
            [1, 2], [], {"x": 1}, {}, dt.date(2026, 8, 1), dt.datetime(2026, 8, 1, 12, 0), dt.time(12, 0), 0.5, 2.5,
            1, 2, 64, 1e4, 1e6, 1e9]


def _toml(v) -> str:
    """A value as TOML (inline tables for tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, float) else str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(map(_toml, v)) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml(x)}" for k, x in v.items()) + "}"


def _paths(data: dict) -> list[tuple]:
    """Top-level keys and the keys of their tables, one level down (of sources, two)."""
    out = [(k,) for k in data]
    out += [(k, k2) for k, v in data.items() if isinstance(v, dict) for k2 in list(v)[:2 if k == "sources" else None]]
    out += [(k, k2, k3) for k, v in data.items() if k == "families" and isinstance(v, dict)
            for k2, v2 in v.items() if isinstance(v2, dict) for k3 in v2]
    return out


@st.composite
def _mutated(draw, data: dict, json_only: bool = False):
    """``data`` with one to three fields set to an extreme, scaled, dropped, nested in a table
    or added: (mutated data, the names of the keys touched)."""
    data = json.loads(json.dumps(data)) if json_only else _copy(data)
    touched = set()
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        paths = _paths(data)
        op = draw(st.sampled_from(["set"] * 4 + ["scale"] * 2 + ["drop", "nest"] * 2 + ["add"] if paths else ["add"]))
        if op == "add":
            data[draw(st.sampled_from(["speed", "extra", "hidden_sizes"]))] = 1
            touched |= {"speed", "extra", "hidden_sizes"}
            continue
        path = draw(st.sampled_from(paths))
        parent = data
        for k in path[:-1]:
            parent = parent[k]
        key, old = path[-1], parent[path[-1]]
        touched |= set(path)
        if op == "drop":
            del parent[key]
        elif op == "nest":
            parent[key] = {"x": old}
        elif op == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool) and abs(old) < 1e300:
            parent[key] = old * draw(st.sampled_from([1e-3, 0.5, 2, 1e3]))
        else:
            v = _copy(draw(st.sampled_from(EXTREMES)))  # a later mutation may change it in place
            parent[key] = v.isoformat() if json_only and isinstance(v, (dt.date, dt.time)) else v
    return data, touched


def _copy(v):
    return {k: _copy(x) for k, x in v.items()} if isinstance(v, dict) else list(v) if isinstance(v, list) else v


def _within_bounds(obj):
    cls = type(obj)
    for f in dataclasses.fields(obj):
        v, b = getattr(obj, f.name), BOUNDS.get((cls, f.name))
        if b is None or v is None:
            continue
        values = list(v.values()) if isinstance(v, dict) else [v]
        for x in values:
            assert isinstance(x, (int, float)) and not isinstance(x, bool), (f.name, x)
            assert math.isfinite(x) and ((x == 0 and b.zero) or b.lo <= x <= b.hi), (f.name, x, b)
    for over in getattr(obj, "families", {}).values():
        for k, x in over.items():
            b = BOUNDS[cls, k]
            assert (x == 0 and b.zero) or b.lo <= x <= b.hi, (k, x)
    json.dumps(dataclasses.asdict(obj))  # no date, nothing JSON cannot write


def _costs_are_finite(obj):
    model, device, engine = load_model("qwen3-30b-a3b"), load_device("h200"), load_engine("vllm")
    if isinstance(obj, ModelSpec):
        model = obj
    elif isinstance(obj, Device):
        device = obj
    elif isinstance(obj, Engine):
        engine = obj
    else:
        return
    for n in (1, 2, 8, 16):
        if n > 1 and not (device.interconnect_bandwidth_gb_per_s > 0 and device.can_span(n)):
            continue
        dep = Deployment(model, device, n, "bf16", engine=engine)
        for cost in (roofline.decode_step(dep, 1, 0), roofline.decode_step(dep, 64, 64 * 8000),
                     roofline.prefill(dep, 2048)):
            for x in (cost.seconds, cost.hbm_bytes, cost.flops):
                assert math.isfinite(x) and x > 0, (n, cost)


def _check(loader, path, touched):
    try:
        obj = loader(str(path))
    except ProfileError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith(str(path)), msg
        assert any(k in msg for k in touched) or "dotted" in msg, (touched, msg)
        return
    _within_bounds(obj)
    _costs_are_finite(obj)


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(st.data())
def test_a_mutated_shipped_toml_loads_within_bounds_or_is_one_line(tmp_path, data):
    import tomllib

    name, loader = data.draw(st.sampled_from(TOMLS))
    mutated, touched = data.draw(_mutated(tomllib.loads((ROOT / name).read_text())))
    p = tmp_path / "p.toml"
    p.write_text("".join(f"{json.dumps(k)} = {_toml(v)}\n" for k, v in mutated.items()))
    _check(loader, p, touched)


@FUZZ
@given(st.data())
def test_a_mutated_hf_config_loads_within_bounds_or_is_one_line(tmp_path, data):
    cfg = json.loads(data.draw(st.sampled_from(CONFIGS)).read_text())
    mutated, touched = data.draw(_mutated(cfg, json_only=True))
    p = tmp_path / "config.json"
    p.write_text(json.dumps(mutated))
    # A config.json's sizes make the model's fields: a refusal may name the field they made.
    _check(model_from_hf_config, p, touched | {f.name for f in dataclasses.fields(ModelSpec)})


def test_the_shipped_configs_are_fuzzed():
    assert len(CONFIGS) >= 10 and all(p.is_file() for p in CONFIGS)

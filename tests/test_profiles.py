"""Every shipped profile loads, validates and names the source of every figure."""

import dataclasses
import re
from pathlib import Path

import pytest

from costsim.memory import devices_to_hold
from costsim.profiles import (ApiEndpoint, Deployment, Device, ModelSpec, ProfileError, load_api, weight_bytes,
                              load_device, load_model, names)

ROOT = Path(__file__).resolve().parents[1]


def numeric_fields(obj):
    """Numeric figures the profile sets (a field left at its default, e.g. no experts, is not one)."""
    skip = {"aliases", "sources"}
    out = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if f.name in skip or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if f.default is not dataclasses.MISSING and v == f.default:
            continue
        out.append(f.name)
    return out


@pytest.mark.parametrize("kind,loader", [("devices", load_device), ("apis", load_api), ("models", load_model)])
def test_every_figure_has_a_source(kind, loader):
    assert names(kind), f"no shipped {kind}"
    for name in names(kind):
        prof = loader(name)
        assert prof.source
        missing = [f for f in numeric_fields(prof) if f not in prof.sources]
        assert not missing, f"{name}: no source for {missing}"


def test_required_profiles_exist():
    assert set(names("devices")) >= {"h20", "h100-sxm", "h200", "b200", "a100-80gb", "l40s", "rtx-4090", "rtx-5090"}
    assert set(names("models")) >= {"qwen3.5-4b", "qwen3.5-397b-a17b", "glm-5", "deepseek-v4-flash",
                                    "llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "qwen3-30b-a3b"}
    assert len(names("apis")) >= 3


#: (hidden_size, moe_intermediate_size) of each MoE model's config.json (Mixtral: its
#: intermediate_size): a routed expert is a gated FFN, 3 x hidden x intermediate weights.
EXPERT_SHAPES = {"deepseek-v3": (7168, 2048), "mixtral-8x7b": (4096, 14336), "qwen3-235b-a22b": (4096, 1536),
                 "qwen3-30b-a3b": (2048, 768), "gpt-oss-120b": (2880, 2880), "gpt-oss-20b": (2880, 2880),
                 "glm-5": (6144, 2048), "qwen3.5-397b-a17b": (4096, 1024), "deepseek-v4-flash": (4096, 2048)}


def test_moe_profiles_split_their_parameters_as_their_architectures_do():
    """The profiles give total and active counts; the expert size they imply, (total - active) /
    (layers x (experts - routed)), must be the architecture's (its FFN shape, 1% for biases,
    norms and rounding of the published counts): a check the totals alone cannot fail."""
    moe = [n for n in names("models") if load_model(n).is_moe]
    assert set(moe) == set(EXPERT_SHAPES)
    for name in moe:
        m = load_model(name)
        assert 0 < m.active_params_b <= m.total_params_b and m.always_active_params > 0
        hidden, inter = EXPERT_SHAPES[name]
        assert m.expert_params == pytest.approx(3 * hidden * inter, rel=0.01), name


def test_default_strong_deployment_fits_one_h20_node_in_fp8():
    m, d = load_model("qwen3.5-397b-a17b"), load_device("h20")
    assert devices_to_hold(m, d, "fp8") == 8   # 397 GB over 8 x (0.9 x 96 - 4) GB with 10% left for KV
    assert devices_to_hold(m, d, "bf16") == 16


def test_bad_profiles_fail_with_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ndisplay_name = "x"\nmemory_gb = -1\nhbm_bandwidth_gb_per_s = 1\n'
                   'bf16_dense_tflops = 1\nsource = "t"\n')
    with pytest.raises(ProfileError, match="memory_gb must be a finite number >= 0"):
        load_device(str(bad))
    bad.write_text('name = "x"\n')
    with pytest.raises(ProfileError, match="missing field"):
        load_device(str(bad))
    bad.write_text('name = "x"\ndisplay_name = "x"\nmemory_gb = 1\nhbm_bandwidth_gb_per_s = 1\n'
                   'bf16_dense_tflops = 1\nsource = "t"\nspeed = 3\n')
    with pytest.raises(ProfileError, match="unknown field"):
        load_device(str(bad))
    with pytest.raises(ProfileError, match="unknown device 'h21'; known: a100-40gb, a100-80gb"):
        load_device("h21")


def test_types_are_frozen():
    d = load_device("h20")
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.memory_gb = 1
    assert isinstance(d, Device) and isinstance(load_api(names("apis")[0]), ApiEndpoint)
    assert isinstance(load_model("qwen3-8b"), ModelSpec)


_DEVICE = 'name = "mydev"\ndisplay_name = "My dev"\nmemory_gb = 96\nhbm_bandwidth_gb_per_s = 400\nbf16_dense_tflops = 148\nsource = "t"\n'


@pytest.mark.parametrize("extra,said", [
    ('aliases = "abc"\n', "aliases must be a list of strings, got 'abc'"),
    ('sources = 5\n', "sources must be a table, got 5"),
    ('family = ["x"]\n', "family must be a string"),
    ('price_date = "soon"\n', "price_date must be YYYY-MM-DD or YYYY-MM, got 'soon'"),
    ('memory_reported_mib = 0\n', "memory_reported_mib must be > 0"),
])
def test_a_profile_field_of_the_wrong_kind_is_one_line(tmp_path, extra, said):
    from costsim.profiles import ProfileError, load_device

    p = tmp_path / "d.toml"
    p.write_text(_DEVICE + extra)
    with pytest.raises(ProfileError, match=re.escape(said)):
        load_device(str(p))


def test_a_device_without_an_interconnect_is_refused_on_more_than_one_gpu(tmp_path):
    from costsim import roofline
    from costsim.profiles import Deployment, ProfileError, load_device

    p = tmp_path / "d.toml"
    p.write_text(_DEVICE)
    dev = load_device(str(p))
    one = Deployment(load_model("llama-3.1-8b"), dev, 1, "bf16")
    assert roofline.coefficients(one).comm_s_per_token == 0.0  # one GPU: no link needed
    with pytest.raises(ProfileError, match="no interconnect_bandwidth_gb_per_s in its profile"):
        roofline.coefficients(Deployment(load_model("llama-3.1-8b"), dev, 2, "bf16"))


def test_a_config_json_the_model_cannot_read_is_refused_naming_the_file(hf_config):
    from conftest import LLAMA_8B_CONFIG

    from costsim.profiles import model_from_hf_config

    with pytest.raises(ProfileError, match="num_key_value_heads must be >= 1"):
        model_from_hf_config(hf_config({**LLAMA_8B_CONFIG, "num_key_value_heads": 0}))
    bnb = {**LLAMA_8B_CONFIG, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
    with pytest.raises(ProfileError, match="quant_method 'bitsandbytes' is not modelled"):
        model_from_hf_config(hf_config(bnb))
    awq3 = {**LLAMA_8B_CONFIG, "quantization_config": {"quant_method": "awq", "bits": 3, "group_size": 128}}
    with pytest.raises(ProfileError, match="awq with 3-bit weights is not modelled"):
        model_from_hf_config(hf_config(awq3))
    path = hf_config({**LLAMA_8B_CONFIG, "num_hidden_layers": True})
    with pytest.raises(ProfileError, match=re.escape(path) + ": num_hidden_layers must be a number"):
        model_from_hf_config(path)
    moe = {**LLAMA_8B_CONFIG, "num_local_experts": 8, "num_experts_per_tok": 20}
    with pytest.raises(ProfileError, match=r"num_experts_per_tok \(20\) must be below the number of experts \(8\)"):
        model_from_hf_config(hf_config(moe))
    with pytest.raises(ProfileError, match="mlp_only_layers must be a list of layer indices, got 5"):
        model_from_hf_config(hf_config({**moe, "num_experts_per_tok": 2, "mlp_only_layers": 5}))
    # An FP8 checkpoint named by its torch dtype alone is FP8.
    assert model_from_hf_config(hf_config({**LLAMA_8B_CONFIG, "torch_dtype": "float8_e4m3fn"})).default_dtype == "fp8"


def test_a_bare_toml_date_in_a_profile_is_read_as_its_iso_text(tmp_path):
    from pathlib import Path

    from costsim.files import data_dir

    src = next(p for p in data_dir("hardware").joinpath("api").iterdir() if p.name.endswith(".toml"))
    text = re.sub(r'^date = ".*"$', "date = 2026-08-01", src.read_text(), flags=re.M)
    assert "date = 2026-08-01" in text
    (tmp_path / "api.toml").write_text(text)
    assert load_api(str(Path(tmp_path / "api.toml"))).date == "2026-08-01"


def test_an_fbgemm_fp8_checkpoint_is_fp8(hf_config):
    from conftest import LLAMA_8B_CONFIG

    from costsim.profiles import model_from_hf_config

    cfg = {**LLAMA_8B_CONFIG, "quantization_config": {"quant_method": "fbgemm_fp8"}}
    assert model_from_hf_config(hf_config(cfg)).default_dtype == "fp8"


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm",
       "modules_to_not_convert": None}  # AutoAWQ's block, as Qwen's AWQ checkpoints carry it
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True,
        "damp_percent": 0.01, "true_sequential": True}  # Qwen2.5's GPTQ-Int4 block
W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
         "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                       "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                                   "strategy": "group", "group_size": 128}}}}
FP8_DYNAMIC = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"],
                                             "weights": {"num_bits": 8, "type": "float", "symmetric": True,
                                                         "strategy": "channel"}}}}


@pytest.mark.parametrize("quant,dtype,head_16bit", [
    (AWQ, "int4-g128", True), (GPTQ, "int4-g128", True), ({**GPTQ, "lm_head": True}, "int4-g128", False),
    (W4A16, "int4-g128-sym", True), (FP8_DYNAMIC, "fp8", True), ({"quant_method": "fp8", "fmt": "e4m3",
     "weight_block_size": [128, 128], "activation_scheme": "dynamic"}, "fp8", True),
])
def test_weight_only_quantized_configs_are_read_as_they_ship(hf_config, quant, dtype, head_16bit):
    from conftest import LLAMA_8B_CONFIG

    from costsim.profiles import model_from_hf_config

    m = model_from_hf_config(hf_config({**LLAMA_8B_CONFIG, "quantization_config": quant}))
    assert (m.default_dtype, m.head_16bit) == (dtype, head_16bit)


def test_a_4bit_checkpoints_bytes_count_its_scales_and_its_16bit_head(hf_config):
    # Qwen3-32B-AWQ: 4 bits a weight plus a 16-bit scale and a 4-bit zero a group of 128 in the
    # decoder's linear layers; its embedding table and head (not tied) in BF16. The checkpoint's
    # tensors add up to 18.0 GiB (the published tensor list of Qwen/Qwen3-32B-AWQ).
    from costsim.profiles import model_from_hf_config

    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 25600,
           "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
           "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "float16", "quantization_config": AWQ}
    m = model_from_hf_config(hf_config(cfg))
    head = 2 * 151936 * 5120
    body = m.total_params_b * 1e9 - head
    assert weight_bytes(m, m.default_dtype) == pytest.approx(body * (4 + 20 / 128) / 8 + head * 2)
    assert weight_bytes(m, m.default_dtype) / 2**30 == pytest.approx(18.0, abs=0.05)
    # The head is read in BF16 every iteration: the decode step's weight bytes say so.
    from costsim import roofline

    dep = Deployment(m, load_device("h100"), 1, m.default_dtype)
    read = roofline.coefficients(dep).always_bytes
    assert read == pytest.approx((body) * (4 + 20 / 128) / 8 + 151936 * 5120 * 2)


def test_the_list_commands_print_json_as_show_does(capsys):
    # `hardware list --json` and `models list --json`: every profile, with the keys (and values)
    # `show --json` gives it, one vocabulary for both.
    import json

    from costsim.cli.main import main

    assert main(["hardware", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert set(listed) == {"devices", "engines", "apis"} and "h20" in listed["devices"] and "vllm" in listed["engines"]
    assert main(["hardware", "show", "h20", "--json"]) == 0
    assert listed["devices"]["h20"] == json.loads(capsys.readouterr().out)
    assert main(["models", "list", "--json"]) == 0
    models = json.loads(capsys.readouterr().out)
    assert main(["models", "show", "llama-3.1-8b", "--json"]) == 0
    assert models["llama-3.1-8b"] == json.loads(capsys.readouterr().out)


def test_a_profile_field_by_its_retired_name_is_read_with_a_warning(tmp_path):
    """Before 2026-12-02 a device's bandwidths were *_gbps (which reads as gigabits) and its
    price price_per_hour_usd: a user's TOML with those names is read, with a warning, for one release."""
    import warnings

    from costsim.profiles import load_device
    from costsim.profiles.types import RENAMED_FIELDS

    text = (ROOT / "hardware" / "h100-sxm.toml").read_text(encoding="utf-8")
    for old, new in RENAMED_FIELDS.items():
        text = text.replace(new, old)
    p = tmp_path / "old.toml"
    p.write_text(text.replace('name = "h100-sxm"', 'name = "old-h100"'))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = load_device(str(p))
    new = load_device("h100-sxm")
    assert (d.hbm_bandwidth_gb_per_s, d.usd_per_gpu_hour, d.price_source) == (new.hbm_bandwidth_gb_per_s, new.usd_per_gpu_hour,
                                                                               new.price_source)
    assert sorted(str(w.message).split(": ")[1].split(" ")[0] for w in caught) == sorted(RENAMED_FIELDS)
    both = tmp_path / "both.toml"
    both.write_text(text.replace("hbm_bandwidth_gbps", "hbm_bandwidth_gb_per_s = 1\nhbm_bandwidth_gbps", 1))
    with pytest.raises(ProfileError, match="one field"):
        load_device(str(both))

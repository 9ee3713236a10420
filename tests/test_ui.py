"""`costsim ui`: the what-if page's server answers with the API's own numbers, refuses bad input
in costsim's one line, and the page, driven in a real (headless) Chromium, shows those numbers
as its slider moves."""

import http.client
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import types
from pathlib import Path

import pytest

from costsim import api
from costsim.cli.main import main
from costsim.ui import MAX_BODY_BYTES, Server

CHROMIUM = "/usr/bin/chromium"
#: Chromium's flags here: headless, and none of its own connections (this network refuses them).
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server():
    s = api.ui_server("127.0.0.1", 0)
    t = threading.Thread(target=s.serve_forever, daemon=True)
    t.start()
    yield s
    s.shutdown()
    t.join(5)
    assert not t.is_alive()


def request(server, method, path, body=None, headers=None):
    """``(status, headers, parsed JSON or text)`` of one request to ``server``."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        raw = r.read().decode("utf-8")
        ctype = r.getheader("Content-Type", "")
        return r.status, r, json.loads(raw) if ctype.startswith("application/json") else raw
    finally:
        conn.close()


def post_plan(server, obj, **headers):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return request(server, "POST", "/api/plan", body, {"Content-Type": "application/json", **headers})


def message_of(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as e:
        fn(*args, **kwargs)
    return str(e.value)


# --- the server, without a browser -----------------------------------------------------------------------


def test_predict_answers_what_the_api_answers(server):
    status, r, body = request(server, "GET", "/api/predict?p_accept=0.8&K=6")
    assert status == 200 and r.getheader("Content-Type") == "application/json; charset=utf-8"
    want = api.predict(0.8, 6).to_dict()
    assert body == want
    assert body["L"] == want["L"] and body["R"] == want["R"] and 0 < body["L"] < 2
    # the other fields, an empty one being "not given" (kappa from the roofline)
    _, _, body = request(server, "GET", "/api/predict?p_accept=0.35&K=4&kappa=0.3&strong_device=h200&weak_device=l40s&engine=sglang"
                                        "&strong=qwen3-235b-a22b&weak=qwen3-8b")
    assert body == api.predict(0.35, 4, kappa=0.3, strong_device="h200", weak_device="l40s", engine="sglang",
                               strong="qwen3-235b-a22b", weak="qwen3-8b").to_dict()
    assert body["kappa"] == 0.3 and body["L"] != want["L"]
    _, _, body = request(server, "GET", "/api/predict?p_accept=0.8&K=6&kappa=&strong=")
    assert body == want


def test_bad_input_is_400_with_costsims_one_line(server):
    status, _, body = request(server, "GET", "/api/predict?p_accept=2&K=6")
    assert status == 400 and body == {"error": message_of(api.predict, 2.0, 6)}
    assert body["error"] == "--p-accept must be in [0, 1], got 2.0"
    status, _, body = request(server, "GET", "/api/predict?p_accept=0.8&strong_device=rtx-5090")
    assert status == 400 and body["error"] == message_of(api.predict, 0.8, strong_device="rtx-5090")
    cases = {"p_accept=abc": "p_accept: expected a number, got 'abc'", "p_accept=0.8&K=6.5": "K: expected an integer, got '6.5'",
             "K=6": "p_accept is required", "p_accept=0.8&colour=red": "unknown parameter 'colour'",
             "p_accept=0.8&p_accept=0.5": "p_accept is given 2 times",
             "p_accept=0.8&strong=/etc/passwd": "strong: '/etc/passwd' is not a shipped model profile",
             "p_accept=0.8&strong_device=h20.toml": "strong_device: 'h20.toml' is not a shipped device profile",
             "p_accept=nan": "--p-accept must be in [0, 1], got nan", "p_accept=0.8&K=0": "--K must be an integer in [1, 1024]"}
    for query, start in cases.items():
        status, _, body = request(server, "GET", "/api/predict?" + query)
        assert status == 400 and set(body) == {"error"} and body["error"].startswith(start), (query, body)
        assert "Traceback" not in body["error"] and "\n" not in body["error"]


def test_unknown_paths_are_404_and_wrong_methods_405(server):
    for path in ("/nope", "/api/predictx", "/api/", "/static/app.js", "/favicon.ico"):
        status, _, body = request(server, "GET", path)
        assert status == 404 and body == {"error": f"not found: {path}"}
    status, r, body = request(server, "GET", "/api/plan")
    assert status == 405 and r.getheader("Allow") == "POST" and "GET is not allowed" in body["error"]
    status, r, _ = request(server, "POST", "/api/predict?p_accept=0.8", b"{}", {"Content-Type": "application/json"})
    assert status == 405 and r.getheader("Allow") == "GET"
    assert request(server, "DELETE", "/")[0] == 405
    assert request(server, "GET", "/?x=1")[0] == 400
    assert request(server, "GET", "/api/options?x=1")[0] == 400


#: An external reference in HTML or CSS: a src, href or action to http(s) or protocol-relative, a url(...) or an @import.
EXTERNAL = re.compile(r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//)|url\(\s*["']?\s*(?:https?:)?//|@import""",
                      re.I)


def test_the_page_references_nothing_outside_this_server(server):
    status, r, html = request(server, "GET", "/")
    assert status == 200 and r.getheader("Content-Type") == "text/html; charset=utf-8"
    assert "<script" in html and "/api/predict" in html and "/api/plan" in html
    assert not EXTERNAL.findall(html)
    assert not re.findall(r"""fetch\(\s*["'`](?!/api/)""", html)  # it calls only this server's endpoints
    assert "default-src 'none'" in r.getheader("Content-Security-Policy")  # and the browser holds it to that
    planted = html.replace("<head>", '<head><script src="https://cdn.example/x.js"></script>'
                                     '<link rel="stylesheet" href="//fonts.example/css">')
    assert len(EXTERNAL.findall(planted)) == 2
    assert request(server, "HEAD", "/")[0] == 200


def test_options_are_the_shipped_names_and_the_defaults(server):
    status, _, body = request(server, "GET", "/api/options")
    assert status == 200
    assert body["models"] == list(api.models().data)
    hw = api.hardware().to_dict()
    assert [d["name"] for d in body["devices"]] == list(hw["devices"])
    assert body["devices"][0]["usd_per_gpu_hour"] == hw["devices"][body["devices"][0]["name"]]["usd_per_gpu_hour"]
    assert body["engines"] == list(hw["engines"])
    assert body["defaults"]["K"] == api.predict(0.8).to_dict()["K"] == 6
    assert body["defaults"]["plan_devices"] == ["h20", "h100-sxm", "h200", "b200"]


def test_plan_answers_what_the_api_answers(server):
    obj = {"task_rate": 1, "latency_p95": 90, "p_accept": 0.7, "devices": ["b200"], "price": ["b200=5"],
           "strong": None, "weak": "qwen3.5-4b", "engine": "vllm"}
    status, _, body = post_plan(server, obj)
    assert status == 200
    want = api.plan(1.0, latency_p95=90.0, devices="b200", price=["b200=5"], p_accept=0.7, weak="qwen3.5-4b",
                    engine="vllm").to_dict()
    assert body.pop("elapsed_s") > 0 and want.pop("elapsed_s") > 0  # the only number that differs run to run
    assert body == want
    assert body["prices"]["b200"]["usd_per_gpu_hour"] == 5.0 and body["recommended"]["simulated"]["cost_per_1k_tasks_usd"] > 0


def test_plans_bad_input_is_refused(server):
    ok = {"task_rate": 1, "devices": ["b200"]}
    cases = [({**ok, "price": ["h100=2.5"]}, 400, message_of(api.plan, 1.0, devices="b200", price=["h100=2.5"])),
             ({**ok, "price": ["b200=-1"]}, 400, message_of(api.plan, 1.0, devices="b200", price=["b200=-1"])),
             ({**ok, "task_rate": -1}, 400, message_of(api.plan, -1.0, devices="b200")),
             ({**ok, "colour": 1}, 400, "unknown parameter 'colour'"), ({"devices": ["b200"]}, 400, "task_rate is required"),
             ({**ok, "task_rate": "fast"}, 400, "task_rate: expected a number, got 'fast'"),
             ({**ok, "task_rate": True}, 400, "task_rate: expected a number"),
             ({**ok, "devices": "b200"}, 400, "devices: expected a list of names"),
             ({**ok, "devices": []}, 400, "devices: choose at least one device"),
             ({**ok, "devices": ["../../etc/passwd"]}, 400, "devices: '../../etc/passwd' is not a shipped device profile"),
             ([1, 2], 400, "expected a JSON object"), (b"{not json", 400, "the body is not valid JSON"),
             (b"x" * (MAX_BODY_BYTES + 1), 413, f"the body is {MAX_BODY_BYTES + 1:,} bytes; at most {MAX_BODY_BYTES:,}")]
    for obj, code, start in cases:
        status, _, body = post_plan(server, obj)
        assert status == code and body["error"].startswith(start), (obj if not isinstance(obj, bytes) else obj[:20], body)
    status, _, body = request(server, "POST", "/api/plan", b'{"task_rate": 1}', {"Content-Type": "text/plain"})
    assert status == 415 and body["error"] == "expected Content-Type: application/json"


def test_a_page_of_another_site_is_refused(server):
    # DNS rebinding (another name resolving to 127.0.0.1) and a cross-site POST
    status, _, body = request(server, "GET", "/api/predict?p_accept=0.8", headers={"Host": f"evil.example:{server.port}"})
    assert status == 403 and "addressed to this machine" in body["error"]
    status, _, body = post_plan(server, {"task_rate": 1}, Origin="http://evil.example")
    assert status == 403 and "another site" in body["error"]
    assert request(server, "GET", "/api/options", headers={"Host": f"localhost:{server.port}"})[0] == 200


def test_one_plan_at_a_time():
    started, release = threading.Event(), threading.Event()

    def plan(task_rate, **kw):
        started.set()
        assert release.wait(30)
        return api.Result({"task_rate_per_s": task_rate})
    fake = types.SimpleNamespace(plan=plan, hardware=api.hardware, models=api.models, INPUT_ERRORS=api.INPUT_ERRORS)
    with Server("127.0.0.1", 0, api=fake) as s:
        threading.Thread(target=s.serve_forever, daemon=True).start()
        first = {}
        t = threading.Thread(target=lambda: first.update(r=post_plan(s, {"task_rate": 2})))
        t.start()
        assert started.wait(30)
        status, _, body = post_plan(s, {"task_rate": 3})
        assert status == 409 and body == {"error": "a plan is already running: wait for it to finish"}
        release.set()
        t.join(30)
        assert first["r"][0] == 200 and first["r"][2] == {"task_rate_per_s": 2.0}
        assert post_plan(s, {"task_rate": 3})[2] == {"task_rate_per_s": 3.0}  # free again


def test_a_bug_is_one_line_500_not_a_traceback(capsys):
    def predict(**kw):
        raise KeyError("boom")
    fake = types.SimpleNamespace(predict=predict, INPUT_ERRORS=())
    with Server("127.0.0.1", 0, api=fake) as s:
        threading.Thread(target=s.serve_forever, daemon=True).start()
        status, _, body = request(s, "GET", "/api/predict?p_accept=0.5")
    assert status == 500 and body == {"error": "internal error (KeyError: 'boom')"}
    assert capsys.readouterr().err == "costsim: warning: ui: /api/predict: KeyError: 'boom'\n"


def test_a_number_too_large_or_a_body_nested_too_deeply_is_400_not_a_bug(server, capsys):
    status, _, body = post_plan(server, b'{"task_rate": 1' + b"0" * 400 + b"}")  # float() overflows
    assert status == 400 and body["error"].startswith("task_rate: '1000") and body["error"].endswith("is too large a number")
    status, _, body = post_plan(server, b"[" * 30_000 + b"]" * 30_000)  # json.loads recurses too deeply
    assert status == 400 and body == {"error": "the body is not valid JSON (nested too deeply)"}
    status, _, body = post_plan(server, {"task_rate": 1, "latency_p95": [[[[[[[[]]]]]]]]})
    assert status == 400 and body["error"].startswith("latency_p95: expected a number, got '[[[[")
    assert capsys.readouterr().err == ""  # bad input, not a bug: nothing on the terminal


# --- the server against clients that send too slowly, too many, or ambiguously -------------------------------


def _serving(api_=api, **handler):
    """A :class:`Server` of its own, serving in a thread, its handler's attributes set from ``handler``
    (``request_deadline``, ``idle_timeout``: short ones, so that a test need not wait 10 s)."""
    s = Server("127.0.0.1", 0, api=api_)
    for k, v in handler.items():
        setattr(s.httpd.RequestHandlerClass, k, v)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s


def _raw(port, data: bytes = b"", timeout: float = 10):
    """A socket to the server that has sent ``data``."""
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if data:
        c.sendall(data)
    return c


def _read_all(c) -> bytes:
    """What the server sends until it closes the connection (a timeout fails the test)."""
    out = b""
    while True:
        try:
            chunk = c.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def _response(raw: bytes):
    """``(status, headers (lower-case names), parsed JSON body)`` of one raw HTTP response."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.setdefault(k.strip().lower(), []).append(v.strip())
    assert headers["content-type"] == ["application/json; charset=utf-8"], raw[:300]
    return int(lines[0].split()[1]), headers, json.loads(body[:int(headers["content-length"][0])])


def test_a_request_has_a_deadline_to_arrive_not_a_timeout_per_read():
    s = _serving(request_deadline=1.0, idle_timeout=1.0)
    try:
        # headers trickled in, a line every 0.3 s: each read is quick, the whole is not
        t0 = time.monotonic()
        c = _raw(s.port, b"GET /api/options HTTP/1.1\r\n")
        got = b""
        for i in range(20):
            try:
                c.sendall(f"X-Slow-{i}: 1\r\n".encode())
            except OSError:  # closed by the server
                break
            time.sleep(0.3)
            c.setblocking(False)
            try:
                got += c.recv(65536)
            except BlockingIOError:
                pass
            except ConnectionResetError:
                break
            finally:
                c.setblocking(True)
            if got:
                break
        held = time.monotonic() - t0
        c.close()
        assert held < 3, f"held {held:.1f} s past a 1 s deadline"
        status, headers, body = _response(got)
        assert status == 408 and headers["connection"] == ["close"]
        assert body == {"error": "the request did not arrive in full within 1 s"}

        # a Content-Length larger than the body sent
        t0 = time.monotonic()
        c = _raw(s.port, f"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: 100\r\n\r\n{{}}".encode())
        status, _, body = _response(_read_all(c))
        c.close()
        assert status == 408 and time.monotonic() - t0 < 3

        # an idle connection, new or kept alive after an answer, is closed
        c = _raw(s.port)
        t0 = time.monotonic()
        assert _read_all(c) == b"" and 0.5 < time.monotonic() - t0 < 3
        c.close()
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        conn.request("GET", "/api/options")
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Connection") is None  # kept alive
        r.read()
        t0 = time.monotonic()
        assert _read_all(conn.sock) == b"" and time.monotonic() - t0 < 3
        conn.close()
    finally:
        s.shutdown()


def test_the_deadline_is_for_receiving_a_request_not_for_computing_its_answer():
    def plan(task_rate, **kw):
        time.sleep(1.5)  # longer than the deadline below
        return api.Result({"task_rate_per_s": task_rate})
    fake = types.SimpleNamespace(plan=plan, hardware=api.hardware, models=api.models, INPUT_ERRORS=api.INPUT_ERRORS)
    s = _serving(fake, request_deadline=0.5, idle_timeout=0.5)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        conn.request("POST", "/api/plan", b'{"task_rate": 2}', {"Content-Type": "application/json"})
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read()) == {"task_rate_per_s": 2.0}
        conn.request("GET", "/api/options")  # the same connection, a new request: a deadline of its own
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        s.shutdown()


def test_connections_beyond_the_bound_are_refused_with_503_and_threads_stay_bounded():
    bound = 32  # costsim.ui.MAX_CONNECTIONS
    s = _serving()
    held = []
    try:
        before = threading.active_count()
        for _ in range(bound):  # half-sent requests, each holding a thread until its deadline
            held.append(_raw(s.port, b"GET /api/options HTTP/1.1\r\nHost: "))
        for _ in range(50):
            if threading.active_count() - before >= bound:
                break
            time.sleep(0.05)
        extra = [_raw(s.port) for _ in range(8)]
        for c in extra:  # refused at once, before reading anything
            status, headers, body = _response(_read_all(c))
            c.close()
            assert status == 503 and headers["connection"] == ["close"] and headers["retry-after"] == ["1"]
            assert body == {"error": "the server is busy: too many connections; try again"}
        assert threading.active_count() - before <= bound
        for c in held:
            c.close()
        held.clear()
        for _ in range(100):  # the slots come back as the threads end
            if threading.active_count() <= before:
                break
            time.sleep(0.05)
        assert request(s, "GET", "/api/options")[0] == 200
        from costsim.ui import MAX_CONNECTIONS
        assert MAX_CONNECTIONS == s.httpd.max_connections == bound
    finally:
        for c in held:
            c.close()
        s.shutdown()


def test_http_servers_own_refusals_are_json_and_ambiguous_headers_refused(server):
    port = server.port
    host = f"Host: 127.0.0.1:{port}\r\n"
    cases = [(b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "the request line is longer than 65,536 bytes"),
             (f"GET / HTTP/1.1\r\n{host}X-Long: {'a' * 70_000}\r\n\r\n".encode(), 431,
              "Line too long: got more than 65536 bytes when reading header line"),
             (f"GET / HTTP/1.1\r\n{host}".encode() + b"X-A: 1\r\n" * 101 + b"\r\n", 431,
              "Too many headers: got more than 100 headers"),
             (b"GET / HTTP/9.9\r\n\r\n", 505, "Invalid HTTP version (9.9)"),
             (b"GET / HTTP/1.1 x\r\n\r\n", 400, "Bad request version ('x')"),
             (f"BREW /api/options HTTP/1.1\r\n{host}\r\n".encode(), 501, "Unsupported method ('BREW')"),
             # two Host headers: the first would pass the DNS-rebinding check, the second be what a proxy read
             (f"GET /api/options HTTP/1.1\r\n{host}Host: evil.example\r\n\r\n".encode(), 400,
              "the Host header is given 2 times"),
             # two Content-Lengths: the first would win, and the server wait for a body that never comes
             (f"POST /api/plan HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: 5\r\n"
              f"Content-Length: 100\r\n\r\n{{}}   ".encode(), 400, "the Content-Length header is given 2 times"),
             (f"POST /api/plan HTTP/1.1\r\n{host}Content-Type: application/json\r\nContent-Length: +5\r\n\r\n{{}}   ".encode(),
              400, "Content-Length: expected a number of bytes, got '+5'")]
    for raw, code, error in cases:
        t0 = time.monotonic()
        c = _raw(port, raw)
        status, headers, body = _response(_read_all(c))
        c.close()
        assert (status, body) == (code, {"error": error}), (raw[:60], status, body)
        assert headers["connection"] == ["close"] and time.monotonic() - t0 < 5


def test_the_server_binds_loopback_unless_told_and_refuses_a_bad_port():
    with api.ui_server() as s:
        assert s.loopback and s.url == f"http://127.0.0.1:{s.port}/" and s.port > 0
    with api.ui_server("0.0.0.0", 0) as s:
        assert not s.loopback and s.url == f"http://127.0.0.1:{s.port}/"
    with pytest.raises(ValueError, match=r"--port must be an integer in \[0, 65535\]"):
        api.ui_server(port=70000)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValueError, match=f"--host 127.0.0.1 --port {port}: cannot listen there"):
            api.ui_server(port=port)


def test_the_cli_refuses_a_port_in_use_in_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--port", str(port), "--no-open"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costsim: error: --host 127.0.0.1 --port {port}: cannot listen there (") and err.count("\n") == 1


def test_open_browser_never_fails(monkeypatch):
    import webbrowser

    opened = []

    class Graphical(webbrowser.BaseBrowser):
        def open(self, url, new=0, autoraise=True):
            opened.append(url)
            return True
    with api.ui_server() as s:
        monkeypatch.setattr(webbrowser, "get", lambda *a: (_ for _ in ()).throw(webbrowser.Error("none")))
        assert s.open_browser() is False
        monkeypatch.setattr(webbrowser, "get", lambda *a: webbrowser.GenericBrowser("lynx"))  # would take the terminal
        assert s.open_browser() is False
        monkeypatch.setattr(webbrowser, "get", lambda *a: Graphical())
        assert s.open_browser() is True
        for _ in range(100):
            if opened:
                break
            time.sleep(0.01)
        assert opened == [s.url]


def _start_cli(*args):
    """``costsim ui --no-open ARGS`` in a process of its own, Ctrl-C reaching it as from a terminal."""
    from conftest import costsim_argv

    p = subprocess.Popen([*costsim_argv(), "ui", "--no-open", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    line = p.stdout.readline()
    m = re.fullmatch(r"costsim ui: (http://127\.0\.0\.1:(\d+)/)  \(Ctrl-C stops it\)\n", line)
    assert m, (line, p.stderr.read() if p.poll() is not None else "")
    return p, m.group(1), int(m.group(2))


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_costsim_ui_prints_its_url_serves_and_stops_on_ctrl_c_in_one_line(host):
    p, url, port = _start_cli("--host", host)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/predict?p_accept=0.8&K=6")
        assert json.loads(conn.getresponse().read())["L"] == api.predict(0.8, 6)["L"]
        conn.close()
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    lines = err.splitlines()
    assert p.returncode == 130 and lines[-1] == "costsim: interrupted" and "Traceback" not in err
    if host == "0.0.0.0":
        assert lines == [f"costsim: warning: --host 0.0.0.0: the page is served beyond this machine and has no "
                         f"authentication: anyone who reaches port {port} can use it", "costsim: interrupted"]
    else:
        assert lines == ["costsim: interrupted"]


# --- the page, in a real browser ------------------------------------------------------------------------------


def _browser_or_skip():
    if not Path(CHROMIUM).exists() or not shutil.which(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium): the page is not driven in a browser")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                   "(pip install playwright==1.63.0; its browsers are not needed)")
    return sync_api.sync_playwright


@pytest.fixture(scope="module")
def browser():
    sync_playwright = _browser_or_skip()
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _page(browser, errors: list):
    """A new page whose script errors (and console errors but the 400s a test asks for) go to ``errors``."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "status of 400" not in m.text else None)
    return page


def test_the_page_shows_the_apis_numbers_as_the_slider_moves(server, browser):
    errors = []
    page = _page(browser, errors)
    try:
        page.goto(server.url)
        page.wait_for_selector("#predict[data-state=ok][data-p='0.8']")
        first = api.predict(0.8, 6)
        before = page.text_content("#L"), page.text_content("#R")
        assert before == (f"{first['L']:.3f}", f"{first['R']:.3f}")
        assert page.text_content("#verdict") == first["verdict"]

        page.fill("#p", "0.35")  # the range input: its value set and 'input' dispatched
        page.wait_for_selector("#predict[data-state=ok][data-p='0.35']")
        now = api.predict(0.35, 6)
        shown = page.text_content("#L"), page.text_content("#R")
        assert shown == (f"{now['L']:.3f}", f"{now['R']:.3f}") and shown != before
        assert page.input_value("#p-num") == "0.35"
        assert page.text_content("#best_K") == str(now["best_K"])
        assert page.text_content("#break_even_kappa") == f"{now['break_even_kappa']:.3f}"
        assert page.text_content("#kappa-out") == f"{now['kappa']:.3f}"

        # a burst of moves: what stays shown is the last one's answer, not a stale one
        for p in ("0.1", "0.5", "0.95", "0.62"):
            page.fill("#p", p)
        page.wait_for_selector("#predict[data-state=ok][data-p='0.62']")
        last = api.predict(0.62, 6)
        assert (page.text_content("#L"), page.text_content("#R")) == (f"{last['L']:.3f}", f"{last['R']:.3f}")

        # K by its number field, kappa given
        page.fill("#K-num", "3")
        page.fill("#kappa", "0.2")
        page.wait_for_selector("#predict[data-state=ok]")
        given = api.predict(0.62, 3, kappa=0.2)
        assert page.text_content("#L") == f"{given['L']:.3f}" and page.text_content("#kappa-src") == "given"
        assert page.input_value("#K") == "3"

        # costsim's error, shown on the page
        page.fill("#kappa", "")
        page.select_option("#strong_device", "rtx-5090")
        page.wait_for_selector("#predict[data-state=error]")
        assert page.text_content("#predict-error") == message_of(api.predict, 0.62, 3, strong_device="rtx-5090")
        page.select_option("#strong_device", "")
        page.wait_for_selector("#predict[data-state=ok]")
        assert page.is_hidden("#predict-error")

        # plan: running shown, a second click refused politely, then the server's answer shown
        with page.expect_response("**/api/plan", timeout=120_000) as answer:
            page.click("#run-plan")
            page.click("#run-plan")
            assert page.text_content("#plan-notice") == "A plan is already running: wait for it to finish."
            assert "running" in page.text_content("#plan-status")
        page.wait_for_selector("#plan[data-state=ok]")
        r = answer.value.json()
        assert answer.value.request.post_data_json["p_accept"] == 0.62
        rec = page.text_content("#plan-recommended")
        if r["recommended"]:
            m = r["recommended"]["simulated"]
            assert f"USD {m['cost_per_1k_tasks_usd']:.3f}" in rec and f"p95 {m['latency_p95_s']:.1f} s" in rec
        else:
            assert rec == f"No recommendation: {r['why']}"
        assert page.locator("#front tbody tr").count() == len(r["front"]) > 0
        assert page.locator("#front-svg circle.pt").count() >= len(r["front"])
        assert page.is_hidden("#plan-notice")
    finally:
        page.close()
    assert not errors, errors


def _late_at(p: float, late_s: float = 1.5):
    """The API, its predict answering ``late_s`` late for p_u = ``p``."""
    def predict(p_accept, **kw):
        if p_accept == p:
            time.sleep(late_s)
        return api.predict(p_accept, **kw)
    return types.SimpleNamespace(predict=predict, hardware=api.hardware, models=api.models, INPUT_ERRORS=api.INPUT_ERRORS)


def test_a_late_answer_for_earlier_inputs_is_never_shown(browser):
    # The answer for p_u = 0.1 comes 1.5 s late, after the one for 0.62 (asked for later) is shown.
    fake = _late_at(0.1)
    errors = []
    with Server("127.0.0.1", 0, api=fake) as s:
        threading.Thread(target=s.serve_forever, daemon=True).start()
        page = _page(browser, errors)
        try:
            page.goto(s.url)
            page.wait_for_selector("#predict[data-state=ok][data-p='0.8']")
            page.fill("#p", "0.1")
            page.wait_for_timeout(400)  # past the debounce: the request for 0.1 is on its way
            assert page.get_attribute("#predict", "data-state") == "pending"
            page.fill("#p", "0.62")
            page.wait_for_selector("#predict[data-state=ok][data-p='0.62']")
            page.wait_for_timeout(1800)  # the late answer has come (and gone)
            want = api.predict(0.62, 6)
            assert page.get_attribute("#predict", "data-p") == "0.62"
            assert (page.text_content("#L"), page.text_content("#R")) == (f"{want['L']:.3f}", f"{want['R']:.3f}")
        finally:
            page.close()
    assert not errors, errors


def test_a_late_answer_is_dropped_even_where_its_request_cannot_be_cancelled(browser):
    # The stale-answer guard on its own: this page's abort() does nothing, so the answer for p_u = 0.1,
    # 1.5 s late, does reach the page after the one for 0.62 is shown; the page must still not show it.
    fake = _late_at(0.1)
    errors, late = [], []
    with Server("127.0.0.1", 0, api=fake) as s:
        threading.Thread(target=s.serve_forever, daemon=True).start()
        page = _page(browser, errors)
        page.add_init_script("AbortController.prototype.abort = function () {};")
        page.on("requestfinished", lambda r: late.append(r.url) if "p_accept=0.1&" in r.url else None)
        try:
            page.goto(s.url)
            page.wait_for_selector("#predict[data-state=ok][data-p='0.8']")
            page.fill("#p", "0.1")
            page.wait_for_timeout(400)  # past the debounce: the request for 0.1 is on its way
            page.fill("#p", "0.62")
            page.wait_for_selector("#predict[data-state=ok][data-p='0.62']")
            assert not late  # 0.62's answer came first
            for _ in range(100):
                if late:
                    break
                page.wait_for_timeout(50)
            assert late, "the late answer was cancelled after all: this test would not hold the guard"
            page.wait_for_timeout(300)  # the page has read it (and dropped it)
            want = api.predict(0.62, 6)
            assert page.get_attribute("#predict", "data-p") == "0.62"
            assert (page.text_content("#L"), page.text_content("#R")) == (f"{want['L']:.3f}", f"{want['R']:.3f}")
        finally:
            page.close()
    assert not errors, errors


def test_the_page_shows_a_confirmations_note_and_the_plans_own_fleet_words(browser):
    # What the page shows of a plan is the plan's: a confirmation's "note" (a run too short to be steady)
    # next to it, none where it is null, and each point's "fleet" as it is (a confirmation's simulated one).
    base = api.plan(1.0, devices="b200", price=["b200=5"]).to_dict()
    assert base["recommended"] and len(base["confirmed"]) >= 2 and base["front"]
    given = json.loads(json.dumps(base))
    for i, c in enumerate(given["confirmed"]):
        c["simulated"].update(steady=False, note=f"note {i}: the core's sentence", fleet=f"simulated fleet {i}, in the core's words")
    given["recommended"]["simulated"].update(note="the recommended's note", fleet="the recommended fleet")
    for i, p in enumerate(given["front"]):
        p["fleet"] = f"front fleet {i}, in the core's words"
    answers = [given, base]

    def plan(task_rate, **kw):
        return api.Result(answers.pop(0))
    fake = types.SimpleNamespace(predict=api.predict, plan=plan, hardware=api.hardware, models=api.models,
                                 INPUT_ERRORS=api.INPUT_ERRORS)
    errors = []
    with Server("127.0.0.1", 0, api=fake) as s:
        threading.Thread(target=s.serve_forever, daemon=True).start()
        page = _page(browser, errors)
        try:
            page.goto(s.url)
            page.wait_for_selector("#predict[data-state=ok]")
            page.click("#run-plan")
            page.wait_for_selector("#plan[data-state=ok]")
            rows = page.locator("#confirmed tbody tr")
            assert rows.count() == len(given["confirmed"])
            for i in range(rows.count()):
                cells = rows.nth(i).locator("td")
                assert cells.nth(1).text_content() == f"simulated fleet {i}, in the core's words"
                assert cells.last.locator(".caveat").text_content() == f"note {i}: the core's sentence"
            assert page.text_content("#plan-recommended-note") == "the recommended's note"
            assert "the recommended fleet: " in page.text_content("#plan-recommended")
            fleets = page.locator("#front tbody tr td:last-child").all_text_contents()
            assert fleets == [f"front fleet {i}, in the core's words" for i in range(len(given["front"]))]

            page.fill("#task_rate", "1.5")  # the plan again: the core's own answer
            page.click("#run-plan")
            page.wait_for_selector("#plan-status:has-text('done')")
            page.wait_for_function("!document.querySelector('#plan-recommended-note')")
            notes = [c["simulated"]["note"] for c in base["confirmed"] if c["simulated"]["note"] is not None]
            assert page.locator("#confirmed .caveat").all_text_contents() == notes  # none where steady
            assert page.locator("#front tbody tr td:last-child").all_text_contents() == [p["fleet"] for p in base["front"]]
            assert [rows.nth(i).locator("td").nth(1).text_content() for i in range(rows.count())] == \
                [c["simulated"]["fleet"] for c in base["confirmed"]]
        finally:
            page.close()
    assert not errors, errors


def test_the_docs_quote_the_servers_limits():
    from costsim import ui

    root = Path(__file__).resolve().parents[1]
    docs, readme = (root / "docs/api.md").read_text(), (root / "README.md").read_text()
    deadline, idle, bound = f"{ui.REQUEST_DEADLINE_S:g} s", f"{ui.IDLE_TIMEOUT_S:g} s", str(ui.MAX_CONNECTIONS)
    assert f"in full {deadline} after its first byte (408" in docs and f"closed after {idle}" in docs
    assert f"beyond the {bound} served at once (503" in docs
    assert f"a request has {deadline} to arrive, at most {bound} connections" in readme

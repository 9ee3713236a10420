"""`costsim ui`: a what-if page served on this machine.

One HTML page (``page.html`` beside this file: inline CSS and vanilla JavaScript, no external
reference) and three JSON endpoints, served by the standard library's
:class:`http.server.ThreadingHTTPServer`:

- ``GET /api/options``: the shipped model, device and engine names and the defaults the page
  starts from (from ``api.models()``, ``api.hardware()`` and :mod:`costsim.config`);
- ``GET /api/predict?p_accept=0.8&K=6[&kappa=..&strong=..&weak=..&strong_device=..&weak_device=..&engine=..]``:
  ``api.predict(...).to_dict()``, what ``costsim predict --json`` prints;
- ``POST /api/plan`` with a JSON object (``task_rate`` in tasks/s, ``latency_p95`` in s,
  ``p_accept``, ``strong``, ``weak``, ``engine``, ``devices``: a list of names, ``price``: a list
  of ``"DEVICE=USD"`` as ``api.plan`` takes them): ``api.plan(...).to_dict()``, one plan at a time.

The page holds no formula: every number it shows is one of these answers. The API is handed
in (:func:`costsim.api.ui_server` passes itself) rather than imported, so that this module and
the API do not import each other. Bad input is HTTP 400 with ``{"error": "<costsim's one
line>"}``, an unknown path 404; every refusal, http.server's own included (a request line or
header too long: 414, 431), is that JSON, and no traceback reaches the page. The models, devices and engines are the
shipped profiles' names only: a page without authentication reads no file named in a request.

A client cannot hold the server: a request has ``REQUEST_DEADLINE_S`` from its first byte to
arrive in full (request line, headers and body, however slowly they trickle in), a connection
waits ``IDLE_TIMEOUT_S`` for its next request, and at most ``MAX_CONNECTIONS`` are served at
once (one more is answered 503 and closed). The deadline is for receiving a request only: a plan
takes the seconds it takes.
"""

from __future__ import annotations

import io
import ipaddress
import json
import re
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from ..config import COMMANDS, DEPLOYMENTS, PLAN_SEARCH, SpecAgentOptions

#: The largest request body taken (a plan's inputs are a few hundred bytes).
MAX_BODY_BYTES = 64 * 1024
#: The longest text value taken (a profile name, a "DEVICE=USD" price).
MAX_TEXT = 200
#: Seconds a request has to arrive in full (request line, headers, body), from its first byte.
REQUEST_DEADLINE_S = 10.0
#: Seconds a connection waits for its next request (a new one, or one kept alive after an answer).
IDLE_TIMEOUT_S = 5.0
#: Seconds an answer has to be sent.
WRITE_TIMEOUT_S = 10.0
#: Connections served at once: one more is answered 503 and closed.
MAX_CONNECTIONS = 32
#: Request headers the server reads that a request may give once only.
SINGLE_HEADERS = ("Host", "Origin", "Content-Type", "Content-Length", "Transfer-Encoding")

#: predict's query parameters: name -> kind ("number", "integer", or the profiles a name is one of).
PREDICT_PARAMS = {"p_accept": "number", "K": "integer", "kappa": "number", "strong": "models", "weak": "models",
                  "strong_device": "devices", "weak_device": "devices", "engine": "engines"}
#: plan's body keys: name -> kind ("devices list": a list of device names, "prices": a list of "DEVICE=USD").
PLAN_PARAMS = {"task_rate": "number", "latency_p95": "number", "p_accept": "number", "strong": "models",
               "weak": "models", "engine": "engines", "devices": "devices list", "price": "prices"}

#: The page's Content-Security-Policy: nothing loads from anywhere but this server, and the page
#: calls only it.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class BadRequest(ValueError):
    """A request the page should not have sent: HTTP ``status`` with a one-line message."""

    def __init__(self, message: str, status: int = HTTPStatus.BAD_REQUEST):
        super().__init__(message)
        self.status = status


def page() -> bytes:
    """The HTML page, as shipped."""
    return resources.files(__package__).joinpath("page.html").read_bytes()


class Server:
    """The what-if page's server, listening once made: ``url``, :meth:`serve_forever` (until
    :meth:`shutdown` from another thread, or Ctrl-C), :meth:`shutdown`, :meth:`open_browser`;
    ``loopback``: whether only this machine can reach it. ``api``: :mod:`costsim.api` (or what
    stands for it: ``predict``, ``plan``, ``models``, ``hardware``, ``INPUT_ERRORS``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, api):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"--port must be an integer in [0, 65535], got {port!r}")
        if not host or not str(host).strip():
            raise ValueError("--host is empty")
        self.api = api
        self.plan_lock = threading.Lock()
        self._choices = None
        self._choices_lock = threading.Lock()
        self._serving = self._closed = False
        family = _family(host)
        handler = type("Handler", (_Handler,), {"app": self})
        http_server = type("HTTPServer", (_HTTPServer,), {"address_family": family})
        try:
            self.httpd = http_server((host, port), handler)
        except OSError as e:
            raise ValueError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
        addr, self.port = self.httpd.server_address[:2]
        self.host = host
        self.loopback = _is_loopback(addr)
        shown = f"[{addr}]" if family == socket.AF_INET6 else addr
        if addr in ("0.0.0.0", "::"):  # every address: the URL names this machine
            shown = "127.0.0.1" if family == socket.AF_INET else "[::1]"
        self.url = f"http://{shown}:{self.port}/"
        #: The Host headers a loopback server answers (DNS rebinding: a page of elsewhere that
        #: resolves its own name to 127.0.0.1 is refused).
        self.hosts = {f"{h}:{self.port}" for h in ("127.0.0.1", "localhost", "[::1]", shown)}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def serve_forever(self) -> None:
        """Answer requests until :meth:`shutdown` (from another thread) or an interrupt."""
        if self._closed:
            return
        self._serving = True
        try:
            self.httpd.serve_forever(poll_interval=0.2)
        finally:
            self.httpd.server_close()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (call it from another thread) and close the socket."""
        if self._closed:
            return
        self._closed = True
        if self._serving:
            self.httpd.shutdown()
        self.httpd.server_close()

    def open_browser(self) -> bool:
        """Open :attr:`url` in the user's graphical browser, where there is one; never fails.
        A console browser (lynx, w3m) is not started: it would take the terminal the server
        runs in. Returns whether a browser was asked to open it."""
        import webbrowser

        try:
            browser = webbrowser.get()
        except Exception:  # webbrowser.Error: none available
            return False
        if type(browser) is webbrowser.GenericBrowser:  # a console browser, run in the foreground
            return False
        threading.Thread(target=_open, args=(browser, self.url), daemon=True).start()
        return True

    # --- what the endpoints answer ----------------------------------------------------------------

    def choices(self) -> dict:
        """The shipped names the page offers, and the defaults it starts from (computed once)."""
        with self._choices_lock:
            if self._choices is None:
                hw = self.api.hardware().to_dict()
                devices = [{"name": n, "display_name": d.get("display_name", n), "memory_gb": d.get("memory_gb"),
                            "usd_per_gpu_hour": d.get("usd_per_gpu_hour"), "price_date": d.get("price_date")}
                           for n, d in hw["devices"].items()]
                self._choices = {
                    "models": list(self.api.models().data), "devices": devices, "engines": list(hw["engines"]),
                    "defaults": {"p_accept": COMMANDS.p_accept, "K": SpecAgentOptions.K, "strong": DEPLOYMENTS.strong,
                                 "weak": DEPLOYMENTS.weak, "device": DEPLOYMENTS.device, "engine": DEPLOYMENTS.engine,
                                 "latency_p95_s": COMMANDS.latency_p95_s, "plan_devices": list(PLAN_SEARCH.devices),
                                 "plan_Ks": list(PLAN_SEARCH.Ks)}}
            return self._choices

    def _names(self, kind: str) -> set:
        c = self.choices()
        return set(c["models"]) if kind == "models" else set(c["engines"]) if kind == "engines" else \
            {d["name"] for d in c["devices"]}

    def _name(self, key: str, value, kind: str) -> str:
        if not isinstance(value, str):
            raise BadRequest(f"{key}: expected a name, got {_short(value)}")
        if value not in self._names(kind):
            what = {"models": "model", "devices": "device", "engines": "engine"}[kind]
            raise BadRequest(f"{key}: {_short(value)} is not a shipped {what} profile (the page takes the names "
                             f"`costsim {'models' if kind == 'models' else 'hardware'} list` shows)")
        return value

    def predict_args(self, query: str) -> dict:
        """The keyword arguments of ``api.predict`` a query string gives: each parameter once,
        none unknown, numbers parsed, names shipped; an empty value is "not given"."""
        pairs = parse_qs(query, keep_blank_values=True)
        args = {}
        for key, values in pairs.items():
            if key not in PREDICT_PARAMS:
                raise BadRequest(f"unknown parameter {_short(key)} (predict takes {', '.join(PREDICT_PARAMS)})")
            if len(values) > 1:
                raise BadRequest(f"{key} is given {len(values)} times")
            text = values[0].strip()
            if not text:
                continue
            if len(text) > MAX_TEXT:
                raise BadRequest(f"{key}: longer than {MAX_TEXT} characters")
            kind = PREDICT_PARAMS[key]
            args[key] = (_number(key, text) if kind == "number" else _integer(key, text) if kind == "integer"
                         else self._name(key, text, kind))
        if "p_accept" not in args:
            raise BadRequest("p_accept is required (the per-step acceptance rate p_u, in [0, 1])")
        return args

    def plan_args(self, body: dict) -> dict:
        """The arguments of ``api.plan`` a request's JSON object gives (``task_rate`` first)."""
        if not isinstance(body, dict):
            raise BadRequest("expected a JSON object")
        unknown = [k for k in body if k not in PLAN_PARAMS]
        if unknown:
            raise BadRequest(f"unknown parameter {_short(unknown[0])} (plan takes {', '.join(PLAN_PARAMS)})")
        args = {}
        for key, value in body.items():
            kind = PLAN_PARAMS[key]
            if value is None or value == "":
                continue
            if kind == "number":
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise BadRequest(f"{key}: expected a number, got {_short(value)}")
                args[key] = _number(key, value)
            elif kind in ("devices list", "prices"):
                if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in value):
                    raise BadRequest(f"{key}: expected a list of names" if kind == "devices list"
                                     else f"{key}: expected a list of \"DEVICE=USD\"")
                args[key] = ([self._name(key, v, "devices") for v in value] if kind == "devices list" else list(value))
            else:
                args[key] = self._name(key, value, kind)
        if "task_rate" not in args:
            raise BadRequest("task_rate is required (tasks per second)")
        if "devices" in args:
            if not args["devices"]:
                raise BadRequest("devices: choose at least one device to search")
            args["devices"] = ",".join(args["devices"])
        return args

    def predict(self, query: str) -> dict:
        return self.api.predict(**self.predict_args(query)).to_dict()

    def plan(self, body: dict) -> dict:
        args = self.plan_args(body)
        if not self.plan_lock.acquire(blocking=False):
            raise BadRequest("a plan is already running: wait for it to finish", HTTPStatus.CONFLICT)
        try:
            return self.api.plan(args.pop("task_rate"), **args).to_dict()
        finally:
            self.plan_lock.release()


def _open(browser, url: str) -> None:
    try:
        browser.open(url)
    except Exception:  # no browser after all: the URL is printed
        pass


def _family(host: str) -> int:
    """The address family of ``host``: IPv6 for an IPv6 literal or a name that has only IPv6."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return socket.AF_INET  # the bind says why
    families = [i[0] for i in infos]
    return socket.AF_INET if socket.AF_INET in families else socket.AF_INET6 if families else socket.AF_INET


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_loopback
    except ValueError:
        return False


def _short(value) -> str:
    """``value`` quoted for a message, cut to a readable length."""
    try:
        text = value if isinstance(value, str) else json.dumps(value)
    except (ValueError, RecursionError):  # an int of too many digits, a list nested too deeply
        text = f"a {type(value).__name__}"
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _number(key: str, text) -> float:
    """``text`` (a query's text, or a JSON number) as a float; a number too large for one is bad input."""
    try:
        return float(text)
    except ValueError:
        raise BadRequest(f"{key}: expected a number, got {_short(text)}") from None
    except OverflowError:  # an integer beyond a float's range (JSON's 1 followed by 400 zeros)
        raise BadRequest(f"{key}: {_short(text)} is too large a number") from None


def _integer(key: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"{key}: expected an integer, got {_short(text)}") from None


#: The answer to a connection beyond MAX_CONNECTIONS (sent as it is accepted, before it is read).
BUSY = json.dumps({"error": "the server is busy: too many connections; try again"}).encode("utf-8")
BUSY_RESPONSE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
                 b"Content-Length: %d\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                 b"Retry-After: 1\r\nConnection: close\r\n\r\n%s" % (len(BUSY), BUSY))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    max_connections = MAX_CONNECTIONS

    def __init__(self, *args, **kwargs):
        #: A thread per connection, at most ``max_connections`` of them.
        self.slots = threading.BoundedSemaphore(self.max_connections)
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address):
        """A thread for the connection where a slot is free; else 503 at once, and closed."""
        if not self.slots.acquire(blocking=False):
            try:
                request.setblocking(False)  # the accepting thread never waits on a client
                request.send(BUSY_RESPONSE)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread: the slot is free again
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address):
        """A client that went away is nothing to report; anything else is one line, no traceback."""
        e = sys.exc_info()[1]
        if not isinstance(e, (ConnectionError, TimeoutError)):
            print(f"costsim: warning: ui: {type(e).__name__}: {e}", file=sys.stderr)


class _DeadlineReader(io.RawIOBase):
    """A socket's bytes, each read waiting at most until :attr:`deadline` (``time.monotonic()``):
    a socket timeout bounds one read, so a client sending a byte at a time would hold the
    connection for as long as it likes; a deadline bounds them all. :attr:`expired`: whether a
    read found it passed."""

    def __init__(self, sock: socket.socket):
        super().__init__()
        self._sock = sock
        self.deadline = time.monotonic()
        self.expired = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.expired = True
            raise TimeoutError("the deadline passed")
        self._sock.settimeout(left)
        try:
            return self._sock.recv_into(buffer)
        except TimeoutError:
            self.expired = True
            raise


class _Handler(BaseHTTPRequestHandler):
    """The endpoints; ``app``: the :class:`Server` (set on a subclass per server)."""

    app: Server
    server_version = "costsim-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = WRITE_TIMEOUT_S  # s: the socket's timeout while an answer is sent (reads have a deadline)
    idle_timeout = IDLE_TIMEOUT_S
    request_deadline = REQUEST_DEADLINE_S
    allow = ()

    def log_message(self, format, *args):  # quiet: the terminal shows the URL and nothing else
        pass

    # --- receiving a request, within its deadline ---------------------------------------------------

    def setup(self):
        super().setup()
        self.rfile.close()  # the socket's own file: replaced by one that reads against a deadline
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self):
        """Wait ``idle_timeout`` for a request, then give it ``request_deadline`` to arrive in
        full; one that does not is answered 408 (where nothing was answered yet) and closed."""
        reader = self._reader
        self._answered = False
        reader.deadline = time.monotonic() + self.idle_timeout
        try:
            if not self.rfile.peek(1):  # the client closed the connection
                self.close_connection = True
                return
        except OSError:  # idle too long (TimeoutError), or gone
            self.close_connection = True
            return
        reader.deadline, reader.expired = time.monotonic() + self.request_deadline, False
        self.command, self.request_version, self.requestline = None, "", ""  # none of the last request's
        super().handle_one_request()
        if reader.expired:
            self.close_connection = True
            if not self._answered:
                try:
                    self.send_error(HTTPStatus.REQUEST_TIMEOUT,
                                    f"the request did not arrive in full within {self.request_deadline:g} s")
                except OSError:
                    pass

    def parse_request(self) -> bool:
        """http.server's parse, then a refusal of a header the server reads given twice (two
        Host headers, two Content-Lengths: which one holds is ambiguous) or a Content-Length
        that is not a number of bytes."""
        if not super().parse_request():
            return False
        for name in SINGLE_HEADERS:
            n = len(self.headers.get_all(name, ()))
            if n > 1:
                self.send_error(HTTPStatus.BAD_REQUEST, f"the {name} header is given {n} times")
                return False
        length = self.headers.get("Content-Length")
        if length is not None and not re.fullmatch(r"[0-9]{1,15}", length.strip()):
            self.send_error(HTTPStatus.BAD_REQUEST, f"Content-Length: expected a number of bytes, got {_short(length)}")
            return False
        if self.command != "POST" and ("Transfer-Encoding" in self.headers or (length or "0").strip() != "0"):
            self.close_connection = True  # a body no endpoint reads: it would be read as the next request
        return True

    def send_error(self, code, message=None, explain=None):
        """http.server's own refusals (a request line or header line too long, too many headers,
        a malformed request line, a method without a ``do_``) in the endpoints' JSON, not its
        HTML page; the connection is closed."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # what parse_request assumes of a version it refuses: no
            self.request_version = ""           # status line, no headers; no client speaks HTTP/0.9
        if code == HTTPStatus.REQUEST_URI_TOO_LONG and message is None:
            message = "the request line is longer than 65,536 bytes"
        elif code == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE and explain:
            message = f"{message}: {explain}"
        self._error(code, message or HTTPStatus(code).phrase)

    def do_GET(self):
        self._answer("GET")

    def do_POST(self):
        self._answer("POST")

    def do_HEAD(self):
        self._answer("HEAD")

    def do_PUT(self):
        self._answer("PUT")

    def do_DELETE(self):
        self._answer("DELETE")

    def do_PATCH(self):
        self._answer("PATCH")

    def do_OPTIONS(self):  # no cross-origin preflight is ever granted
        self._answer("OPTIONS")

    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        routes = {"/": ("GET", "HEAD"), "/index.html": ("GET", "HEAD"), "/api/options": ("GET",),
                  "/api/predict": ("GET",), "/api/plan": ("POST",)}
        try:
            self._check_host()
            if url.path not in routes:
                raise BadRequest(f"not found: {url.path[:100]}", HTTPStatus.NOT_FOUND)
            if method not in routes[url.path]:
                self.allow = routes[url.path]
                raise BadRequest(f"{method} is not allowed on {url.path} (only {', '.join(routes[url.path])})",
                                 HTTPStatus.METHOD_NOT_ALLOWED)
            if url.path in ("/", "/index.html"):
                if url.query:
                    raise BadRequest("the page takes no query parameters")
                return self._send(HTTPStatus.OK, page(), "text/html; charset=utf-8")
            if url.path == "/api/options":
                if url.query:
                    raise BadRequest("options takes no query parameters")
                return self._json(HTTPStatus.OK, self.app.choices())
            if url.path == "/api/predict":
                return self._json(HTTPStatus.OK, self.app.predict(url.query))
            if url.query:
                raise BadRequest("plan takes its inputs as a JSON body, not as query parameters")
            return self._json(HTTPStatus.OK, self.app.plan(self._body()))
        except BadRequest as e:
            self._error(e.status, str(e))
        except (ValueError, *getattr(self.app.api, "INPUT_ERRORS", ())) as e:  # costsim's one-line errors
            self._error(HTTPStatus.BAD_REQUEST, str(e))
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception as e:  # a bug: one line on the terminal and on the page, no traceback
            print(f"costsim: warning: ui: {url.path[:100]}: {type(e).__name__}: {e}", file=sys.stderr)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error ({type(e).__name__}: {e})")

    def _check_host(self) -> None:
        if self.app.loopback and self.headers.get("Host", "") not in self.app.hosts:
            raise BadRequest("this page answers only requests addressed to this machine (127.0.0.1 or localhost)",
                             HTTPStatus.FORBIDDEN)
        origin = self.headers.get("Origin")
        if origin is not None and self.command == "POST" and origin != f"http://{self.headers.get('Host', '')}":
            raise BadRequest("a request from another site's page is refused", HTTPStatus.FORBIDDEN)

    def _body(self):
        """The request's JSON body: declared as JSON, with its length, at most MAX_BODY_BYTES."""
        if self.headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/json":
            raise BadRequest("expected Content-Type: application/json", HTTPStatus.UNSUPPORTED_MEDIA_TYPE)
        if "Transfer-Encoding" in self.headers:
            raise BadRequest("a chunked body is not taken: send its Content-Length", HTTPStatus.LENGTH_REQUIRED)
        try:
            length = int(self.headers.get("Content-Length", ""))  # digits only (parse_request)
        except ValueError:
            raise BadRequest("a body needs its Content-Length", HTTPStatus.LENGTH_REQUIRED) from None
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            raise BadRequest(f"the body is {length:,} bytes; at most {MAX_BODY_BYTES:,} are taken",
                             HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        raw = self.rfile.read(length)  # TimeoutError past the request's deadline: 408
        if len(raw) < length:  # the client closed its side before the body's end
            self.close_connection = True
            raise BadRequest(f"the body ended after {len(raw):,} of its {length:,} bytes")
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise BadRequest(f"the body is not valid JSON ({e})") from None
        except RecursionError:
            raise BadRequest("the body is not valid JSON (nested too deeply)") from None

    def _json(self, status: int, obj) -> None:
        data = json.dumps(obj, allow_nan=False, ensure_ascii=False).encode("utf-8")
        self._send(status, data, "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        if self.command == "POST" and status >= 400:  # an unread body would be read as the next request
            self.close_connection = True
        self._json(status, {"error": " ".join(str(message).split()) or HTTPStatus(status).phrase})

    def _send(self, status: int, data: bytes, ctype: str) -> None:
        self._answered = True
        self.connection.settimeout(self.timeout)  # reads had the request's deadline; an answer has its own
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if ctype.startswith("text/html"):
            self.send_header("Content-Security-Policy", CSP)
        if status == HTTPStatus.METHOD_NOT_ALLOWED:
            self.send_header("Allow", ", ".join(self.allow))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

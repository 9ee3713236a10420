"""A small OpenAI-compatible HTTP client that times what live mode needs.

One :class:`Endpoint` per server. Every request has a bounded retry with exponential backoff
(connection refused, timeouts, HTTP 429 and 5xx, truncated streams) and, once retries are spent,
raises :class:`EndpointError` whose message is one line naming the URL and the cause. API keys
come from an environment variable only and never appear in messages, logs or files.

A server is not trusted: each request has a wall-clock deadline (not httpx's per-read timeout,
which a server dripping a byte at a time never trips), what an answer may hold in memory is
capped as its bytes arrive (inflated ones included), and whatever a server or an exception says
goes into a message only with every form of every secret taken out.

Completions are streamed so that the client measures time to first token as well as total time.
Prompts are token-id lists where the server accepts them (exact lengths, no tokenizer needed);
otherwise random words, with the server's ``usage`` giving the true counts.
"""

from __future__ import annotations

import base64
import json
import math
import os
import random
import re
import socket
import threading
import time
import zlib
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

from ..config import LIVE

#: Token ids used for random prompts: below every modern vocabulary's size and above the
#: special tokens most tokenizers put first.
TOKEN_ID_RANGE = (1000, 30000)
_WORDS = ("apple river stone cloud paper window orange silver garden music yellow candle bridge "
          "forest engine market pocket summer winter number letter circle planet signal").split()

#: What one answer may hold in memory, counted as its bytes arrive and after any
#: Content-Encoding is undone (a gzip bomb counts at its inflated size). A completion of a few
#: thousand tokens is a few hundred KB of JSON; one stream line is one token's chunk, under a KB.
#: A stream as a whole is not capped: it is read a line at a time and bounded by the deadline.
MAX_BODY_BYTES = 16 * 2**20
MAX_LINE_BYTES = 2**20
#: An error's body is read only this far: its message's first line is all a message shows.
ERROR_BODY_BYTES = 64 * 2**10
#: Retries and waits are bounded so that a run's worst case stays hours, not years: 2^40
#: backoffs (``--retries 40``) or a Retry-After of 10^9 s would outlast the user.
MAX_RETRIES = 10
MAX_BACKOFF_S = 30.0
#: A day: past any one request, short of the clock's overflow.
MAX_TIMEOUT_S = 86400.0
#: An API key shorter than this is refused: no service issues one, and redacting a string that
#: short would blot out ordinary words of every message (every "e" of them, for a 1-letter key).
MIN_KEY_CHARS = 6
#: Query parameters whose values are credentials (``?api_key=``, ``?key=``, ``?token=``, ...).
_CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential", re.I)
_CUT_AT = re.compile(r"[?#]")


def check_limits(timeout_s, retries) -> None:
    """ValueError (one line) unless ``timeout_s`` is in (0, 86400] s and ``retries`` in [0, 10]."""
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        raise ValueError(f"--retries must be in [0, {MAX_RETRIES}], got {retries}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"--timeout must be in (0, {MAX_TIMEOUT_S:g}] s, got {timeout_s}")


def public_url(url: str) -> str:
    """``url`` without its user:password, query and fragment: what messages, files and output show.

    Cut as text, not parsed: a password holding '#', '/' or '?' makes a parser split inside it
    (and then quote it in its error); the last '@' always ends the credentials."""
    scheme, sep, rest = url.partition("://")
    rest = _CUT_AT.split(rest.rpartition("@")[2], maxsplit=1)[0]
    return "".join(ch if ch.isprintable() else "?" for ch in f"{scheme}{sep}{rest}")


def url_problem(url: str) -> str | None:
    """What is wrong with an endpoint's ``url`` (None: nothing), in words of costsim's own: the
    parsers' errors quote the URL, credentials and all."""
    import httpx

    scheme, _, rest = url.partition("://")
    if "@" in re.sub(r"^[^/?#]*", "", rest):
        return "'#', '/' and '?' in a user name or password must be percent-encoded (%23, %2F, %3F)"
    try:
        s = urlsplit(url)
        s.port  # noqa: B018 - raises for a port out of range
        httpx.URL(url)  # what requests use; stricter (control characters)
    except (ValueError, httpx.InvalidURL) as e:
        msg = str(e)
        for known, why in (("out of range", "Port out of range 0-65535"), ("Invalid IPv6 URL", "Invalid IPv6 URL"),
                           ("port", "the port is not a number"), ("IPv", "a bracketed host that is not an IPv6 address"),
                           ("non-printable", "a control character in it")):
            if known.lower() in msg.lower():
                return why
        return "not a URL"
    if s.scheme not in ("http", "https"):
        return "an endpoint's URL is http:// or https://"
    return None if s.hostname else "no host"


def _forms(secret: str) -> set:
    """The ways ``secret`` can show in a reply or an exception: as given, percent-decoded (a URL's
    password is typed encoded, sent decoded), percent- or form-encoded again, and in base64 (an
    HTTP Basic header a server echoes)."""
    out = set()
    for s in {secret, unquote(secret), unquote_plus(secret)}:
        out |= {s, quote(s, safe=""), quote(s), quote_plus(s)}
    for s in list(out):
        b64 = base64.b64encode(s.encode("utf-8", "surrogateescape")).decode()
        out |= {b64, b64.rstrip("=")}
    return out


def redact(text: str, secrets) -> str:
    """``text`` with every form (:func:`_forms`) of every secret replaced by ``***``, longest
    first, so that no part of a longer one is left beside a shorter one's stars. Whatever its
    length: a short secret garbles a message rather than shows in it."""
    forms = set().union(*(_forms(s) for s in secrets if s)) - {""}
    for f in sorted(forms, key=len, reverse=True):
        text = text.replace(f, "***")
    return text


def _one_line(text: str, limit: int | None = None) -> str:
    """The first line of ``text``, its control characters (a terminal's escapes) as '?'."""
    lines = str(text).strip().splitlines()
    line = "".join(ch if ch.isprintable() else "?" for ch in lines[0]) if lines else ""
    return line if limit is None else line[:limit]


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


class EndpointError(RuntimeError):
    """An endpoint failed after its retries; ``str(e)`` is '<URL>: <cause>'."""

    def __init__(self, url: str, cause: str, status: int | None = None):
        super().__init__(f"{url}: {cause}")
        self.url, self.cause, self.status = url, cause, status


class _Refused(Exception):
    """An answer costsim will not read (over a cap, an encoding it does not undo): not retried,
    the same request would only get it again."""


class _Retryable(Exception):
    def __init__(self, cause: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(cause)
        self.cause, self.retry_after, self.status = cause, retry_after, status


@dataclass
class CallResult:
    """One completion call, timed on the client and, where the server says, on the server."""

    prompt_tokens: int
    completion_tokens: int
    requested_tokens: int
    wall_s: float
    ttft_s: float | None
    finish_reason: str | None = None
    cached_tokens: int | None = None
    server_prompt_s: float | None = None     # llama.cpp `timings.prompt_ms`
    server_decode_s: float | None = None     # llama.cpp `timings.predicted_ms`
    attempts: int = 1

    @property
    def forced(self) -> bool:
        """Did the server decode as many tokens as asked (max_tokens honoured and EOS ignored)?"""
        return self.completion_tokens == self.requested_tokens

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class _Answer:
    """A whole (capped) answer: what :meth:`Endpoint.get` returns."""

    status_code: int
    headers: object
    content: bytes

    def json(self):
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


@dataclass
class Endpoint:
    """An OpenAI-compatible server at ``url`` (with or without the trailing ``/v1``)."""

    url: str
    api_key_env: str | None = None
    timeout_s: float = LIVE.timeout_s      # a wall-clock deadline per request, connect to last byte
    retries: int = LIVE.retries
    backoff_s: float = 0.5
    model: str | None = None
    token_prompts: bool | None = None      # None: not yet known
    force_supported: bool | None = None    # does `ignore_eos` / `min_tokens` take effect?
    streaming: bool | None = None          # does the server stream (with usage)?
    _client: object = field(default=None, repr=False)

    def __post_init__(self):
        check_limits(self.timeout_s, self.retries)
        u = self.url.strip()
        if "://" not in u:
            u = "http://" + u
        why = url_problem(u)
        if why:
            hidden = "; its credentials are not shown" if "@" in u else ""
            raise ValueError(f"{public_url(u)}: not an endpoint URL ({why}{hidden})")
        s = urlsplit(u)
        path = s.path.rstrip("/")
        path = path[:-3] if path.endswith("/v1") else path
        self.base = f"{s.scheme}://{s.netloc}{path}"  # with any credentials: what requests use
        self._query = f"?{s.query}" if s.query else ""  # kept on every request (e.g. ?api-version=)
        self.url = public_url(self.base)  # without them: what every message shows
        self._socks = []  # this client's connections, for the deadline to cut (see _attempt)

    # --- plumbing ---------------------------------------------------------------------------

    def _key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = (os.environ.get(self.api_key_env) or "").strip()  # a CRLF .env leaves a "\r"
        if not key:
            raise EndpointError(self.url, f"environment variable {self.api_key_env} is not set (API key)")
        if not key.isascii() or any(ord(ch) < 33 or ord(ch) == 127 for ch in key):
            raise EndpointError(self.url, f"environment variable {self.api_key_env} holds a control character, a space "
                                          "or a non-ASCII character inside the API key (not shown)")
        if len(key) < MIN_KEY_CHARS:
            raise EndpointError(self.url, f"environment variable {self.api_key_env} holds an API key shorter than "
                                          f"{MIN_KEY_CHARS} characters (not shown): not a key a server issues")
        return key

    def _secrets(self) -> list:
        """This endpoint's secrets as configured (:func:`redact` adds their other forms): the API
        key, valid or not, the URL's password with its user name as HTTP Basic sends them (the
        user name alone only where there is no password: then it is the token), and the values of
        credential-like query parameters."""
        raw = (os.environ.get(self.api_key_env) or "") if self.api_key_env else ""
        s = urlsplit(self.base)
        out = [raw, raw.strip(), s.password]
        if s.password is None:
            out.append(s.username)
        else:
            out += [f"{s.username}:{s.password}", f"{unquote(s.username or '')}:{unquote(s.password)}"]
        for part in self._query[1:].split("&"):
            name, _, value = part.partition("=")
            if _CREDENTIAL_NAME.search(unquote_plus(name)):
                out.append(value)
        return out

    def _quote(self, text, limit: int = 160) -> str:
        """A server's or an exception's ``text`` fit for a message: redacted before it is cut (a
        cut secret would no longer match), one printable line, at most ``limit`` characters."""
        return _one_line(redact(str(text), self._secrets()), limit)

    def _fail(self, cause: str, status: int | None = None) -> EndpointError:
        """An :class:`EndpointError` whose message shows no secret, whatever the cause quotes."""
        return EndpointError(self.url, _one_line(redact(cause, self._secrets())), status)

    def _headers(self) -> dict:
        # Only what _decoded undoes, a bounded piece at a time (httpx would offer br and zstd
        # where they are installed, and inflate each network read whole).
        h = {"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"}
        key = self._key()
        if key:
            h["Authorization"] = f"Bearer {key}"
        return h

    def _http(self):
        import httpx

        if self._client is None:
            self._client = httpx.Client(timeout=httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)))
        return self._client

    def close(self):
        if self._client is not None:
            self._client.close()
            self._client = None

    def _with_retries(self, fn, what: str):
        """Run ``fn`` (which raises _Retryable on transient failures) with bounded backoff."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn(), attempt
            except _Retryable as e:
                if attempt > self.retries:
                    more = f" (after {attempt} attempts)" if attempt > 1 else ""
                    raise self._fail(f"{what}: {e.cause}{more}", e.status) from None
                delay = self.backoff_s * (2 ** (attempt - 1)) * (1.0 + 0.25 * random.random())
                if e.retry_after is not None:
                    delay = max(delay, e.retry_after)
                time.sleep(min(max(delay, 0.0), MAX_BACKOFF_S))

    def _classify(self, exc) -> _Retryable:
        import httpx

        if isinstance(exc, httpx.ConnectError):
            return _Retryable(f"connection failed ({self._quote(exc) or 'refused'})")
        if isinstance(exc, httpx.TimeoutException):
            return _Retryable(f"timed out after {self.timeout_s:g} s ({type(exc).__name__})")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return _Retryable(f"connection dropped ({self._quote(exc) or type(exc).__name__})")
        return _Retryable(f"{type(exc).__name__}: {self._quote(exc)}")

    def _late(self) -> _Retryable:
        return _Retryable(f"timed out after {self.timeout_s:g} s (no complete response within the --timeout deadline)")

    def _track(self, event: str, info: dict):
        """httpcore's trace hook: note each connection this client opens (see :meth:`_attempt`)."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            sock = getattr(info.get("return_value"), "get_extra_info", lambda _: None)("socket")
            if isinstance(sock, socket.socket):
                self._socks = [s for s in self._socks if s.fileno() != -1] + [sock]

    def _cut(self):
        """Shut this client's connections (from the deadline's timer thread): a read blocked on
        one returns at once. shutdown, not close: a closed descriptor's number can be handed to
        the next connection while the reader still holds it."""
        for sock in list(self._socks):
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # an SSLSocket's own would unwrap it mid-read
            except OSError:
                pass

    def _attempt(self, method: str, path: str, what: str, read, body: dict | None = None):
        """One request; ``read(response, t0, deadline)`` takes a 2xx answer. The network, a
        deadline passed and a 429 or 5xx raise :class:`_Retryable`.

        The deadline covers connect, headers and the whole body: httpx's timeout is per read,
        which a server sending a byte every few seconds never trips. Bytes are checked against it
        as they arrive (:meth:`_decoded`); a read blocked past it (headers dripped, or silence)
        is cut by a timer."""
        import httpx

        deadline = time.monotonic() + self.timeout_s
        late = []
        timer = threading.Timer(self.timeout_s, lambda: (late.append(True), self._cut()))
        timer.daemon = True
        timer.start()
        try:
            t0 = time.perf_counter()
            with self._http().stream(method, self.base + path + self._query, headers=self._headers(), json=body,
                                     extensions={"trace": self._track}) as r:
                self._check_status(r, what, deadline)
                return read(r, t0, deadline)
        except _Refused as e:
            raise self._fail(f"{what}: {e}") from None
        except httpx.HTTPError as e:
            if late or time.monotonic() >= deadline:
                raise self._late() from None
            raise self._classify(e) from None
        except httpx.InvalidURL:  # checked at construction; its text would quote the URL
            raise self._fail(f"{what}: not a URL httpx accepts") from None
        finally:
            timer.cancel()

    def _decoded(self, r, deadline: float):
        """The body's bytes as they arrive, checked against the deadline, any Content-Encoding
        undone 64 KiB at a time: httpx inflates each network read whole (~1000x for gzip, and
        gzip twice multiplies), before any cap could count it."""
        enc = [e.strip().lower() for e in r.headers.get("content-encoding", "").split(",")]
        enc = [e for e in enc if e not in ("", "identity")]
        if len(enc) > 1 or (enc and enc[0] not in ("gzip", "x-gzip", "deflate")):
            raise _Refused(f"a body in Content-Encoding {self._quote(', '.join(enc), 60)} "
                           "(costsim reads gzip, deflate or none)")
        inflate = zlib.decompressobj(32 + zlib.MAX_WBITS) if enc else None  # 32: a gzip or zlib header
        try:
            for raw in r.iter_raw():
                if time.monotonic() > deadline:
                    raise self._late()
                if inflate is None:
                    yield raw
                while inflate is not None and raw:
                    yield inflate.decompress(raw, 64 * 2**10)
                    raw = inflate.unconsumed_tail
            if time.monotonic() >= deadline:  # cut by the timer: a close-delimited body "ends" there
                raise self._late()
            if inflate is not None:
                yield inflate.flush()
        except zlib.error:
            raise _Retryable("malformed compressed body") from None

    def _read(self, r, deadline: float, cap: int | None = None, partial: bool = False) -> bytes:
        """The whole body, at most ``cap`` bytes (MAX_BODY_BYTES); past it an error, or with
        ``partial`` the first ``cap`` bytes."""
        cap = MAX_BODY_BYTES if cap is None else cap
        buf = bytearray()
        for piece in self._decoded(r, deadline):
            buf += piece
            if len(buf) > cap:
                if partial:
                    return bytes(buf[:cap])
                raise _Refused(f"response body over {_size(cap)} (costsim's cap)")
        return bytes(buf)

    def _lines(self, r, deadline: float):
        """A stream's lines as they arrive (ended by \\n, \\r\\n or \\r), each at most MAX_LINE_BYTES."""
        rest = b""
        for piece in self._decoded(r, deadline):
            lines = (rest + piece).splitlines(keepends=True)
            rest = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
            for line in lines + [rest]:
                if len(line) > MAX_LINE_BYTES:
                    raise _Refused(f"a stream line over {_size(MAX_LINE_BYTES)} (costsim's cap)")
            yield from (line.rstrip(b"\r\n") for line in lines)
        if rest:
            yield rest

    def _check_status(self, r, what: str, deadline: float):
        code = r.status_code
        if 200 <= code < 300:
            return
        try:
            body = self._read(r, deadline, ERROR_BODY_BYTES, partial=True)
        except _Refused:  # an encoding not read: the status says enough
            body = b""
        reason = self._reason(r, body)
        if code == 429 or code >= 500:
            try:
                ra = float(r.headers.get("retry-after"))
            except (TypeError, ValueError):  # absent, or an HTTP date: the backoff's own wait
                ra = None
            raise _Retryable(f"HTTP {code} {reason}", ra if ra is not None and math.isfinite(ra) else None, code)
        raise self._fail(f"{what}: HTTP {code} {reason}", code)

    def _reason(self, r, body: bytes) -> str:
        """The status line's phrase and the first line of a JSON error's message, redacted."""
        msg = self._quote(r.reason_phrase or "", 80)
        try:
            d = json.loads(body)
            err = d.get("error") if isinstance(d, dict) else None
            if isinstance(err, dict):
                err = err.get("message")
            if err:
                msg = f"{msg}: {self._quote(err)}"
        except (ValueError, RecursionError):
            pass
        return msg.strip()

    def get(self, path: str, retries: bool = True) -> _Answer:
        def once():
            return self._attempt("GET", path, f"GET {path}",
                                 lambda r, t0, deadline: _Answer(r.status_code, r.headers, self._read(r, deadline)))

        if not retries:
            try:
                return once()
            except _Retryable as e:
                raise self._fail(f"GET {path}: {e.cause}", e.status) from None
        return self._with_retries(once, f"GET {path}")[0]

    # --- API --------------------------------------------------------------------------------

    def discover(self) -> str:
        """The served model's id from ``/v1/models`` (kept in ``self.model``)."""
        if self.model:
            return self.model
        r = self.get("/v1/models")
        try:
            data = r.json()["data"]
            model = str(data[0]["id"])
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            raise self._fail("GET /v1/models: no model listed in the answer") from None
        if redact(model, self._secrets()) != model:  # it is sent back, written to files and shown
            raise self._fail("GET /v1/models: the served model's id holds this endpoint's credentials (not used)")
        self.model = model
        return self.model

    def metrics_text(self) -> str | None:
        """The Prometheus ``/metrics`` text, or None when the server has none."""
        try:
            r = self.get("/metrics", retries=False)
        except EndpointError as e:
            if e.status in (401, 403, 404, 405, 501):
                return None
            raise
        ctype = r.headers.get("content-type", "")
        if "html" in ctype or "json" in ctype:
            return None
        return redact(r.text, self._secrets())  # a parse error quotes its lines, into warnings and files

    def random_prompt(self, n_tokens: int, rng: random.Random):
        """A prompt of ``n_tokens`` that starts with a fresh random prefix (defeats prefix caches)."""
        if self.token_prompts is False:
            # ~1 token per short word plus its space for most BPE vocabularies; usage gives truth.
            return " ".join(rng.choice(_WORDS) + str(rng.randrange(100)) for _ in range(max(1, n_tokens // 2)))
        lo, hi = TOKEN_ID_RANGE
        return [rng.randrange(lo, hi) for _ in range(max(1, int(n_tokens)))]

    def complete(self, prompt, max_tokens: int, force: bool = True, stream: bool = True) -> CallResult:
        """One ``/v1/completions`` call, streamed; forced to ``max_tokens`` where supported.

        A server that answers HTTP 400/422 to what not every server accepts is asked again
        without it, in this order, and the endpoint remembers: the forcing parameters
        (``ignore_eos``, ``min_tokens``), token-id prompts (random words instead), streaming
        (then no time to first token).
        """
        self.discover()
        while True:
            use_force = force and self.force_supported is not False
            use_stream = stream and self.streaming is not False
            body = {"model": self.model, "prompt": prompt, "max_tokens": int(max_tokens), "temperature": 0.0}
            if use_force:
                body.update(ignore_eos=True, min_tokens=int(max_tokens))
            if use_stream:
                body.update(stream=True, stream_options={"include_usage": True})
            try:
                res, attempts = self._with_retries(lambda: self._post_completion(body, use_stream),
                                                   "POST /v1/completions")
                break
            except EndpointError as e:
                if e.status not in (400, 422):
                    raise
                if use_force and self.force_supported is None:
                    self.force_supported = False
                elif isinstance(prompt, list) and self.token_prompts is None:
                    self.token_prompts = False
                    prompt = self.random_prompt(len(prompt), random.Random())
                elif use_stream and self.streaming is None:
                    self.streaming = False
                else:
                    raise
        if isinstance(prompt, list):
            self.token_prompts = True
        if use_stream and self.streaming is None:  # (False if it answered without streaming)
            self.streaming = True
        res.requested_tokens, res.attempts = int(max_tokens), attempts
        if res.finish_reason is not None:  # the server's words, saved with the probes
            res.finish_reason = self._quote(res.finish_reason, 40)
        if res.completion_tokens > max_tokens:
            raise self._fail(f"server ignored max_tokens: asked {max_tokens}, got {res.completion_tokens} tokens")
        return res

    def _post_completion(self, body: dict, stream: bool) -> CallResult:
        def read(r, t0, deadline):
            if not stream or r.headers.get("content-type", "").startswith("application/json"):
                if stream:  # answered without streaming
                    self.streaming = False
                d = _loads(self._read(r, deadline), "answer is not JSON (truncated?)")
                return _result(d, time.perf_counter() - t0, None)
            return self._read_stream(r, t0, deadline)

        return self._attempt("POST", "/v1/completions", "POST /v1/completions", read, body)

    def _read_stream(self, r, t0: float, deadline: float) -> CallResult:
        final, finish, ttft, done = {}, None, None, False
        for line in self._lines(r, deadline):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = _loads(data, "truncated or malformed stream chunk")
            if not isinstance(chunk, dict):
                raise _Retryable("malformed stream chunk (not an object)")
            if "error" in chunk:
                raise _Retryable(f"server error in stream: {self._quote(chunk['error'], 120)}")
            choices = chunk.get("choices")
            for ch in choices if isinstance(choices, list) else ():
                if not isinstance(ch, dict):
                    raise _Retryable("malformed stream chunk (a choice is not an object)")
                if ttft is None and (ch.get("text") or ch.get("delta") or ch.get("token_ids")):
                    ttft = time.perf_counter() - t0
                if isinstance(ch.get("finish_reason"), str):
                    finish = ch["finish_reason"]
            for k in ("usage", "timings"):
                if chunk.get(k):
                    final[k] = chunk[k]
        wall = time.perf_counter() - t0
        if not done:
            raise _Retryable("stream ended before [DONE] (truncated)")
        if "usage" not in final:
            raise _Retryable("stream carried no usage (token counts); the server must support stream_options.include_usage")
        final["choices"] = [{"finish_reason": finish}]
        return _result(final, wall, ttft)


def _loads(data: bytes, why: str):
    """JSON from a server; anything else (nested past the parser's depth too) is retryable."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise _Retryable(why) from None


def _result(d, wall: float, ttft: float | None) -> CallResult:
    """A call's numbers from the server's answer; a malformed answer is a retryable failure."""
    def obj(v, what):
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise _Retryable(f"malformed answer: {what} is not an object")
        return v

    def count(v, what):
        if v is None:
            raise _Retryable(f"malformed answer: no {what}")
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not v >= 0
                or v != int(v)):
            raise _Retryable(f"malformed answer: {what} is not a token count")
        return int(v)

    def ms(v):  # llama.cpp timings: a number, else not reported
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        return v / 1e3 if ok else None

    d = obj(d, "the answer")
    u, t = obj(d.get("usage"), "usage"), obj(d.get("timings"), "timings")
    choices = d.get("choices") if isinstance(d.get("choices"), list) else []
    ch = choices[0] if choices and isinstance(choices[0], dict) else {}
    details = obj(u.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    cached = details.get("cached_tokens", t.get("cache_n"))
    finish = ch.get("finish_reason")
    return CallResult(
        prompt_tokens=count(u.get("prompt_tokens"), "usage.prompt_tokens"),
        completion_tokens=count(u.get("completion_tokens"), "usage.completion_tokens"),
        requested_tokens=0, wall_s=wall, ttft_s=ttft, finish_reason=finish if isinstance(finish, str) else None,
        cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) and cached >= 0 else None,
        server_prompt_s=ms(t.get("prompt_ms")), server_decode_s=ms(t.get("predicted_ms")),
    )

"""A small OpenAI-compatible HTTP client that times what live mode needs.

One :class:`Endpoint` per server. Every request has a bounded retry with exponential backoff
(connection refused, timeouts, HTTP 429 and 5xx, truncated streams) and, once retries are spent,
raises :class:`EndpointError` whose message is one line naming the URL and the cause. API keys
come from an environment variable only and never appear in messages, logs or files.

Completions are streamed so that the client measures time to first token as well as total time.
Prompts are token-id lists where the server accepts them (exact lengths, no tokenizer needed);
otherwise random words, with the server's ``usage`` giving the true counts.
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from ..config import LIVE

#: Token ids used for random prompts: below every modern vocabulary's size and above the
#: special tokens most tokenizers put first.
TOKEN_ID_RANGE = (1000, 30000)
_WORDS = ("apple river stone cloud paper window orange silver garden music yellow candle bridge "
          "forest engine market pocket summer winter number letter circle planet signal").split()


def public_url(url: str) -> str:
    """``url`` without any user:password part: what messages, files and output show."""
    s = urlsplit(url)
    host = s.hostname or ""
    if s.port:
        host = f"{host}:{s.port}"
    return urlunsplit((s.scheme, host, s.path, "", ""))


def url_problem(url: str) -> str | None:
    """What is wrong with an endpoint's ``url`` (None: nothing): a scheme other than HTTP(S),
    no host, a port out of range, a bracket left open."""
    try:
        s = urlsplit(url)
        s.port  # noqa: B018 - raises for a port out of range
    except ValueError as e:
        return str(e)
    if s.scheme not in ("http", "https"):
        return "an endpoint's URL is http:// or https://"
    return None if s.hostname else "no host"


def redact(text: str, secrets) -> str:
    """``text`` with every secret (an API key, a URL password) replaced by ``***``."""
    for sec in secrets:
        if sec and len(sec) >= 3:
            text = text.replace(sec, "***")
    return text


class EndpointError(RuntimeError):
    """An endpoint failed after its retries; ``str(e)`` is '<URL>: <cause>'."""

    def __init__(self, url: str, cause: str, status: int | None = None):
        super().__init__(f"{url}: {cause}")
        self.url, self.cause, self.status = url, cause, status


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
class Endpoint:
    """An OpenAI-compatible server at ``url`` (with or without the trailing ``/v1``)."""

    url: str
    api_key_env: str | None = None
    timeout_s: float = LIVE.timeout_s
    retries: int = LIVE.retries
    backoff_s: float = 0.5
    model: str | None = None
    token_prompts: bool | None = None      # None: not yet known
    force_supported: bool | None = None    # does `ignore_eos` / `min_tokens` take effect?
    streaming: bool | None = None          # does the server stream (with usage)?
    _client: object = field(default=None, repr=False)

    def __post_init__(self):
        u = self.url.strip().rstrip("/")
        if "://" not in u:
            u = "http://" + u
        why = url_problem(u)
        if why:
            scheme, _, rest = u.partition("://")
            shown = f"{scheme}://{rest.rpartition('@')[2]}"  # never a credential in a message
            raise ValueError(f"{shown}: not an endpoint URL ({why})")
        self.base = u[:-3] if u.endswith("/v1") else u  # with any credentials: what requests use
        self.url = public_url(self.base)  # without them: what every message shows
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")

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
        return key

    def _secrets(self) -> tuple:
        try:
            key = self._key()
        except EndpointError:
            key = None
        return (key, urlsplit(self.base).password)

    def _fail(self, cause: str, status: int | None = None) -> EndpointError:
        """An :class:`EndpointError` whose message shows no secret, whatever the cause quotes."""
        return EndpointError(self.url, redact(cause, self._secrets()), status)

    def _headers(self) -> dict:
        h = {"Content-Type": "application/json"}
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
                    delay = max(delay, min(e.retry_after, 30.0))
                time.sleep(delay)

    def _classify(self, exc) -> _Retryable:
        import httpx

        if isinstance(exc, httpx.ConnectError):
            return _Retryable(f"connection failed ({_short(exc) or 'refused'})")
        if isinstance(exc, httpx.TimeoutException):
            return _Retryable(f"timed out after {self.timeout_s:g} s ({type(exc).__name__})")
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)):
            return _Retryable(f"connection dropped ({_short(exc) or type(exc).__name__})")
        return _Retryable(f"{type(exc).__name__}: {_short(exc)}")

    def _check_status(self, r, what: str):
        if r.status_code == 429 or r.status_code >= 500:
            ra = r.headers.get("retry-after")
            try:
                ra = float(ra) if ra is not None else None
            except ValueError:
                ra = None
            raise _Retryable(f"HTTP {r.status_code} {_reason(r)}", ra, r.status_code)
        if r.status_code >= 400:
            raise self._fail(f"{what}: HTTP {r.status_code} {_reason(r)}", r.status_code)

    def get(self, path: str, retries: bool = True) -> "object":
        import httpx

        def once():
            try:
                r = self._http().get(self.base + path, headers=self._headers())
            except httpx.HTTPError as e:
                raise self._classify(e) from None
            self._check_status(r, f"GET {path}")
            return r

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
            self.model = str(data[0]["id"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._fail("GET /v1/models: no model listed in the answer") from None
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
        return r.text

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
        if res.completion_tokens > max_tokens:
            raise self._fail(f"server ignored max_tokens: asked {max_tokens}, got {res.completion_tokens} tokens")
        return res

    def _post_completion(self, body: dict, stream: bool) -> CallResult:
        import httpx

        url = self.base + "/v1/completions"
        t0 = time.perf_counter()
        ttft = None
        try:
            if not stream:
                r = self._http().post(url, headers=self._headers(), json=body)
                self._check_status(r, "POST /v1/completions")
                wall = time.perf_counter() - t0
                return _result(_json(r, self.url), wall, None)
            final, finish, n_chunks, done = {}, None, 0, False
            with self._http().stream("POST", url, headers=self._headers(), json=body) as r:
                if r.status_code >= 400:
                    r.read()
                self._check_status(r, "POST /v1/completions")
                if r.headers.get("content-type", "").startswith("application/json"):  # answered without streaming
                    r.read()
                    self.streaming = False
                    return _result(_json(r, self.url), time.perf_counter() - t0, None)
                for line in r.iter_lines():
                    if time.perf_counter() - t0 > self.timeout_s:  # keep-alives reset httpx's read timeout
                        raise _Retryable(f"no complete answer within the {self.timeout_s:g} s deadline")
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise _Retryable("truncated or malformed stream chunk") from None
                    if "error" in chunk:
                        raise _Retryable(f"server error in stream: {str(chunk['error'])[:120]}")
                    for ch in chunk.get("choices") or []:
                        if ttft is None and (ch.get("text") or ch.get("delta") or ch.get("token_ids")):
                            ttft = time.perf_counter() - t0
                        if ch.get("finish_reason"):
                            finish = ch["finish_reason"]
                        n_chunks += 1
                    for k in ("usage", "timings"):
                        if chunk.get(k):
                            final[k] = chunk[k]
            wall = time.perf_counter() - t0
        except httpx.HTTPError as e:
            raise self._classify(e) from None
        if not done:
            raise _Retryable("stream ended before [DONE] (truncated)")
        if "usage" not in final:
            raise _Retryable("stream carried no usage (token counts); the server must support stream_options.include_usage")
        final["choices"] = [{"finish_reason": finish}]
        return _result(final, wall, ttft)


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
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or v != int(v):
            raise _Retryable(f"malformed answer: {what} is not a token count")
        return int(v)

    def ms(v):  # llama.cpp timings: a number, else not reported
        return v / 1e3 if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None

    d = obj(d, "the answer")
    u, t = obj(d.get("usage"), "usage"), obj(d.get("timings"), "timings")
    choices = d.get("choices") if isinstance(d.get("choices"), list) else []
    ch = choices[0] if choices and isinstance(choices[0], dict) else {}
    details = obj(u.get("prompt_tokens_details"), "usage.prompt_tokens_details")
    cached = details.get("cached_tokens", t.get("cache_n"))
    return CallResult(
        prompt_tokens=count(u.get("prompt_tokens"), "usage.prompt_tokens"),
        completion_tokens=count(u.get("completion_tokens"), "usage.completion_tokens"),
        requested_tokens=0, wall_s=wall, ttft_s=ttft, finish_reason=ch.get("finish_reason"),
        cached_tokens=cached if isinstance(cached, int) and not isinstance(cached, bool) else None,
        server_prompt_s=ms(t.get("prompt_ms")), server_decode_s=ms(t.get("predicted_ms")),
    )


def _json(r, url):
    try:
        return r.json()
    except ValueError:
        raise _Retryable("answer is not JSON (truncated?)") from None


def _short(exc) -> str:
    s = str(exc).strip().splitlines()
    return s[0][:160] if s else ""


def _reason(r) -> str:
    msg = r.reason_phrase or ""
    try:
        body = r.json()
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            err = err.get("message")
        if err:
            msg = f"{msg}: {str(err).splitlines()[0][:160]}"
    except Exception:
        pass
    return msg.strip()

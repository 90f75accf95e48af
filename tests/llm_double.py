"""TEST DOUBLE of a paid OpenAI-compatible LLM service: a scripted Chat Completions server.

This is not an LLM. It is a real HTTP server (standard library ``http.server``, one thread per
connection) on 127.0.0.1 with an ephemeral port, speaking enough of the OpenAI Chat Completions
API for the real ``openai`` client: ``POST /v1/chat/completions`` and ``GET /v1/models``. Tests
script what it answers, so the product's real client code (retries, timeouts, parsing, token and
cost accounting) runs unchanged against it.

Scripting. Each request is resolved, in this order, by: the queue for its role, the shared
queue, the ``script`` callable, and finally a default text reply naming the role. The role is
read from the first line of the system message (``ROLE: planner``), which every prompt file of
:mod:`accelopt_core.proposers.agents` starts with. A scripted answer is a :class:`Reply` or a plain ``str``
(the assistant message). Helpers build the other behaviours:

- :func:`text` — an assistant message (optionally with explicit token counts / finish reason,
  a ``reasoning_content`` field, or no ``usage`` at all);
- :func:`status` — an HTTP error (429 carries ``Retry-After: 0`` and ``retry-after-ms``, so the
  openai client retries at once instead of backing off for seconds);
- :func:`rate_limited` — a 429 whose only delay is ``Retry-After: <seconds>``;
- :func:`context_length` — the 400 a server answers a prompt over the model's context with
  (OpenAI's and vLLM's wording and code);
- :func:`quota_spent` — OpenAI's 429 ``insufficient_quota`` (no retry helps);
- :func:`garbage` — a 200 response whose body is not JSON;
- :func:`drop` — the connection is closed without any response;
- :func:`delay` — any reply, sent after a pause (s).

Every request is recorded (:class:`RecordedRequest`: headers, parsed body, role, messages,
temperature, how many requests were in flight when it arrived). The double checks the
``Authorization`` header against its test key (401 otherwise), so tests can prove the key was
sent — and assert it never shows up in logs or error messages.

Usage::

    with LLMDouble(script=lambda req: "Title: fuse passes") as double:
        settings = Settings.model_validate({"llm": double.llm_settings()})
        ...  # with os.environ[double.api_key_env] = double.api_key

or the ``llm_double`` pytest fixture below (sets the key in the environment for the test).
Token counts default to whitespace-separated words of the messages / reply (NOT a real
tokenizer), so tests can compute expected usage exactly.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

#: The fake API key the double expects (``Authorization: Bearer <key>``).
TEST_API_KEY = "sk-double-TEST-KEY-0123456789abcdef"
#: The environment variable the fixture puts the key in; pair it with ``apiKeyEnv``.
TEST_API_KEY_ENV = "ACCELOPT_TEST_LLM_KEY"
#: Model name the double reports when the request names none.
DOUBLE_MODEL = "double-model"

_ROLE_RE = re.compile(r"^\s*ROLE:\s*([A-Za-z_][\w-]*)")


@dataclass
class Reply:
    """One scripted answer of the double.

    Attributes:
        content: the assistant message text (status 200 only).
        status: HTTP status code; non-200 sends an OpenAI-shaped error body.
        headers: extra response headers.
        body: raw response body replacing the JSON (for garbage replies).
        content_type: Content-Type of the response.
        delay_s: seconds to wait before answering (the request counts as in flight meanwhile).
        drop: close the connection without answering.
        finish_reason: ``stop`` or ``length`` (truncated reply) ...
        prompt_tokens / completion_tokens: usage to report; None: word counts.
        model: model name to report; None: the requested one.
        reasoning_content: a ``reasoning_content`` field in the message (what servers with a
            reasoning parser send besides the answer), None: no such field.
        usage: False sends no ``usage`` object (some local servers do not).
    """

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str = "application/json"
    delay_s: float = 0.0
    drop: bool = False
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model: str | None = None
    reasoning_content: str | None = None
    usage: bool = True


def text(content: str, **kwargs: Any) -> Reply:
    """An assistant message ``content`` (keyword arguments: any :class:`Reply` field)."""
    return Reply(content=content, **kwargs)


def status(code: int, message: str | None = None, *, retry_after_ms: int = 1) -> Reply:
    """An HTTP error reply with an OpenAI-shaped error body.

    429 and 5xx carry ``Retry-After: 0`` and ``retry-after-ms: <retry_after_ms>`` (the openai
    client honours the latter when > 0; with 0 it falls back to its own 0.5 s+ backoff).
    """
    headers: dict[str, str] = {}
    if code == 429 or code >= 500:
        headers = {"Retry-After": "0", "retry-after-ms": str(retry_after_ms)}
    kind = {
        400: "invalid_request_error",
        401: "invalid_api_key",
        429: "rate_limit_exceeded",
    }.get(code, "server_error")
    msg = message or f"llm double: scripted HTTP {code}"
    body = json.dumps({"error": {"message": msg, "type": kind, "code": kind, "param": None}})
    return Reply(status=code, headers=headers, body=body.encode())


def rate_limited(retry_after_s: float) -> Reply:
    """A 429 whose only delay is ``Retry-After: <retry_after_s>`` (seconds, no ``-ms``)."""
    reply = status(429, "llm double: slow down")
    reply.headers = {"Retry-After": f"{retry_after_s:g}"}
    return reply


def context_length(limit: int = 4096, requested: int = 5000) -> Reply:
    """The 400 for a prompt over the model's context, worded as OpenAI and vLLM word it, with
    OpenAI's ``context_length_exceeded`` code."""
    message = (
        f"This model's maximum context length is {limit} tokens. However, you requested "
        f"{requested} tokens ({requested} in the messages, 0 in the completion). Please reduce "
        "the length of the messages or completion."
    )
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
            "param": "messages",
        }
    }
    return Reply(status=400, body=json.dumps(body).encode())


def quota_spent() -> Reply:
    """OpenAI's 429 for an account without credit (``insufficient_quota``): retrying is useless."""
    body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing.",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
            "param": None,
        }
    }
    return Reply(status=429, headers={"retry-after-ms": "1"}, body=json.dumps(body).encode())


def garbage(
    body: bytes = b"<html><body>502 Bad Gateway (proxy)</body></html>",
    content_type: str = "application/json",
) -> Reply:
    """A 200 response whose body is not a chat completion (not even JSON by default)."""
    return Reply(body=body, content_type=content_type)


def drop() -> Reply:
    """Close the connection without sending any response."""
    return Reply(drop=True)


def delay(seconds: float, reply: Reply | str) -> Reply:
    """``reply`` (a :class:`Reply` or message text) sent after ``seconds`` s."""
    r = _as_reply(reply)
    r.delay_s = seconds
    return r


def _as_reply(value: Reply | str) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    raise TypeError(f"llm double: a script must return a Reply or str, not {type(value).__name__}")


@dataclass
class RecordedRequest:
    """One request the double received.

    Attributes:
        index: 0-based arrival order.
        method / path: HTTP method and path (``/v1/chat/completions``).
        headers: request headers, keys lower-cased.
        body: the parsed JSON body (None if it was not JSON).
        role: the role from the system message's ``ROLE:`` line, or None.
        in_flight: requests in flight (this one included) when it arrived.
        started / finished: ``time.monotonic()`` at arrival / when the answer was sent.
        reply: what the double answered.
    """

    index: int
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    role: str | None
    in_flight: int
    started: float
    finished: float | None = None
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])

    @property
    def model(self) -> str | None:
        return (self.body or {}).get("model")

    @property
    def temperature(self) -> float | None:
        return (self.body or {}).get("temperature")

    @property
    def system(self) -> str:
        """Text of the system message(s)."""
        return "\n".join(
            _content_text(m) for m in self.messages if m.get("role") in ("system", "developer")
        )

    @property
    def user(self) -> str:
        """Text of the user message(s)."""
        return "\n".join(_content_text(m) for m in self.messages if m.get("role") == "user")


def _content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _words(s: str) -> int:
    return len(s.split())


Script = Callable[[RecordedRequest], "Reply | str"]


class LLMDouble:
    """TEST DOUBLE: scripted OpenAI-compatible Chat Completions server on 127.0.0.1.

    Args:
        script: called with each :class:`RecordedRequest` not served by a queue; returns a
            :class:`Reply` or the message text. It runs in the server's handler thread and may
            block (see :meth:`wait_in_flight`).
        api_key: the key expected in ``Authorization: Bearer``; None accepts any request.
        delay_s: fixed delay added to every reply (for overhead benchmarks).

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1`` (after :meth:`start`).
        api_key_env: environment variable name to hold the key (:data:`TEST_API_KEY_ENV`).
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        api_key: str | None = TEST_API_KEY,
        delay_s: float = 0.0,
        api_key_env: str = TEST_API_KEY_ENV,
    ) -> None:
        self.script = script
        self.api_key = api_key
        self.api_key_env = api_key_env
        self.delay_s = delay_s
        self._lock = threading.Condition()
        self._requests: list[RecordedRequest] = []
        self._queues: dict[str | None, deque[Reply | str]] = {}
        self._in_flight = 0
        self.max_in_flight = 0
        self._closing = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> LLMDouble:
        """Bind an ephemeral port on 127.0.0.1 and serve in a background thread."""
        double = self

        class Handler(_Handler):
            pass

        Handler.double = double
        server = _Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="llm-double", kwargs={"poll_interval": 0.05}
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; requests still sleeping in a delay are released at once."""
        self._closing.set()
        with self._lock:
            self._lock.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LLMDouble:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("llm double is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def llm_settings(self, **overrides: Any) -> dict[str, Any]:
        """An ``accelopt.llm`` settings section (camelCase) pointing at this double, with small
        timeouts and retries suitable for tests; ``overrides`` are merged on top."""
        section: dict[str, Any] = {
            "baseUrl": self.base_url,
            "model": DOUBLE_MODEL,
            "apiKeyEnv": self.api_key_env,
            "timeoutS": 10.0,
            "maxRetries": 2,
            "temperature": 0.7,
        }
        section.update(overrides)
        return section

    # -- scripting ---------------------------------------------------------------------------
    def queue(self, *replies: Reply | str, role: str | None = None) -> None:
        """Append replies served in order, to requests of ``role`` (None: any role) — they
        take precedence over ``script``."""
        with self._lock:
            self._queues.setdefault(role, deque()).extend(replies)

    def pending(self, role: str | None = None) -> int:
        """Replies still queued for ``role`` (None: the shared queue)."""
        with self._lock:
            return len(self._queues.get(role, ()))

    def wait_in_flight(self, n: int, timeout: float = 5.0) -> bool:
        """Block (inside a script) until at least ``n`` requests are in flight at once, or
        ``timeout`` s passed. True when reached. Lets a test prove concurrency without timing."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.max_in_flight < n and not self._closing.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return self.max_in_flight >= n

    # -- records -----------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    def requests_for(self, role: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.role == role]

    def _pick(self, req: RecordedRequest) -> Reply:
        with self._lock:
            for key in (req.role, None):
                q = self._queues.get(key)
                if q:
                    return _as_reply(q.popleft())
        if self.script is not None:
            return _as_reply(self.script(req))
        return Reply(content=f"(llm double: nothing scripted for role {req.role})")

    def _begin(self, method: str, path: str, headers: dict[str, str], body: Any) -> RecordedRequest:
        role = None
        if isinstance(body, dict):
            for m in body.get("messages") or []:
                if isinstance(m, dict) and m.get("role") in ("system", "developer"):
                    match = _ROLE_RE.match(_content_text(m))
                    if match:
                        role = match.group(1).lower()
                    break
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            req = RecordedRequest(
                index=len(self._requests),
                method=method,
                path=path,
                headers=headers,
                body=body if isinstance(body, dict) else None,
                role=role,
                in_flight=self._in_flight,
                started=time.monotonic(),
            )
            self._requests.append(req)
            self._lock.notify_all()
        return req

    def _end(self, req: RecordedRequest, reply: Reply | None) -> None:
        with self._lock:
            self._in_flight -= 1
            req.finished = time.monotonic()
            req.reply = reply
            self._lock.notify_all()

    def _completion_body(self, req: RecordedRequest, reply: Reply) -> bytes:
        content = reply.content or ""
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = sum(_words(_content_text(m)) for m in req.messages)
        completion = reply.completion_tokens
        if completion is None:
            completion = _words(content)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.reasoning_content is not None:
            message["reasoning_content"] = reply.reasoning_content
        body: dict[str, Any] = {
            "id": f"chatcmpl-double-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or req.model or DOUBLE_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.finish_reason,
                    "logprobs": None,
                }
            ],
        }
        if reply.usage:
            body["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return json.dumps(body).encode()


class _Server(ThreadingHTTPServer):
    """socketserver's default listen backlog is 5: a burst of concurrent requests (a beam's worth
    of planner or executor calls) would overflow it and the client would see dropped connections
    and retry after a back-off. A real service accepts such bursts."""

    request_queue_size = 256


class _Handler(BaseHTTPRequestHandler):
    double: LLMDouble
    protocol_version = "HTTP/1.1"
    timeout = 30  # idle keep-alive connections end eventually

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: tests read the records instead

    def _send(self, code: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/").endswith("/models"):
            body = json.dumps(
                {
                    "object": "list",
                    "data": [{"id": DOUBLE_MODEL, "object": "model", "owned_by": "double"}],
                }
            ).encode()
            self._send(200, body, "application/json", {})
        else:
            self._send(404, b'{"error": {"message": "not found"}}', "application/json", {})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        d = self.double
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw or b"null")
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = d._begin("POST", self.path, headers, body)
        reply: Reply | None = None
        try:
            if d.api_key is not None and headers.get("authorization") != f"Bearer {d.api_key}":
                reply = status(401, "llm double: missing or wrong API key")
            elif not self.path.rstrip("/").endswith("/chat/completions"):
                reply = status(404, f"llm double: no route {self.path}")
            elif not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                reply = status(400, "llm double: body is not a chat completion request")
            else:
                reply = d._pick(req)
            wait = reply.delay_s + d.delay_s
            if wait > 0:
                d._closing.wait(wait)
            if reply.drop:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if reply.status == 200 and reply.body is None:
                payload = d._completion_body(req, reply)
            else:
                payload = reply.body if reply.body is not None else b""
            self._send(reply.status, payload, reply.content_type, reply.headers)
        except Exception as exc:  # a broken script must not hang the client
            err = status(500, f"llm double: script raised {type(exc).__name__}: {exc}")
            reply = err
            try:
                self._send(err.status, err.body or b"", err.content_type, {})
            except OSError:
                pass
        finally:
            d._end(req, reply)


@pytest.fixture
def llm_double(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMDouble]:
    """A started :class:`LLMDouble` (TEST DOUBLE of the LLM service), its key in
    ``$ACCELOPT_TEST_LLM_KEY`` for the test's duration. Script it via ``.script`` / ``.queue``;
    point settings at it with ``{"llm": llm_double.llm_settings()}``."""
    with LLMDouble() as double:
        monkeypatch.setenv(double.api_key_env, double.api_key or "")
        yield double

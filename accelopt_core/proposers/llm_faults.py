"""What went wrong in a request of :mod:`accelopt_core.proposers.llm`: the message of a failure
after the openai client's retries, and whether an HTTP 400 says the prompt exceeds the model's
context (and by how many tokens)."""

from __future__ import annotations

import re
from typing import Any

import openai

from accelopt_core.settings import LLMSettings


def classify(
    exc: Exception, settings: LLMSettings, key_env: str
) -> tuple[str, str, int | None, int | None]:
    """``(kind, message, HTTP status or None, excess tokens or None)`` of a request that raised
    ``exc`` after the client's retries. ``kind``: ``context`` (a 400 for a prompt over the
    model's context, with the excess when the server said it), ``unusable`` (HTTP 401/403: the
    key in ``$key_env`` was rejected; HTTP 429 ``insufficient_quota``: the quota is spent) or
    ``other``."""
    message, status = failure_text(exc, settings)
    body = exc.body if isinstance(exc, openai.APIStatusError) else None
    if status == 400 and is_context_error(message, body):
        return "context", message, status, excess_tokens(message, body)
    if status in (401, 403):
        return "unusable", f"the API key in ${key_env} was rejected ({message})", status, None
    if status == 429 and error_code(body) == "insufficient_quota":
        return "unusable", f"the account's quota is spent ({message})", status, None
    return "other", message, status, None


def failure_text(exc: Exception, settings: LLMSettings) -> tuple[str, int | None]:
    """What went wrong in a request that raised ``exc`` after the openai client's retries:
    (message, HTTP status or None). Says "after N retries" for the failures the client retries
    (408, 409, 429, 5xx, connection errors, timeouts)."""
    retries = settings.max_retries
    after = f" after {retries} retries" if retries else ""
    if isinstance(exc, openai.APIStatusError):
        code = exc.status_code
        retried = after if code in (408, 409, 429) or code >= 500 else ""
        return f"HTTP {code}{retried}: {status_text(exc)}", code
    if isinstance(exc, openai.APITimeoutError):
        return f"timed out after {settings.timeout_s:g} s{after}", None
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return f"cannot connect{after}: {short(str(cause) or type(cause).__name__)}", None
    return f"unreadable response: {short(str(exc)) or type(exc).__name__}", None


def status_text(exc: openai.APIStatusError) -> str:
    """The server's error message (OpenAI-shaped ``{"error": {"message": ...}}`` bodies), else
    the start of the raw body."""
    body = exc.body
    if isinstance(body, dict):
        msg = body.get("message")
        if isinstance(body.get("error"), dict):
            msg = body["error"].get("message", msg)
        if msg:
            return short(str(msg))
    try:
        raw = exc.response.text
    except Exception:
        raw = ""
    return short(raw) or "(empty body)"


def short(s: str, limit: int = 300) -> str:
    """``s`` on one line (whitespace runs collapsed), cut to ``limit`` characters with "..."."""
    s = " ".join(str(s).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


# -- context-length errors -------------------------------------------------------------------
_CONTEXT_WORDS = re.compile(
    r"context[_ ]length|maximum context|context size|context window|prompt is too long|"
    r"too many tokens|reduce the length",
    re.IGNORECASE,
)
_LIMIT = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_ASKED = re.compile(r"(?:resulted in|requested) (\d+) tokens", re.IGNORECASE)
_OVER = re.compile(r"(\d+) tokens? > (\d+)", re.IGNORECASE)


def error_code(body: Any) -> str | None:
    """``error.code`` (or ``error.type``) of an OpenAI-shaped error body."""
    err = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return None
    code = err.get("code") or err.get("type")
    return str(code) if code else None


def is_context_error(message: str, body: Any = None) -> bool:
    """True when a 400's message or error code says the prompt exceeds the model's context
    (OpenAI ``context_length_exceeded``, vLLM "maximum context length", llama.cpp
    ``exceed_context_size_error``, "prompt is too long")."""
    code = error_code(body) or ""
    return "context" in code or bool(_CONTEXT_WORDS.search(message))


def excess_tokens(message: str, body: Any = None) -> int | None:
    """How many tokens the prompt is over the context, from the server's message ("maximum
    context length is 4096 tokens ... requested 5000 tokens", "210000 tokens > 200000") or
    llama.cpp's ``n_prompt_tokens`` / ``n_ctx``; None when it does not say."""
    err = body.get("error", body) if isinstance(body, dict) else {}
    if isinstance(err, dict) and isinstance(err.get("n_prompt_tokens"), int):
        if isinstance(err.get("n_ctx"), int):
            return max(1, err["n_prompt_tokens"] - err["n_ctx"])
    limit, asked = _LIMIT.search(message), _ASKED.search(message)
    if limit and asked:
        return max(1, int(asked.group(1)) - int(limit.group(1)))
    over = _OVER.search(message)
    if over:
        return max(1, int(over.group(1)) - int(over.group(2)))
    return None

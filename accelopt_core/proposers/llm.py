"""The OpenAI-compatible LLM client of the agents: endpoints per role, retries, tokens and cost.

One :class:`openai.AsyncOpenAI`, with its own connection pool, per role (planner, executor,
summarizer, fixer) and endpoint, created on first use or by :meth:`LLMClient.warm` (and again if
the event loop changed), then reused for every call of that role: a pool serves one role's
bursts (N planner or K x plans executor calls at once), so each request scans only that role's
connections. Retries of rate limits (429), 5xx,
connection errors and timeouts are the openai client's own: ``max_retries`` with exponential
backoff (0.5 s doubling to 8 s, 25% jitter, or the server's ``Retry-After`` / ``retry-after-ms``
up to two minutes; a longer one is not waited for) and a per-request ``timeout`` — both from
:class:`accelopt_core.settings.LLMSettings`.

Faults no retry fixes are told apart (issue 30): a prompt longer than the model's context (HTTP
400) raises :class:`LLMContextError`, which the agents answer by trimming the prompt once; a
missing or rejected API key (HTTP 401/403) or a spent quota (HTTP 429 ``insufficient_quota``)
raises :class:`LLMUnusable`, and every later call to that endpoint raises it again without a
request (:meth:`LLMClient.fatal_error`; the search stops with that one message). Tokens, cost
and the budget (:mod:`~accelopt_core.proposers.llm_usage`) count only what the endpoint billed:
the ``usage`` of the answers it gave (a failed request bills nothing, a retried one once).

API keys. A role's key is read from the environment variable named by its ``apiKeyEnv``
(default ``OPENAI_API_KEY``) at the first call. When that variable is unset:

- with a ``baseUrl`` set (vLLM, Ollama, llama.cpp server, a proxy), the placeholder
  ``"not-needed"`` is sent, since such local servers usually ignore the key;
- without a ``baseUrl`` (the official OpenAI endpoint), :class:`LLMError` is raised before any
  request, naming the variable to set.

The key is never logged and never appears in an exception message (messages are scrubbed of it
as a second guard).

Cut replies (issue 53). A code reply (executor, fixer: :data:`CONTINUED_ROLES`) that stopped at
the output token limit (``finish_reason: "length"``) gets one continuation request: the same
messages, the cut reply as the assistant's turn and :data:`CONTINUE_PROMPT` (not when the reply
is empty: its tokens went to the model's reasoning); the continuation is
appended to the cut text and both requests' tokens count. A continuation that is cut again, or
that fails, leaves the reply cut (``finish_reason`` ``length``), and the agents name it so. Each
step is a note on the :class:`Completion` (and so in the run's transcript). No continuation is
asked for when the token budget is spent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

from accelopt_core.proposers.base import ROLES, CallRecord, Usage
from accelopt_core.proposers.llm_faults import classify
from accelopt_core.proposers.llm_usage import UsageAccounting
from accelopt_core.settings import LLMSettings

log = logging.getLogger("accelopt.llm")

#: Key sent when the key variable is unset and a custom ``baseUrl`` is configured.
PLACEHOLDER_KEY = "not-needed"
DEFAULT_ENDPOINT = "https://api.openai.com/v1"
#: The chat-completion route, relative to the base URL (OpenAI API reference).
CHAT_PATH = "/chat/completions"
#: Roles whose reply cut at the output token limit gets one continuation request.
CONTINUED_ROLES = frozenset(("executor", "fixer"))
#: The user turn that asks for the rest of a cut reply.
CONTINUE_PROMPT = (
    "Your reply was cut off at the output token limit. Continue it exactly where it stopped: "
    "no preamble, no repetition of what you already wrote, and close any open code block."
)


class LLMError(Exception):
    """An LLM call failed after the client's retries were spent (or could not be made).

    Attributes:
        role: the agent role of the call (``planner`` ...).
        endpoint: base URL of the endpoint (user:password stripped).
        model: the model asked for, or None when none is configured.
        status: HTTP status of the last response, or None (connection error, timeout,
            unreadable body, missing key, budget spent).
    """

    def __init__(
        self,
        message: str,
        *,
        role: str,
        endpoint: str,
        model: str | None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.role = role
        self.endpoint = endpoint
        self.model = model
        self.status = status


class LLMBudgetError(LLMError):
    """The token budget (``max_tokens``) is spent; no request was made."""


class LLMContextError(LLMError):
    """HTTP 400: the prompt does not fit the model's context. ``excess_tokens``: how many
    tokens too many, when the server said (OpenAI, vLLM, llama.cpp and Anthropic-style
    messages are read), else None."""

    excess_tokens: int | None = None


class LLMUnusable(LLMError):
    """A fault no retry fixes: the API key is missing or was rejected (HTTP 401/403), or the
    account's quota is spent (HTTP 429 ``insufficient_quota``)."""


@dataclass
class Completion:
    """One chat completion.

    Attributes:
        text: the assistant message (empty string when the model sent none).
        usage: tokens of this call and its cost in USD (0 without a price for the model).
        model: the model that answered (as reported by the endpoint).
        role: the agent role that asked.
        finish_reason: ``stop``, ``length`` (cut off at the output limit) ...
        reasoning_chars: length of a ``reasoning_content`` / ``reasoning`` field the endpoint
            sent (never read otherwise), 0 without one.
        latency_s: seconds from the request to the answer, the client's retries included.
        record: the call's transcript entry, attached by the agents
            (:class:`~accelopt_core.proposers.agents.AgentProposer`), else None.
        notes: what happened to the reply besides the request (cut at the output limit and
            continued), one line each.
        continued: how many continuation requests the text includes (0 or 1).
    """

    text: str
    usage: Usage
    model: str
    role: str
    finish_reason: str | None = None
    reasoning_chars: int = 0
    latency_s: float = 0.0
    record: CallRecord | None = None
    notes: list[str] = field(default_factory=list)
    continued: int = 0


@dataclass(frozen=True)
class _Endpoint:
    """Where one role's calls go: base URL (None: the OpenAI endpoint), model and key variable."""

    role: str
    base_url: str | None
    model: str | None
    key_env: str

    @property
    def display(self) -> str:
        """The base URL for messages (user:password stripped)."""
        return _display_url(self.base_url or DEFAULT_ENDPOINT)


def _display_url(url: str) -> str:
    """The URL without user:password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


class LLMClient(UsageAccounting):
    """Chat-completion calls for the agent roles, with token, cost and budget accounting.

    Args:
        settings: the ``accelopt.llm`` settings (endpoint, per-role overrides, retries,
            timeout, temperature, price table).
        max_tokens: optional token budget (prompt + completion, all roles). Once reached,
            :attr:`over_budget` is True and :meth:`complete` raises :class:`LLMBudgetError`
            without calling the endpoint (a call in flight may overshoot by its own size).
        environ: where API keys are read from (default ``os.environ``).
    """

    def __init__(
        self,
        settings: LLMSettings,
        *,
        max_tokens: int | None = None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.max_tokens = max_tokens
        self._environ = environ
        self._clients: dict[_Endpoint, tuple[openai.AsyncOpenAI, Any]] = {}
        self._usage: dict[str, Usage] = {}
        self._fatal: dict[tuple[str | None, str], LLMUnusable] = {}

    # -- accounting (usage_by_role, total, over_budget, price_of: UsageAccounting) -------------
    def fatal_error(self) -> str | None:
        """The message of the first :class:`LLMUnusable` fault met (a missing or rejected key,
        a spent quota), None while every endpoint may still answer."""
        return str(next(iter(self._fatal.values()))) if self._fatal else None

    def preflight(self) -> str | None:
        """Check, without a request, that every role with a model has an API key; a role
        without one is recorded as unusable. Returns :meth:`fatal_error`."""
        for role in ROLES:
            ep = self._endpoint(role)
            if ep.model and self._key(ep) is None:
                self._fatal.setdefault((ep.base_url, ep.key_env), self._missing_key(ep))
        return self.fatal_error()

    # -- endpoints ---------------------------------------------------------------------------
    def _endpoint(self, role: str) -> _Endpoint:
        if role in ROLES:
            eff = self.settings.role(role)  # type: ignore[arg-type]
            key_env = eff.api_key_env or self.settings.api_key_env
            return _Endpoint(role, eff.base_url, eff.model, key_env)
        return _Endpoint(
            role, self.settings.base_url, self.settings.model, self.settings.api_key_env
        )

    def _key(self, ep: _Endpoint) -> str | None:
        env = self._environ if self._environ is not None else os.environ
        key = env.get(ep.key_env)
        if key:
            return key
        return PLACEHOLDER_KEY if ep.base_url else None

    def _client(self, ep: _Endpoint, key: str) -> openai.AsyncOpenAI:
        """The client (and connection pool) of ``ep``'s role on the running event loop."""
        loop = asyncio.get_running_loop()
        cached = self._clients.get(ep)
        if cached is not None and cached[1] is loop:
            return cached[0]
        client = openai.AsyncOpenAI(
            api_key=key,
            base_url=ep.base_url or None,
            timeout=self.settings.timeout_s,
            max_retries=self.settings.max_retries,
        )
        self._clients[ep] = (client, loop)
        return client

    async def warm(self) -> None:
        """Build the HTTP clients of every role on the running event loop, without sending a
        request (creating a client's transport costs ~0.2 s: SSL context). The search calls this
        while the baseline is evaluated, so the first planner call does not pay it."""
        for role in ROLES:
            ep = self._endpoint(role)
            key = self._key(ep)
            if key is not None:
                self._client(ep, key)

    async def close(self) -> None:
        """Close the HTTP connections of the clients made on the running event loop."""
        loop = asyncio.get_running_loop()
        clients, self._clients = self._clients, {}
        for client, owner in clients.values():
            if owner is loop:
                try:
                    await client.close()
                except Exception:  # closing is best effort
                    log.debug("closing an LLM client failed", exc_info=True)

    # -- the call ----------------------------------------------------------------------------
    async def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        temperature: float | None = None,
    ) -> Completion:
        """One chat completion for ``role`` (``planner``, ``executor``, ``summarizer``,
        ``fixer``) with the role's endpoint and model.

        ``messages`` are OpenAI chat messages (``{"role": "system"|"user"|..., "content": str}``);
        ``temperature`` defaults to ``settings.temperature``. A reply of a
        :data:`CONTINUED_ROLES` role cut at the output token limit is continued once (see the
        module docstring): the Completion is then the two requests' together.

        Raises:
            LLMBudgetError: the token budget is spent (no request made).
            LLMError: no model configured, key missing for the OpenAI endpoint, HTTP error
                after retries (status set), connection error or timeout after retries, or a
                response that is not a chat completion. The message names the endpoint, model
                and status; never the key.
            asyncio.CancelledError: the caller was cancelled.
        """
        ep = self._endpoint(role)
        client = self._client(ep, self._ready(ep))
        temp = self.settings.temperature if temperature is None else temperature
        body = {"model": ep.model, "messages": messages, "temperature": temp}
        started = time.monotonic()
        done = await self._post(ep, client, body)
        if done.finish_reason == "length" and role in CONTINUED_ROLES:
            if done.text.strip():
                done = await self._continued(ep, client, body, done)
            else:  # its tokens went to reasoning: nothing to continue from
                done.notes.append("cut at the output token limit with no answer: not continued")
        done.latency_s = time.monotonic() - started
        return done

    async def _post(self, ep: _Endpoint, client: openai.AsyncOpenAI, body: dict) -> Completion:
        """One request of ``body`` to ``ep``'s endpoint, its usage counted; raises LLMError."""
        try:
            # ``post`` with ``cast_to=object`` is the client's own request path (headers, retries,
            # timeout, errors) without its per-call typed-dict transform of the messages and the
            # pydantic model of the reply: together ~40% of the host's CPU per call (issue 20).
            response = await client.post(CHAT_PATH, body=body, cast_to=object)
        except (openai.OpenAIError, ValueError) as exc:
            raise self._classified(ep, exc) from None
        return self._record(ep, response)

    async def _continued(
        self, ep: _Endpoint, client: openai.AsyncOpenAI, body: dict, cut: Completion
    ) -> Completion:
        """``cut`` (a reply stopped at the output token limit) with one continuation request's
        text appended and its usage added; ``cut`` itself, with a note saying why, when the
        budget is spent or the continuation fails (never raises an LLMError)."""
        note = f"cut at the output token limit after {len(cut.text)} characters"
        asked = _continuation(body, cut)
        try:
            self._ready(ep)
            more = await self._post(ep, client, asked)
        except LLMError as exc:
            cut.notes.append(f"{note}; not continued: {exc}")
            return cut
        return _joined(cut, more, note)

    def _classified(self, ep: _Endpoint, exc: Exception) -> LLMError:
        """The LLMError of a failed request: :class:`LLMContextError` for a prompt over the
        context, :class:`LLMUnusable` (remembered for ``ep``) for a rejected key or a spent
        quota, else a plain LLMError."""
        kind, message, status, excess = classify(exc, self.settings, ep.key_env)
        if kind == "context":
            error = self._error(ep, message, status, LLMContextError)
            error.excess_tokens = excess  # type: ignore[attr-defined]
            return error
        if kind == "unusable":
            return self._unusable(ep, self._error(ep, message, status, LLMUnusable))
        return self._error(ep, message, status)

    def _unusable(self, ep: _Endpoint, error: LLMError) -> LLMError:
        """Remember ``error`` (an :class:`LLMUnusable`) for ``ep``'s endpoint and key."""
        self._fatal.setdefault((ep.base_url, ep.key_env), error)  # type: ignore[arg-type]
        return error

    def _missing_key(self, ep: _Endpoint) -> LLMUnusable:
        return self._error(  # type: ignore[return-value]
            ep,
            f"no API key: set the environment variable {ep.key_env} "
            "(or accelopt.llm.apiKeyEnv to the variable that holds it)",
            cls=LLMUnusable,
        )

    def _ready(self, ep: _Endpoint) -> str:
        """The API key for a call to ``ep``; raises LLMBudgetError / LLMError when no call may
        be made (budget spent, no model, no key for the OpenAI endpoint)."""
        fatal = self._fatal.get((ep.base_url, ep.key_env))
        if fatal is not None:
            raise fatal
        if self.over_budget:
            raise self._error(
                ep,
                f"token budget of {self.max_tokens} tokens is spent "
                f"({self.total().total_tokens} used)",
                cls=LLMBudgetError,
            )
        if not ep.model:
            raise self._error(ep, "no model is configured (set accelopt.llm.model)")
        key = self._key(ep)
        if key is None:
            raise self._unusable(ep, self._missing_key(ep))
        return key

    def _error(
        self, ep: _Endpoint, msg: str, status: int | None = None, cls: type[LLMError] = LLMError
    ) -> LLMError:
        """An error naming the role, endpoint and model; the API key scrubbed from its text."""
        text = f"{ep.role} call to {ep.display} (model {ep.model or '<none>'}) failed: {msg}"
        key = self._key(ep)
        if key and key != PLACEHOLDER_KEY:
            text = text.replace(key, "<api key>")
        return cls(text, role=ep.role, endpoint=ep.display, model=ep.model, status=status)

    def _record(self, ep: _Endpoint, response: Any) -> Completion:
        """The Completion of a response body (the JSON of a chat completion), its tokens and
        cost added to the role's usage. Raises LLMError when it is not a chat completion."""
        reply = _reply_fields(response)
        if reply is None:
            raise self._error(ep, "unreadable response: not a chat completion")
        text, finish_reason, answered, prompt_tokens, completion_tokens, reasoning = reply
        answered_by = answered or ep.model or ""
        price_model = ep.model if ep.model in self.settings.prices else answered_by
        usage = Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            calls=1,
            cost_usd=self.price_of(price_model, prompt_tokens, completion_tokens),
        )
        self._usage.setdefault(ep.role, Usage()).add(usage)
        log.debug(
            "%s call (model %s): %d prompt + %d completion tokens, finish %s",
            ep.role,
            answered_by,
            prompt_tokens,
            completion_tokens,
            finish_reason,
        )
        return Completion(
            text=text,
            usage=usage,
            model=answered_by,
            role=ep.role,
            finish_reason=finish_reason,
            reasoning_chars=reasoning,
        )


def _continuation(body: dict, cut: Completion) -> dict:
    """The request ``body`` asking for the rest of ``cut``: the same messages, the cut reply as
    the assistant's turn and :data:`CONTINUE_PROMPT`."""
    messages = [
        *body["messages"],
        {"role": "assistant", "content": cut.text},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]
    return {**body, "messages": messages}


def _joined(cut: Completion, more: Completion, note: str) -> Completion:
    """``cut`` with its continuation ``more`` appended: both texts and usages, ``more``'s finish
    reason, and ``note`` (how ``cut`` was cut) saying it was continued once."""
    usage = replace(cut.usage)
    usage.add(more.usage)
    ended = "cut again" if more.finish_reason == "length" else f"ended: {more.finish_reason}"
    return Completion(
        text=cut.text + more.text,
        usage=usage,
        model=cut.model,
        role=cut.role,
        finish_reason=more.finish_reason,
        reasoning_chars=cut.reasoning_chars + more.reasoning_chars,
        notes=[*cut.notes, f"{note}; continued once ({len(more.text)} characters, {ended})"],
        continued=cut.continued + 1,
    )


def _reply_fields(data: Any) -> tuple[str, str | None, str | None, int, int, int] | None:
    """``(text, finish_reason, model, prompt_tokens, completion_tokens, reasoning_chars)`` of a
    chat completion's JSON body (OpenAI's ``/chat/completions`` response:
    ``choices[0].message.content``, ``usage.prompt_tokens`` ...; ``reasoning_content`` or
    ``reasoning`` only measured, never used); None when ``data`` is not one (no choices, not
    an object). Tokens missing from ``usage`` count 0: nothing else is known to be billed."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    model = data.get("model")
    reasoning = ""
    if isinstance(message, dict):
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    return (
        content if isinstance(content, str) else "",
        choice.get("finish_reason"),
        model if isinstance(model, str) and model else None,
        _count(usage.get("prompt_tokens")),
        _count(usage.get("completion_tokens")),
        len(reasoning) if isinstance(reasoning, str) else 0,
    )


def _count(value: Any) -> int:
    """A token count from a reply (0 when missing or not a number)."""
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0

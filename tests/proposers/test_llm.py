"""LLMClient (accelopt_core.proposers.llm) with the real openai client against the scripted LLM TEST DOUBLE
(tests/llm_double.py, a loopback HTTP server)."""

from __future__ import annotations

import logging
import socket

import pytest

from accelopt_core.proposers.llm import PLACEHOLDER_KEY, LLMBudgetError, LLMClient, LLMError
from accelopt_core.settings import LLMSettings
from tests.llm_double import (
    DOUBLE_MODEL,
    TEST_API_KEY,
    LLMDouble,
    delay,
    drop,
    garbage,
    status,
    text,
)
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)

SYSTEM = {"role": "system", "content": "ROLE: planner\nYou plan."}


def _client(double: LLMDouble, max_tokens: int | None = None, **overrides) -> LLMClient:
    return LLMClient(
        LLMSettings.model_validate(double.llm_settings(**overrides)), max_tokens=max_tokens
    )


def _msgs(user: str = "make it fast") -> list[dict]:
    return [SYSTEM, {"role": "user", "content": user}]


async def test_success_counts_tokens_and_cost(llm_double: LLMDouble) -> None:
    llm_double.queue(
        text("Title: fuse the passes", prompt_tokens=1000, completion_tokens=500),
        text("second", prompt_tokens=10, completion_tokens=4),
    )
    prices = {DOUBLE_MODEL: {"inputPerMtok": 2.0, "outputPerMtok": 10.0}}
    client = _client(llm_double, prices=prices)
    done = await client.complete("planner", _msgs())
    assert done.text == "Title: fuse the passes"
    assert done.role == "planner" and done.model == DOUBLE_MODEL
    assert done.finish_reason == "stop"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (1000, 500)
    assert done.usage.cost_usd == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)
    await client.complete("executor", _msgs(), temperature=0.0)

    by_role = client.usage_by_role()
    assert set(by_role) == {"planner", "executor"}
    assert by_role["planner"].calls == 1 and by_role["planner"].total_tokens == 1500
    assert by_role["executor"].total_tokens == 14
    total = client.total()
    assert total.calls == 2 and total.total_tokens == 1514
    assert total.cost_usd == pytest.approx((1010 * 2.0 + 504 * 10.0) / 1e6)

    first, second = llm_double.requests
    assert first.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert first.model == DOUBLE_MODEL and first.role == "planner"
    assert first.temperature == pytest.approx(0.7)  # settings default
    assert second.temperature == 0.0
    await client.close()


async def test_no_price_means_zero_cost(llm_double: LLMDouble) -> None:
    llm_double.queue("a b c")
    client = _client(llm_double)
    done = await client.complete("planner", _msgs("one two"))
    assert done.usage.cost_usd == 0.0
    # the double counts words: "ROLE: planner You plan." (4) + "one two" (2)
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (6, 3)


async def test_rate_limit_then_success_is_retried(llm_double: LLMDouble) -> None:
    llm_double.queue(status(429), status(429), "ok now")
    client = _client(llm_double, maxRetries=2)
    done = await client.complete("planner", _msgs())
    assert done.text == "ok now"
    assert [r.reply.status for r in llm_double.requests] == [429, 429, 200]
    assert client.total().calls == 1


@pytest.mark.parametrize("code", [500, 503])
async def test_server_errors_retried_then_llm_error(llm_double: LLMDouble, code: int) -> None:
    llm_double.queue(*[status(code)] * 3, "never reached")
    client = _client(llm_double, maxRetries=2)
    with pytest.raises(LLMError) as info:
        await client.complete("planner", _msgs())
    err = info.value
    assert len(llm_double.requests) == 3  # first try + 2 retries
    assert err.status == code and err.role == "planner" and err.model == DOUBLE_MODEL
    msg = str(err)
    assert f"HTTP {code}" in msg and "after 2 retries" in msg
    assert llm_double.base_url in msg and DOUBLE_MODEL in msg
    assert llm_double.pending() == 1
    assert client.total().calls == 0


async def test_client_error_is_not_retried(llm_double: LLMDouble) -> None:
    llm_double.queue(status(400, "context too long"))
    client = _client(llm_double, maxRetries=3)
    with pytest.raises(LLMError, match="HTTP 400: context too long") as info:
        await client.complete("planner", _msgs())
    assert "retries" not in str(info.value)
    assert len(llm_double.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [garbage(), garbage(b"<html>oops</html>", content_type="text/html"), garbage(b"{}")],
    ids=["bad-json", "html", "not-a-completion"],
)
async def test_garbage_body_is_llm_error(llm_double: LLMDouble, reply) -> None:
    llm_double.queue(reply)
    client = _client(llm_double, maxRetries=0)
    with pytest.raises(LLMError, match="unreadable response"):
        await client.complete("planner", _msgs())


async def test_dropped_connection_is_retried(llm_double: LLMDouble) -> None:
    llm_double.queue(drop(), "after the drop")
    client = _client(llm_double, maxRetries=1)
    done = await client.complete("planner", _msgs())
    assert done.text == "after the drop"
    assert len(llm_double.requests) == 2


async def test_timeout_is_llm_error(llm_double: LLMDouble) -> None:
    llm_double.queue(delay(5.0, "too late"))
    client = _client(llm_double, maxRetries=0, timeoutS=0.3)
    with pytest.raises(LLMError, match="timed out after 0.3 s") as info:
        await client.complete("planner", _msgs())
    assert info.value.status is None


async def test_endpoint_down_is_llm_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = LLMSettings(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=0, timeout_s=5
    )
    client = LLMClient(settings, environ={})
    with pytest.raises(LLMError, match="cannot connect") as info:
        await client.complete("executor", _msgs())
    assert info.value.status is None and f"127.0.0.1:{port}" in str(info.value)


async def test_api_key_never_in_errors_or_logs(
    llm_double: LLMDouble, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    llm_double.queue("fine", status(503), status(503))
    client = _client(llm_double, maxRetries=1)
    await client.complete("planner", _msgs())
    with pytest.raises(LLMError) as info:
        await client.complete("planner", _msgs())
    assert llm_double.requests[0].headers["authorization"] == f"Bearer {TEST_API_KEY}"
    assert TEST_API_KEY not in str(info.value) and TEST_API_KEY not in repr(info.value.args)
    assert TEST_API_KEY not in caplog.text
    # a wrong key: the double answers 401; neither key shows up anywhere
    wrong = "sk-WRONG-key-9876543210"
    monkeypatch.setenv(llm_double.api_key_env, wrong)
    other = _client(llm_double, maxRetries=0)
    with pytest.raises(LLMError, match="HTTP 401") as info:
        await other.complete("planner", _msgs())
    assert wrong not in str(info.value) and wrong not in caplog.text
    assert TEST_API_KEY not in caplog.text


async def test_missing_key_uses_placeholder_for_custom_endpoint(
    llm_double: LLMDouble, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(llm_double.api_key_env)
    llm_double.api_key = None  # a local server that ignores keys
    llm_double.queue("hi")
    done = await _client(llm_double).complete("planner", _msgs())
    assert done.text == "hi"
    assert llm_double.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


async def test_missing_key_for_openai_endpoint_fails_before_any_request() -> None:
    client = LLMClient(LLMSettings(model="gpt-x", api_key_env="NO_SUCH_KEY_VAR"), environ={})
    with pytest.raises(LLMError, match="set the environment variable NO_SUCH_KEY_VAR") as info:
        await client.complete("planner", _msgs())
    assert "api.openai.com" in str(info.value)


async def test_no_model_configured() -> None:
    client = LLMClient(LLMSettings(base_url="http://127.0.0.1:9/v1"), environ={})
    with pytest.raises(LLMError, match="no model is configured"):
        await client.complete("planner", _msgs())


async def test_budget_stops_calls(llm_double: LLMDouble) -> None:
    llm_double.queue(text("x", prompt_tokens=8, completion_tokens=4), "never sent")
    client = _client(llm_double, max_tokens=12)
    assert not client.over_budget
    await client.complete("planner", _msgs())
    assert client.over_budget
    with pytest.raises(LLMBudgetError, match="budget of 12 tokens is spent"):
        await client.complete("executor", _msgs())
    assert len(llm_double.requests) == 1


async def test_role_override_uses_its_own_endpoint_and_model(
    llm_double: LLMDouble,
) -> None:
    with LLMDouble(api_key=None) as second:
        settings = llm_double.llm_settings(
            executor={"baseUrl": second.base_url, "model": "exec-model", "apiKeyEnv": "UNSET_X"}
        )
        client = LLMClient(LLMSettings.model_validate(settings))
        llm_double.queue("plan")
        second.queue("code")
        assert (await client.complete("planner", _msgs())).text == "plan"
        executed = await client.complete(
            "executor", [{"role": "system", "content": "ROLE: executor"}]
        )
        assert executed.text == "code" and executed.model == "exec-model"
        assert [r.role for r in llm_double.requests] == ["planner"]
        assert [(r.role, r.model) for r in second.requests] == [("executor", "exec-model")]
        assert second.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
        await client.close()


async def test_the_request_is_a_plain_chat_completion(llm_double: LLMDouble) -> None:
    llm_double.queue("ok")
    client = _client(llm_double, temperature=0.3)
    await client.complete("planner", _msgs("hi"))
    (req,) = llm_double.requests
    assert req.method == "POST" and req.path.endswith("/chat/completions")
    assert req.body == {"model": DOUBLE_MODEL, "messages": _msgs("hi"), "temperature": 0.3}
    assert req.headers["authorization"] == f"Bearer {TEST_API_KEY}"


async def test_each_role_keeps_one_client_and_pool(llm_double: LLMDouble) -> None:
    """One openai client (its own connection pool) per role, built once and reused by every
    call of that role; another role gets its own."""
    llm_double.queue("a", "b", "c", "d")
    client = _client(llm_double)
    await client.warm()
    built = {ep.role: pair[0] for ep, pair in client._clients.items()}
    assert set(built) == {"planner", "executor", "summarizer", "fixer"}
    assert len({id(c) for c in built.values()}) == 4
    for role in ("planner", "planner", "executor", "executor"):
        await client.complete(role, _msgs())
    assert {ep.role: pair[0] for ep, pair in client._clients.items()} == built
    await client.close()

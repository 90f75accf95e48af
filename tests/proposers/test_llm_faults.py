"""Issue 30: service faults as real servers make them, spoken to by the real openai client
through LLMClient (accelopt_core.proposers.llm). The server is the scripted LLM TEST DOUBLE
(tests/llm_double.py, a loopback HTTP server)."""

from __future__ import annotations

import pytest

from accelopt_core.proposers.llm import LLMClient, LLMContextError, LLMError, LLMUnusable
from accelopt_core.proposers.llm_faults import excess_tokens, is_context_error
from accelopt_core.settings import LLMSettings
from tests.llm_double import (
    TEST_API_KEY,
    LLMDouble,
    context_length,
    quota_spent,
    rate_limited,
    status,
    text,
)
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)

MESSAGES = [
    {"role": "system", "content": "ROLE: planner\nYou plan."},
    {"role": "user", "content": "make it fast"},
]


def _client(double: LLMDouble, **overrides) -> LLMClient:
    return LLMClient(LLMSettings.model_validate(double.llm_settings(**overrides)))


async def test_retry_after_in_seconds_is_honoured(llm_double: LLMDouble) -> None:
    llm_double.queue(rate_limited(1), "now")
    client = _client(llm_double, maxRetries=1)
    done = await client.complete("planner", MESSAGES)
    first, second = llm_double.requests
    assert done.text == "now"
    assert first.finished is not None and second.started - first.finished >= 0.9
    assert client.total().calls == 1 and done.latency_s >= 0.9


async def test_a_prompt_over_the_context_is_its_own_error_and_bills_nothing(
    llm_double: LLMDouble,
) -> None:
    llm_double.queue(context_length(limit=4096, requested=5000))
    client = _client(llm_double, maxRetries=3)
    with pytest.raises(LLMContextError) as info:
        await client.complete("planner", MESSAGES)
    assert info.value.status == 400 and info.value.excess_tokens == 904
    assert len(llm_double.requests) == 1  # a 400 is not retried
    assert client.total().total_tokens == 0 and client.fatal_error() is None


@pytest.mark.parametrize(
    ("message", "body", "excess"),
    [
        ("This model's maximum context length is 8192 tokens. However, your messages "
         "resulted in 9000 tokens.", None, 808),
        ("prompt is too long: 210000 tokens > 200000 maximum", None, 10000),
        ("the request exceeds the available context size, try increasing it",
         {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 5000,
                    "n_ctx": 4096}}, 904),
        ("bad request", {"error": {"code": "context_length_exceeded"}}, None),
    ],
    ids=["openai", "anthropic-style", "llama.cpp", "code-only"],
)  # fmt: skip
def test_context_errors_of_several_servers_are_read(
    message: str, body: dict | None, excess: int | None
) -> None:
    assert is_context_error(message, body)
    assert excess_tokens(message, body) == excess
    assert not is_context_error("model 'x' not found", {"error": {"code": "model_not_found"}})


async def test_a_rejected_key_is_said_once_and_never_sent_again(llm_double: LLMDouble) -> None:
    llm_double.api_key = "sk-the-server-wants-another-key"
    client = _client(llm_double, maxRetries=2)
    with pytest.raises(LLMUnusable) as info:
        await client.complete("planner", MESSAGES)
    assert info.value.status == 401 and len(llm_double.requests) == 1  # 401 is not retried
    message = client.fatal_error()
    assert (
        message is not None and f"the API key in ${llm_double.api_key_env} was rejected" in message
    )
    assert TEST_API_KEY not in message
    with pytest.raises(LLMUnusable):  # the executor shares the endpoint: no new request
        await client.complete("executor", MESSAGES)
    assert len(llm_double.requests) == 1


async def test_a_spent_quota_stops_the_calls(llm_double: LLMDouble) -> None:
    llm_double.queue(*[quota_spent()] * 3)
    client = _client(llm_double, maxRetries=2)
    with pytest.raises(LLMUnusable, match="quota is spent"):
        await client.complete("planner", MESSAGES)
    assert "quota is spent" in (client.fatal_error() or "")


async def test_a_missing_key_for_the_openai_endpoint_is_known_before_any_request() -> None:
    settings = LLMSettings(model="gpt-4o", api_key_env="ACCELOPT_TEST_NO_SUCH_KEY")
    client = LLMClient(settings, environ={})
    assert client.preflight() == (
        "planner call to https://api.openai.com/v1 (model gpt-4o) failed: no API key: set the "
        "environment variable ACCELOPT_TEST_NO_SUCH_KEY (or accelopt.llm.apiKeyEnv to the "
        "variable that holds it)"
    )
    with pytest.raises(LLMUnusable):
        await client.complete("executor", MESSAGES)


async def test_only_billed_tokens_count(llm_double: LLMDouble) -> None:
    llm_double.queue(
        status(500),  # retried by the client: billed once, for the answer
        text("a b", prompt_tokens=100, completion_tokens=2),
        text("no usage reported", usage=False),  # nothing known to be billed
        context_length(),  # refused: nothing billed
    )
    client = _client(llm_double, maxRetries=1, prices={"double-model": {"inputPerMtok": 1.0}})
    await client.complete("planner", MESSAGES)
    await client.complete("planner", MESSAGES)
    with pytest.raises(LLMError):
        await client.complete("planner", MESSAGES)
    total = client.total()
    assert (total.calls, total.prompt_tokens, total.completion_tokens) == (2, 100, 2)
    assert total.cost_usd == pytest.approx(100 / 1e6)


async def test_reasoning_content_is_never_the_answer(llm_double: LLMDouble) -> None:
    llm_double.queue(
        text("Title: the answer", reasoning_content="```python\ndef draft(): ...\n```"),
        text("", reasoning_content="thinking and thinking", finish_reason="length"),
    )
    client = _client(llm_double)
    answered = await client.complete("planner", MESSAGES)
    assert answered.text == "Title: the answer" and answered.reasoning_chars > 0
    only = await client.complete("planner", MESSAGES)
    assert only.text == "" and only.reasoning_chars == len("thinking and thinking")

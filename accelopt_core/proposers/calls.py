"""The transcript side of the agents' calls (issue 30): :class:`CallLog` numbers each call of one
proposer, makes its :class:`~accelopt_core.proposers.base.CallRecord` and hands it, once its
verdict is known, to the listeners (the search's run recorder)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from accelopt_core.proposers.base import ROLES, CallRecord, Usage
from accelopt_core.proposers.llm import Completion, LLMError
from accelopt_core.settings import LLMSettings

log = logging.getLogger("accelopt.agents")


class CallLog:
    """The calls of one proposer, in the order they were made.

    Args:
        llm: the settings: ``store_prompts`` (keep prompts and replies) and the models asked
            for (named in a failed call's record).
    """

    def __init__(self, llm: LLMSettings) -> None:
        self.llm = llm
        self._listeners: list[Callable[[CallRecord], None]] = []
        self._count = 0

    def subscribe(self, callback: Callable[[CallRecord], None]) -> None:
        """Hand every later call, with its verdict, to ``callback``."""
        self._listeners.append(callback)

    async def request(
        self,
        client: Any,
        role: str,
        messages: list[dict[str, str]],
        temperature: float | None,
        trimmed: list[str] | None = None,
    ) -> Completion:
        """One ``client.complete`` call (an :class:`~accelopt_core.proposers.llm.LLMClient`).
        A failed one is recorded (verdict ``failed``) and its LLMError re-raised; a successful
        one carries its open record (``Completion.record``) until :meth:`verdict`. ``trimmed``:
        what the prompt left out to fit the context."""
        started, clock = time.time(), time.monotonic()
        try:
            done = await client.complete(role, messages, temperature=temperature)
        except LLMError as exc:
            record = self._record(role, messages, None, started, trimmed or [])
            record.latency_s, record.status = time.monotonic() - clock, exc.status
            self._emit(record, "failed", str(exc))
            raise
        done.record = self._record(role, messages, done, started, trimmed or [])
        return done

    def verdict(self, done: Completion | None, verdict: str, detail: str | None) -> int | None:
        """Close the call of ``done`` with its verdict (``plan``, ``candidate``, ``rule``,
        ``unusable``) and hand it to the listeners; its number (None without a call)."""
        record = done.record if done is not None else None
        if record is None:
            return None
        self._emit(record, verdict, detail)
        return record.n

    def _record(
        self,
        role: str,
        messages: list[dict[str, str]],
        done: Completion | None,
        started: float,
        trimmed: list[str],
    ) -> CallRecord:
        """The transcript entry of one call (its verdict still open)."""
        self._count += 1
        keep = self.llm.store_prompts
        usage = done.usage if done is not None else Usage()
        return CallRecord(
            n=self._count,
            role=role,
            model=done.model if done is not None else self._asked_model(role),
            prompt=[dict(m) for m in messages] if keep else [],
            reply=done.text if done is not None and keep else None,
            finish_reason=done.finish_reason if done is not None else None,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            latency_s=done.latency_s if done is not None else 0.0,
            started_at=started,
            verdict="",
            trimmed=list(trimmed),
        )

    def _asked_model(self, role: str) -> str:
        """The model a role's calls ask for ('' when none is configured)."""
        model = self.llm.role(role).model if role in ROLES else self.llm.model  # type: ignore[arg-type]
        return model or ""

    def _emit(self, record: CallRecord, verdict: str, detail: str | None) -> None:
        record.verdict, record.detail = verdict, detail
        for callback in self._listeners:
            try:
                callback(record)
            except Exception:  # a transcript must never break a search
                log.exception("recording an LLM call failed")

"""The budget of one search: tokens (``search.max_tokens``), wall time (``search.max_wall_s``),
and the cancellation request checked at the same checkpoints. The iteration count T is the loop's
own bound."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping

from accelopt_core.proposers import Usage
from accelopt_core.settings import SearchSettings


class BudgetSpent(Exception):
    """A budget ran out; ``str(exc)`` is the report's ``stopped_reason``
    (``budget: tokens (1200 >= 1000)``, ``budget: wall time``)."""


class ProposerUnusable(BudgetSpent):
    """The proposer can make no call (a missing or rejected API key, a spent quota); ``str(exc)``
    is ``LLM unusable: <why>``, the report's ``stopped_reason``."""


class Budget:
    """Token and wall-time limits of one search, checked against the proposer's usage.

    Args:
        settings: ``max_tokens`` (total LLM tokens, all roles) and ``max_wall_s`` (seconds from
            :meth:`start`); None means no limit.
        usage: the proposer's usage per role (``Proposer.usage``); an exception there counts as
            no usage.
        unusable: why the proposer can make no call, or None (``AgentProposer.unusable``);
            None (the default) for a proposer that can always propose.
    """

    def __init__(
        self,
        settings: SearchSettings,
        usage: Callable[[], Mapping[str, Usage]],
        unusable: Callable[[], str | None] | None = None,
    ) -> None:
        self.max_tokens = settings.max_tokens
        self.max_wall_s = settings.max_wall_s
        self._usage = usage
        self._unusable = unusable
        self.started = time.monotonic()
        self.cancel_requested = False

    def start(self) -> None:
        """Start the wall clock."""
        self.started = time.monotonic()

    def elapsed_s(self) -> float:
        """Seconds since :meth:`start`."""
        return time.monotonic() - self.started

    def usage(self) -> dict[str, Usage]:
        """The proposer's usage per role (empty when it cannot tell)."""
        try:
            return dict(self._usage())
        except Exception:
            return {}

    def check(self) -> None:
        """A checkpoint of the search.

        Raises:
            asyncio.CancelledError: the search was asked to stop (:attr:`cancel_requested`).
            ProposerUnusable: the proposer can make no call (its ``unusable`` says why).
            BudgetSpent: the proposer's tokens reached ``max_tokens``.
        """
        if self.cancel_requested:
            raise asyncio.CancelledError
        why = self._unusable() if self._unusable is not None else None
        if why:
            raise ProposerUnusable(f"LLM unusable: {why}")
        if self.max_tokens is not None:
            used = sum(u.total_tokens for u in self.usage().values())
            if used >= self.max_tokens:
                raise BudgetSpent(f"budget: tokens ({used} >= {self.max_tokens})")

    @contextlib.asynccontextmanager
    async def wall_clock(self) -> AsyncIterator[None]:
        """Run the block until ``max_wall_s`` after :meth:`start`; past it the block is cancelled
        and :class:`BudgetSpent` (``budget: wall time``) raised instead."""
        deadline = self.started + self.max_wall_s if self.max_wall_s else None
        try:
            async with _deadline(deadline):
                yield
        except TimeoutError:
            raise BudgetSpent("budget: wall time") from None


@contextlib.asynccontextmanager
async def _deadline(deadline: float | None) -> AsyncIterator[None]:
    """Raise TimeoutError in the block at ``deadline`` (``time.monotonic()`` seconds):
    asyncio.timeout_at on Python >= 3.11, a watchdog task on 3.10."""
    if deadline is None:
        yield
        return
    timeout = getattr(asyncio, "timeout_at", None)
    if timeout is not None:
        loop = asyncio.get_running_loop()
        async with timeout(loop.time() + max(0.0, deadline - time.monotonic())):
            yield
        return
    task = asyncio.current_task()
    assert task is not None
    fired = False

    def _fire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(max(0.0, deadline - time.monotonic()), _fire)
    try:
        yield
    except asyncio.CancelledError:
        if fired:
            raise TimeoutError from None
        raise
    finally:
        handle.cancel()

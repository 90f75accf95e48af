"""asyncio helpers of the search: no LLM call, evaluation or memory write outlives it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


async def gather_all(*aws: Awaitable[T]) -> list[T]:
    """asyncio.gather that cancels the siblings when one of them fails (a budget stop, an error),
    so no orphan LLM call or evaluation outlives the search. Results in argument order."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel every task first, then wait for each to end (whatever it raises)."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(BaseException):
            await task


class Background:
    """Fire-and-forget tasks that are still awaited: :meth:`drain` waits for all of them
    (also those spawned meanwhile), :meth:`pending` lists them for :func:`cancel_all`."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, aw: Awaitable[Any]) -> None:
        """Run ``aw`` as a task of the running loop."""
        task = asyncio.ensure_future(aw)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def pending(self) -> list[asyncio.Task[Any]]:
        """The tasks not finished yet."""
        return list(self._tasks)

    async def drain(self) -> None:
        """Wait until no task is left (exceptions are the tasks' own business)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

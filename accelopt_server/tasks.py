"""Background tasks of the server: kept referenced, failures logged, cancelled at shutdown.

:meth:`BackgroundTasks.schedule` runs one task per key (a document URI), debounced: a newer
request for the same key cancels the older run (its evaluations are cancelled with it) and starts
after ``debounce_s``. The on-save profiles use it.

Nothing here blocks the event loop; all callbacks run on the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("accelopt.server.jobs")


class BackgroundTasks:
    """The server's background asyncio tasks."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._keyed: dict[str, asyncio.Task[Any]] = {}

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run a coroutine in the background, keeping a reference and logging its failure."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task failed: %s", t.exception())

        task.add_done_callback(done)
        return task

    def schedule(
        self, key: str, run: Callable[[], Awaitable[Any]], debounce_s: float = 0.25
    ) -> asyncio.Task[Any]:
        """Run ``run()`` after ``debounce_s`` seconds, cancelling any earlier run for ``key``
        that is still waiting or running."""
        self.cancel(key)

        async def delayed() -> None:
            await asyncio.sleep(debounce_s)
            await run()

        task = self.spawn(delayed())
        self._keyed[key] = task
        task.add_done_callback(
            lambda t: self._keyed.pop(key, None) if self._keyed.get(key) is t else None
        )
        return task

    def pending(self, key: str) -> asyncio.Task[Any] | None:
        """The waiting or running task of ``key``, if any."""
        task = self._keyed.get(key)
        return task if task is not None and not task.done() else None

    def cancel(self, key: str) -> bool:
        """Cancel the task of ``key``; False when none was waiting or running."""
        task = self._keyed.pop(key, None)
        if task is not None and not task.done():
            task.cancel()
            return True
        return False

    async def close(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` seconds for every task to end, then cancel the rest (and
        give them one more second to unwind)."""
        tasks = list(self._tasks)
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)

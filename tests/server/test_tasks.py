"""Background tasks: the debounced per-document run (on-save profiles)."""

from __future__ import annotations

import asyncio

from accelopt_server.tasks import BackgroundTasks


async def test_profile_debounce_newer_cancels_older() -> None:
    tasks = BackgroundTasks()
    ran: list[int] = []

    async def run(n: int) -> None:
        await asyncio.sleep(0.05)
        ran.append(n)

    first = tasks.schedule("doc", lambda: run(1), 0.05)
    second = tasks.schedule("doc", lambda: run(2), 0.05)
    await asyncio.wait_for(second, 2)
    assert first.cancelled() and ran == [2]
    await tasks.close(1.0)

"""The device pool: which evaluations may run at once on a target, and on which device.

The local and ssh targets hand each evaluation one slot of a :class:`DevicePool`: a device
(``"0"``, ``"1"``, ...) when the target has devices, each pinned to one evaluation at a time,
else an anonymous CPU slot (``None``). The ray target has no pool: Ray places its tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence

from accelopt_core.onsite.protocol import EvalRequest


class DevicePool:
    """Slots for concurrent evaluations: one per device, or ``cpu_slots`` without devices.

    A slot is taken with ``async with pool.slot() as device``; waiting callers get slots in
    the order they asked (FIFO), and freed devices go to the back of the line, so devices are
    handed out in turn. Cancelling a caller while it waits takes nothing; cancelling it while
    it holds a slot frees the slot.

    Args:
        devices: device names (``["0", "1"]``); empty for a CPU-only target.
        cpu_slots: slots when ``devices`` is empty (ignored otherwise).

    Attributes:
        devices: the devices handed out, in their first-use order.
        capacity: evaluations that may hold a slot at once (``len(devices)`` or
            ``cpu_slots``).

    Raises:
        ValueError: the pool would have no slot (no devices and ``cpu_slots`` < 1).
    """

    def __init__(self, devices: Sequence[str] = (), cpu_slots: int = 1) -> None:
        self.devices: tuple[str, ...] = tuple(devices)
        tokens: list[str | None] = list(self.devices) or [None] * cpu_slots
        if not tokens:
            raise ValueError(f"a device pool needs a device or a CPU slot (cpu_slots={cpu_slots})")
        self.capacity = len(tokens)
        self._free: asyncio.Queue[str | None] = asyncio.Queue()
        for token in tokens:
            self._free.put_nowait(token)

    @property
    def free(self) -> int:
        """Slots free right now."""
        return self._free.qsize()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[str | None]:
        """Wait for a free slot and hold it for the ``async with`` block.

        Yields:
            the device of the slot, or None for a CPU slot.
        """
        token = await self._free.get()
        try:
            yield token
        finally:
            self._free.put_nowait(token)


def pinned(request: EvalRequest, device: str | None) -> EvalRequest:
    """``request`` pinned to ``device`` (its ``device`` field set), or unchanged for a CPU
    slot (None)."""
    return request if device is None else dataclasses.replace(request, device=device)

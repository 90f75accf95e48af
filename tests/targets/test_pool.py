"""DevicePool: slots for concurrent evaluations, on a real asyncio event loop."""

from __future__ import annotations

import asyncio

import pytest

from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.targets.pool import DevicePool, pinned


async def _hold(pool: DevicePool, seen: list, release: asyncio.Event) -> None:
    async with pool.slot() as device:
        seen.append(device)
        await release.wait()


async def test_capacity_is_devices_or_cpu_slots() -> None:
    assert DevicePool(["0", "1", "2"]).capacity == 3
    assert DevicePool(["0"], cpu_slots=8).capacity == 1
    cpu = DevicePool([], cpu_slots=4)
    assert cpu.capacity == cpu.free == 4
    async with cpu.slot() as device:
        assert device is None and cpu.free == 3
    assert cpu.free == 4
    with pytest.raises(ValueError, match="cpu_slots=0"):
        DevicePool([], cpu_slots=0)


async def test_each_device_serves_one_evaluation_at_a_time() -> None:
    pool = DevicePool(["0", "1"])
    busy: set[str] = set()
    peak = 0

    async def evaluation() -> None:
        nonlocal peak
        async with pool.slot() as device:
            assert device not in busy
            busy.add(device)
            peak = max(peak, len(busy))
            await asyncio.sleep(0.01)
            busy.remove(device)

    await asyncio.gather(*(evaluation() for _ in range(10)))
    assert peak == 2 and pool.free == 2


async def test_waiters_are_served_in_order_and_devices_in_turn() -> None:
    pool = DevicePool(["0", "1"])
    seen: list = []
    release = [asyncio.Event() for _ in range(4)]
    tasks = []
    for event in release:
        tasks.append(asyncio.create_task(_hold(pool, seen, event)))
        await asyncio.sleep(0)
    assert seen == ["0", "1"] and pool.free == 0
    release[1].set()  # device "1" comes back: the first waiter gets it
    await asyncio.sleep(0.01)
    assert seen == ["0", "1", "1"]
    release[0].set()
    await asyncio.sleep(0.01)
    assert seen == ["0", "1", "1", "0"]
    for event in release:
        event.set()
    await asyncio.gather(*tasks)
    async with pool.slot() as first:  # freed devices went to the back in release order
        assert first == "1"


async def test_cancelled_waiter_takes_nothing() -> None:
    pool = DevicePool(["0"])
    seen: list = []
    release = asyncio.Event()
    holder = asyncio.create_task(_hold(pool, seen, release))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(_hold(pool, seen, asyncio.Event()))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    await holder
    assert seen == ["0"] and pool.free == 1
    async with pool.slot() as device:
        assert device == "0"


async def test_cancelled_holder_frees_its_slot() -> None:
    pool = DevicePool(["0"])
    seen: list = []
    holder = asyncio.create_task(_hold(pool, seen, asyncio.Event()))
    await asyncio.sleep(0)
    waiting: list = []
    waiter = asyncio.create_task(_hold(pool, waiting, asyncio.Event()))
    await asyncio.sleep(0.01)
    assert seen == ["0"] and waiting == []
    holder.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holder
    await asyncio.sleep(0.01)
    assert waiting == ["0"]  # the slot passed on to the waiter
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert pool.free == 1


def test_pinned_sets_the_device_only_for_a_device_slot() -> None:
    request = EvalRequest(candidate_source="", harness_source="", entry="f")
    assert pinned(request, "3").device == "3"
    assert pinned(request, None) is request

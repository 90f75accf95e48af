"""Issue 52: a cancelled counterexample search stops its thread (no probe after, nothing left
blocking the process's exit), and the drawn descriptors are checked like any request's.

The probe here is a coroutine that never returns, standing for a target evaluation that hangs:
the thing under test is the search's thread and its cancellation, not the judge.
"""

from __future__ import annotations

import asyncio
import threading
import time

from accelopt_core.evaluation.counterexample import Falsifier, Space
from accelopt_core.onsite.judge import derived_inputs

SPACE = Space(
    signature=[{"name": "x", "kind": "tensor", "dtype": "float32", "shape": [4, 8],
                "floating": True}],
    symbols=[{"symbol": "d0", "length": 4, "dims": [[0, 0]]},
             {"symbol": "d1", "length": 8, "dims": [[0, 1]]}],
    parts=[{"kind": "values", "input": 0, "op": "large", "value": 250.0, "name": "x × 250"}],
)  # fmt: skip


def test_a_cancelled_search_ends_its_thread() -> None:
    calls: list[int] = []

    async def hangs(source: str, examples: list[dict]) -> list[dict]:
        calls.append(len(examples))
        await asyncio.Event().wait()  # an evaluation that never ends
        return []

    async def main() -> None:
        falsifier = Falsifier(hangs, "baseline", SPACE, seed=3, budget=10)
        task = asyncio.create_task(falsifier.search("candidate"))
        while not calls:
            await asyncio.sleep(0.05)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass

    before = {t.ident for t in threading.enumerate()}
    asyncio.run(main())
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        if not left:
            break
        time.sleep(0.1)
    assert not left, left
    assert calls == [calls[0]]  # the baseline's batch only: no probe after the cancel


def test_drawn_examples_are_checked_as_untrusted_requests() -> None:
    async def record(source: str, examples: list[dict]) -> list[dict]:
        return [{"verdict": "ok"} for _ in examples]

    drawn: list[dict] = []

    async def keep(source: str, examples: list[dict]) -> list[dict]:
        drawn.extend(examples)
        return await record(source, examples)

    outcome = asyncio.run(Falsifier(keep, "baseline", SPACE, seed=5, budget=12).search("c"))
    assert outcome.counterexample is None and outcome.tried == len({str(d) for d in drawn})
    for example in drawn:  # every example is a descriptor the judge accepts, unchanged
        assert derived_inputs.checked(example, 1) is not None, example
        assert example["kind"] == "drawn" and example["names"] == ["x"]
    bad = dict(drawn[0], parts=[{"kind": "data", "input": 0, "data": [float("nan")]}])
    assert derived_inputs.checked(bad, 1) is None  # no NaN smuggled in drawn values
    twice = dict(drawn[0], parts=[SPACE.parts[0], SPACE.parts[0]])
    assert derived_inputs.checked(twice, 1) is None  # one value part per input

"""A scripted evaluator for tests of the search's rules: it returns given EvalResults and
records the order of evaluations, so a test can check what the search does with timings (the
re-timing rounds, the trust rules) without measuring any. The real evaluation stack is tested
in tests/evaluation and by the slow tests of this folder."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from accelopt_core.onsite.protocol import EvalResult


def timed(ms: float, timing: str = "interpreter") -> EvalResult:
    """An ok result with median ``ms`` (no p20/p80) measured by ``timing``."""
    return EvalResult(status="ok", latency_ms=ms, timing=timing)  # type: ignore[arg-type]


@dataclass
class Call:
    """One evaluation asked of the scripted evaluator: ``kind`` is ``evaluate``, ``retime`` (an
    evaluation again, as for an implausible speedup) or ``round`` (a re-timing round);
    ``started`` / ``ended`` are the evaluator's event counters at its start and end."""

    kind: str
    source: str
    started: int
    ended: int = -1


@dataclass
class ScriptedEvaluator:
    """``script(source, n)`` gives the result of the ``n``-th (0-based) evaluation of
    ``source``; every evaluation yields to the event loop twice, so concurrent ones interleave.

    Attributes:
        calls: every evaluation, in the order they started.
    """

    script: Callable[[str, int], EvalResult]
    calls: list[Call] = field(default_factory=list)
    _counts: dict[str, int] = field(default_factory=dict)
    _clock: int = 0

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    async def _run(self, kind: str, source: str) -> EvalResult:
        call = Call(kind, source, self._tick())
        self.calls.append(call)
        n = self._counts.get(source, 0)
        self._counts[source] = n + 1
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        call.ended = self._tick()
        return self.script(source, n)

    async def evaluate(
        self, original: str, source: str, entry: str, *, use_cache: bool = True, **_: object
    ) -> EvalResult:
        """The scripted result; ``kind`` ``evaluate``."""
        return await self._run("evaluate", source)

    async def retime(self, original: str, source: str, entry: str, **_: object) -> EvalResult:
        """The scripted result; ``kind`` ``retime``."""
        return await self._run("retime", source)

    async def time_again(self, original: str, source: str, entry: str, **_: object) -> EvalResult:
        """The scripted result; ``kind`` ``round`` (a round of the A/B re-timing)."""
        return await self._run("round", source)

    def sources(self, kind: str | None = None) -> list[str]:
        """The sources evaluated (of ``kind`` only, when given), in start order."""
        return [c.source for c in self.calls if kind is None or c.kind == kind]


def sequence(table: dict[str, list[EvalResult]]) -> Callable[[str, int], EvalResult]:
    """A script from per-source result lists: the n-th evaluation of a source gets its n-th
    result (the last one repeated past the end)."""

    def script(source: str, n: int) -> EvalResult:
        results = table[source]
        return results[min(n, len(results) - 1)]

    return script

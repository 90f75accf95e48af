"""The property-based search for a counterexample (issue 52; DESIGN.md, "Derived inputs").

Every candidate is checked on the derived inputs its baseline is correct on, a fixed list. A
candidate faster than its parent or the baseline is about to matter: it may be written by
``--write``, offered first in the editor, or kept as a positive experience. Before that,
:class:`Falsifier` searches for an input on which it disagrees with the baseline, with
`Hypothesis <https://hypothesis.readthedocs.io>`_ (its ``hypothesis.extra.numpy`` strategies for
drawn values), composing the classes the judge derives (``metrics["derived_inputs"]["space"]``
of the baseline's result, :func:`accelopt_core.onsite.judge.derived_checks.find_usable`) with
the harness's shapes:

- a length per size symbol (``d0 = 16`` becomes 1..20: small ones first, so a shrunk
  counterexample is small);
- per floating input: its own values, a value derivation of the judge (its number with either
  sign), or values drawn element by element (``arrays``) when the input is small enough
  (:data:`~accelopt_core.onsite.judge.derived_inputs.MAX_DATA` elements);
- per input of 2 or more dimensions: contiguous, or a layout of the judge (another order of
  the dimensions where the judge's space has one).

Each example is one ``drawn`` descriptor (:func:`~accelopt_core.onsite.judge.derived_inputs.
drawn`) the target applies to the seed's inputs as it applies any derived input: the worker
imports no Hypothesis. The classes a budget left out of every candidate's checks
(``deferred``) are explicit examples, tried first (a third of the examples drawn at most, so
that the rest explores).

**The oracle.** An example counts only where the reference runs on it (finite where it changes
values) and the *baseline* is correct on it, as for every derived input; the baseline's
verdicts are probed once per search (the same seed draws the same examples for every
candidate) and kept.

**Bounded.** At most :attr:`Falsifier.budget` checked calls per candidate: twice one
evaluation's checked calls (its correctness seeds and derived inputs). Three quarters go to the
examples drawn (probed in one request), the rest to shrinking: a disagreement is shrunk by Hypothesis,
each smaller example probed on the baseline and the candidate (one call each), until the budget
is spent; the smallest disagreement verified is the one reported.

**Seeded and reproducible.** The seed (``evaluation.searchSeed``) is in the message and in
``metrics["derived_inputs"]["search"]``; the same seed, harness and candidate find the same
example. A disagreement makes the candidate ``incorrect`` with :data:`SEARCH_RULE` and the
shrunk input in the message (``wrong on an input found by search, seed 1234: x 3×5 = [[...]]:
max abs error ...``), which the fixer reads and the memory keeps as a negative experience.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from accelopt_core.evaluation.counterexample_space import Space
from accelopt_core.onsite.judge import derived_inputs
from accelopt_core.onsite.protocol import EvalResult

__all__ = ["SEARCH_RULE", "Falsifier", "SearchOutcome", "Space"]

#: ``EvalResult.rule`` of a candidate the search caught (status ``incorrect``).
SEARCH_RULE = "wrong on an input found by search"
#: Least examples drawn, whatever the budget.
MIN_EXAMPLES = 4
#: Names of examples kept in the outcome (the report shows them).
KEPT_NAMES = 5
#: One Hypothesis run at a time in this process (its engine keeps per-thread state; searches
#: of concurrent candidates wait for each other rather than interleave).
_HYPOTHESIS = threading.Lock()

Probe = Callable[[str, list[dict]], Awaitable[list[dict]]]


def _no_local_constants() -> None:
    """Keep Hypothesis (6.131 and later) from drawing the constants of "local" modules: it
    reads and ``ast.parse``-s the source of every module not in site-packages (ours, with an
    editable install) on its first draw. The examples would then depend on which modules the
    process has loaded, not only on the seed; the parse runs in the search's thread, beside
    the event loop's own, and CPython 3.11 shares the AST converter's recursion counter
    between threads (gh-106905: a search failed with "AST constructor recursion depth
    mismatch"); and its cache lands in ``.hypothesis/`` of the working directory, the user's
    workspace under the language server. Hypothesis's own constants stay. Where its internals
    differ (another version), nothing is changed."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    if hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants"):
        providers._get_local_constants = providers.Constants


@dataclass
class SearchOutcome:
    """What the search did for one candidate (``metrics["derived_inputs"]["search"]``).

    Attributes:
        seed: Hypothesis's seed.
        tried: distinct examples drawn (explicit and generated, shrinking included).
        usable: of those, the ones the baseline is correct on (the only ones that count).
        budget: the most checked calls the candidate was allowed.
        calls: checked calls the candidate's search made.
        seconds: wall time of the search (s).
        counterexample: the reason a person and the fixer read, or None.
        examples: the names of the first examples drawn.
        skipped: why no search ran (no space, an NKI kernel, ...), or None.
    """

    seed: int
    tried: int = 0
    usable: int = 0
    budget: int = 0
    calls: int = 0
    seconds: float = 0.0
    counterexample: str | None = None
    examples: list[str] = field(default_factory=list)
    skipped: str | None = None

    def as_metrics(self) -> dict[str, Any]:
        """The JSON form kept in the result's metrics."""
        return dataclasses.asdict(self)


def _key(example: dict) -> str:
    return json.dumps(example, sort_keys=True)


class _BudgetSpent(Exception):
    """The shrinking's budget is spent: Hypothesis is made to stop (every later example raises
    this at once, so it shrinks to its simplest and ends); the smallest disagreement verified
    so far is the one reported."""


@dataclass
class _Link:
    """What a search's thread needs of the search: the event loop its probes run on, and the
    event set when the search is cancelled."""

    loop: asyncio.AbstractEventLoop
    stop: threading.Event


class _Stopped(Exception):
    """The search was cancelled or its event loop stopped: no further probe."""


class _Disagrees(Exception):
    """The candidate disagrees with the baseline on an example (Hypothesis shrinks it)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class Falsifier:
    """Searches candidates for a counterexample against the baseline (module docstring).

    Args:
        probe: ``await probe(source, examples)``: the judge's verdicts of ``source`` on each
            example (:func:`accelopt_core.onsite.judge.derived_probe.probe`'s dicts, in
            order). The baseline's source is probed through it too.
        baseline_source: the oracle's source.
        space: what can be drawn (:meth:`Space.of` the baseline's result).
        deferred: the parts a budget left out of every candidate's checks (explicit examples).
        seed: Hypothesis's seed (``evaluation.searchSeed``).
        budget: the most checked calls per candidate (twice one evaluation's, >= 2).
    """

    def __init__(
        self,
        probe: Probe,
        baseline_source: str,
        space: Space,
        *,
        deferred: list[dict] | None = None,
        seed: int = 1234,
        budget: int = 20,
    ) -> None:
        self._probe = probe
        self._baseline_source = baseline_source
        self.space = space
        self.seed = int(seed)
        self.budget = max(2, int(budget))
        # the deferred classes first, a third of the examples drawn at most: the rest explores
        # (the others may still be drawn: the strategy's templates are every part derived)
        self._explicit = space.explicit(deferred or [])[: max(1, self.examples_drawn // 3)]
        self._baseline: dict[str, dict] = {}  # key -> the baseline's verdict, once per search

    @property
    def examples_drawn(self) -> int:
        """Examples drawn at first (explicit ones included): three quarters of the budget,
        the rest left to shrinking."""
        return max(MIN_EXAMPLES, self.budget - max(2, self.budget // 4))

    async def search(self, source: str) -> SearchOutcome:
        """Search ``source`` for a counterexample (module docstring). Never raises for a bad
        candidate or target: a probe that fails leaves the examples unusable."""
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        stop = threading.Event()  # set when this search is cancelled
        try:
            outcome = await asyncio.to_thread(self._search, source, _Link(loop, stop))
        except BaseException:  # cancelled (or the thread failed): its probes stop at once
            stop.set()
            raise
        outcome.seconds = round(time.monotonic() - start, 3)
        return outcome

    def _call(self, link: _Link, source: str, examples: list[dict]) -> list[dict]:
        """The probe, from the search's thread (on the event loop). Raises :class:`_Stopped`
        once the search was cancelled or its event loop stopped (the thread then ends soon,
        never blocking the process's exit)."""
        if not examples:
            return []
        loop = link.loop
        if link.stop.is_set():
            raise _Stopped
        try:
            future = asyncio.run_coroutine_threadsafe(self._probe(source, examples), loop)
        except RuntimeError:  # the loop is closed
            raise _Stopped from None
        try:
            while True:
                try:
                    found = future.result(timeout=1.0)
                    break
                except concurrent.futures.TimeoutError:
                    if link.stop.is_set() or loop.is_closed() or not loop.is_running():
                        future.cancel()
                        raise _Stopped from None
        except _Stopped:
            raise
        except Exception as exc:  # noqa: BLE001 - a target's failure: no verdict, not a bug
            why = f"the probe failed: {type(exc).__name__}: {exc}"[:300]
            return [{"verdict": "unusable", "why": why} for _ in examples]
        if not isinstance(found, list) or len(found) != len(examples):
            why = "the target answered no verdict for it"
            return [{"verdict": "unusable", "why": why} for _ in examples]
        return found

    def _run(self, test: Callable[[dict], None], shrink: bool) -> None:
        """``test`` under Hypothesis: the explicit examples, then :attr:`examples_drawn`
        generated ones, then (``shrink``) shrinking a failure. Raises what ``test`` raised
        on the smallest failing example."""
        from hypothesis import HealthCheck, Phase, Verbosity, example, given, settings
        from hypothesis import seed as seed_of

        phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
        wrapped = given(self.space.strategy())(test)
        for ex in self._explicit:
            wrapped = example(ex)(wrapped)
        wrapped = settings(
            max_examples=max(1, self.examples_drawn - len(self._explicit)),
            database=None,
            deadline=None,
            phases=phases,
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            verbosity=Verbosity.quiet,
            derandomize=False,
        )(wrapped)
        wrapped = seed_of(self.seed)(wrapped)
        with _HYPOTHESIS:
            _no_local_constants()
            wrapped()

    def _drawn(self, source: str, link: _Link) -> tuple[dict, list[str], dict]:
        """The examples drawn at first (``{key: example}``), the keys the baseline is correct
        on (probed once per search), and the candidate's verdicts on those (one request)."""
        drawn: dict[str, dict] = {}

        def record(ex: dict) -> None:
            drawn.setdefault(_key(ex), ex)

        self._run(record, shrink=False)
        unknown = [k for k in drawn if k not in self._baseline]
        found = self._call(link, self._baseline_source, [drawn[k] for k in unknown])
        self._baseline.update(zip(unknown, found, strict=True))
        usable = [k for k in drawn if self._baseline[k].get("verdict") == "ok"]
        verdicts = self._call(link, source, [drawn[k] for k in usable])
        return drawn, usable, dict(zip(usable, verdicts, strict=True))

    def _search(self, source: str, link: _Link) -> SearchOutcome:
        outcome = SearchOutcome(seed=self.seed, budget=self.budget)
        drawn, usable, verdicts = self._drawn(source, link)
        keys = list(drawn)
        outcome.examples = [str(drawn[k].get("name"))[:160] for k in keys[:KEPT_NAMES]]
        outcome.calls = len(usable)
        seen = set(keys)
        if not any(_bad(v) for v in verdicts.values()):
            outcome.tried, outcome.usable = len(seen), len(usable)
            return outcome
        left = [self.budget - outcome.calls]
        failing = {k: drawn[k] for k in usable if _bad(verdicts[k])}

        def test(ex: dict) -> None:
            k = _key(ex)
            if k not in self._baseline or (
                self._baseline[k].get("verdict") == "ok" and k not in verdicts
            ):
                if left[0] <= 0:
                    raise _BudgetSpent
            if k not in self._baseline:
                left[0] -= 1
                self._baseline[k] = self._call(link, self._baseline_source, [ex])[0]
            seen.add(k)
            if self._baseline[k].get("verdict") != "ok":
                return
            if k not in verdicts:
                if left[0] <= 0:
                    raise _BudgetSpent
                left[0] -= 1
                verdicts[k] = self._call(link, source, [ex])[0]
                outcome.calls += 1
            if _bad(verdicts[k]):
                failing[k] = ex
                raise _Disagrees(k)

        try:
            self._run(test, shrink=True)
        except Exception:  # noqa: BLE001 - ours, or Hypothesis's own complaints (flaky, ...)
            pass
        if link.stop.is_set():
            raise _Stopped
        found = min(failing, key=lambda k: _size(self.space, failing[k]))
        outcome.tried = len(seen)
        outcome.usable = sum(1 for k in seen if self._baseline[k].get("verdict") == "ok")
        outcome.counterexample = self._message(verdicts[found])
        return outcome

    def _message(self, verdict: dict) -> str:
        """``wrong on an input found by search, seed 1234: x 3×5 = [[...]]: <the judge's
        message>``."""
        shown = str(verdict.get("shown") or "the drawn inputs")
        why = str(verdict.get("why") or verdict.get("status") or "disagrees with the baseline")
        if verdict.get("verdict") == "fails":
            why = f"fails where the baseline is correct: {why}"
        return f"{SEARCH_RULE}, seed {self.seed}: {shown}: {why}"

    def refute(self, result: EvalResult, outcome: SearchOutcome) -> EvalResult:
        """``result`` (the candidate's ok result) with the search's outcome in
        ``metrics["derived_inputs"]["search"]``; ``incorrect`` with :data:`SEARCH_RULE` when
        it found a counterexample."""
        metrics = dict(result.metrics or {})
        found = metrics.get("derived_inputs")
        found = dict(found) if isinstance(found, dict) else {}
        found["search"] = outcome.as_metrics()
        metrics["derived_inputs"] = found
        if outcome.counterexample is None:
            return dataclasses.replace(result, metrics=metrics)
        return dataclasses.replace(
            result,
            status="incorrect",
            rule=SEARCH_RULE,
            message=outcome.counterexample,
            metrics=metrics,
        )


def _size(space: Space, example: dict) -> tuple[int, int]:
    """How big an example is (the smallest disagreement is reported): the product of its size
    symbols' lengths, then the length of its JSON."""
    sizes = {str(s["symbol"]): int(s["length"]) for s in space.symbols}
    for part in derived_inputs.parts(example):
        if part.get("kind") == "shape" and part.get("symbol") in sizes:
            sizes[part["symbol"]] = int(part["to"])
    total = 1
    for n in sizes.values():
        total *= n
    return total, len(_key(example))


def _bad(verdict: dict) -> bool:
    return verdict.get("verdict") in ("wrong", "fails")

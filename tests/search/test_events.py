"""The search's events (accelopt_core.search.events): typed, delivered to every subscriber in
order, and a subscriber that raises never breaks the search."""

from __future__ import annotations

import logging

import pytest

from accelopt_core.search import IterationStarted, NewBest, SearchEvent
from accelopt_core.search.events import Subscribers
from tests.search.builders import cand


def test_every_subscriber_gets_every_event_even_after_one_raises(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[tuple[str, SearchEvent]] = []

    def broken(event: SearchEvent) -> None:
        raise RuntimeError("subscriber bug")

    subscribers = Subscribers()
    subscribers.add(lambda e: seen.append(("first", e)))
    subscribers.add(broken)
    subscribers.add(lambda e: seen.append(("last", e)))
    started = IterationStarted(iteration=1, iterations=2)
    best = NewBest(cand("fast", 1.0), speedup=2.0)
    with caplog.at_level(logging.ERROR, logger="accelopt.search"):
        subscribers.emit(started)
        subscribers.emit(best)
    assert seen == [("first", started), ("last", started), ("first", best), ("last", best)]
    assert caplog.text.count("search event subscriber failed") == 2

"""The server's wiring: every feature registered once, in hook order; every command answered by a
feature coroutine; lifecycle hooks reach every feature in order."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator

import pytest

from accelopt_server.features import COMMANDS, FEATURES, LanguageFeature
from accelopt_server.logs import LOGGER_NAME
from accelopt_server.server import create_server


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """A server routes the ``accelopt`` logger to its client: undo that for the other tests."""
    logger = logging.getLogger(LOGGER_NAME)
    saved = (list(logger.handlers), logger.propagate, logger.level)
    yield
    logger.handlers[:] = saved[0]
    logger.propagate, logger.level = saved[1], saved[2]


def test_features_and_commands_are_registered() -> None:
    server = create_server()
    assert [type(f) for f in server.ctx.features] == list(FEATURES)
    assert all(isinstance(f, LanguageFeature) for f in server.ctx.features)
    assert list(server.protocol.fm.commands) == list(COMMANDS)
    for cls, method in COMMANDS.values():
        assert inspect.iscoroutinefunction(getattr(server.ctx.feature(cls), method))


async def test_call_features_runs_a_hook_on_every_feature_in_order() -> None:
    server = create_server()
    called: list[str] = []
    for feature in server.ctx.features:

        async def hook(uri: str, name: str = type(feature).__name__) -> None:
            called.append(f"{name}:{uri}")

        feature.document_close = hook  # type: ignore[method-assign]
    await server.call_features("document_close", "file:///x.py")
    assert called == [f"{cls.__name__}:file:///x.py" for cls in FEATURES]

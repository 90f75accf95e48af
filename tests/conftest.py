"""Shared pytest configuration.

The session runs in its own environment (tests/hermetic.py: its own HOME and XDG folders, no
ambient ``ACCELOPT_*``/``OPENAI_*``/``TRITON_*`` variables, no Neuron SDK from ``PYTHONPATH``,
Triton's compile cache in pytest's cache folder), set before collection and restored at the end.

Every test gets its own optimization-memory directory (ACCELOPT_MEMORY_DIR), so no test reads or
writes the user's real memory and tests cannot see each other's experiences, and a user config
path (ACCELOPT_CONFIG) of its own where no file exists, so the user's real
``~/.config/accelopt/config.toml`` never changes a test.

Under ``-n auto --dist loadfile`` the files go to the workers as tests/scheduling.py orders
them (the onsite batch's files together, the longest first).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import hermetic

# The scripted OpenAI-compatible server (a test double for the paid LLM service) as a fixture.
from tests.llm_double import llm_double  # noqa: F401

# pytest-lsp fixtures for the language-server tests (a real server over stdio).
pytest_plugins = ["tests.lsp_fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    try:  # pytest's cache folder (.pytest_cache/d/triton), unless it is off or read-only
        triton_cache = config.cache.mkdir("triton")
    except (AttributeError, OSError):
        triton_cache = None
    hermetic.enter(triton_cache)


def pytest_unconfigure(config: pytest.Config) -> None:
    hermetic.leave()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``: the files sharing the onsite batch as one unit, the longest units
    first (tests/scheduling.py); other modes are xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tests.scheduling import CostOrderedFileScheduling

    return CostOrderedFileScheduling(config, log)


@pytest.fixture(autouse=True)
def _isolated_memory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    directory = tmp_path_factory.mktemp("accelopt-memory")
    monkeypatch.setenv("ACCELOPT_MEMORY_DIR", str(directory))
    return directory


@pytest.fixture(autouse=True)
def _isolated_user_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    path = tmp_path_factory.mktemp("accelopt-user-config") / "config.toml"
    monkeypatch.setenv("ACCELOPT_CONFIG", str(path))
    return path

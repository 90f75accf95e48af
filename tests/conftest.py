"""Shared pytest configuration.

Every test gets its own optimization-memory directory (ACCELOPT_MEMORY_DIR), so no test reads or
writes the user's real memory and tests cannot see each other's experiences, and a user config
path (ACCELOPT_CONFIG) of its own where no file exists, so the user's real
``~/.config/accelopt/config.toml`` never changes a test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The scripted OpenAI-compatible server (a test double for the paid LLM service) as a fixture.
from tests.llm_double import llm_double  # noqa: F401

# pytest-lsp fixtures for the language-server tests (a real server over stdio).
pytest_plugins = ["tests.lsp_fixtures"]

os.environ.setdefault("ACCELOPT_SHAPE", "small")


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

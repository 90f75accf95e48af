"""The CLI tests never read the real user config: ``$ACCELOPT_CONFIG`` names a file in a temp
directory (absent unless a test writes it); subprocesses inherit it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.configfiles import CONFIG_ENV


@pytest.fixture(autouse=True)
def user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user config path of this test (not created)."""
    path = tmp_path_factory.mktemp("user-config") / "config.toml"
    monkeypatch.setenv(CONFIG_ENV, str(path))
    return path

"""The one typed settings model: validation with per-value fallback, both key spellings,
the VS Code schema rendering, and the README table generated from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.settings import (
    MEMORY_DIR_ENV,
    Settings,
    load_settings,
    settings_markdown,
    vscode_configuration,
)

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_are_valid_and_small() -> None:
    settings, issues = load_settings(None)
    assert issues == []
    assert settings.target == "local"
    s = settings.search
    assert (s.beam_width, s.plans_per_candidate, s.samples_per_plan, s.iterations) == (2, 2, 1, 2)
    assert not settings.llm.configured


def test_camel_and_snake_case_keys_are_both_accepted() -> None:
    camel, issues1 = load_settings({"search": {"beamWidth": 4}, "profileOnSave": False})
    snake, issues2 = load_settings({"search": {"beam_width": 4}, "profile_on_save": False})
    assert issues1 == issues2 == []
    assert camel.search.beam_width == snake.search.beam_width == 4
    assert camel.profile_on_save is snake.profile_on_save is False


def test_each_invalid_value_falls_back_to_its_default_and_is_named() -> None:
    settings, issues = load_settings(
        {
            "target": "ftp://host",
            "search": {"beamWidth": 0, "iterations": 3},
            "logLevel": "loud",
            "maxCodeActions": "many",
        }
    )
    assert settings.target == "local"
    assert settings.search.beam_width == 2
    assert settings.search.iterations == 3  # the valid sibling is kept
    assert settings.log_level == "info"
    assert settings.max_code_actions == 5
    by_key = {i.key: i for i in issues}
    assert set(by_key) == {
        "accelopt.target",
        "accelopt.search.beamWidth",
        "accelopt.logLevel",
        "accelopt.maxCodeActions",
    }
    assert by_key["accelopt.search.beamWidth"].default == 2
    text = str(by_key["accelopt.search.beamWidth"])
    assert "accelopt.search.beamWidth" in text and "default 2" in text


@pytest.mark.parametrize(
    "raw", [42, "text", ["a"], {"search": "not a section"}, {"llm": {"planner": 7}}]
)
def test_garbage_never_raises(raw: object) -> None:
    settings, _issues = load_settings(raw)  # type: ignore[arg-type]
    assert isinstance(settings, Settings)


def test_memory_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MEMORY_DIR_ENV, str(tmp_path / "env"))
    assert load_settings({})[0].resolved_memory_dir() == tmp_path / "env"
    assert (
        load_settings({"memoryDir": str(tmp_path / "s")})[0].resolved_memory_dir() == tmp_path / "s"
    )
    monkeypatch.delenv(MEMORY_DIR_ENV)
    assert "accelopt" in str(load_settings({})[0].resolved_memory_dir())


def test_vscode_schema_covers_every_leaf_setting_with_its_default() -> None:
    props = vscode_configuration()
    assert props["accelopt.search.beamWidth"]["default"] == 2
    assert props["accelopt.search.beamWidth"]["minimum"] == 1
    assert props["accelopt.logLevel"]["enum"] == ["error", "warning", "info", "debug"]
    assert props["accelopt.llm.prices"]["type"] == "object"
    assert "accelopt.llm.planner.model" in props
    # every leaf of the model is present, and every default round-trips through the model
    defaults = {k: v["default"] for k, v in props.items()}
    nested: dict = {}
    for key, value in defaults.items():
        node = nested
        parts = key.split(".")[1:]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    settings, issues = load_settings(nested)
    assert issues == []
    assert settings == Settings()


def test_docs_document_every_setting() -> None:
    """The docs site's settings reference is generated from the model (issue 51; it was a table
    pasted into the README)."""
    from tests.docs.docs_pages import reference

    page = reference().page_text("reference/settings.md")
    missing = [key for key in vscode_configuration() if f"`{key}`" not in page]
    assert missing == []
    assert settings_markdown() in page

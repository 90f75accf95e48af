"""Settings from files: project file discovery, precedence, provenance, located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.configfiles import (
    CONFIG_ENV,
    ConfigLayer,
    effective_settings,
    files_fingerprint,
    find_project_file,
    resolve,
    user_layers,
)


@pytest.fixture
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user" / "config.toml"
    path.parent.mkdir()
    monkeypatch.setenv(CONFIG_ENV, str(path))
    return path


def _project(tmp_path: Path, pyproject: str | None = None, accelopt: str | None = None) -> Path:
    root = tmp_path / "repo"
    (root / "pkg" / "ops").mkdir(parents=True)
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    if accelopt is not None:
        (root / "accelopt.toml").write_text(accelopt)
    kernel = root / "pkg" / "ops" / "kernel.py"
    kernel.write_text("")
    return kernel


def test_pyproject_tool_table_is_found_from_a_nested_kernel(tmp_path, user_config):
    kernel = _project(tmp_path, '[project]\nname = "x"\n\n[tool.accelopt.search]\nbeamWidth = 3\n')
    assert find_project_file(kernel) == tmp_path / "repo" / "pyproject.toml"
    eff = effective_settings(start=kernel)
    assert eff.settings.search.beam_width == 3
    assert eff.sources["search.beamWidth"] == f"project file {tmp_path / 'repo' / 'pyproject.toml'}"
    assert not eff.issues


def test_pyproject_without_the_table_does_not_stop_the_walk(tmp_path, user_config):
    kernel = _project(tmp_path, accelopt='target = "ssh://gpu-box"\n')
    (kernel.parent / "pyproject.toml").write_text('[project]\nname = "inner"\n')
    assert find_project_file(kernel) == tmp_path / "repo" / "accelopt.toml"
    assert effective_settings(start=kernel).settings.target == "ssh://gpu-box"


def test_precedence_flags_over_project_over_user_over_defaults(tmp_path, user_config):
    user_config.write_text('target = "ray:auto"\n[search]\niterations = 7\nbeamWidth = 2\n')
    kernel = _project(tmp_path, "[tool.accelopt.search]\nbeam_width = 3\n")
    eff = effective_settings({"search": {"iterations": 9}}, start=kernel)
    s = eff.settings
    assert (s.target, s.search.beam_width, s.search.iterations) == ("ray:auto", 3, 9)
    assert eff.sources["target"] == f"user config {user_config}"
    assert eff.sources["search.beamWidth"].startswith("project file ")
    assert eff.sources["search.iterations"] == "command line"
    rows = {key: source for key, _, source in eff.rows()}
    assert rows["search.samplesPerPlan"] == "default"
    assert rows["search.iterations"] == "command line"


def test_bad_value_names_file_and_key_and_the_lower_layer_applies(tmp_path, user_config):
    user_config.write_text("[search]\nbeamWidth = 2\n")
    kernel = _project(tmp_path, "[tool.accelopt.search]\nbeamWidth = -4\n")
    eff = effective_settings(start=kernel)
    assert eff.settings.search.beam_width == 2
    (issue,) = eff.issues
    assert issue.key == "accelopt.search.beamWidth"
    assert str(tmp_path / "repo" / "pyproject.toml") in str(issue)
    assert "[tool.accelopt]" in str(issue)


def test_toml_syntax_error_is_located_and_loses_nothing_else(tmp_path, user_config):
    user_config.write_text('llm = { model = "m"\n')  # unterminated inline table
    kernel = _project(tmp_path, accelopt="[search]\niterations = 5\n")
    eff = effective_settings(start=kernel)
    assert eff.settings.search.iterations == 5
    (issue,) = eff.issues
    assert str(user_config) in str(issue) and "line 1" in str(issue)


def test_layers_without_files(tmp_path, user_config):
    eff = resolve(ConfigLayer("editor", {"maxCodeActions": 2}))
    assert eff.settings.max_code_actions == 2 and eff.sources == {"maxCodeActions": "editor"}
    assert find_project_file(tmp_path) is None


def test_fingerprint_changes_exactly_when_a_settings_file_does(tmp_path, user_config):
    kernel = _project(tmp_path, '[project]\nname = "x"\n')
    ops = kernel.parent
    before = files_fingerprint(ops)
    assert files_fingerprint(ops) == before
    (ops / "notes.txt").write_text("not a settings file")
    assert files_fingerprint(ops) == before
    (tmp_path / "repo" / "accelopt.toml").write_text("[search]\niterations = 3\n")
    created = files_fingerprint(ops)
    assert created != before
    (tmp_path / "repo" / "accelopt.toml").write_text("[search]\niterations = 30\n")
    assert files_fingerprint(ops) != created
    user_config.write_text('target = "ray:auto"\n')
    assert files_fingerprint(None) != files_fingerprint(ops)
    assert [layer.name for layer in user_layers()] == ["user config"]
    user_config.unlink()
    assert user_layers() == []


def test_layers_merge_nested_sections_later_wins() -> None:
    eff = resolve(
        ConfigLayer("a", {"search": {"beamWidth": 3, "iterations": 5}, "llm": {"model": "m1"}}),
        ConfigLayer("b", {"search": {"iterations": 1}, "llm": {"planner": {"model": "big"}}}),
    )
    settings, issues = eff.settings, eff.issues
    assert issues == []
    assert settings.search.beam_width == 3 and settings.search.iterations == 1
    assert settings.llm.role("planner").model == "big"
    assert settings.llm.role("executor").model == "m1"
    assert settings.llm.configured

"""The VS Code extension's settings schema must match the one Python settings model.

client-vscode/package.json ``contributes.configuration.properties`` is generated from
:func:`accelopt_core.settings.vscode_configuration` by ``client-vscode/scripts/gen-settings.mjs``;
the only other keys allowed are the extension-only settings in
``client-vscode/settings.extension.json``. Fix drift with ``(cd client-vscode && npm run gen-settings)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelopt_core.settings import SECTION, Settings, load_settings, vscode_configuration

CLIENT = Path(__file__).resolve().parents[1] / "client-vscode"
FIX = "run (cd client-vscode && npm run gen-settings)"


def _package_properties() -> dict:
    package = json.loads((CLIENT / "package.json").read_text(encoding="utf-8"))
    return package["contributes"]["configuration"]["properties"]


def _extension_only() -> dict:
    return json.loads((CLIENT / "settings.extension.json").read_text(encoding="utf-8"))


def test_every_model_setting_is_in_package_json_unchanged() -> None:
    props = _package_properties()
    model = vscode_configuration()
    missing = sorted(set(model) - set(props))
    assert not missing, f"settings missing from package.json: {missing}; {FIX}"
    differing = [key for key in model if props[key] != model[key]]
    assert not differing, f"package.json differs from the model for {differing}; {FIX}"


def test_package_json_has_no_settings_beyond_the_model_and_the_extension_extras() -> None:
    props = _package_properties()
    extras = _extension_only()
    model = vscode_configuration()
    assert not set(extras) & set(model), "settings.extension.json redefines model settings"
    unknown = sorted(set(props) - set(model) - set(extras))
    assert not unknown, f"package.json settings unknown to the model: {unknown}; {FIX}"
    for key, entry in extras.items():
        assert props.get(key) == entry, f"{key} differs from settings.extension.json; {FIX}"
    assert all(key.startswith(f"{SECTION}.") for key in props)


def test_package_json_defaults_are_the_model_defaults() -> None:
    """The defaults VS Code sends (nested like initializationOptions) validate to Settings()."""
    nested: dict = {}
    for key, entry in vscode_configuration().items():
        if entry["default"] is None:
            continue
        node = nested
        parts = key.split(".")[1:]
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = entry["default"]
    settings, issues = load_settings(nested)
    assert issues == []
    assert settings == Settings()


@pytest.mark.parametrize(
    ("key", "value"), [("accelopt.search.beamWidth", 0), ("accelopt.logLevel", "loud")]
)
def test_schema_bounds_match_the_model_validation(key: str, value: object) -> None:
    """A value the schema rejects (out of bounds, not in the enum) is also rejected by the model."""
    entry = _package_properties()[key]
    if "enum" in entry:
        assert value not in entry["enum"]
    else:
        assert value < entry["minimum"]
    parts = key.split(".")[1:]
    raw: dict = {}
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    _, issues = load_settings(raw)
    assert [i.key for i in issues] == [key]

"""Settings from files: the project's ``[tool.accelopt]`` and the user's config, with provenance.

The CLI and the language server read the same files, in the same names as the editor settings
(``target``, ``search.beamWidth``, ``llm.model``, ...; snake_case also accepted):

- the **project file**: the nearest configuring file found walking up from the kernel file (or the
  working directory): in each directory ``accelopt.toml`` (settings at its top level) first, then
  ``pyproject.toml`` when it has a ``[tool.accelopt]`` table (as ruff does with ``ruff.toml`` and
  ``[tool.ruff]``); a ``pyproject.toml`` without that table does not stop the walk;
- the **user config**: ``config.toml`` in the user config directory from platformdirs
  (``~/.config/accelopt/config.toml`` on Linux), or the file ``$ACCELOPT_CONFIG`` names.

Precedence, highest first: command-line flags / editor settings > project file > user config >
defaults (:func:`resolve`). A file that cannot be read or parsed, or a value that is invalid,
is reported as a :class:`~accelopt_core.settings.SettingsIssue` that names the file (and line
for a TOML syntax error) and the key; the default (or the next lower layer) applies.
:func:`files_fingerprint` tells a long-lived reader (the language server) when to read again.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelopt_core.settings import (
    SECTION,
    Settings,
    SettingsIssue,
    clean_settings,
    deep_merge,
    load_settings,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Environment variable naming a user config file to use instead of the platformdirs one.
CONFIG_ENV = "ACCELOPT_CONFIG"
PROJECT_FILE = "accelopt.toml"
PYPROJECT = "pyproject.toml"
DEFAULTS = "default"


@dataclass
class ConfigLayer:
    """One source of settings.

    Attributes:
        name: what it is, as shown by ``accelopt config`` (``user config``, ``project file``,
            ``command line``, ``editor``).
        data: the ``accelopt`` section it sets, invalid values removed.
        path: the file it was read from, if any.
        issues: what was wrong with it (unreadable file, TOML syntax error, invalid values).
    """

    name: str
    data: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    issues: list[SettingsIssue] = field(default_factory=list)

    @property
    def label(self) -> str:
        """``project file /repo/pyproject.toml`` or ``command line``."""
        return f"{self.name} {self.path}" if self.path else self.name


@dataclass
class EffectiveSettings:
    """The merged settings, what was wrong on the way, and where each value came from.

    Attributes:
        settings: the validated settings.
        issues: every layer's issues, lowest layer first.
        sources: dotted camelCase key (``search.beamWidth``) -> the label of the layer that set
            it; keys no layer set are absent (their value is the default).
        layers: the layers, lowest precedence first.
    """

    settings: Settings
    issues: list[SettingsIssue]
    sources: dict[str, str]
    layers: list[ConfigLayer]

    def rows(self) -> list[tuple[str, Any, str]]:
        """``(key, value, source)`` for every leaf setting, in model order; source ``default``
        where no layer set the key."""
        rows = []
        for key, value in _leaves(self.settings.model_dump(by_alias=True, mode="json")):
            rows.append((key, value, self.sources.get(key, DEFAULTS)))
        return rows


def user_config_path() -> Path:
    """``$ACCELOPT_CONFIG``, else ``<user config dir>/config.toml`` (platformdirs)."""
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("accelopt", appauthor=False)) / "config.toml"


def find_project_file(start: str | Path) -> Path | None:
    """The nearest ``accelopt.toml``, or ``pyproject.toml`` with ``[tool.accelopt]``, in
    ``start`` (a file's directory, or a directory) or any parent; None if there is none.

    A ``pyproject.toml`` that cannot be parsed is returned (so its error gets reported) only if
    its text mentions ``tool.accelopt``."""
    here = Path(start).expanduser().resolve()
    if not here.is_dir():
        here = here.parent
    for directory in (here, *here.parents):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _configures_accelopt(pyproject):
            return pyproject
    return None


def _configures_accelopt(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    if "accelopt" not in text:
        return False
    try:
        return isinstance(tomllib.loads(text).get("tool", {}).get(SECTION), Mapping)
    except tomllib.TOMLDecodeError:
        return "tool.accelopt" in text


def read_layer(path: Path, name: str) -> ConfigLayer:
    """Read one settings file: ``[tool.accelopt]`` of a ``pyproject.toml``, else the whole
    document (``accelopt.toml``, the user config). Never raises: problems become issues."""
    layer = ConfigLayer(name=name, path=path)
    where = f"{path} [tool.{SECTION}]" if path.name == PYPROJECT else str(path)
    try:
        document = tomllib.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return layer
    except (OSError, UnicodeDecodeError) as exc:
        layer.issues.append(_file_issue(str(path), f"cannot be read ({exc})"))
        return layer
    except tomllib.TOMLDecodeError as exc:
        layer.issues.append(_file_issue(str(path), f"is not valid TOML: {exc}"))
        return layer
    section = document.get("tool", {}).get(SECTION) if path.name == PYPROJECT else document
    if not isinstance(section, Mapping):
        return layer
    layer.data, layer.issues = clean_settings(section, source=where)
    return layer


def _file_issue(path: str, why: str) -> SettingsIssue:
    return SettingsIssue(key=SECTION, message=why, default="the other layers", source=path)


def user_layers() -> list[ConfigLayer]:
    """The user config as a one-layer list, or no layer when the file does not exist."""
    user = user_config_path()
    return [read_layer(user, "user config")] if user.is_file() else []


def file_layers(start: str | Path | None = None) -> list[ConfigLayer]:
    """The user config and the project file for ``start`` (default: the working directory),
    lowest precedence first; missing files are left out."""
    layers = user_layers()
    user = user_config_path()
    project = find_project_file(start if start is not None else Path.cwd())
    if project is not None and project.resolve() != user.expanduser().resolve():
        layers.append(read_layer(project, "project file"))
    return layers


def files_fingerprint(start: str | Path | None) -> tuple[Any, ...]:
    """What :func:`file_layers` for ``start`` reads, as ``(mtime_ns, size, inode)`` of the user
    config and of every ``accelopt.toml`` / ``pyproject.toml`` from ``start`` up to the root
    (None where absent); ``start`` None: the user config only.

    Equal fingerprints mean the same files with the same contents (to the file system's
    timestamp resolution), so a cache keyed by it is re-read exactly when a file is created,
    changed or removed. Costs two ``stat`` calls per directory level (the list of paths is
    computed once per ``start``: the language server asks on every request)."""
    env = tuple(os.environ.get(name) for name in _USER_CONFIG_ENV)
    return tuple(_stat(path) for path in _fingerprint_paths(env, start))


#: The environment variables :func:`user_config_path` depends on (platformdirs reads the XDG
#: variable on Linux, HOME / APPDATA elsewhere).
_USER_CONFIG_ENV = (CONFIG_ENV, "XDG_CONFIG_HOME", "HOME", "APPDATA")


@functools.lru_cache(maxsize=1024)
def _fingerprint_paths(env: tuple[str | None, ...], start: str | Path | None) -> tuple[str, ...]:
    """The files :func:`files_fingerprint` stats: the user config (``env``: the values of
    :data:`_USER_CONFIG_ENV` it was found with), then the two settings files of ``start``
    (symlinks resolved once) and of each parent up to the root."""
    paths = [str(user_config_path())]
    if start is not None:
        directory = os.path.realpath(os.path.expanduser(start))
        while True:
            paths += [os.path.join(directory, PROJECT_FILE), os.path.join(directory, PYPROJECT)]
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
    return tuple(paths)


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def resolve(*layers: ConfigLayer) -> EffectiveSettings:
    """Merge ``layers`` (lowest precedence first; nested sections merge, later values win) and
    validate. Never raises on user input."""
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    issues: list[SettingsIssue] = []
    for layer in layers:
        issues.extend(layer.issues)
        data = _camel(layer.data)  # one spelling, so `beam_width` overrides `beamWidth`
        deep_merge(merged, data)
        for key, _ in _leaves(data):
            sources[key] = layer.label
    settings, found = load_settings(merged)
    issues.extend(found)
    return EffectiveSettings(settings, issues, sources, list(layers))


def effective_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    start: str | Path | None = None,
    overrides_name: str = "command line",
) -> EffectiveSettings:
    """Defaults < user config < project file (found from ``start``) < ``overrides`` (the
    command-line flags or the editor's settings, named ``overrides_name``)."""
    layers = file_layers(start)
    if overrides:
        data, issues = clean_settings(overrides, source=overrides_name)
        layers.append(ConfigLayer(name=overrides_name, data=data, issues=issues))
    return resolve(*layers)


def _camel(data: Mapping[str, Any]) -> dict[str, Any]:
    """Keys as the model's camelCase aliases (``beam_width`` -> ``beamWidth``), recursively,
    except inside free-form maps."""
    from pydantic.alias_generators import to_camel

    out: dict[str, Any] = {}
    for key, value in data.items():
        name = to_camel(key) if isinstance(key, str) else key
        out[name] = _camel(value) if isinstance(value, Mapping) and name not in _MAPS else value
    return out


#: Settings whose value is a free-form map (one setting, not a section).
_MAPS = frozenset({"prices"})


def _leaves(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and key not in _MAPS and value:
            out.extend(_leaves(value, dotted + "."))
        else:
            out.append((dotted, value))
    return out

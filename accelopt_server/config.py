"""Settings for the server: the editor's settings over the project file over the user config.

The layers of a document's settings, lowest precedence first (merged with provenance by
:func:`accelopt_core.configfiles.resolve`):

1. the user config (``~/.config/accelopt/config.toml`` via platformdirs, or ``$ACCELOPT_CONFIG``);
2. the project file found from the document's directory (``[tool.accelopt]`` in the nearest
   ``pyproject.toml``, or ``accelopt.toml``; the workspace root for the server-wide settings);
3. the editor, named ``editor settings``: ``initializationOptions`` (``{"accelopt": {...}}`` or
   the section itself), then settings pushed with ``workspace/didChangeConfiguration`` (clients
   without ``workspace/configuration``), then the section pulled with ``workspace/configuration``
   for the document's URI (else the root scope's).

The file layers are cached per directory and re-read when any file they depend on changes on disk
(:func:`~accelopt_core.configfiles.files_fingerprint`, checked at each use), so a client that never
answers ``workspace/configuration`` (Neovim 0.7) and never reports file changes still gets the
project file, current. Invalid values never stop the server: each distinct
:class:`~accelopt_core.settings.SettingsIssue` is reported once, when it appears, and again only
after it went away and came back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from accelopt_core.configfiles import (
    ConfigLayer,
    EffectiveSettings,
    file_layers,
    files_fingerprint,
    resolve,
    user_layers,
)
from accelopt_core.settings import SECTION, Settings, SettingsIssue, clean_settings, deep_merge

log = logging.getLogger("accelopt.server.config")

#: How long a workspace/configuration request may take before the known settings are used (s).
CONFIG_TIMEOUT_S = 5.0
#: The name of the editor's layer, as provenance and in issue messages.
EDITOR = "editor settings"


def _section(options: Any) -> dict[str, Any] | None:
    """The ``accelopt`` section of an options object (accepts the section itself, too)."""
    if not isinstance(options, Mapping):
        return None
    inner = options.get(SECTION)
    if isinstance(inner, Mapping):
        return dict(inner)
    return dict(options)


def uri_directory(uri: str | None, *, is_dir: bool = False) -> Path | None:
    """The directory a ``file:`` URI's settings are found from (its parent for a document);
    None for other schemes (``untitled:``) and None."""
    if not uri or not uri.startswith("file:"):
        return None
    path = Path(to_fs_path(uri))
    return path if is_dir else path.parent


class FileLayers:
    """The user config and project file layers per directory, re-read when a file changes."""

    def __init__(self) -> None:
        self._cache: dict[Path | None, tuple[tuple[Any, ...], list[ConfigLayer]]] = {}

    def layers(self, directory: Path | None) -> list[ConfigLayer]:
        """The file layers for ``directory`` (None: the user config only). The same list
        object is returned while no file changed, so callers can compare with ``is``."""
        stamp = files_fingerprint(directory)
        hit = self._cache.get(directory)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        layers = user_layers() if directory is None else file_layers(directory)
        self._cache[directory] = (stamp, layers)
        return layers

    def clear(self) -> None:
        """Forget every directory (the next use reads the files again)."""
        self._cache.clear()


@dataclass
class _Scope:
    """The settings of one scope and what they were built from."""

    generation: int
    files: list[ConfigLayer]
    effective: EffectiveSettings


class ConfigManager:
    """Typed settings per scope (a document URI, or None for the server-wide settings).

    Args:
        report: called with the issues that appeared (each a
            :class:`~accelopt_core.settings.SettingsIssue`) so the server can show them.
    """

    def __init__(self, report: Callable[[list[SettingsIssue]], None]) -> None:
        self._report = report
        self.init_options: dict[str, Any] | None = None
        self.pushed: dict[str, Any] | None = None
        self.root_scope: str | None = None
        self.files = FileLayers()
        self._pulled: dict[str | None, Any] = {}
        self._generation = 0
        self._scopes: dict[str | None, _Scope] = {}
        self._documents: set[str] = set()
        self._active: dict[str | None, frozenset[str]] = {}

    def set_init_options(self, options: Any, root_scope: str | None) -> None:
        """Record ``initializationOptions`` and the root scope URI."""
        self.init_options = _section(options)
        self.root_scope = root_scope
        self._generation += 1

    def set_pushed(self, settings: Any) -> None:
        """Record settings pushed by ``workspace/didChangeConfiguration`` (may be None)."""
        section = _section(settings)
        self.pushed = section if section else None
        self._generation += 1

    @property
    def global_settings(self) -> Settings:
        """The server-wide settings (the root scope's)."""
        return self.for_uri(None)

    def for_uri(self, uri: str | None) -> Settings:
        """The settings of a document (None: the server-wide ones), current with the files."""
        return self.effective(uri).settings

    def effective(self, uri: str | None) -> EffectiveSettings:
        """The settings of ``uri`` with their provenance; rebuilt when the editor's settings or
        a file they depend on changed, reporting issues that appeared."""
        files = self.files.layers(self._directory(uri))
        scope = self._scopes.get(uri)
        if scope is not None and scope.generation == self._generation and scope.files is files:
            return scope.effective
        effective = resolve(*files, self._editor_layer(uri))
        self._scopes[uri] = _Scope(self._generation, files, effective)
        self._note_issues(uri, effective.issues)
        return effective

    def forget(self, uri: str) -> None:
        """A document closed: drop its scope (and its issues)."""
        self._documents.discard(uri)
        self._scopes.pop(uri, None)
        self._pulled.pop(uri, None)
        self._active.pop(uri, None)

    def documents(self) -> list[str]:
        """The document URIs whose settings are kept (opened kernel files)."""
        return sorted(self._documents)

    def all_settings(self) -> list[Settings]:
        """Every distinct settings object in use (server-wide first)."""
        every = [self.for_uri(None), *(self.for_uri(uri) for uri in self.documents())]
        seen: dict[str, Settings] = {}
        for s in every:
            seen.setdefault(s.model_dump_json(), s)
        return list(seen.values())

    def reread_files(self) -> None:
        """A settings file changed: read the files again and rebuild every scope now (so new
        issues are reported at once)."""
        self.files.clear()
        self.all_settings()

    async def refresh(
        self,
        fetch: Callable[[types.ConfigurationParams], Any] | None,
        scopes: list[str],
    ) -> None:
        """Pull the ``accelopt`` section for the root scope and for each document URI in
        ``scopes`` (which are kept from now on), then rebuild the settings; with ``fetch`` None
        (the client has no ``workspace/configuration``) the other layers are used.

        A client that fails or does not answer within :data:`CONFIG_TIMEOUT_S` leaves the
        settings built from the other layers; the failure is logged, never raised.
        """
        self._documents.update(scopes)
        if fetch is not None:
            pulled = await self._pull(fetch, scopes)
            if pulled:
                for scope, value in zip([None, *scopes], pulled, strict=False):
                    self._pulled[scope] = value if isinstance(value, Mapping) else None
                self._generation += 1
        self.all_settings()

    async def _pull(
        self, fetch: Callable[[types.ConfigurationParams], Any], scopes: list[str]
    ) -> list[Any]:
        items = [types.ConfigurationItem(section=SECTION, scope_uri=self.root_scope)]
        items += [types.ConfigurationItem(section=SECTION, scope_uri=u) for u in scopes]
        try:
            params = types.ConfigurationParams(items=items)
            return list(await asyncio.wait_for(fetch(params), CONFIG_TIMEOUT_S) or [])
        except Exception as exc:  # client error or timeout: keep the other layers
            log.warning("workspace/configuration failed (%r); using the known settings", exc)
            return []

    def _directory(self, uri: str | None) -> Path | None:
        if uri is None:
            return uri_directory(self.root_scope, is_dir=True)
        return uri_directory(uri) or uri_directory(self.root_scope, is_dir=True)

    def _editor_layer(self, uri: str | None) -> ConfigLayer:
        merged: dict[str, Any] = {}
        pulled = self._pulled.get(uri, self._pulled.get(None))
        for layer in (self.init_options, self.pushed, pulled):
            if isinstance(layer, Mapping):
                deep_merge(merged, layer)
        data, issues = clean_settings(merged, source=EDITOR)
        return ConfigLayer(name=EDITOR, data=data, issues=issues)

    def _note_issues(self, scope: str | None, issues: list[SettingsIssue]) -> None:
        """Report the issues of ``scope`` that no scope had before; remember them."""
        known = frozenset().union(*self._active.values())
        texts = {str(issue): issue for issue in issues}
        self._active[scope] = frozenset(texts)
        fresh = [issue for text, issue in texts.items() if text not in known]
        if fresh:
            self._report(fresh)

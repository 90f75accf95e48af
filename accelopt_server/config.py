"""Settings for the server: ``initializationOptions``, then ``workspace/configuration``.

The layers, later ones winning (merged per nested section by
:func:`accelopt_core.settings.settings_from_sources`):

1. ``initializationOptions`` (either ``{"accelopt": {...}}`` or the section itself);
2. settings pushed in ``workspace/didChangeConfiguration`` (for clients without
   ``workspace/configuration``);
3. the ``accelopt`` section pulled with ``workspace/configuration`` for a scope (a document URI,
   or the workspace root for the server-wide settings).

Settings are kept per scope, so a multi-root workspace can point two folders at different targets.
Invalid values never stop the server: each becomes a :class:`~accelopt_core.settings.SettingsIssue`
reported once per distinct text through ``window/showMessage``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from lsprotocol import types

from accelopt_core.settings import SECTION, Settings, SettingsIssue, settings_from_sources

log = logging.getLogger("accelopt.server.config")

#: How long a workspace/configuration request may take before the known settings are used (s).
CONFIG_TIMEOUT_S = 5.0


def _section(options: Any) -> dict[str, Any] | None:
    """The ``accelopt`` section of an options object (accepts the section itself, too)."""
    if not isinstance(options, Mapping):
        return None
    inner = options.get(SECTION)
    if isinstance(inner, Mapping):
        return dict(inner)
    return dict(options)


class ConfigManager:
    """Typed settings per scope.

    Args:
        report: called with the new issues of a refresh (each a
            :class:`~accelopt_core.settings.SettingsIssue`) so the server can show them.
    """

    def __init__(self, report: Callable[[list[SettingsIssue]], None]) -> None:
        self._report = report
        self.init_options: dict[str, Any] | None = None
        self.pushed: dict[str, Any] | None = None
        self.root_scope: str | None = None
        self.global_settings = Settings()
        self._scoped: dict[str, Settings] = {}
        self._shown: set[str] = set()

    def set_init_options(self, options: Any, root_scope: str | None) -> None:
        """Record ``initializationOptions`` and the root scope URI; rebuild the defaults."""
        self.init_options = _section(options)
        self.root_scope = root_scope
        self.global_settings = self._validate(None)

    def set_pushed(self, settings: Any) -> None:
        """Record settings pushed by ``workspace/didChangeConfiguration`` (may be None)."""
        section = _section(settings)
        self.pushed = section if section else None

    def for_uri(self, uri: str | None) -> Settings:
        """The settings of a document (its scope's, else the server-wide ones)."""
        if uri is not None and uri in self._scoped:
            return self._scoped[uri]
        return self.global_settings

    def forget(self, uri: str) -> None:
        self._scoped.pop(uri, None)

    def all_settings(self) -> list[Settings]:
        """Every distinct settings object in use (server-wide first)."""
        seen: dict[str, Settings] = {self.global_settings.model_dump_json(): self.global_settings}
        for s in self._scoped.values():
            seen.setdefault(s.model_dump_json(), s)
        return list(seen.values())

    async def refresh(
        self,
        fetch: Callable[[types.ConfigurationParams], Any] | None,
        scopes: list[str],
    ) -> None:
        """Pull the ``accelopt`` section for the root scope and for each document URI in
        ``scopes``; with ``fetch`` None (the client has no ``workspace/configuration``), the
        pushed and initialization settings are used for every scope.

        A client that fails or does not answer within :data:`CONFIG_TIMEOUT_S` leaves the
        settings built from the other layers; the failure is logged, never raised.
        """
        pulled: list[Any] = []
        if fetch is not None:
            items = [types.ConfigurationItem(section=SECTION, scope_uri=self.root_scope)]
            items += [types.ConfigurationItem(section=SECTION, scope_uri=u) for u in scopes]
            try:
                pulled = list(
                    await asyncio.wait_for(
                        fetch(types.ConfigurationParams(items=items)), CONFIG_TIMEOUT_S
                    )
                    or []
                )
            except Exception as exc:  # client error or timeout: keep the other layers
                log.warning("workspace/configuration failed (%s); using the known settings", exc)
                pulled = []
        issues: list[SettingsIssue] = []
        self.global_settings = self._validate(pulled[0] if pulled else None, issues)
        for i, uri in enumerate(scopes, start=1):
            self._scoped[uri] = self._validate(pulled[i] if i < len(pulled) else None, issues)
        fresh = []
        for issue in issues:
            text = str(issue)
            if text not in self._shown:
                self._shown.add(text)
                fresh.append(issue)
        if fresh:
            self._report(fresh)

    def reset_reported(self) -> None:
        """Forget which issues were shown (after a configuration change, a value that is still
        invalid is reported again)."""
        self._shown.clear()

    def _validate(self, pulled: Any, issues: list[SettingsIssue] | None = None) -> Settings:
        settings, found = settings_from_sources(
            self.init_options, self.pushed, pulled if isinstance(pulled, Mapping) else None
        )
        if issues is not None:
            issues.extend(found)
        elif found:
            issues_list = list(found)
            fresh = [i for i in issues_list if str(i) not in self._shown]
            self._shown.update(str(i) for i in fresh)
            if fresh:
                self._report(fresh)
        return settings

"""Settings: the editor's (``initializationOptions``, ``workspace/configuration`` per scope)
over the project file and the user config, and their changes.

The layers and their merge are :class:`accelopt_server.config.ConfigManager`'s; this feature
decides when to pull them (at ``initialized``, when a kernel document opens, on
``workspace/didChangeConfiguration``), registers for configuration changes and for changes of
``pyproject.toml`` / ``accelopt.toml`` (``workspace/didChangeWatchedFiles``) where the client
allows dynamic registration, re-reads the files when one is reported changed or saved
(:meth:`SettingsFeature.files_changed`), and applies what the settings steer in the server
itself (log level, which environment variables hold secrets).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.uris import to_fs_path

from accelopt_core.configfiles import PROJECT_FILE, PYPROJECT, user_config_path
from accelopt_core.targets.sandbox import api_key_names

from ..logs import set_level
from .base import LanguageFeature, command_args

if TYPE_CHECKING:
    from ..documents import KernelDocument

log = logging.getLogger("accelopt.server")

#: The settings files watched in the workspace (glob patterns).
WATCHED = (f"**/{PYPROJECT}", f"**/{PROJECT_FILE}")


class SettingsFeature(LanguageFeature):
    """Typed settings per scope, kept current."""

    async def initialize(self, params: types.InitializeParams) -> None:
        root = params.root_uri
        if root is None and params.workspace_folders:
            root = params.workspace_folders[0].uri
        self.ctx.config.set_init_options(params.initialization_options, root)
        self._apply()

    async def initialized(self) -> None:
        await self.refresh([])
        if self.ctx.capability("workspace.did_change_configuration.dynamic_registration", False):
            self.ctx.tasks.spawn(self._register(_configuration_registration()))
        if self.ctx.capability("workspace.did_change_watched_files.dynamic_registration", False):
            self.ctx.tasks.spawn(self._register(_watch_registration()))
        s = self.ctx.config.global_settings
        log.info(
            "AccelOpt %s ready: target %s, memory %s, LLM %s; %s",
            self.ctx.server_version,
            s.target,
            s.resolved_memory_dir(),
            s.llm.model or "none (offline proposer)",
            self._files_read(),
        )

    async def document_open(self, doc: KernelDocument) -> None:
        await self.refresh([doc.uri])

    async def document_close(self, uri: str) -> None:
        self.ctx.config.forget(uri)

    async def configuration_changed(self, pushed: Any) -> None:
        """``workspace/didChangeConfiguration``: ``pushed`` is the client's ``settings`` (used
        when it has no ``workspace/configuration``). Every scope with kernels is pulled again."""
        ctx = self.ctx
        ctx.config.set_pushed(pushed)
        scopes = [uri for uri, st in ctx.docs.states.items() if st.kernel_file is not None]
        await self.refresh(scopes)
        await self._settings_changed(f"target {ctx.config.global_settings.target}")

    async def files_changed(self, uris: list[str]) -> None:
        """Files changed or were saved (``workspace/didChangeWatchedFiles``, ``didSave``): when
        one is a ``pyproject.toml``, an ``accelopt.toml`` or the user config, every scope's
        settings are rebuilt from the files now (new issues are shown at once). Other files
        are ignored."""
        user = str(user_config_path())
        paths = [to_fs_path(u) for u in uris if u.startswith("file:")]
        changed = [p for p in paths if Path(p).name in (PYPROJECT, PROJECT_FILE) or p == user]
        if not changed:
            return
        self.ctx.config.reread_files()
        self._apply()
        await self._settings_changed(f"{', '.join(changed)} changed; {self._files_read()}")

    async def cmd_show_settings(self, *args: Any) -> dict[str, Any]:
        """``accelopt.showSettings [uri?]``: the effective settings of ``uri``'s scope (the
        server-wide ones without) and where each came from (``editor settings``, ``project
        file <path>``, ``user config <path>``, ``default``), e.g. for a status bar:
        ``{target, targetSource, settings: {dotted key: value}, sources: {dotted key: source}}``.
        """
        (uri,) = command_args("accelopt.showSettings", args, [], ["uri"])
        effective = self.ctx.config.effective(uri)
        rows = effective.rows()
        sources = {key: source for key, _, source in rows}
        return {
            "target": effective.settings.target,
            "targetSource": sources.get("target", "default"),
            "settings": {key: value for key, value, _ in rows},
            "sources": sources,
        }

    async def _settings_changed(self, what: str) -> None:
        """Close engines no scope uses (unless a search runs), log, refresh the lenses."""
        ctx = self.ctx
        if not any(job.active for job in ctx.jobs.list()):  # a running search keeps its engine
            await ctx.adapter.retire(ctx.config.all_settings())
        log.info("settings changed: %s", what)
        ctx.refresh_lenses()

    async def refresh(self, scopes: list[str]) -> None:
        """Pull the settings of the root scope and of the document URIs ``scopes``."""
        pull = self.ctx.capability("workspace.configuration", False)
        await self.ctx.config.refresh(self.ctx.workspace_configuration if pull else None, scopes)
        self._apply()

    def _apply(self) -> None:
        config = self.ctx.config
        set_level(config.global_settings.log_level)
        names: set[str] = set()
        for s in config.all_settings():
            names.update(api_key_names(s))
        self.ctx.redact.update(names)

    def _files_read(self) -> str:
        """``settings files: project file /x/pyproject.toml`` (the server-wide scope's)."""
        layers = self.ctx.config.effective(None).layers
        files = [layer.label for layer in layers if layer.path is not None]
        return "settings files: " + (", ".join(files) if files else "none")

    async def _register(self, registration: types.Registration) -> None:
        try:
            await self.ctx.register_capability(
                types.RegistrationParams(registrations=[registration])
            )
        except Exception as exc:
            log.debug("client did not register %s: %s", registration.method, exc)


def _configuration_registration() -> types.Registration:
    return types.Registration(
        id="accelopt-configuration",
        method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
        register_options=types.DidChangeConfigurationRegistrationOptions(section="accelopt"),
    )


def _watch_registration() -> types.Registration:
    """Watch the workspace's ``pyproject.toml`` and ``accelopt.toml`` files."""
    watchers = [types.FileSystemWatcher(glob_pattern=pattern) for pattern in WATCHED]
    return types.Registration(
        id="accelopt-settings-files",
        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
    )

"""Settings: ``initializationOptions``, ``workspace/configuration`` per scope, and changes.

The layers and their merge are :class:`accelopt_server.config.ConfigManager`'s; this feature
decides when to pull them (at ``initialized``, when a kernel document opens, on
``workspace/didChangeConfiguration``), registers for configuration changes where the client
allows it, and applies what the settings steer in the server itself (log level, which
environment variables hold secrets).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from ..logs import set_level
from .base import LanguageFeature

if TYPE_CHECKING:
    from ..documents import KernelDocument

log = logging.getLogger("accelopt.server")

#: The LLM roles whose ``apiKeyEnv`` may name a secret.
_ROLES = ("planner", "executor", "summarizer", "fixer")


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
            self.ctx.tasks.spawn(self._register())
        s = self.ctx.config.global_settings
        log.info(
            "AccelOpt %s ready: target %s, memory %s, LLM %s",
            self.ctx.server_version,
            s.target,
            s.resolved_memory_dir(),
            s.llm.model or "none (offline proposer)",
        )

    async def document_open(self, doc: KernelDocument) -> None:
        await self.refresh([doc.uri])

    async def document_close(self, uri: str) -> None:
        self.ctx.config.forget(uri)

    async def configuration_changed(self, pushed: Any) -> None:
        """``workspace/didChangeConfiguration``: ``pushed`` is the client's ``settings`` (used
        when it has no ``workspace/configuration``). Every scope with kernels is pulled again;
        unused engines are closed unless a search runs."""
        ctx = self.ctx
        ctx.config.set_pushed(pushed)
        ctx.config.reset_reported()
        scopes = [uri for uri, st in ctx.docs.states.items() if st.kernel_file is not None]
        await self.refresh(scopes)
        if not any(job.active for job in ctx.jobs.list()):  # a running search keeps its engine
            await ctx.adapter.retire(ctx.config.all_settings())
        log.info("settings changed: target %s", ctx.config.global_settings.target)
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
            names.add(s.llm.api_key_env)
            for role in _ROLES:
                names.add(s.llm.role(role).api_key_env or "")
        self.ctx.redact.update(names)

    async def _register(self) -> None:
        registration = types.Registration(
            id="accelopt-configuration",
            method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
            register_options=types.DidChangeConfigurationRegistrationOptions(section="accelopt"),
        )
        try:
            await self.ctx.register_capability(
                types.RegistrationParams(registrations=[registration])
            )
        except Exception as exc:
            log.debug("client did not register for configuration changes: %s", exc)

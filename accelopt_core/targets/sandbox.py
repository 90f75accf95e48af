"""The host's part of the sandbox of candidate processes (issue 34): which extra environment
names the user's settings add, and the command and environment of a local worker.

The sandbox itself is on-site code (:mod:`accelopt_core.onsite.sandbox`: the allowlist,
Landlock, the network namespace, bubblewrap); this module only feeds it the settings.
"""

from __future__ import annotations

import os

from accelopt_core.onsite.sandbox.environment import keep_names
from accelopt_core.onsite.sandbox.launch import worker_command
from accelopt_core.settings import Settings

__all__ = ["api_key_names", "keep", "local_worker"]

_ROLES = ("planner", "executor", "summarizer", "fixer")


def api_key_names(settings: Settings) -> set[str]:
    """Every environment variable the LLM settings read a key from (``llm.apiKeyEnv`` and
    the roles' overrides)."""
    names = {settings.llm.api_key_env}
    names.update(settings.llm.role(role).api_key_env or "" for role in _ROLES)
    names.discard("")
    return names


def keep(settings: Settings) -> str:
    """``accelopt.evaluation.environment`` as the on-site code reads it (comma-separated),
    without the API-key variables: those never reach a candidate, even when named."""
    secret = api_key_names(settings)
    return ",".join(n for n in keep_names(settings.evaluation.environment) if n not in secret)


def local_worker(argv: list[str], settings: Settings) -> tuple[list[str], dict[str, str]]:
    """``(command, environment)`` of a worker on this machine: this process's environment
    allowlisted, every API-key variable of the settings absent, the command wrapped in
    bubblewrap where Landlock is missing
    (:func:`accelopt_core.onsite.sandbox.launch.worker_command`)."""
    argv, env = worker_command(argv, os.environ, keep_names(keep(settings)))
    for name in api_key_names(settings):  # even one the allowlist's prefixes would pass
        env.pop(name, None)
    return argv, env

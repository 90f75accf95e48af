"""Server logging: ``window/logMessage`` at the configured level, with secrets scrubbed.

Everything the server and the engine log goes through the ``accelopt`` logger. One
:class:`LspLogHandler` forwards records at or above ``accelopt.logLevel`` to the client. Every
message (logs and ``window/showMessage`` texts alike) passes through :class:`Redactor`, which
removes the values of the API-key environment variables named in the settings and anything that
looks like a bearer token or an OpenAI-style key, so secrets never reach the client.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable

from lsprotocol import types

LOGGER_NAME = "accelopt"

#: Settings level name -> logging level.
LEVELS = {
    "error": logging.ERROR,
    "warning": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
}

_PATTERNS = [
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)(api[_-]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]{6,}"),
]


class Redactor:
    """Removes secrets from text before it leaves the server.

    ``update(env_names)`` takes the environment-variable names that hold API keys (from
    ``llm.apiKeyEnv`` and the per-role overrides); their current values (4+ characters) are
    replaced by ``***`` wherever they appear, as are bearer tokens, ``sk-...`` keys and
    ``api_key=...`` pairs.
    """

    def __init__(self) -> None:
        self._secrets: list[str] = []

    def update(self, env_names: Iterable[str]) -> None:
        secrets = {os.environ.get(name, "") for name in env_names if name}
        self._secrets = sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        for pattern in _PATTERNS:
            text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + "***", text)
        return text


_MESSAGE_TYPES = {
    logging.ERROR: types.MessageType.Error,
    logging.WARNING: types.MessageType.Warning,
    logging.INFO: types.MessageType.Info,
    logging.DEBUG: types.MessageType.Log,
}


class LspLogHandler(logging.Handler):
    """Forwards ``accelopt`` log records to the client as ``window/logMessage``.

    Records logged from worker threads are handed to the event loop thread first (the
    JSON-RPC writer is not thread-safe). ``send`` is the server's ``window_log_message``.
    """

    def __init__(
        self,
        send: Callable[[types.LogMessageParams], None],
        redact: Redactor,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(logging.DEBUG)
        self._send = send
        self._redact = redact
        self.loop = loop
        self._loop_thread: int | None = None
        self.setFormatter(logging.Formatter("[%(name)s] %(message)s"))

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Attach to the running event loop (call from the loop thread)."""
        self.loop = loop
        self._loop_thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self._redact(self.format(record))
            if record.exc_info:  # the traceback goes to stderr only, never to the user
                text = text.split("\nTraceback", 1)[0]
            level = max((lvl for lvl in _MESSAGE_TYPES if lvl <= record.levelno), default=10)
            params = types.LogMessageParams(type=_MESSAGE_TYPES[level], message=text)
            if self.loop is None or self.loop.is_closed():
                return
            if threading.get_ident() == self._loop_thread:
                self._send(params)
            else:
                self.loop.call_soon_threadsafe(self._send, params)
        except Exception:  # logging must never take the server down
            self.handleError(record)


def install_log_handler(
    send: Callable[[types.LogMessageParams], None], redact: Redactor
) -> LspLogHandler:
    """Route the ``accelopt`` logger to the client (``send`` is ``window_log_message``) at level
    ``info`` until the settings say otherwise, and its errors (tracebacks, for bug reports) to
    standard error; the records no longer reach the root logger. Returns the client handler
    (bind it to the event loop once it runs)."""
    handler = LspLogHandler(send, redact)
    root = logging.getLogger(LOGGER_NAME)
    root.addHandler(handler)
    root.propagate = False
    stderr = logging.StreamHandler()
    stderr.setLevel(logging.ERROR)
    root.addHandler(stderr)
    set_level("info")
    return handler


def set_level(level_name: str) -> None:
    """Set the ``accelopt`` logger's level from the settings value (error|warning|info|debug)."""
    logging.getLogger(LOGGER_NAME).setLevel(LEVELS.get(level_name, logging.INFO))


def engine_log(level: str, message: str) -> None:
    """The ``(level, message)`` sink handed to :class:`accelopt_core.engine.Engine`."""
    logging.getLogger(f"{LOGGER_NAME}.engine").log(LEVELS.get(level, logging.INFO), message)

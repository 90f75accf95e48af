"""The JSON-RPC layer under every handler: malformed params are answered, expected errors are
quiet.

pygls 2 structures each incoming message with its cattrs converter inside ``json.loads``'s
``object_hook`` (:meth:`pygls.protocol.JsonRPCProtocol.structure_message`). When a request's
params do not fit the method's lsprotocol type (a string where a line number belongs), pygls
raises there, its reading loop logs the traceback, and the request is never answered: the
client waits forever. :class:`AccelOptProtocol` catches that one place, for every method, and
answers the request with ``InvalidParams`` (-32602) naming the method and the first offending
field; a malformed notification is dropped with one warning line.

Errors a handler raises on purpose (:class:`~pygls.exceptions.JsonRpcException`: invalid command
arguments, ContentModified for a stale code action) are sent to the client and logged at debug
level without a traceback; only unexpected exceptions keep their traceback (error level).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cattrs import Converter
from cattrs.errors import ClassValidationError
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol, default_converter

log = logging.getLogger("accelopt.server.protocol")


@dataclass(frozen=True)
class MalformedMessage:
    """An incoming message whose params could not be structured (what :meth:`handle_message`
    answers instead of the message). ``id`` is None for a notification."""

    id: int | str | None
    method: str
    problem: str
    jsonrpc: str = "2.0"


def describe(exc: BaseException) -> str:
    """The first leaf of a cattrs validation error as one line: ``position.line: expected int,
    got 'x'``-like text (``ExceptionGroup`` notes carry the field paths)."""
    if isinstance(exc, ClassValidationError):
        for sub in exc.exceptions:
            notes = [str(n) for n in getattr(sub, "__notes__", [])]
            where = notes[0].replace("Structuring class ", "") if notes else ""
            inner = describe(sub)
            return f"{where}: {inner}" if where else inner
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def _strict(kind: type, accepts: tuple[type, ...]) -> Any:
    def structure(value: Any, target: type) -> Any:
        if isinstance(value, bool) and kind is not bool or not isinstance(value, accepts):
            raise TypeError(f"expected {kind.__name__}, got {value!r:.40}")
        # The hook also serves subclasses: an IntEnum field (DiagnosticSeverity) or a str enum
        # gets its member, never a bare int/str (which would not unstructure back).
        return target(value)

    return structure


def strict_converter() -> Converter:
    """lsprotocol's converter, except that a string, integer, number or boolean field takes
    only that JSON type (cattrs' default would turn ``7`` into ``"7"`` and ``"12"`` into 12,
    answering a malformed request as if it were a valid one)."""
    converter = default_converter()
    for kind, accepts in ((str, (str,)), (int, (int,)), (float, (int, float)), (bool, (bool,))):
        converter.register_structure_hook(kind, _strict(kind, accepts))
    return converter


class AccelOptProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, answering malformed requests and logging expected errors quietly."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Structure one message; a request or notification whose params do not fit its type
        becomes a :class:`MalformedMessage` instead of an exception inside the reader."""
        method = data.get("method") if isinstance(data, dict) else None
        if "jsonrpc" not in data or not isinstance(method, str) or "error" in data:
            return super().structure_message(data)
        request_type = self.get_message_type(method)
        if request_type is None:  # unknown method: pygls answers MethodNotFound
            return super().structure_message(data)
        try:
            return self._converter.structure(data, request_type)
        except Exception as exc:
            msg_id = data.get("id")
            if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
                msg_id = None
            return MalformedMessage(msg_id, method, describe(exc))

    def handle_message(self, message: Any) -> None:
        """Answer a :class:`MalformedMessage` request with ``InvalidParams``; hand everything
        else to pygls."""
        if not isinstance(message, MalformedMessage):
            super().handle_message(message)
            return
        if message.id is None:
            log.warning(
                "ignored %s notification with invalid params: %s", message.method, message.problem
            )
            return
        text = f"invalid params for {message.method}: {message.problem}"
        log.debug("request %s: %s", message.id, text)
        self._send_response(message.id, None, JsonRpcInvalidParams(text).to_response_error())

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """Send a handler's result; a JSON-RPC error it raised on purpose is sent without a
        traceback in the log (pygls logs every error with its traceback)."""
        if future.cancelled() or not isinstance(future.exception(), JsonRpcException):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        exc = future.exception()
        log.debug("request %s answered with error %s: %s", msg_id, exc.code, exc.message)
        self._send_response(msg_id, error=exc.to_response_error())

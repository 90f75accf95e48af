"""The judge <-> candidate channel: newline-delimited JSON objects over a pair of pipes.

One :class:`Channel` per side, each reading one pipe and writing the other. The judge reads
with a deadline (:meth:`Channel.recv` ``timeout_s``); the candidate reads without one. What
arrives is untrusted on the judge's side: a line longer than :data:`MAX_LINE` bytes, not JSON
or not an object raises :class:`ChannelError`, as does the end of the pipe (the peer died or
closed it) and a deadline passed.
"""

from __future__ import annotations

import json
import os
import time

#: Longest message accepted (bytes, newline excluded); messages carry paths and figures only.
MAX_LINE = 1 << 20


class ChannelError(Exception):
    """The channel broke: ``kind`` is ``"closed"`` (end of file), ``"timeout"`` or
    ``"invalid"`` (an over-long line, not JSON, not an object)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


class Channel:
    """One end: reads JSON lines from fd ``rfd``, writes them to fd ``wfd`` (both owned)."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self._buf = bytearray()

    def send(self, message: dict) -> None:
        """Write ``message`` as one JSON line. Raises ChannelError("closed") when the peer is
        gone (broken pipe)."""
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.wfd, view) :]
        except (BrokenPipeError, OSError) as exc:
            raise ChannelError("closed", str(exc)) from None

    def _line(self) -> bytes | None:
        """A complete line from the buffer (without its newline), else None."""
        end = self._buf.find(b"\n")
        if end < 0:
            if len(self._buf) > MAX_LINE:
                raise ChannelError("invalid", f"a message longer than {MAX_LINE} bytes")
            return None
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        return line

    def _fill(self, deadline: float | None) -> None:
        """Read what the pipe has into the buffer, waiting until ``deadline`` (monotonic s)."""
        import select

        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise ChannelError("timeout")
            ready, _, _ = select.select([self.rfd], [], [], wait)
            if ready:
                break
        chunk = os.read(self.rfd, 1 << 16)
        if not chunk:
            raise ChannelError("closed", "end of file")
        self._buf += chunk

    def recv(self, timeout_s: float | None = None) -> dict:
        """The next message (a JSON object). Raises ChannelError: ``closed``, ``timeout``
        (``timeout_s`` seconds passed), ``invalid``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        line = self._line()
        while line is None:
            self._fill(deadline)
            line = self._line()
        try:
            message = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ChannelError("invalid", f"not JSON: {exc}") from None
        if not isinstance(message, dict):
            raise ChannelError("invalid", "not a JSON object")
        return message

    def close(self) -> None:
        """Close both fds (errors ignored)."""
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass


def serve_requests(chan: Channel, handlers: dict, error_of) -> None:
    """The loop of a forked peer (candidate or reference process): answer each request
    ``{"op": name, ...}`` with ``handlers[name](request)``, or with ``{"error": error_of(exc,
    request)}`` when the handler raises; exit the process (``os._exit(0)``) at ``exit``, an
    unknown op, or when the judge closes or breaks the channel. Never returns."""
    import sys

    while True:
        try:
            msg = chan.recv()
        except Exception:  # noqa: BLE001 - the judge is gone or broke the channel
            os._exit(0)
        handler = handlers.get(msg.get("op"))
        if handler is None:
            os._exit(0)
        try:
            answer = handler(msg)
        except BaseException as exc:  # noqa: BLE001 - reported to the judge
            answer = {"error": error_of(exc, msg)}
        sys.stdout.flush()
        chan.send(answer)

"""The judge <-> peer channel: newline-delimited JSON objects over a pair of pipes, and
shared-memory segments (:class:`.runtime.exchange.Segment`) beside them over a Unix socket
pair (issue 50).

One :class:`Channel` per side, each reading one pipe and writing the other. The judge reads
with a deadline (:meth:`Channel.recv` ``timeout_s``); a peer reads without one. What arrives
is untrusted on the judge's side: a line longer than :data:`MAX_LINE` bytes, not JSON or not
an object raises :class:`ChannelError`, as does the end of the pipe (the peer died or closed
it) and a deadline passed.

A message may hold :class:`~.runtime.exchange.Segment` objects anywhere in its dicts and
lists. :meth:`Channel.send` sends their descriptors first, as one ``SCM_RIGHTS`` record on
the socket (``SOCK_SEQPACKET``: records keep their boundaries), then the line, in which each
segment is ``{"$seg": i, "layout": ...}`` and the message counts them in ``"$nfds"``.
:meth:`Channel.recv` takes exactly that many descriptors from the next record and turns each
entry back into a Segment (:func:`~.runtime.exchange.adopt`: checked against its
descriptor); a wrong count, a truncated record or a malformed layout is ``invalid``, and every
descriptor received is closed. Sending closes nothing: the sender keeps its segments.
"""

from __future__ import annotations

import json
import os
import time

from .exchange import ExchangeError, Segment, adopt

#: Longest message accepted (bytes, newline excluded); messages carry layouts and figures.
MAX_LINE = 1 << 20
#: Most descriptors in one message (the kernel's ``SCM_MAX_FD`` is 253).
MAX_FDS = 250
_NFDS = "$nfds"
_SEG = "$seg"


class ChannelError(Exception):
    """The channel broke: ``kind`` is ``"closed"`` (end of file), ``"timeout"`` or
    ``"invalid"`` (an over-long line, not JSON, not an object)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


def segment_socketpair() -> tuple[int, int]:
    """Two connected Unix sockets (fds, owned by the caller) for a channel's segments:
    ``SOCK_SEQPACKET``, or ``SOCK_STREAM`` where the platform has no sequenced packets for
    Unix sockets (macOS). A stream keeps the protocol too: each direction has one record of
    descriptors in flight at most (a message, then its answer), and a receive never joins
    two records' descriptors."""
    import socket

    try:
        pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError:
        pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return pair[0].detach(), pair[1].detach()


def encode(obj, fds: list[int], depth: int = 0):
    """``obj`` with each Segment replaced by its wire entry, its descriptor appended to
    ``fds``."""
    if isinstance(obj, Segment):
        fds.append(obj.fd)
        return {_SEG: len(fds) - 1, "layout": obj.layout}
    if depth > 8:
        return obj
    if isinstance(obj, dict):
        return {k: encode(v, fds, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v, fds, depth + 1) for v in obj]
    return obj


def decode(obj, fds: list[int], used: set[int], depth: int = 0):
    """``obj`` with each wire entry replaced by the Segment it names (each descriptor used
    once). Raises ChannelError("invalid")."""
    if isinstance(obj, dict):
        if _SEG in obj:
            i = obj[_SEG]
            if set(obj) != {_SEG, "layout"} or type(i) is not int or not 0 <= i < len(fds):
                raise ChannelError("invalid", "a malformed segment entry")
            if i in used:
                raise ChannelError("invalid", "a descriptor named twice")
            used.add(i)
            try:
                return adopt(os.dup(fds[i]), obj["layout"])
            except (ExchangeError, OSError) as exc:
                raise ChannelError("invalid", f"segment: {exc}") from None
        if depth > 8:
            return obj
        return {k: decode(v, fds, used, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list) and depth <= 8:
        return [decode(v, fds, used, depth + 1) for v in obj]
    return obj


class Channel:
    """One end: reads JSON lines from fd ``rfd``, writes them to fd ``wfd``, and passes
    segments' descriptors over the Unix socket ``sock`` (an fd; None: a channel that carries
    no segments). All owned."""

    def __init__(self, rfd: int, wfd: int, sock: int | None = None) -> None:
        self.rfd = rfd
        self.wfd = wfd
        self.sock = sock
        self._buf = bytearray()

    def send(self, message: dict) -> None:
        """Write ``message`` as one JSON line, after the descriptors of the segments in it.
        Raises ChannelError("closed") when the peer is gone (broken pipe)."""
        fds: list[int] = []
        wire = encode(message, fds)
        if fds:
            if self.sock is None or len(fds) > MAX_FDS:
                raise ChannelError("invalid", f"{len(fds)} segments on a channel for none")
            wire[_NFDS] = len(fds)
            import socket

            try:
                with socket.socket(fileno=os.dup(self.sock)) as sock:
                    socket.send_fds(sock, [b"s"], fds)
            except OSError as exc:
                raise ChannelError("closed", str(exc)) from None
        data = json.dumps(wire, separators=(",", ":")).encode() + b"\n"
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.wfd, view) :]
        except (BrokenPipeError, OSError) as exc:
            raise ChannelError("closed", str(exc)) from None

    def _take_fds(self, n, deadline: float | None) -> list[int]:
        """The ``n`` descriptors of the next record on the socket. Raises ChannelError."""
        import select
        import socket

        if self.sock is None or type(n) is not int or not 0 < n <= MAX_FDS:
            raise ChannelError("invalid", f"a message announcing {str(n)[:20]} descriptors")
        while True:
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise ChannelError("timeout")
            if select.select([self.sock], [], [], wait)[0]:
                break
        with socket.socket(fileno=os.dup(self.sock)) as sock:
            try:
                _, fds, flags, _ = socket.recv_fds(sock, 16, MAX_FDS + 1)
            except OSError as exc:
                raise ChannelError("closed", str(exc)) from None
        if len(fds) != n or flags & getattr(socket, "MSG_CTRUNC", 0):
            for fd in fds:
                os.close(fd)
            raise ChannelError("invalid", f"{len(fds)} descriptors where {n} were announced")
        return fds

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
        if _NFDS not in message:
            return decode(message, [], set())
        fds = self._take_fds(message.pop(_NFDS), deadline)
        try:
            return decode(message, fds, set())
        finally:
            for fd in fds:
                os.close(fd)

    def close(self) -> None:
        """Close all three fds (errors ignored)."""
        for fd in (self.rfd, self.wfd, self.sock):
            try:
                if fd is not None:
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
        close_segments(answer)


def segments_in(obj, depth: int = 0) -> list[Segment]:
    """Every Segment in ``obj`` (a message's dicts and lists, 8 levels deep), in the order
    :func:`encode` numbers them."""
    if isinstance(obj, Segment):
        return [obj]
    if depth > 8:
        return []
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in segments_in(v, depth + 1)]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in segments_in(v, depth + 1)]
    return []


def close_segments(obj) -> None:
    """Close every Segment in ``obj`` (a message's dicts and lists): what a peer sent is the
    receiver's now, and an open descriptor would keep its memory."""
    for seg in segments_in(obj):
        seg.close()

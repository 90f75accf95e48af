"""Inputs and reference outputs made once per search (issue 50, item 4; DESIGN.md "Evaluating a
candidate", item 9): the warm worker keeps the reference process's answers between evaluations.

The reference does not change between the candidates of one search: the same original file,
seeds, shapes and derived inputs give the same inputs and the same reference outputs. So the
warm worker (:mod:`.process.zygote`) keeps them, as the sealed shared-memory segments the
reference process sent (:mod:`.runtime.exchange`), and every later evaluation it forks reads
them instead of asking the reference process again: no ``get_inputs``, no ``reference``, no copy
into shared memory. The trust rules of the exchange hold unchanged: a kept segment is sealed (no
process can write its bytes, the sender included), each reader maps it privately, and the
candidate still receives only its inputs.

How it works, with no thread and no lock:

- The zygote makes one :class:`CaseStore` at start (:func:`install`): a ``SOCK_SEQPACKET``
  socket pair and the entries, by key. Its supervisors, and the judges they fork, inherit both
  (``fork``, no ``exec``): a judge reads the entries that existed when its supervisor was
  forked, with their descriptors, without asking anyone (:meth:`CaseStore.get`).
- A judge that had to ask the reference process offers the answer (:meth:`CaseStore.offer`):
  one record on the socket, the answer as JSON with its segments' descriptors as
  ``SCM_RIGHTS``, sent without blocking (a full socket: not kept, never a wait). The zygote's
  loop takes it (:meth:`CaseStore.take`) and keeps it for the evaluations forked after.
- The budget comes with each record (:func:`budget_bytes`: the setting
  ``evaluation.referenceStoreMb``, by default a quarter of the memory available when the
  evaluation started). The zygote drops the least recently used entries beyond it, beyond
  :data:`MAX_ENTRIES` entries, and those unused for :data:`IDLE_S` (:meth:`CaseStore.expire`);
  a judge that used an entry says so (a ``touch`` record). An
  answer that does not fit is not kept: later evaluations recompute it, and the evaluation
  says so in ``metrics["reference_store"]["note"]``. Never a failed evaluation.
- The candidate, the reference process and the compile stage close every descriptor they
  inherit (:func:`.contestant.process.isolate`): neither the entries nor the socket reach them.
  An evaluation that runs candidate code in the judge's own process (NKI) calls
  :func:`forget` first.

Keys (:func:`key`) name everything the answer depends on: the original file and its project
(the sources the reference process loads), the device kind, the judge's version and the request
itself (operation, seeds, shape, derived input). A cold worker has no store: each evaluation
asks the reference process, as before.

Standard library only at module level (the onsite rule).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import os
import time

from .channel import decode, encode, segments_in
from .exchange import Segment

#: Most entries kept (each holds up to two descriptors, inherited by every judge: the judge's
#: processes stay far below the usual limit of 1,024 open files).
MAX_ENTRIES = 192
#: Longest record (bytes): an answer's JSON, its segments as layouts.
MAX_RECORD = 1 << 16
#: Most descriptors in one record.
MAX_RECORD_FDS = 8
#: The share of the memory available when an evaluation starts that the store may hold, when
#: ``evaluation.referenceStoreMb`` is unset (issue 50: "say a quarter").
AUTO_SHARE = 0.25
#: Seconds an answer stays kept without being used: a search's evaluations follow each other
#: within seconds, and a warm worker that lives as long as an editor's language server gives
#: the memory back when the searches stop.
IDLE_S = 600.0


class CaseStore:
    """The kept answers, by key, and the socket that brings new ones to the zygote.

    Attributes:
        entries: key -> ``(answer in wire form, segments)``, least recently used first.
        nbytes: the bytes of every kept segment.
        recv_fd: the zygote's end of the socket (None in a supervisor or judge).
        send_fd: the judges' end (None after :func:`forget`).
    """

    def __init__(self) -> None:
        import socket

        recv, send = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        recv.setblocking(False)
        self.recv_fd: int | None = recv.detach()
        self.send_fd: int | None = send.detach()
        self.entries: collections.OrderedDict[str, tuple[dict, list[Segment]]] = (
            collections.OrderedDict()
        )
        self.nbytes = 0
        self.used: dict[str, float] = {}  # key -> when it was last kept or used (monotonic s)

    # --- the zygote's side -------------------------------------------------------------

    def take(self) -> int:
        """Take every record waiting on the socket (never blocks): keep each offered answer,
        move each touched entry to the end, then drop the least recently used entries beyond
        the record's budget. Malformed records are dropped. Returns how many records came."""
        import socket

        count = 0
        with socket.socket(fileno=os.dup(self.recv_fd)) as sock:
            sock.setblocking(False)
            while True:
                try:
                    data, fds, flags, _ = socket.recv_fds(sock, MAX_RECORD, MAX_RECORD_FDS)
                except OSError:  # nothing waiting (EAGAIN), or the socket is gone
                    return count
                if not data and not fds:
                    return count
                count += 1
                self._record(data, fds, flags)

    def _record(self, data: bytes, fds: list[int], flags: int) -> None:
        """Act on one record; every descriptor in it is closed or kept."""
        import socket

        try:
            bad = flags & (getattr(socket, "MSG_TRUNC", 0) | getattr(socket, "MSG_CTRUNC", 0))
            msg = None if bad else json.loads(data.decode("utf-8"))
            if not isinstance(msg, dict) or not isinstance(msg.get("key"), str):
                return
            if "touch" in msg:
                if msg["key"] in self.entries:
                    self.entries.move_to_end(msg["key"])
                    self.used[msg["key"]] = time.monotonic()
                return
            answer, segs = _adopted(msg.get("answer"), fds)
            if answer is not None:
                self._keep(msg["key"], answer, segs, _budget(msg.get("budget")))
        except (ValueError, UnicodeDecodeError):
            return
        finally:
            for fd in fds:
                os.close(fd)

    def _keep(self, key: str, answer: dict, segs: list[Segment], budget: int) -> None:
        size = sum(s.nbytes for s in segs)
        if size > budget:
            for seg in segs:
                seg.close()
            return
        self._drop(key)
        self.entries[key] = (answer, segs)
        self.used[key] = time.monotonic()
        self.nbytes += size
        while self.entries and (self.nbytes > budget or len(self.entries) > MAX_ENTRIES):
            self._drop(next(iter(self.entries)))

    def expire(self, now: float | None = None) -> float | None:
        """Drop the answers unused for :data:`IDLE_S`; the seconds until the next one is due,
        or None when nothing is kept (the zygote's loop sleeps that long at most)."""
        now = time.monotonic() if now is None else now
        for key in [k for k, t in self.used.items() if now - t >= IDLE_S]:
            self._drop(key)
        return min(self.used.values()) + IDLE_S - now if self.used else None

    def _drop(self, key: str) -> None:
        self.used.pop(key, None)
        old = self.entries.pop(key, None)
        if old is not None:
            for seg in old[1]:
                self.nbytes -= seg.nbytes
                seg.close()

    def clear(self) -> None:
        """Drop every entry (their memory is freed once no judge maps them)."""
        for key in list(self.entries):
            self._drop(key)

    # --- a judge's side ----------------------------------------------------------------

    def get(self, key: str) -> dict | None:
        """The kept answer for ``key`` with fresh Segments (duplicate descriptors the caller
        owns), or None. Tells the zygote the entry was used."""
        kept = self.entries.get(key)
        if kept is None:
            return None
        answer, segs = kept
        try:
            fds = [os.dup(s.fd) for s in segs]
        except OSError:
            return None
        try:
            found = decode(answer, fds, set())
        except Exception:  # noqa: BLE001 - a kept entry that no longer maps: recompute
            return None
        finally:
            for fd in fds:
                os.close(fd)
        self._send({"key": key, "touch": True}, [])
        return found

    def offer(self, key: str, answer: dict, budget: int) -> str | None:
        """Send ``answer`` (a reference process's answer; its Segments stay the caller's) to
        the zygote to keep under ``key``; None when sent, else why it is not kept (too large
        for the budget, a segment that is not sealed, the socket full or closed)."""
        fds: list[int] = []
        wire = encode(answer, fds)
        segs = segments_in(answer)
        size = sum(s.nbytes for s in segs)
        if size > budget:
            return (
                f"the reference store's budget ({budget / 2**20:.0f} MiB) is smaller than this "
                f"case's inputs and outputs ({size / 2**20:.0f} MiB): recomputed by each "
                "evaluation"
            )
        if not all(s.sealed for s in segs):
            return "the segments are not sealed on this platform: nothing is kept"
        if len(fds) > MAX_RECORD_FDS:
            return f"an answer of {len(fds)} segments is not kept (at most {MAX_RECORD_FDS})"
        return self._send({"key": key, "budget": budget, "answer": wire}, fds)

    def _send(self, msg: dict, fds: list[int]) -> str | None:
        import socket

        data = json.dumps(msg, separators=(",", ":")).encode()
        if self.send_fd is None or len(data) > MAX_RECORD:
            return "the answer is too large to keep" if self.send_fd is not None else "no store"
        try:
            with socket.socket(fileno=os.dup(self.send_fd)) as sock:
                socket.send_fds(sock, [data], fds, socket.MSG_DONTWAIT)
        except OSError as exc:
            return f"the warm worker did not take it ({exc.strerror or exc})"
        return None

    def close_all(self) -> None:
        """Close the socket's ends and every entry's descriptors (this process's copies)."""
        for seg_list in (segs for _, segs in self.entries.values()):
            for seg in seg_list:
                seg.close()
        self.entries.clear()
        self.used.clear()
        self.nbytes = 0
        for fd in (self.recv_fd, self.send_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.recv_fd = self.send_fd = None


def _adopted(answer, fds: list[int]) -> tuple[dict | None, list[Segment]]:
    """``(answer in wire form, its Segments)`` of a record, each segment checked against its
    descriptor and sealed; ``(None, [])`` when anything is wrong."""
    if not isinstance(answer, dict):
        return None, []
    try:
        segs = segments_in(decode(answer, fds, set()))
    except Exception:  # noqa: BLE001 - a malformed record: dropped
        return None, []
    if len(segs) != len(fds) or not all(s.sealed for s in segs):
        for seg in segs:
            seg.close()
        return None, []
    return answer, segs


def _budget(value) -> int:
    return int(value) if type(value) is int and value >= 0 else 0


_STORE: CaseStore | None = None


def install() -> CaseStore:
    """Make this process's store (the zygote, at start); its forks inherit it."""
    global _STORE
    _STORE = CaseStore()
    return _STORE


def current() -> CaseStore | None:
    """The store this process inherited (a warm worker's supervisor or judge), or None (a
    cold worker)."""
    return _STORE


def forget() -> None:
    """Close this process's copies of the store (the socket and every entry): before code
    that is not the judge's runs in this process (NKI candidates run in the judge)."""
    global _STORE
    if _STORE is not None:
        _STORE.close_all()
    _STORE = None


def leave_receiving() -> None:
    """In a supervisor just forked: close the zygote's end of the socket (only the zygote
    takes records)."""
    if _STORE is not None and _STORE.recv_fd is not None:
        with contextlib.suppress(OSError):
            os.close(_STORE.recv_fd)
        _STORE.recv_fd = None


def key(identity: str, msg: dict) -> str:
    """The key of ``msg`` (a request to the reference process) for the harness ``identity``
    (:func:`identity`): a SHA-256 hex digest."""
    body = json.dumps(msg, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{identity}\n{body}".encode()).hexdigest()


def identity(setup: dict, use_cuda: bool, version: str) -> str:
    """What the reference process's answers depend on besides the request: its ``setup``'s
    sources (``harness_source``, ``source_name``, ``project``), the device kind and the judge's
    ``version``; a SHA-256 hex digest."""
    parts = {k: setup.get(k) for k in ("harness_source", "source_name", "project")}
    parts.update(use_cuda=bool(use_cuda), version=version)
    body = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def budget_bytes(setting_mb: int | None) -> int:
    """The store's budget in bytes: ``setting_mb`` MiB (the setting
    ``evaluation.referenceStoreMb``; 0 keeps nothing), or, unset, :data:`AUTO_SHARE` of the
    memory available now: ``MemAvailable`` of ``/proc/meminfo``, or less where the container's
    memory cgroup leaves less (:func:`_cgroup_headroom`); 0 where neither can be read."""
    if setting_mb is not None:
        return max(0, int(setting_mb)) * 2**20
    free = [n for n in (_mem_available(), _cgroup_headroom()) if n is not None]
    return int(AUTO_SHARE * min(free)) if free else 0


def _mem_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo``, bytes (the host's, even in a container)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


#: ``(limit, usage)`` files of the memory cgroup as a container sees it: cgroup v2, then v1.
_CGROUP_FILES = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def _cgroup_headroom() -> int | None:
    """The memory cgroup's limit minus its usage, bytes (shared memory is charged to it);
    None without a limit or where the files cannot be read."""
    for limit_path, usage_path in _CGROUP_FILES:
        try:
            with open(limit_path, encoding="ascii") as f:
                limit = f.read().strip()
            with open(usage_path, encoding="ascii") as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 2**62:
            return None
        return max(0, int(limit) - usage)
    return None

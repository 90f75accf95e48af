"""The optimization memory on local disk: :class:`OptimizationMemory` (a :mod:`diskcache` cache,
SQLite, safe across processes) and the disk layer it shares with the results store.

The memory keeps :class:`~accelopt_core.memory.experience.Experience` items, merges repeated
observations, evicts by a documented rule (:func:`~accelopt_core.memory.ranking.eviction_order`)
and retrieves the most similar ones (:mod:`~accelopt_core.memory.ranking`) for the planner, for
``accelopt memory search`` and for hovers. Sparse vectors
(:mod:`~accelopt_core.memory.vectors`) are stored next to each experience, so retrieval never
re-tokenizes the memory.

All errors of the disk (read-only directory, corrupt database, full disk, lock timeout) surface
as :class:`MemoryUnavailable` with the directory and the reason; nothing is ever half-written:
every change happens inside one SQLite transaction.
"""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import diskcache
import numpy as np

from accelopt_core.memory.experience import (
    HOST_TIMINGS,
    Experience,
    judge_key,
    merge,
    read_jsonl,
    write_jsonl,
)
from accelopt_core.memory.ranking import IndexEntry, Snapshot, Stored, eviction_order, mentions
from accelopt_core.memory.vectors import (
    FEATURE_VERSION,
    code_query,
    experience_vector,
    text_query,
)

if TYPE_CHECKING:
    from accelopt_core.settings import Settings

__all__ = ["DiskStore", "MemoryUnavailable", "OptimizationMemory"]

_SCHEMA = 1
_EXP_PREFIX = "exp:"
_INDEX_KEY = "meta:index"
_VERSION_KEY = "meta:version"
_SCHEMA_KEY = "meta:schema"
# Values up to 32 MiB stay inside SQLite (diskcache would otherwise write big values to separate
# files, outside the transaction), so a failed write leaves nothing behind.
_IN_DB = 2**25

_DISK_ERRORS = (OSError, sqlite3.Error, diskcache.Timeout)
_T = TypeVar("_T")


# --------------------------------------------------------------------------------------------
# The disk layer


class MemoryUnavailable(Exception):
    """The optimization memory (or results store) cannot be used: the message names the
    directory and why (read-only, not a directory, corrupt, locked, disk full)."""


def _os_reason(exc: OSError) -> tuple[str, str]:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "read-only", exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        return "unusable", "no space left on device"
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return "unusable", f"{exc.strerror}: {exc.filename}"
    return "unusable", exc.strerror or str(exc)


def _reason(exc: BaseException) -> tuple[str, str]:
    """(kind, reason) of a disk error: kind is 'read-only', 'corrupt', 'busy' or 'unusable'."""
    if isinstance(exc, diskcache.Timeout):
        return "busy", "timed out waiting for another process's lock"
    if isinstance(exc, OSError):
        return _os_reason(exc)
    text = str(exc)
    low = text.lower()
    if any(s in low for s in ("readonly", "read-only", "disk i/o error", "unable to open")):
        return "read-only", text
    if "locked" in low or "busy" in low:
        return "busy", text
    if "full" in low:
        return "unusable", text
    if isinstance(exc, sqlite3.DatabaseError):
        return "corrupt", text
    return "unusable", text


def _unavailable(what: str, directory: Path, exc: BaseException) -> MemoryUnavailable:
    kind, reason = _reason(exc)
    if kind == "corrupt":
        reason += " (move the directory away to start afresh)"
    return MemoryUnavailable(f"{what} at {directory} is {kind}: {reason}")


def _open_cache(what: str, directory: Path, **options: Any) -> diskcache.Cache:
    """Open a diskcache Cache and prove it is writable; raise MemoryUnavailable otherwise."""
    cache: diskcache.Cache | None = None
    try:
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(directory))
        directory.mkdir(parents=True, exist_ok=True)
        cache = diskcache.Cache(
            str(directory),
            eviction_policy=options.pop("eviction_policy", "none"),
            disk_min_file_size=_IN_DB,
            timeout=60,
            **options,
        )
        with cache.transact():
            cache.set(_SCHEMA_KEY, _SCHEMA)
    except _DISK_ERRORS as exc:
        if cache is not None:
            with contextlib.suppress(Exception):
                cache.close()
        raise _unavailable(what, directory, exc) from exc
    return cache


class DiskStore:
    """A diskcache Cache in ``directory`` whose disk errors surface as MemoryUnavailable.

    Args:
        what: the store's name in error messages (``"optimization memory"``).
        directory: its directory (``~`` expanded; created when missing).
        options: diskcache settings (``eviction_policy``, ``size_limit``).

    Raises MemoryUnavailable when the directory cannot be created, opened or written.
    """

    def __init__(self, what: str, directory: Path | str, **options: Any) -> None:
        self.directory = Path(directory).expanduser()
        self._what = what
        self._cache = _open_cache(what, self.directory, **options)

    def close(self) -> None:
        """Close this process's SQLite connections (the store may be reopened)."""
        with contextlib.suppress(Exception):
            self._cache.close()

    def _guard(self, fn: Callable[[], _T]) -> _T:
        """``fn()``, with a disk error raised as MemoryUnavailable."""
        try:
            return fn()
        except _DISK_ERRORS as exc:
            raise _unavailable(self._what, self.directory, exc) from exc


# --------------------------------------------------------------------------------------------
# The optimization memory


class OptimizationMemory(DiskStore):
    """Experiences on local disk (diskcache), merged, capped, and searchable by similarity.

    Layout (keys of one diskcache Cache): ``exp:<id>`` -> {experience, sparse vector, rev};
    ``meta:index`` -> {id: (positive, seen x speedup, updated_at, rev)}; ``meta:version`` -> a
    counter bumped by every change. Every change (add, import, remove, clear) is one SQLite
    transaction (``cache.transact()``), so concurrent processes never lose entries and a failure
    leaves nothing half-written.

    Eviction rule: at most ``max_experiences`` are kept. When an add goes over, the experiences
    evicted first are the negatives, then those with the lowest ``seen x speedup``, then the
    least recently observed (``updated_at``); the experience being added competes on the same
    terms.

    Similarity: cosine of TF-IDF-weighted hashed feature vectors (:mod:`.vectors`, ranked by
    :mod:`.ranking`). ``backend`` always filters; ``device`` never filters in :meth:`search` /
    :meth:`retrieve_for`: an experience measured on another device has its similarity multiplied
    by :data:`~accelopt_core.memory.ranking.DEVICE_PENALTY` (it ranks lower but does not
    vanish). In :meth:`all` ``device`` filters exactly.

    Methods block on SQLite: call them from a thread (``asyncio.to_thread``) in async code.
    Every method raises :class:`MemoryUnavailable` (never a raw sqlite or OS error) when the
    disk fails; reads keep working on a memory whose directory became read-only.
    """

    def __init__(self, directory: Path | str, *, max_experiences: int = 5000) -> None:
        """Open (or create) the memory in ``directory``.

        Raises MemoryUnavailable when the directory cannot be created, opened or written.
        Raises ValueError when ``max_experiences`` < 1.
        """
        if max_experiences < 1:
            raise ValueError("max_experiences must be >= 1")
        super().__init__("optimization memory", directory)
        self.max_experiences = max_experiences
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None

    @classmethod
    def open(cls, settings: Settings) -> tuple[OptimizationMemory | None, str | None]:
        """The memory in ``settings.resolved_memory_dir() / "memory"``, or ``(None, warning)``
        when it is unusable (read-only, corrupt, ...): the search then goes on without it."""
        directory = settings.resolved_memory_dir() / "memory"
        try:
            return cls(directory), None
        except MemoryUnavailable as exc:
            return None, f"{exc}; searching without the optimization memory"

    def __enter__(self) -> OptimizationMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OptimizationMemory({str(self.directory)!r})"

    # -- the disk ----------------------------------------------------------------------------

    def _write(self, incoming: list[Experience], *, add_seen: bool) -> list[Experience]:
        """Merge ``incoming`` in one transaction and enforce the cap."""
        cap = self.max_experiences
        return self._guard(lambda: _merge_into(self._cache, incoming, add_seen=add_seen, cap=cap))

    def _load(self) -> Snapshot:
        """The current snapshot, refreshed from disk when another writer changed the memory.
        Only the entries whose revision changed are read again."""
        with self._lock:
            version = int(self._guard(lambda: self._cache.get(_VERSION_KEY, 0)))
            snap = self._snapshot
            if snap is not None and snap.version == version:
                return snap
            old_items = snap.items if snap is not None else {}
            ver, index, changed = self._guard(lambda: _read_changed(self._cache, old_items))
            items = {eid: old_items[eid] for eid in index if eid not in changed}
            for eid, entry in changed.items():
                if entry is not None:  # None: removed by a writer after the index was read
                    items[eid] = _stored(entry, index[eid][3])
            self._snapshot = Snapshot.build(ver, items)
            return self._snapshot

    # -- public API --------------------------------------------------------------------------

    def add(self, exp: Experience) -> Experience:
        """Store one observation. An experience with the same id is merged into the stored one
        (``seen`` += ``exp.seen``, the best speedup, the newest sources, rule and plan); the cap
        is then enforced (see the class docstring). Returns the stored experience (possibly
        already evicted when it was the weakest). Raises MemoryUnavailable on a disk failure."""
        return self._write([exp], add_seen=True)[0]

    def get(self, id_or_prefix: str) -> Experience | None:
        """The experience with this id, or the only one whose id starts with the prefix; None
        when there is none. Raises ValueError when the prefix matches several."""
        key = id_or_prefix.strip().lower()
        if not key:
            return None
        entry = self._guard(lambda: self._cache.get(_EXP_PREFIX + key))
        if entry is not None:
            return Experience.from_dict(entry["exp"])
        matches = [e for e in self._load().exps if e.id.startswith(key)]
        if len(matches) > 1:
            ids = ", ".join(sorted(e.id for e in matches)[:5])
            raise ValueError(f"id prefix {id_or_prefix!r} is ambiguous: {ids}")
        return matches[0] if matches else None

    def all(
        self,
        *,
        backend: str | None = None,
        device: str | None = None,
        positive: bool | None = None,
        hack: bool | None = None,
    ) -> list[Experience]:
        """Every experience matching the filters (exact match on each one given; ``hack``:
        True for reward-hack experiences only, False for the others), newest (most recently
        observed) first."""
        return [
            e
            for e in self._load().exps
            if (backend is None or e.backend == backend)
            and (device is None or e.device == device)
            and (positive is None or e.positive == positive)
            and (hack is None or (e.hack is not None) == hack)
        ]

    def older_judged(self, judge_version: str) -> list[Experience]:
        """The experiences verified by a judge older than ``judge_version`` (by
        :func:`~accelopt_core.memory.experience.judge_key`; records without a judge version
        count as ``"1"``), newest first: what ``accelopt memory recheck`` lists."""
        current = judge_key(judge_version)
        return [e for e in self._load().exps if judge_key(e.judge_version) < current]

    def remove_many(self, ids: list[str]) -> int:
        """Delete the experiences with these full ids in one transaction; how many were
        there."""
        wanted = list(ids)
        return self._guard(lambda: _delete(self._cache, lambda index: wanted))

    def __len__(self) -> int:
        index = self._guard(lambda: self._cache.get(_INDEX_KEY, {}))
        return len(index)

    def remove(self, id: str) -> bool:
        """Delete one experience by its full id. True when it was there."""
        return self._guard(lambda: _delete(self._cache, lambda index: [id])) == 1

    def clear(self) -> int:
        """Delete every experience; returns how many there were."""
        return self._guard(lambda: _delete(self._cache, list))

    def search(
        self,
        text: str,
        k: int = 10,
        *,
        backend: str | None = None,
        device: str | None = None,
        positive: bool | None = None,
    ) -> list[tuple[Experience, float]]:
        """Up to ``k`` experiences most similar to ``text`` (prose or code), best first, with
        their cosine similarity in (0, 1]. Experiences with no feature in common are left out."""
        query = text_query(text)
        return self._load().rank(query, k, backend=backend, device=device, positive=positive)

    def retrieve_for(
        self,
        kernel_source: str,
        backend: str,
        device: str | None,
        k: int,
        *,
        timing: str | None = None,
    ) -> tuple[list[Experience], list[Experience]]:
        """The planner's memory items for a kernel: the ``k`` positives and the ``k`` negatives
        whose slow source, title and rule are most similar to ``kernel_source`` (same backend;
        other devices rank lower by :data:`~accelopt_core.memory.ranking.DEVICE_PENALTY`).
        Reward-hack experiences are not among them (:meth:`hacks_for`).

        ``timing`` is the timing mode of the search's target (its baseline's
        ``EvalResult.timing``): unless it is itself a host timing
        (:data:`~accelopt_core.memory.experience.HOST_TIMINGS`: ``interpreter``,
        ``simulated``), experiences timed on the host are left out, so interpreter or
        simulator latencies never steer a search on a GPU or Trainium. None: no timing filter.
        """
        query = code_query(kernel_source)
        snap = self._load()
        excluded = frozenset() if timing is None or timing in HOST_TIMINGS else HOST_TIMINGS
        found = [
            snap.rank(
                query,
                k,
                backend=backend,
                device=device,
                positive=positive,
                hack=False,
                exclude_timings=excluded,
            )
            for positive in (True, False)
        ]
        return [e for e, _ in found[0]], [e for e, _ in found[1]]

    def hacks_for(self, kernel_source: str, backend: str, k: int) -> list[Experience]:
        """Up to ``k`` reward-hack experiences (same backend) for the planner's "do not"
        examples: those most similar to ``kernel_source`` first, then the most recently
        observed others. A hack is a hack whatever timed it, so timing does not filter."""
        if k <= 0:
            return []
        snap = self._load()
        ranked = snap.rank(
            code_query(kernel_source), k, backend=backend, device=None, positive=None, hack=True
        )
        chosen = [e for e, _ in ranked]
        ids = {e.id for e in chosen}
        for e in snap.exps:  # newest first
            if len(chosen) >= k:
                break
            if e.hack is not None and e.backend == backend and e.id not in ids:
                chosen.append(e)
        return chosen

    def mentioning(
        self, api_name: str, *, backend: str | None = None, k: int = 5
    ) -> list[Experience]:
        """Up to ``k`` experiences whose title or rule names ``api_name`` (e.g. ``tl.dot``,
        ``nl.matmul``; a whole-name match, case-sensitive), for hovers: positives first, each
        group by ``seen x speedup`` (negatives by ``seen``)."""
        if not api_name.strip() or k <= 0:
            return []
        return mentions(self._load().exps, api_name, backend=backend, k=k)

    def export_jsonl(self, path: Path | str) -> int:
        """Write every experience (:meth:`Experience.to_dict`) as one JSON line, newest first,
        atomically (a temporary file renamed over ``path``). Returns the count. Raises OSError
        when ``path`` cannot be written."""
        return write_jsonl(path, self.all())

    def import_jsonl(self, path: Path | str) -> int:
        """Merge the experiences of a JSON-lines file (:meth:`export_jsonl` format).

        Every line is validated first; when any is bad, nothing is imported and ValueError
        lists the bad line numbers (1-based) with their reasons. The id is derived from the
        fields (:func:`~accelopt_core.memory.experience.experience_id`), so hand-edited lines
        are keyed correctly. Importing the same file twice changes nothing (``seen`` keeps the
        larger count). Blank lines are skipped. Returns the number of experiences imported.
        Raises OSError when the file cannot be read, MemoryUnavailable on a disk failure."""
        good = read_jsonl(path)
        if good:
            self._write(good, add_seen=False)
        return len(good)


# --------------------------------------------------------------------------------------------
# The memory's transactions on its diskcache Cache (the layout is in OptimizationMemory's
# docstring); disk errors propagate raw, the caller's _guard turns them into MemoryUnavailable


def _merge_into(
    cache: diskcache.Cache, incoming: list[Experience], *, add_seen: bool, cap: int
) -> list[Experience]:
    """Merge ``incoming`` into the memory in one transaction, then evict down to ``cap``
    (:func:`~accelopt_core.memory.ranking.eviction_order`). Returns the stored experiences."""
    stored: list[Experience] = []
    with cache.transact():
        index: dict[str, IndexEntry] = cache.get(_INDEX_KEY, {})
        version = int(cache.get(_VERSION_KEY, 0))
        for exp in incoming:
            version += 1
            old = cache.get(_EXP_PREFIX + exp.id)
            if old is not None:
                exp = merge(Experience.from_dict(old["exp"]), exp, add_seen=add_seen)
            cache.set(_EXP_PREFIX + exp.id, _entry(exp, version))
            index[exp.id] = (exp.positive, exp.score, exp.updated_at, version)
            stored.append(exp)
        for eid in eviction_order(index)[: max(len(index) - cap, 0)]:
            del index[eid]
            cache.delete(_EXP_PREFIX + eid)
        cache.set(_INDEX_KEY, index)
        cache.set(_VERSION_KEY, version)
    return stored


def _delete(cache: diskcache.Cache, select: Callable[[dict[str, IndexEntry]], list[str]]) -> int:
    """Delete the experiences ``select(index)`` names, in one transaction; returns how many were
    there."""
    with cache.transact():
        index = cache.get(_INDEX_KEY, {})
        gone = [eid for eid in select(index) if eid in index]
        if gone:
            for eid in gone:
                del index[eid]
                cache.delete(_EXP_PREFIX + eid)
            cache.set(_INDEX_KEY, index)
            cache.set(_VERSION_KEY, int(cache.get(_VERSION_KEY, 0)) + 1)
    return len(gone)


def _read_changed(
    cache: diskcache.Cache, old_items: dict[str, Stored]
) -> tuple[int, dict[str, IndexEntry], dict[str, Any]]:
    """(version, index, the entries whose revision differs from ``old_items``).

    Plain reads, no write lock (they must work on a read-only memory). A writer in between is
    harmless: each entry carries its own revision, a vanished one reads as None, and the
    version read first makes the next call refresh again."""
    ver = int(cache.get(_VERSION_KEY, 0))
    index = cache.get(_INDEX_KEY, {})
    changed = {
        eid: cache.get(_EXP_PREFIX + eid)
        for eid, meta in index.items()
        if eid not in old_items or old_items[eid].rev != meta[3]
    }
    return ver, index, changed


def _entry(exp: Experience, rev: int) -> dict[str, Any]:
    """The stored value of ``exp``: its dict, its sparse vector (bytes) and its revision."""
    idx, val = experience_vector(exp)
    return {
        "exp": exp.to_dict(),
        "fv": FEATURE_VERSION,
        "idx": idx.tobytes(),
        "val": val.tobytes(),
        "rev": rev,
    }


def _stored(entry: dict[str, Any], index_rev: int) -> Stored:
    """An entry read from disk; its vector is recomputed when another tokenizer version wrote
    it."""
    exp = Experience.from_dict(entry["exp"])
    if entry.get("fv") == FEATURE_VERSION:
        idx = np.frombuffer(entry["idx"], dtype=np.int32)
        val = np.frombuffer(entry["val"], dtype=np.float32)
    else:
        idx, val = experience_vector(exp)
    return Stored(exp, idx, val, int(entry.get("rev", index_rev)))

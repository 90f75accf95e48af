"""The optimization memory (experiences on local disk) and the search-results store.

An :class:`Experience` is one slow->fast rewrite of a kernel with the summarizer's reusable rule
(AccelOpt, arXiv 2511.15915, section "optimization memory"); negative experiences record rewrites
that were correct but slower. :class:`OptimizationMemory` keeps them in a :mod:`diskcache` cache
(SQLite, safe across processes), merges repeated observations, evicts by a documented rule, and
retrieves the most similar ones for the planner, for ``accelopt memory search`` and for hovers.

Similarity needs no model download: every experience becomes a hashed bag of features (code
tokens of its slow source; words and word bigrams of its title, rule and plan) in a fixed
``2**12``-dimensional space with log term weights; a query is weighted by the corpus' inverse
document frequency and ranked by cosine similarity (the TF-IDF vector-space model, Salton &
Buckley 1988; the hashing trick, Weinberger et al. 2009). Sparse vectors are stored next to each
experience, so retrieval never re-tokenizes the memory.

:class:`ResultsStore` keeps the last search report of each kernel so that results survive a
server restart; a report is only returned for the exact source it was computed for.

All errors of the disk (read-only directory, corrupt database, full disk, lock timeout) surface
as :class:`MemoryUnavailable` with the directory and the reason; nothing is ever half-written:
every change happens inside one SQLite transaction.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import hashlib
import json
import math
import os
import re
import sqlite3
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import diskcache
import numpy as np

if TYPE_CHECKING:
    from accelopt_core.settings import Settings

__all__ = [
    "DEVICE_PENALTY",
    "Experience",
    "MemoryUnavailable",
    "OptimizationMemory",
    "ResultsStore",
    "experience_id",
    "FEATURE_DIM",
]

FEATURE_DIM = 2**12
"""Dimension of the hashed feature space of the similarity search."""

FEATURE_VERSION = 1
"""Version of the tokenizer; stored vectors of another version are recomputed on load."""

DEVICE_PENALTY = 0.8
"""Factor applied to the similarity of an experience measured on another device than the one
asked for. Rules usually transfer between devices (a tiling idea is a tiling idea), measured
speedups do not, so such experiences rank lower but are not dropped."""

_SCHEMA = 1
_EXP_PREFIX = "exp:"
_INDEX_KEY = "meta:index"
_VERSION_KEY = "meta:version"
_SCHEMA_KEY = "meta:schema"
# Values up to 32 MiB stay inside SQLite (diskcache would otherwise write big values to separate
# files, outside the transaction), so a failed write leaves nothing behind.
_IN_DB = 2**25


# --------------------------------------------------------------------------------------------
# Experience


def _normalize_title(title: str) -> str:
    return " ".join(title.lower().split())


def experience_id(backend: str, source_fingerprint: str, title: str, positive: bool) -> str:
    """Stable id of an experience: the first 16 hex digits of sha256 over (backend, fingerprint
    of the slow source, title with case and whitespace normalized, positive).

    The same rule observed again on the same kernel source gets the same id, so it is merged.
    """
    key = "\x1f".join([backend, source_fingerprint, _normalize_title(title), str(bool(positive))])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def _source_fingerprint(source: str) -> str:
    """Fingerprint of a kernel source (accelopt_core.kernelfile.source_fingerprint when present)."""
    try:
        from accelopt_core.kernelfile import source_fingerprint
    except ImportError:  # pragma: no cover - only while accelopt_core.kernelfile is missing
        try:
            normalized = ast.unparse(ast.parse(source))
        except (SyntaxError, ValueError):
            normalized = source
        return hashlib.sha256(normalized.encode("utf-8")).hexdigest()
    return source_fingerprint(source)


_STR_FIELDS = (
    "id",
    "backend",
    "device",
    "timing",
    "kernel_name",
    "source_fingerprint",
    "slow_source",
    "fast_source",
    "title",
    "rule",
)


@dataclass(repr=False)
class Experience:
    """One slow->fast rewrite of a kernel with its reusable rule (one item of the memory).

    Attributes:
        id: 16 hex digits, :func:`experience_id` of (backend, source_fingerprint, title, positive).
        backend: ``"triton"`` or ``"nki"``.
        device: device name the speedup was measured on (``"NVIDIA H100 80GB HBM3"``, ``"cpu"``).
        timing: how it was timed: ``"cuda"``, ``"interpreter"`` (says nothing about a GPU),
            ``"neuron"``.
        kernel_name: name of the kernel that was rewritten.
        source_fingerprint: fingerprint of the slow source
            (:func:`accelopt_core.kernelfile.source_fingerprint`).
        slow_source / fast_source: full module sources before and after the rewrite.
        speedup: slow latency / fast latency (dimensionless; <= 1 for negatives).
        title: short name of the rewrite; rule: the summarizer's reusable rule.
        positive: True when the rewrite made the kernel faster.
        created_at: unix time (s) of the first observation.
        seen: how often this rule was observed on this source (merged on add).
        plan: the plan text the rewrite implemented.
        updated_at: unix time (s) of the latest observation (0: same as ``created_at``).
    """

    id: str
    backend: str
    device: str
    timing: str
    kernel_name: str
    source_fingerprint: str
    slow_source: str
    fast_source: str
    speedup: float
    title: str
    rule: str
    positive: bool
    created_at: float
    seen: int = 1
    plan: str = ""
    updated_at: float = 0.0

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at

    def __repr__(self) -> str:  # the sources would drown a log line
        sign = "+" if self.positive else "-"
        return (
            f"Experience({self.id} {sign} {self.backend}/{self.kernel_name} "
            f"{self.speedup:.2f}x seen={self.seen} {self.title!r})"
        )

    @classmethod
    def create(
        cls,
        *,
        backend: str,
        device: str | None,
        timing: str | None,
        kernel_name: str,
        slow_source: str,
        fast_source: str,
        speedup: float,
        title: str,
        rule: str,
        positive: bool | None = None,
        plan: str = "",
        source_fingerprint: str | None = None,
        created_at: float | None = None,
    ) -> Experience:
        """A new experience with its id and timestamps filled in.

        ``positive`` defaults to ``speedup > 1``; ``source_fingerprint`` to the fingerprint of
        ``slow_source``; a missing device or timing is recorded as ``"unknown"``.
        Raises ValueError when the speedup is not a positive finite number or the title is empty.
        """
        if not isinstance(speedup, (int, float)) or not math.isfinite(speedup) or speedup <= 0:
            raise ValueError(f"speedup must be a positive finite number, got {speedup!r}")
        if not title or not title.strip():
            raise ValueError("an experience needs a non-empty title")
        fp = source_fingerprint or _source_fingerprint(slow_source)
        pos = bool(speedup > 1.0) if positive is None else bool(positive)
        now = time.time() if created_at is None else float(created_at)
        return cls(
            id=experience_id(backend, fp, title, pos),
            backend=backend,
            device=device or "unknown",
            timing=timing or "unknown",
            kernel_name=kernel_name,
            source_fingerprint=fp,
            slow_source=slow_source,
            fast_source=fast_source,
            speedup=float(speedup),
            title=title.strip(),
            rule=rule.strip(),
            positive=pos,
            created_at=now,
            seen=1,
            plan=plan,
            updated_at=now,
        )

    @property
    def score(self) -> float:
        """Evidence used for eviction and tie-breaks: ``seen x speedup``."""
        return self.seen * self.speedup

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable dict with every field (the export format, one per line)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Experience:
        """Validate and build an experience from :meth:`to_dict` output.

        Unknown keys are ignored; ``seen``, ``plan`` and ``updated_at`` are optional. Raises
        ValueError naming the first missing or mistyped field.
        """
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.name not in ("seen", "plan", "updated_at")}
        missing = sorted(required - data.keys())
        if missing:
            raise ValueError(f"missing field(s): {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in known}
        for name in _STR_FIELDS:
            if not isinstance(values[name], str):
                raise ValueError(f"field {name!r} must be a string")
        if "plan" in values and not isinstance(values["plan"], str):
            raise ValueError("field 'plan' must be a string")
        if not isinstance(values["positive"], bool):
            raise ValueError("field 'positive' must be true or false")
        for name in ("speedup", "created_at", "updated_at"):
            if name in values:
                v = values[name]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise ValueError(f"field {name!r} must be a finite number")
                values[name] = float(v)
        if values["speedup"] <= 0:
            raise ValueError("field 'speedup' must be > 0")
        seen = values.get("seen", 1)
        if isinstance(seen, bool) or not isinstance(seen, int) or seen < 1:
            raise ValueError("field 'seen' must be an integer >= 1")
        if not values["title"].strip():
            raise ValueError("field 'title' must not be empty")
        if not re.fullmatch(r"[0-9a-f]{16}", values["id"]):
            raise ValueError("field 'id' must be 16 lowercase hex digits")
        return cls(**values)


def _merge(old: Experience, new: Experience, *, add_seen: bool) -> Experience:
    """Merge a repeated observation into a stored experience: the best speedup, the newest
    sources/rule/plan, ``seen`` summed (``add_seen``) or the larger of both (imports)."""
    newer = new if new.updated_at >= old.updated_at else old
    return Experience(
        id=old.id,
        backend=old.backend,
        device=newer.device,
        timing=newer.timing,
        kernel_name=newer.kernel_name,
        source_fingerprint=old.source_fingerprint,
        slow_source=newer.slow_source,
        fast_source=newer.fast_source,
        speedup=max(old.speedup, new.speedup),
        title=newer.title,
        rule=newer.rule or old.rule,
        positive=old.positive,
        created_at=min(old.created_at, new.created_at),
        seen=old.seen + new.seen if add_seen else max(old.seen, new.seen),
        plan=newer.plan or old.plan,
        updated_at=max(old.updated_at, new.updated_at),
    )


# --------------------------------------------------------------------------------------------
# Features for the similarity search

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    """a an and are as at be by def do else for from has have if import in into is it its of on
    or return self so than that the then this to was were when which while with none true false
    pass not use using""".split()
)


def _code_tokens(source: str) -> Iterator[str]:
    """Identifiers of a source: dotted names (``tl.dot``), their last part and their
    snake_case / camelCase parts, lower-cased, without stop words."""
    for match in _IDENT.finditer(source):
        name = match.group(0)
        low = name.lower()
        if low not in _STOP and len(low) > 1:
            yield low
        last = name.rsplit(".", 1)[-1]
        if "." in name and last.lower() not in _STOP and len(last) > 1:
            yield last.lower()
        parts = [p.lower() for piece in last.split("_") for p in _CAMEL.findall(piece)]
        if len(parts) > 1:
            for p in parts:
                if p not in _STOP and len(p) > 1:
                    yield p


def _text_tokens(text: str) -> Iterator[str]:
    """Words of prose (code names kept whole, like ``tl.dot``) plus word bigrams."""
    words = [w for w in (m.group(0).lower() for m in _IDENT.finditer(text)) if w not in _STOP]
    yield from words
    for a, b in zip(words, words[1:], strict=False):
        yield f"{a} {b}"
    for w in words:  # the parts of names mentioned in prose, as in code
        if "." in w or "_" in w:
            for p in re.split(r"[._]", w):
                if p and p not in _STOP and len(p) > 1:
                    yield p


def _bucket(token: str) -> int:
    return zlib.crc32(token.encode("utf-8")) % FEATURE_DIM


def _vectorize(weighted: list[tuple[Iterator[str], float]]) -> tuple[np.ndarray, np.ndarray]:
    """Sparse hashed vector (indices int32, values float32) with weight ``w * (1 + log tf)``."""
    acc: dict[int, float] = {}
    for tokens, weight in weighted:
        for token, count in Counter(tokens).items():
            b = _bucket(token)
            acc[b] = acc.get(b, 0.0) + weight * (1.0 + math.log(count))
    idx = np.fromiter(acc.keys(), dtype=np.int32, count=len(acc))
    val = np.fromiter(acc.values(), dtype=np.float32, count=len(acc))
    order = np.argsort(idx)
    return idx[order], val[order]


def _experience_vector(exp: Experience) -> tuple[np.ndarray, np.ndarray]:
    # Title and rule are the distilled knowledge: weight 2; the slow source's code and the plan: 1.
    return _vectorize(
        [
            (_text_tokens(f"{exp.title}\n{exp.rule}"), 2.0),
            (_text_tokens(exp.plan), 1.0),
            (_code_tokens(exp.slow_source), 1.0),
        ]
    )


# --------------------------------------------------------------------------------------------
# Errors


class MemoryUnavailable(Exception):
    """The optimization memory (or results store) cannot be used: the message names the
    directory and why (read-only, not a directory, corrupt, locked, disk full)."""


def _reason(exc: BaseException) -> tuple[str, str]:
    """(kind, reason) of a disk error: kind is 'read-only', 'corrupt', 'busy' or 'unusable'."""
    if isinstance(exc, diskcache.Timeout):
        return "busy", "timed out waiting for another process's lock"
    if isinstance(exc, OSError):
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return "read-only", exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            return "unusable", "no space left on device"
        if exc.errno in (errno.ENOTDIR, errno.EEXIST):
            return "unusable", f"{exc.strerror}: {exc.filename}"
        return "unusable", exc.strerror or str(exc)
    text = str(exc)
    low = text.lower()
    if (
        "readonly" in low
        or "read-only" in low
        or "disk i/o error" in low
        or "unable to open" in low
    ):
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
    if kind == "read-only":
        return MemoryUnavailable(f"{what} at {directory} is read-only: {reason}")
    if kind == "corrupt":
        return MemoryUnavailable(
            f"{what} at {directory} is corrupt: {reason} (move the directory away to start afresh)"
        )
    if kind == "busy":
        return MemoryUnavailable(f"{what} at {directory} is busy: {reason}")
    return MemoryUnavailable(f"{what} at {directory} is unusable: {reason}")


_DISK_ERRORS = (OSError, sqlite3.Error, diskcache.Timeout)
_T = TypeVar("_T")


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


# --------------------------------------------------------------------------------------------
# The optimization memory


@dataclass
class _Snapshot:
    """In-process copy of the memory for fast retrieval (rebuilt when the version changes)."""

    version: int
    items: dict[str, tuple[Experience, np.ndarray, np.ndarray, int]]  # id -> exp, idx, val, rev
    exps: list[Experience]  # newest first; row i of the arrays below
    rows: np.ndarray  # int32, row of each stored feature
    idx: np.ndarray  # int32 feature bucket
    val: np.ndarray  # float32 log-tf weight
    wval: np.ndarray  # float32, val x idf[idx]
    idf: np.ndarray  # float32, FEATURE_DIM
    norms: np.ndarray  # float32, per experience, of the idf-weighted vector
    backends: np.ndarray  # str, per experience
    devices: np.ndarray  # str, per experience
    positives: np.ndarray  # bool, per experience
    scores: np.ndarray  # float64, seen x speedup per experience


class OptimizationMemory:
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

    Similarity: cosine of TF-IDF-weighted hashed feature vectors (see the module docstring).
    ``backend`` always filters; ``device`` never filters in :meth:`search` / :meth:`retrieve_for`:
    an experience measured on another device has its similarity multiplied by
    :data:`DEVICE_PENALTY` (it ranks lower but does not vanish). In :meth:`all` ``device``
    filters exactly.

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
        self.directory = Path(directory).expanduser()
        self.max_experiences = max_experiences
        self._cache = _open_cache("optimization memory", self.directory)
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None

    @classmethod
    def open(cls, settings: Settings) -> tuple[OptimizationMemory | None, str | None]:
        """The memory in ``settings.resolved_memory_dir() / "memory"``, or ``(None, warning)``
        when it is unusable (read-only, corrupt, ...): the search then goes on without it."""
        directory = settings.resolved_memory_dir() / "memory"
        try:
            return cls(directory), None
        except MemoryUnavailable as exc:
            return None, f"{exc}; searching without the optimization memory"

    def close(self) -> None:
        """Close the SQLite connections of this process (the memory may be reopened)."""
        with contextlib.suppress(Exception):
            self._cache.close()

    def __enter__(self) -> OptimizationMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OptimizationMemory({str(self.directory)!r})"

    # -- low level ---------------------------------------------------------------------------

    def _guard(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except _DISK_ERRORS as exc:
            raise _unavailable("optimization memory", self.directory, exc) from exc

    def _entry(self, exp: Experience, rev: int) -> dict[str, Any]:
        idx, val = _experience_vector(exp)
        return {
            "exp": exp.to_dict(),
            "fv": FEATURE_VERSION,
            "idx": idx.tobytes(),
            "val": val.tobytes(),
            "rev": rev,
        }

    def _write(self, incoming: list[Experience], *, add_seen: bool) -> list[Experience]:
        """Merge ``incoming`` into the memory in one transaction and enforce the cap."""
        cache = self._cache

        def run() -> list[Experience]:
            stored: list[Experience] = []
            with cache.transact():
                index: dict[str, tuple[bool, float, float, int]] = cache.get(_INDEX_KEY, {})
                version = int(cache.get(_VERSION_KEY, 0))
                for exp in incoming:
                    version += 1
                    old = cache.get(_EXP_PREFIX + exp.id)
                    if old is not None:
                        exp = _merge(Experience.from_dict(old["exp"]), exp, add_seen=add_seen)
                    cache.set(_EXP_PREFIX + exp.id, self._entry(exp, version))
                    index[exp.id] = (exp.positive, exp.score, exp.updated_at, version)
                    stored.append(exp)
                excess = len(index) - self.max_experiences
                if excess > 0:
                    # negatives first, then lowest seen x speedup, then least recently observed
                    order = sorted(index.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[1][2]))
                    for eid, _ in order[:excess]:
                        del index[eid]
                        cache.delete(_EXP_PREFIX + eid)
                cache.set(_INDEX_KEY, index)
                cache.set(_VERSION_KEY, version)
            return stored

        return self._guard(run)

    def _load(self) -> _Snapshot:
        """The current snapshot, refreshed from disk when another writer changed the memory.
        Only the entries whose revision changed are read again."""
        cache = self._cache
        with self._lock:
            version = int(self._guard(lambda: cache.get(_VERSION_KEY, 0)))
            snap = self._snapshot
            if snap is not None and snap.version == version:
                return snap
            old_items = snap.items if snap is not None else {}

            def read() -> tuple[int, dict[str, Any], dict[str, Any]]:
                # Plain reads, no write lock (they must work on a read-only memory). A writer
                # in between is harmless: each entry carries its own revision, a vanished one
                # is skipped, and the version read first makes the next call refresh again.
                ver = int(cache.get(_VERSION_KEY, 0))
                index = cache.get(_INDEX_KEY, {})
                changed = {
                    eid: cache.get(_EXP_PREFIX + eid)
                    for eid, meta in index.items()
                    if eid not in old_items or old_items[eid][3] != meta[3]
                }
                return ver, index, changed

            ver, index, changed = self._guard(read)
            items = {eid: old_items[eid] for eid in index if eid not in changed}
            for eid, entry in changed.items():
                if entry is None:  # removed by a writer after the index was read
                    continue
                exp = Experience.from_dict(entry["exp"])
                if entry.get("fv") == FEATURE_VERSION:
                    idx = np.frombuffer(entry["idx"], dtype=np.int32)
                    val = np.frombuffer(entry["val"], dtype=np.float32)
                else:
                    idx, val = _experience_vector(exp)
                items[eid] = (exp, idx, val, int(entry.get("rev", index[eid][3])))
            snap = self._build(ver, items)
            self._snapshot = snap
            return snap

    @staticmethod
    def _build(
        version: int, items: dict[str, tuple[Experience, np.ndarray, np.ndarray, int]]
    ) -> _Snapshot:
        ordered = sorted(items.values(), key=lambda t: t[0].updated_at, reverse=True)
        exps = [t[0] for t in ordered]
        n = len(exps)
        if ordered:
            lengths = np.fromiter((len(t[1]) for t in ordered), dtype=np.int64, count=n)
            rows = np.repeat(np.arange(n, dtype=np.int32), lengths)
            idx = np.concatenate([t[1] for t in ordered]).astype(np.int32, copy=False)
            val = np.concatenate([t[2] for t in ordered]).astype(np.float32, copy=False)
        else:
            rows = idx = np.zeros(0, dtype=np.int32)
            val = np.zeros(0, dtype=np.float32)
        df = np.bincount(idx, minlength=FEATURE_DIM).astype(np.float32)
        idf = (np.log((1.0 + n) / (1.0 + df)) + 1.0).astype(np.float32)  # smoothed idf
        w = val * idf[idx]
        norms = np.sqrt(np.bincount(rows, weights=w * w, minlength=n)).astype(np.float32)
        return _Snapshot(
            version=version,
            items=items,
            exps=exps,
            rows=rows,
            idx=idx,
            val=val,
            wval=w.astype(np.float32, copy=False),
            idf=idf,
            norms=norms,
            backends=np.array([e.backend for e in exps], dtype=object),
            devices=np.array([e.device for e in exps], dtype=object),
            positives=np.array([e.positive for e in exps], dtype=bool),
            scores=np.array([e.score for e in exps], dtype=np.float64),
        )

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
    ) -> list[Experience]:
        """Every experience matching the filters (exact match on each one given), newest
        (most recently observed) first."""
        return [
            e
            for e in self._load().exps
            if (backend is None or e.backend == backend)
            and (device is None or e.device == device)
            and (positive is None or e.positive == positive)
        ]

    def __len__(self) -> int:
        index = self._guard(lambda: self._cache.get(_INDEX_KEY, {}))
        return len(index)

    def remove(self, id: str) -> bool:
        """Delete one experience by its full id. True when it was there."""
        cache = self._cache

        def run() -> bool:
            with cache.transact():
                index = cache.get(_INDEX_KEY, {})
                if id not in index:
                    return False
                del index[id]
                cache.delete(_EXP_PREFIX + id)
                cache.set(_INDEX_KEY, index)
                cache.set(_VERSION_KEY, int(cache.get(_VERSION_KEY, 0)) + 1)
                return True

        return self._guard(run)

    def clear(self) -> int:
        """Delete every experience; returns how many there were."""
        cache = self._cache

        def run() -> int:
            with cache.transact():
                index = cache.get(_INDEX_KEY, {})
                for eid in index:
                    cache.delete(_EXP_PREFIX + eid)
                cache.set(_INDEX_KEY, {})
                cache.set(_VERSION_KEY, int(cache.get(_VERSION_KEY, 0)) + 1)
                return len(index)

        return self._guard(run)

    def _rank(
        self,
        query: tuple[np.ndarray, np.ndarray],
        k: int,
        *,
        backend: str | None,
        device: str | None,
        positive: bool | None,
    ) -> list[tuple[Experience, float]]:
        snap = self._load()
        n = len(snap.exps)
        q_idx, q_val = query
        if n == 0 or k <= 0 or len(q_idx) == 0:
            return []
        qd = np.zeros(FEATURE_DIM, dtype=np.float32)
        np.add.at(qd, q_idx, q_val * snap.idf[q_idx])
        q_norm = float(np.linalg.norm(qd))
        if q_norm == 0.0:
            return []
        dots = np.bincount(snap.rows, weights=snap.wval * qd[snap.idx], minlength=n)
        with np.errstate(divide="ignore", invalid="ignore"):
            sims = np.where(snap.norms > 0, dots / (snap.norms * q_norm), 0.0)
        keep = sims > 0.0
        if backend is not None:
            keep &= snap.backends == backend
        if positive is not None:
            keep &= snap.positives == positive
        if device is not None:
            sims = np.where(snap.devices == device, sims, sims * DEVICE_PENALTY)
        rows = np.flatnonzero(keep)
        # similarity first; equal similarity (to 1e-6): more evidence (seen x speedup) first
        order = np.lexsort((-snap.scores[rows], -np.round(sims[rows], 6)))[:k]
        return [(snap.exps[r], float(sims[r])) for r in rows[order]]

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
        query = _vectorize([(_text_tokens(text), 1.0), (_code_tokens(text), 1.0)])
        return self._rank(query, k, backend=backend, device=device, positive=positive)

    def retrieve_for(
        self, kernel_source: str, backend: str, device: str | None, k: int
    ) -> tuple[list[Experience], list[Experience]]:
        """The planner's memory items for a kernel: the ``k`` positives and the ``k`` negatives
        whose slow source, title and rule are most similar to ``kernel_source`` (same backend;
        other devices rank lower by :data:`DEVICE_PENALTY`)."""
        query = _vectorize([(_code_tokens(kernel_source), 1.0)])
        pos = self._rank(query, k, backend=backend, device=device, positive=True)
        neg = self._rank(query, k, backend=backend, device=device, positive=False)
        return [e for e, _ in pos], [e for e, _ in neg]

    def mentioning(
        self, api_name: str, *, backend: str | None = None, k: int = 5
    ) -> list[Experience]:
        """Up to ``k`` experiences whose title or rule names ``api_name`` (e.g. ``tl.dot``,
        ``nl.matmul``; a whole-name match, case-sensitive), for hovers: positives first, each
        group by ``seen x speedup`` (negatives by ``seen``)."""
        name = api_name.strip()
        if not name or k <= 0:
            return []
        pattern = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?![\w])")
        hits = [
            e
            for e in self._load().exps
            if (backend is None or e.backend == backend)
            and (name in e.title or name in e.rule)  # cheap test before the regex
            and (pattern.search(e.title) or pattern.search(e.rule))
        ]
        hits.sort(key=lambda e: (not e.positive, -(e.score if e.positive else e.seen)))
        return hits[:k]

    def export_jsonl(self, path: Path | str) -> int:
        """Write every experience (:meth:`Experience.to_dict`) as one JSON line, newest first,
        atomically (a temporary file renamed over ``path``). Returns the count. Raises OSError
        when ``path`` cannot be written."""
        exps = self.all()
        target = Path(path).expanduser()
        fd, tmp = tempfile.mkstemp(prefix=".accelopt-export-", dir=str(target.parent or "."))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for e in exps:
                    fh.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return len(exps)

    def import_jsonl(self, path: Path | str) -> int:
        """Merge the experiences of a JSON-lines file (:meth:`export_jsonl` format).

        Every line is validated first; when any is bad, nothing is imported and ValueError
        lists the bad line numbers (1-based) with their reasons. The id is derived from the
        fields (:func:`experience_id`), so hand-edited lines are keyed correctly. Importing the
        same file twice changes nothing (``seen`` keeps the larger count). Blank lines are
        skipped. Returns the number of experiences imported. Raises OSError when the file
        cannot be read, MemoryUnavailable on a disk failure."""
        text = Path(path).expanduser().read_text(encoding="utf-8")
        good: list[Experience] = []
        bad: list[str] = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if isinstance(data, dict):  # the id is derived from the fields below
                    data = {**data, "id": "0" * 16}
                exp = Experience.from_dict(data)
            except (ValueError, TypeError) as exc:
                bad.append(f"line {lineno}: {exc}")
                continue
            exp.id = experience_id(exp.backend, exp.source_fingerprint, exp.title, exp.positive)
            good.append(exp)
        if bad:
            shown = "; ".join(bad[:10]) + (f"; ... {len(bad) - 10} more" if len(bad) > 10 else "")
            numbers = ", ".join(b.split(":", 1)[0].removeprefix("line ") for b in bad)
            raise ValueError(
                f"{path}: {len(bad)} bad line(s) ({numbers}), nothing imported: {shown}"
            )
        if good:
            self._write(good, add_seen=False)
        return len(good)


# --------------------------------------------------------------------------------------------
# Search results that survive a restart


class ResultsStore:
    """The latest search report of each kernel, on disk (diskcache).

    Keyed by (absolute real path of the file, kernel name, fingerprint of the file's source):
    a report is only returned for the exact source it was computed for (up to formatting, see
    :func:`accelopt_core.kernelfile.source_fingerprint`). Reports must be JSON-serializable (they
    are stored as JSON). The store keeps at most ~256 MB; past that, diskcache evicts the least
    recently stored reports.
    """

    SIZE_LIMIT = 256 * 2**20

    def __init__(self, directory: Path | str) -> None:
        """Open (or create) the store. Raises MemoryUnavailable when it cannot be opened or
        written."""
        self.directory = Path(directory).expanduser()
        self._cache = _open_cache(
            "results store",
            self.directory,
            eviction_policy="least-recently-stored",
            size_limit=self.SIZE_LIMIT,
        )

    @classmethod
    def open(cls, settings: Settings) -> tuple[ResultsStore | None, str | None]:
        """The store in ``settings.resolved_memory_dir() / "results"``, or ``(None, warning)``."""
        directory = settings.resolved_memory_dir() / "results"
        try:
            return cls(directory), None
        except MemoryUnavailable as exc:
            return None, f"{exc}; search results will not be kept across restarts"

    def close(self) -> None:
        """Close this process's SQLite connections."""
        with contextlib.suppress(Exception):
            self._cache.close()

    @staticmethod
    def _key(path: str, kernel_name: str, kernel_source: str) -> str:
        real = os.path.realpath(os.path.expanduser(path))
        return "\x1f".join(["report", real, kernel_name, _source_fingerprint(kernel_source)])

    def _guard(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except _DISK_ERRORS as exc:
            raise _unavailable("results store", self.directory, exc) from exc

    def save(self, path: str, kernel_name: str, kernel_source: str, report: dict) -> None:
        """Store ``report`` for this kernel and source (replacing an earlier one).

        Raises TypeError/ValueError when the report is not JSON-serializable, MemoryUnavailable
        on a disk failure."""
        payload = json.dumps(report, allow_nan=False)
        key = self._key(path, kernel_name, kernel_source)
        self._guard(lambda: self._cache.set(key, {"saved_at": time.time(), "report": payload}))

    def load(self, path: str, kernel_name: str, kernel_source: str) -> dict | None:
        """The stored report for this kernel and exactly this source, or None."""
        key = self._key(path, kernel_name, kernel_source)
        entry = self._guard(lambda: self._cache.get(key))
        if entry is None:
            return None
        try:
            report = json.loads(entry["report"])
        except (KeyError, TypeError, ValueError):
            return None
        return report if isinstance(report, dict) else None

    def remove(self, path: str, kernel_name: str, kernel_source: str) -> bool:
        """Forget the report of this kernel and source. True when there was one."""
        key = self._key(path, kernel_name, kernel_source)
        return bool(self._guard(lambda: self._cache.delete(key)))

    def clear(self, path: str | None = None) -> int:
        """Forget the stored reports of one file (any kernel, any source), or of every file
        when ``path`` is None; returns how many were removed."""
        prefix = "report\x1f"
        if path is not None:
            prefix += os.path.realpath(os.path.expanduser(path)) + "\x1f"

        def run() -> int:
            with self._cache.transact():
                keys = [k for k in self._cache.iterkeys() if str(k).startswith(prefix)]
                for key in keys:
                    self._cache.delete(key)
            return len(keys)

        return self._guard(run)

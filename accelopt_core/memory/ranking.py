"""Ranking in the optimization memory: retrieval by similarity, hover mentions, eviction order.

Retrieval works on a :class:`Snapshot`, an in-process copy of the memory as flat arrays (every
stored sparse vector concatenated, the idf of the corpus, each experience's norm). Its
:meth:`Snapshot.rank` scores a query by cosine similarity of idf-weighted vectors
(:mod:`accelopt_core.memory.vectors`); ``backend`` and ``positive`` filter, ``device`` only
lowers the similarity of experiences measured elsewhere by :data:`DEVICE_PENALTY`.

Eviction (:func:`eviction_order`): negatives first, then the lowest ``seen x speedup``, then the
least recently observed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from accelopt_core.memory.experience import Experience
from accelopt_core.memory.vectors import FEATURE_DIM, SparseVector, smoothed_idf

__all__ = ["DEVICE_PENALTY", "IndexEntry", "Snapshot", "Stored", "eviction_order", "mentions"]

DEVICE_PENALTY = 0.8
"""Factor applied to the similarity of an experience measured on another device than the one
asked for. Rules usually transfer between devices (a tiling idea is a tiling idea), measured
speedups do not, so such experiences rank lower but are not dropped."""


class Stored(NamedTuple):
    """One experience as loaded from disk: its sparse vector and its revision."""

    exp: Experience
    idx: np.ndarray  # int32 feature buckets
    val: np.ndarray  # float32 log-tf weights
    rev: int  # the memory version that last wrote it


IndexEntry = tuple[bool, float, float, int]
"""What the memory's index keeps of an experience, enough to evict it without loading it:
``(positive, seen x speedup, updated_at, rev)`` (a plain tuple on disk)."""


def eviction_order(index: Mapping[str, IndexEntry]) -> list[str]:
    """The ids of ``index`` in the order they are evicted: negatives first, then the lowest
    ``seen x speedup``, then the least recently observed (``updated_at``)."""
    return [eid for eid, _ in sorted(index.items(), key=lambda kv: kv[1][:3])]


def mentions(
    exps: Iterable[Experience], api_name: str, *, backend: str | None, k: int
) -> list[Experience]:
    """Up to ``k`` of ``exps`` whose title or rule names ``api_name`` as a whole name
    (case-sensitive; ``dot`` does not mention ``tl.dot``, ``tl.dot`` does not mention
    ``tl.dot_scaled``): positives first, each group by ``seen x speedup`` (negatives by
    ``seen``), best first."""
    name = api_name.strip()
    if not name or k <= 0:
        return []
    pattern = re.compile(r"(?<![\w.])" + re.escape(name) + r"(?![\w])")
    hits = [
        e
        for e in exps
        if (backend is None or e.backend == backend)
        and (name in e.title or name in e.rule)  # cheap test before the regex
        and (pattern.search(e.title) or pattern.search(e.rule))
    ]
    hits.sort(key=lambda e: (not e.positive, -(e.score if e.positive else e.seen)))
    return hits[:k]


@dataclass
class Snapshot:
    """In-process copy of the memory for fast retrieval (rebuilt when the version changes).

    Row ``i`` of the per-experience arrays is ``exps[i]``; ``rows``/``idx``/``val``/``wval``
    hold every stored feature of every experience, concatenated.
    """

    version: int
    items: dict[str, Stored]  # id -> stored experience
    exps: list[Experience]  # newest (most recently observed) first
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
    timings: np.ndarray  # str, per experience
    hacks: np.ndarray  # bool, per experience: learned from a candidate the judge caught

    @classmethod
    def build(cls, version: int, items: dict[str, Stored]) -> Snapshot:
        """The snapshot of ``items`` at memory version ``version``."""
        ordered = sorted(items.values(), key=lambda s: s.exp.updated_at, reverse=True)
        exps = [s.exp for s in ordered]
        n = len(exps)
        if ordered:
            lengths = np.fromiter((len(s.idx) for s in ordered), dtype=np.int64, count=n)
            rows = np.repeat(np.arange(n, dtype=np.int32), lengths)
            idx = np.concatenate([s.idx for s in ordered]).astype(np.int32, copy=False)
            val = np.concatenate([s.val for s in ordered]).astype(np.float32, copy=False)
        else:
            rows = idx = np.zeros(0, dtype=np.int32)
            val = np.zeros(0, dtype=np.float32)
        idf = smoothed_idf(idx, n)
        w = val * idf[idx]
        norms = np.sqrt(np.bincount(rows, weights=w * w, minlength=n)).astype(np.float32)
        return cls(
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
            timings=np.array([e.timing for e in exps], dtype=object),
            hacks=np.array([e.hack is not None for e in exps], dtype=bool),
        )

    def similarities(self, query: SparseVector) -> np.ndarray:
        """Cosine similarity (float, in [0, 1]) of each experience's idf-weighted vector with
        the idf-weighted ``query``; all zeros when the query shares no feature with the corpus
        or the memory is empty."""
        n = len(self.exps)
        q_idx, q_val = query
        if n == 0 or len(q_idx) == 0:
            return np.zeros(n)
        qd = np.zeros(FEATURE_DIM, dtype=np.float32)
        np.add.at(qd, q_idx, q_val * self.idf[q_idx])
        q_norm = float(np.linalg.norm(qd))
        if q_norm == 0.0:
            return np.zeros(n)
        dots = np.bincount(self.rows, weights=self.wval * qd[self.idx], minlength=n)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.norms > 0, dots / (self.norms * q_norm), 0.0)

    def rank(
        self,
        query: SparseVector,
        k: int,
        *,
        backend: str | None,
        device: str | None,
        positive: bool | None,
        hack: bool | None = None,
        exclude_timings: frozenset[str] = frozenset(),
    ) -> list[tuple[Experience, float]]:
        """Up to ``k`` experiences with a similarity > 0 to ``query``, best first, with their
        similarity. ``backend``, ``positive`` and ``hack`` (True: only reward-hack experiences,
        False: none of them) filter exactly, and experiences timed in one of
        ``exclude_timings`` are left out; an experience measured on another device than
        ``device`` has its similarity multiplied by :data:`DEVICE_PENALTY`.
        Equal similarities (to 1e-6): more evidence (``seen x speedup``) first."""
        if k <= 0:
            return []
        sims = self.similarities(query)
        keep = sims > 0.0
        if backend is not None:
            keep &= self.backends == backend
        if positive is not None:
            keep &= self.positives == positive
        if hack is not None:
            keep &= self.hacks == hack
        if exclude_timings and len(self.exps):
            keep &= ~np.isin(self.timings, list(exclude_timings))
        if device is not None:
            sims = np.where(self.devices == device, sims, sims * DEVICE_PENALTY)
        rows = np.flatnonzero(keep)
        order = np.lexsort((-self.scores[rows], -np.round(sims[rows], 6)))[:k]
        return [(self.exps[r], float(sims[r])) for r in rows[order]]

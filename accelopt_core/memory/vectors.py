"""Hashed TF-IDF vectors for the similarity search of the optimization memory.

Similarity needs no model download: every experience becomes a hashed bag of features (code
tokens of its slow source; words and word bigrams of its title, rule and plan) in a fixed
:data:`FEATURE_DIM`-dimensional space with log term weights ``w * (1 + log tf)``; a query is
weighted by the corpus' smoothed inverse document frequency (:func:`smoothed_idf`) and ranked by
cosine similarity (the TF-IDF vector-space model, Salton & Buckley 1988; the hashing trick,
Weinberger et al. 2009).

A sparse vector is a pair of arrays ``(idx, val)``: feature buckets (int32, sorted, unique) and
their weights (float32), same length.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from accelopt_core.memory.experience import Experience

__all__ = [
    "FEATURE_DIM",
    "FEATURE_VERSION",
    "SparseVector",
    "code_query",
    "code_tokens",
    "experience_vector",
    "smoothed_idf",
    "text_query",
    "text_tokens",
    "vectorize",
]

FEATURE_DIM = 2**12
"""Dimension of the hashed feature space of the similarity search."""

FEATURE_VERSION = 1
"""Version of the tokenizer; stored vectors of another version are recomputed on load."""

SparseVector = tuple[np.ndarray, np.ndarray]
"""``(idx, val)``: int32 feature buckets (sorted, unique) and their float32 weights."""

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    """a an and are as at be by def do else for from has have if import in into is it its of on
    or return self so than that the then this to was were when which while with none true false
    pass not use using""".split()
)


def _keep(token: str) -> bool:
    return token not in _STOP and len(token) > 1


def code_tokens(source: str) -> Iterator[str]:
    """Identifiers of a source: dotted names (``tl.dot``), their last part and their
    snake_case / camelCase parts, lower-cased, without stop words and one-letter names."""
    for match in _IDENT.finditer(source):
        name = match.group(0)
        low = name.lower()
        if _keep(low):
            yield low
        last = name.rsplit(".", 1)[-1]
        if "." in name and _keep(last.lower()):
            yield last.lower()
        parts = [p.lower() for piece in last.split("_") for p in _CAMEL.findall(piece)]
        if len(parts) > 1:
            yield from (p for p in parts if _keep(p))


def text_tokens(text: str) -> Iterator[str]:
    """Words of prose (code names kept whole, like ``tl.dot``) plus word bigrams, plus the
    parts of dotted or snake_case names (as in code), lower-cased, without stop words."""
    words = [w for w in (m.group(0).lower() for m in _IDENT.finditer(text)) if w not in _STOP]
    yield from words
    for a, b in zip(words, words[1:], strict=False):
        yield f"{a} {b}"
    for w in words:
        if "." in w or "_" in w:
            yield from (p for p in re.split(r"[._]", w) if p and _keep(p))


def _bucket(token: str) -> int:
    return zlib.crc32(token.encode("utf-8")) % FEATURE_DIM


def vectorize(weighted: Iterable[tuple[Iterable[str], float]]) -> SparseVector:
    """The sparse hashed vector of weighted token streams: each distinct token adds
    ``w * (1 + log tf)`` to its bucket (crc32 of the token modulo :data:`FEATURE_DIM`)."""
    acc: dict[int, float] = {}
    for tokens, weight in weighted:
        for token, count in Counter(tokens).items():
            b = _bucket(token)
            acc[b] = acc.get(b, 0.0) + weight * (1.0 + math.log(count))
    idx = np.fromiter(acc.keys(), dtype=np.int32, count=len(acc))
    val = np.fromiter(acc.values(), dtype=np.float32, count=len(acc))
    order = np.argsort(idx)
    return idx[order], val[order]


def experience_vector(exp: Experience) -> SparseVector:
    """The stored vector of an experience. Title and rule are the distilled knowledge (weight
    2); the plan and the code of the slow source weigh 1."""
    return vectorize(
        [
            (text_tokens(f"{exp.title}\n{exp.rule}"), 2.0),
            (text_tokens(exp.plan), 1.0),
            (code_tokens(exp.slow_source), 1.0),
        ]
    )


def text_query(text: str) -> SparseVector:
    """The query vector of free text (prose or code): its words and its code tokens."""
    return vectorize([(text_tokens(text), 1.0), (code_tokens(text), 1.0)])


def code_query(source: str) -> SparseVector:
    """The query vector of a kernel source: its code tokens."""
    return vectorize([(code_tokens(source), 1.0)])


def smoothed_idf(idx: np.ndarray, n_docs: int) -> np.ndarray:
    """Smoothed inverse document frequency ``log((1 + n) / (1 + df)) + 1`` (float32, shape
    ``(FEATURE_DIM,)``) of a corpus of ``n_docs`` vectors whose buckets, concatenated, are
    ``idx`` (each vector's buckets unique, so a bucket's count is its document frequency)."""
    df = np.bincount(idx, minlength=FEATURE_DIM).astype(np.float32)
    return (np.log((1.0 + n_docs) / (1.0 + df)) + 1.0).astype(np.float32)

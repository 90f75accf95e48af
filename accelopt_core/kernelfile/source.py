"""Whole-source helpers that need no analysis: a cheap "may hold kernels" test, and the
normalised form and fingerprint that identify a candidate across formatting changes."""

from __future__ import annotations

import ast
import hashlib
import re

__all__ = ["normalize_source", "quick_has_kernels", "source_fingerprint"]

_QUICK = re.compile(
    r"^[ \t]*@[ \t]*(?:[A-Za-z_][\w.]*\.)?(?:jit|baremetal|benchmark|profile)\b", re.MULTILINE
)


def quick_has_kernels(source: str) -> bool:
    """Cheap text test (no parsing) for "this file may hold Triton or NKI kernels": it
    mentions triton or nki and has a ``@...jit`` (or ``@nki.baremetal`` / ``benchmark`` /
    ``profile``) decorator line. False positives are fine (parse_kernel_file decides)."""
    if "triton" not in source and "nki" not in source:
        return False
    return _QUICK.search(source) is not None


#: normalize_source's memo (source -> normalized), emptied when it reaches _KEPT entries.
_NORMALIZED: dict[str, str] = {}
_KEPT = 512


def normalize_source(source: str, tree: ast.Module | None = None) -> str:
    """``ast.unparse(ast.parse(source))``: the source without comments and formatting, so
    that whitespace-only edits keep the same fingerprint. Unparsable source is returned as is.
    ``tree`` is ``source`` already parsed, when the caller has it (read, not mutated).
    Memoized: a search fingerprints the same candidate several times (dedup, cache key, memory)."""
    hit = _NORMALIZED.get(source)
    if hit is not None:
        return hit
    try:
        normalized = ast.unparse(tree if tree is not None else ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        normalized = source
    if len(_NORMALIZED) >= _KEPT:
        _NORMALIZED.clear()
    _NORMALIZED[source] = normalized
    return normalized


def source_fingerprint(source: str) -> str:
    """SHA-256 hex digest of :func:`normalize_source` (64 hex characters)."""
    return hashlib.sha256(normalize_source(source).encode("utf-8")).hexdigest()

"""Whole-source helpers that need no analysis: a cheap "may hold kernels" test, and the
normalised form and fingerprint that identify a candidate across formatting changes."""

from __future__ import annotations

import ast
import functools
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


@functools.lru_cache(maxsize=512)
def normalize_source(source: str) -> str:
    """``ast.unparse(ast.parse(source))``: the source without comments and formatting, so
    that whitespace-only edits keep the same fingerprint. Unparsable source is returned as is.
    Memoized: a search fingerprints the same candidate several times (dedup, cache key, memory)."""
    try:
        return ast.unparse(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source


def source_fingerprint(source: str) -> str:
    """SHA-256 hex digest of :func:`normalize_source` (64 hex characters)."""
    return hashlib.sha256(normalize_source(source).encode("utf-8")).hexdigest()

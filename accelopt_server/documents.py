"""What the server knows about each open document: its parse, profiles and search results.

The parse (:class:`accelopt_core.kernelfile.KernelFile`) is cached per document version and shared
by concurrent requests; files without a Triton/NKI kernel are recognised by a cheap text test and
never parsed. Profiles are kept per kernel with the version they measured; search reports per
kernel, whether from a job of this session or loaded from the results store.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pygls.uris import to_fs_path

from accelopt_core.kernelfile import split_lines
from accelopt_core.onsite.protocol import EvalResult

from .engine_adapter import EngineAdapter


@dataclass
class ProfileEntry:
    """A kernel's last profile: the result and the document version it measured."""

    result: EvalResult
    version: int | None


@dataclass
class DocState:
    """Per-document state. ``profiles``, ``profile_diagnostics`` and ``reports`` (SearchReport)
    are keyed by kernel name."""

    uri: str
    path: str
    parse_key: Any = None
    kernel_file: Any = None
    parsing: asyncio.Future[Any] | None = None
    profiles: dict[str, ProfileEntry] = field(default_factory=dict)
    profile_diagnostics: dict[str, list[types.Diagnostic]] = field(default_factory=dict)
    profiling: bool = False
    reports: dict[str, Any] = field(default_factory=dict)


def uri_path(uri: str) -> str:
    """The file-system path of a URI (the URI itself for other schemes)."""
    try:
        return to_fs_path(uri) or uri
    except Exception:
        return uri


def kernel_text(kernel_file: Any, name: str) -> str | None:
    """The source lines of kernel ``name`` (decorators included), or None if absent."""
    try:
        kernel = kernel_file.kernel(name)
    except (KeyError, AttributeError):
        return None
    lines = split_lines(kernel_file.source)
    return "".join(lines[kernel.range.start_line - 1 : kernel.range.end_line])


class DocumentStore:
    """Parses and state of documents, keyed by URI."""

    def __init__(self, adapter: EngineAdapter) -> None:
        self._adapter = adapter
        self.states: dict[str, DocState] = {}
        self._report_kernels: dict[tuple[str, str], str | None] = {}

    def state(self, uri: str) -> DocState:
        st = self.states.get(uri)
        if st is None:
            st = self.states[uri] = DocState(uri=uri, path=uri_path(uri))
        return st

    def drop(self, uri: str) -> None:
        self.states.pop(uri, None)

    async def kernel_file(self, uri: str, source: str, version: int | None) -> Any:
        """The parse of this document version, or None for a file without kernels."""
        if not self._adapter.has_kernels(source):
            st = self.states.get(uri)
            if st is not None:
                st.kernel_file, st.parse_key = None, None
            return None
        st = self.state(uri)
        key = (
            (version, len(source), hashlib.blake2b(source.encode(), digest_size=8).digest())
            if version is None
            else version
        )
        if st.parse_key == key and st.kernel_file is not None:
            return st.kernel_file
        if st.parsing is not None and getattr(st.parsing, "key", None) == key:
            return await asyncio.shield(st.parsing)
        fut = asyncio.ensure_future(self._adapter.parse(source, st.path))
        fut.key = key  # type: ignore[attr-defined]
        st.parsing = fut
        try:
            kf = await asyncio.shield(fut)
        finally:
            if st.parsing is fut:
                st.parsing = None
        st.kernel_file, st.parse_key = kf, key
        return kf

    def report_matches(self, report: Any, kernel_file: Any, kernel: str) -> bool:
        """True while the kernel's text is what the search optimized (other parts of the file may
        have changed: :func:`accelopt_server.edits.rebase` carries the edit over them)."""
        original = getattr(report, "original_source", None)
        if original is None:
            return False
        key = (hashlib.blake2b(original.encode(), digest_size=16).hexdigest(), kernel)
        if key not in self._report_kernels:
            from accelopt_core.kernelfile import parse_kernel_file

            self._report_kernels[key] = kernel_text(
                parse_kernel_file(original, report.path), kernel
            )
        text = self._report_kernels[key]
        return text is not None and text == kernel_text(kernel_file, kernel)

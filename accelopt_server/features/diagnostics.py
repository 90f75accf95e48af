"""Diagnostics of kernel documents: the parse's findings plus the last profiles' failures.

They are published when a kernel document opens or is saved, after every profile and when results
are cleared; cleared when the document closes or loses its kernels. The conversion to LSP is
:mod:`accelopt_server.diagnostics`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelopt_core.textdiff import split_lines

from ..diagnostics import parse_diagnostics
from .base import LanguageFeature

if TYPE_CHECKING:
    from ..documents import KernelDocument


class DiagnosticsFeature(LanguageFeature):
    """``textDocument/publishDiagnostics`` for kernel documents."""

    async def document_open(self, doc: KernelDocument) -> None:
        self.publish(doc.uri)

    async def document_save(self, doc: KernelDocument) -> None:
        self.publish(doc.uri)

    async def kernels_removed(self, uri: str, version: int | None) -> None:
        self.ctx.publish_diagnostics(uri, [], version)

    async def document_close(self, uri: str) -> None:
        self.ctx.publish_diagnostics(uri, [], None)

    def publish(self, uri: str) -> None:
        """Publish the parse diagnostics and the last profiles' failures of a document."""
        doc = self.ctx.docs.document(uri)
        st = self.ctx.docs.states.get(uri)
        if doc is None or st is None or st.kernel_file is None:
            return
        lines = split_lines(st.kernel_file.source)
        diagnostics = parse_diagnostics(st.kernel_file, lines, doc.position_codec)
        for items in st.profile_diagnostics.values():
            diagnostics.extend(items)
        self.ctx.publish_diagnostics(uri, diagnostics, doc.version)

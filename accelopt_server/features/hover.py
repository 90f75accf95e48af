"""Hover and ``accelopt.showMemory``: what the optimization memory knows about a kernel.

* On a kernel's name: its last profile, a running search's status and the experiences of the
  memory that fit the kernel (when the last profile was timed on hardware, not those timed by
  the Triton interpreter or the NKI simulator).

Experiences timed on the host are labelled ``(interpreter-timed)`` / ``(simulator-timed)``.
* On a Triton/NKI API call inside a kernel: the experiences whose rule mentions that call.

Command: ``accelopt.showMemory [uri, kernelName]`` -> markdown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types

from accelopt_core.memory.experience import HOST_TIMINGS
from accelopt_core.textdiff import split_lines

from .. import present
from ..documents import kernel_source
from ..edits import from_lsp_position, to_lsp_range
from ..markdown import escape
from .base import LanguageFeature, command_args, unknown_kernel

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile, KernelInfo, SourceRange
    from accelopt_core.memory import Experience

    from ..documents import DocState

#: Experiences the hover shows when ``search.memoryTopK`` is 0.
_HOVER_TOP_K = 3
#: Experiences ``accelopt.showMemory`` shows.
_SHOW_TOP_K = 10


class HoverFeature(LanguageFeature):
    """``textDocument/hover`` and ``accelopt.showMemory``."""

    async def hover(self, uri: str, position: types.Position) -> types.Hover | None:
        """The hover at ``position``: on a kernel's name or on an API call in a kernel."""
        doc, kf = await self.ctx.docs.parsed(uri)
        if doc is None or kf is None:
            return None
        lines = split_lines(kf.source)
        where = from_lsp_position(lines, doc.position_codec, position)
        if where is None:
            return None
        line, col = where
        kernel = kf.kernel_at(line, col)
        if kernel is None:
            return None
        if kernel.name_range.contains(line, col):
            st = self.ctx.docs.state(uri)
            value, rng = await self._kernel_hover(uri, kf, st, kernel, doc.version)
        else:
            call = next(((n, r) for n, r in kernel.api_calls if r.contains(line, col)), None)
            if call is None:
                return None
            value, rng = await self._api_hover(uri, kernel, *call)
        markdown = "markdown" in (
            self.ctx.capability("text_document.hover.content_format", []) or []
        )
        kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
        return types.Hover(
            contents=types.MarkupContent(kind=kind, value=value),
            range=to_lsp_range(lines, doc.position_codec, rng),
        )

    async def _kernel_hover(
        self, uri: str, kf: KernelFile, st: DocState, kernel: KernelInfo, version: int | None
    ) -> tuple[str, SourceRange]:
        settings = self.ctx.settings(uri)
        entry = st.profiles.get(kernel.name)
        device = entry.result.device if entry is not None else None
        pos, neg, problem = await self.ctx.adapter.memory_for_kernel(
            settings,
            kernel_source(kf, kernel),
            kernel.backend,
            device,
            settings.search.memory_top_k or _HOVER_TOP_K,
        )
        if entry is not None:
            pos, neg = _for_timing(pos, entry.result.timing), _for_timing(neg, entry.result.timing)
        job = self.ctx.jobs.active_job(uri, kernel.name)
        value = present.kernel_hover(
            kernel,
            entry.result if entry else None,
            entry.version if entry else None,
            version,
            present.experiences_markdown(pos, neg, problem),
            job.status_line() if job else None,
        )
        return value, kernel.name_range

    async def _api_hover(
        self, uri: str, kernel: KernelInfo, api_name: str, rng: SourceRange
    ) -> tuple[str, SourceRange]:
        experiences, problem = await self.ctx.adapter.memory_mentioning(
            self.ctx.settings(uri), api_name, kernel.backend
        )
        return present.api_hover(api_name, experiences, problem), rng

    async def cmd_show_memory(self, *args: Any) -> str:
        """``accelopt.showMemory [uri, kernelName]``: the memory for one kernel, and its last
        search, as markdown."""
        uri, kernel_name = command_args("accelopt.showMemory", args, ["uri", "kernelName"])
        doc, kf = await self.ctx.docs.parsed(uri)
        if doc is None or kf is None:
            return f"_AccelOpt: no Triton or NKI kernel in {escape(uri)}_"
        if kernel_name not in kf.kernel_names:
            return f"_AccelOpt: {escape(unknown_kernel(kernel_name, kf))}_"
        kernel = kf.kernel(kernel_name)
        pos, neg, problem = await self.ctx.adapter.memory_for_kernel(
            self.ctx.settings(uri), kernel_source(kf, kernel), kernel.backend, None, _SHOW_TOP_K
        )
        report = self.ctx.docs.state(uri).reports.get(kernel_name)
        return present.memory_document(kernel, pos, neg, problem, report)


def _for_timing(experiences: list[Experience], timing: str) -> list[Experience]:
    """``experiences`` that may speak to a kernel profiled with ``timing``: all of them for a
    host timing (``interpreter``, ``simulated``) or none, else only those not timed on the
    host (an interpreter latency says nothing about a GPU)."""
    if timing in HOST_TIMINGS or timing == "none":
        return experiences
    return [e for e in experiences if e.timing not in HOST_TIMINGS]

"""Code lenses above each kernel: its last profile or a running search's status, and the
Profile / Optimize / Cancel / Show Memory commands. The client is asked to refresh them
(throttled) whenever what they show changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lsprotocol import types

from accelopt_core.textdiff import split_lines

from ..edits import to_lsp_position
from .base import LanguageFeature, runnable
from .results import ResultsFeature

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile, KernelInfo

    from ..documents import DocState, KernelDocument


class CodeLensFeature(LanguageFeature):
    """``textDocument/codeLens``."""

    async def document_open(self, doc: KernelDocument) -> None:
        self.ctx.refresh_lenses()

    async def document_save(self, doc: KernelDocument) -> None:
        self.ctx.refresh_lenses()

    async def code_lenses(self, uri: str) -> list[types.CodeLens] | None:
        """The lenses of every kernel of the document (None when it has no kernels)."""
        doc, kf = await self.ctx.docs.parsed(uri)
        if doc is None or kf is None:
            return None
        st = self.ctx.docs.state(uri)
        lines = split_lines(kf.source)
        lenses: list[types.CodeLens] = []
        for kernel in kf.kernels:
            start = to_lsp_position(lines, doc.position_codec, kernel.range.start_line - 1, 0)
            rng = types.Range(start=start, end=start)
            for title, command, args in self._kernel_lenses(uri, kf, st, kernel):
                cmd = types.Command(title=title, command=command, arguments=args)
                lenses.append(types.CodeLens(range=rng, command=cmd))
        return lenses

    def _kernel_lenses(
        self, uri: str, kf: KernelFile, st: DocState, kernel: KernelInfo
    ) -> list[tuple[str, str, list[Any] | None]]:
        """(title, command, arguments) of one kernel's lenses; an empty command is a label."""
        job = self.ctx.jobs.active_job(uri, kernel.name)
        if job is not None:
            return [
                (f"AccelOpt: {job.status_line()}", "", None),
                ("Cancel", "accelopt.cancel", [job.id]),
            ]
        if not runnable(kf):
            # clickable, and it names the kernel so editors can find it (Show Memory works
            # without a harness; the code action inserts a harness skeleton)
            title = "AccelOpt: no benchmark harness (see the code action) · memory"
            return [(title, "accelopt.showMemory", [uri, kernel.name])]
        out: list[tuple[str, str, list[Any] | None]] = []
        entry = st.profiles.get(kernel.name)
        if st.profiling:
            out.append(("AccelOpt: profiling…", "", None))
        elif entry is not None:
            out.append((entry.result.summary(), "accelopt.profile", [uri, kernel.name]))
        else:
            out.append(("Profile", "accelopt.profile", [uri, kernel.name]))
        report = self.ctx.feature(ResultsFeature).offered(uri, kf, kernel.name)
        if report is not None:
            best = report.candidates[0].speedup
            title = f"{len(report.candidates)} improvement(s), best {best:.2f}x (code actions)"
            out.append((title, "", None))
        out.append(("Optimize", "accelopt.optimize", [uri, kernel.name]))
        return out

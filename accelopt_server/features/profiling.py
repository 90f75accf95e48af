"""Profiling: every kernel of a file with a complete harness is profiled on save (debounced) and
on request; the results feed the code lenses, the hover and the diagnostics.

Command: ``accelopt.profile [uri, kernelName?]`` -> ``{kernels: {name: EvalResult dict +
summary, version}, message?}``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from accelopt_core.textdiff import split_lines

from ..diagnostics import profile_diagnostic, spill_diagnostics
from ..documents import DocState, ProfileEntry
from .base import LanguageFeature, command_args, no_harness, refusal, runnable
from .diagnostics import DiagnosticsFeature

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile
    from accelopt_core.onsite.protocol import EvalResult

    from ..documents import KernelDocument

log = logging.getLogger("accelopt.server")

#: Delay between a save and its profile; a newer save within it replaces the older (s).
PROFILE_DEBOUNCE_S = 0.25
#: How often ``accelopt.profile`` follows a newer profile that replaced the one it started.
_MAX_REPLACEMENTS = 10


class ProfilingFeature(LanguageFeature):
    """Profiles on save and ``accelopt.profile``."""

    async def document_save(self, doc: KernelDocument) -> None:
        settings = self.ctx.settings(doc.uri)
        kf = doc.kernel_file
        if settings.profile_on_save and kf.kernels and runnable(kf):
            uri, version = doc.uri, doc.version
            self.ctx.tasks.schedule(
                uri, lambda: self.run_profile(uri, version, kf), PROFILE_DEBOUNCE_S
            )

    async def document_close(self, uri: str) -> None:
        self.ctx.tasks.cancel(uri)

    async def run_profile(
        self, uri: str, version: int | None, kernel_file: KernelFile, only: str | None = None
    ) -> dict[str, EvalResult]:
        """Profile a file version: one evaluation per harness entry (shared by the kernels it
        launches), all at once. Updates lenses and diagnostics; returns results per kernel."""
        st = self.ctx.docs.state(uri)
        settings = self.ctx.settings(uri)
        groups = _entry_groups(kernel_file, only)
        if not groups:
            return {}
        st.profiling = True
        self.ctx.refresh_lenses()
        try:
            outcomes = await asyncio.gather(
                *(self.ctx.adapter.profile(settings, kernel_file, names[0]) for names in groups)
            )
        finally:
            st.profiling = False
        results = self._record(st, version, kernel_file, groups, outcomes)
        for outcome in outcomes:  # candidates ran unconfined on the target: say so once
            self.ctx.warn_once(outcome.warnings)
        self.ctx.feature(DiagnosticsFeature).publish(uri)
        self.ctx.refresh_lenses()
        return results

    def _record(
        self,
        st: DocState,
        version: int | None,
        kernel_file: KernelFile,
        groups: list[list[str]],
        outcomes: list[EvalResult],
    ) -> dict[str, EvalResult]:
        """Keep each kernel's result, its spill warnings on the configured GPU and its failure
        diagnostic (one per failing line: the kernels sharing an entry share a located
        failure)."""
        lines = split_lines(kernel_file.source)
        codec = self.ctx.docs.position_codec(st.uri)
        results: dict[str, EvalResult] = {}
        for names, result in zip(groups, outcomes, strict=True):
            failed_line_reported = False
            for name in names:
                results[name] = result
                st.profiles[name] = ProfileEntry(result, version)
                kernel = kernel_file.kernel(name)
                st.profile_diagnostics[name] = spill_diagnostics(kernel, result, lines, codec)
                if not result.ok and not (failed_line_reported and result.line):
                    st.profile_diagnostics[name].append(
                        profile_diagnostic(kernel, result, lines, codec)
                    )
                    failed_line_reported = True
                log.info("profile of %s: %s", name, result.summary())
        return results

    async def cmd_profile(self, *args: Any) -> dict[str, Any]:
        """``accelopt.profile [uri, kernelName?]``: profile now (replacing a pending on-save
        profile) and answer with the results of the newest profile of the file."""
        uri, kernel = command_args("accelopt.profile", args, ["uri"], ["kernelName"])
        doc, kf = await self.ctx.docs.parsed(uri)
        problem = refusal(uri, doc, kf, kernel)
        if problem is None and not runnable(kf):
            problem = no_harness(kf)
        if problem is not None:
            return {"kernels": {}, "message": problem}
        version = doc.version
        task = self.ctx.tasks.schedule(uri, lambda: self.run_profile(uri, version, kf, kernel), 0.0)
        if not await self._follow(uri, task):
            return {"kernels": {}, "message": "the profile was cancelled"}
        out = {}
        for name, entry in self.ctx.docs.state(uri).profiles.items():
            if kernel is None or name == kernel:
                out[name] = {
                    **entry.result.to_dict(),
                    "summary": entry.result.summary(),
                    "version": entry.version,
                }
        return {"kernels": out}

    async def _follow(self, uri: str, task: asyncio.Task[Any]) -> bool:
        """Wait for ``task``; when a newer profile of the file (a save) replaced it, wait for
        that one instead. False when it was cancelled with nothing newer."""
        for _ in range(_MAX_REPLACEMENTS):
            try:
                await asyncio.shield(task)
                return True
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
                newer = self.ctx.tasks.pending(uri)
                if newer is None:
                    return False
                task = newer
        return True


def _entry_groups(kernel_file: KernelFile, only: str | None) -> list[list[str]]:
    """Kernel names grouped by the harness entry that times them (one evaluation per group)."""
    groups: dict[str, list[str]] = {}
    for kernel in kernel_file.kernels:
        if only is not None and kernel.name != only:
            continue
        entry = kernel_file.entry_for(kernel.name)
        if entry:
            groups.setdefault(entry, []).append(kernel.name)
    return list(groups.values())

"""Search results: the reports per kernel, restored from the results store after a restart,
offered while the kernel's text still matches, and cleared on request.

Command: ``accelopt.clearResults [uri?]`` -> ``{cleared, reports, profiles}``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..documents import DocState, uri_path
from ..edits import RebaseConflict, rebase
from .base import LanguageFeature, command_args
from .diagnostics import DiagnosticsFeature

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile
    from accelopt_core.search import Candidate, SearchReport

    from ..context import ServerContext
    from ..documents import KernelDocument

log = logging.getLogger("accelopt.server")


#: How many (candidate, document text) verdicts of :func:`applicable` are kept.
_APPLICABLE_CACHE = 4096


def applicable(original: str, candidate: str, current: str) -> bool:
    """True when the change ``original -> candidate`` can still be carried onto ``current``
    (:func:`~accelopt_server.edits.rebase`) and would change it. An applied candidate fails
    both ways: the lines it rewrote are no longer in ``current`` (a conflict), or the merge is
    ``current`` itself."""
    try:
        return rebase(original, candidate, current) != current
    except RebaseConflict:
        return False


class ResultsFeature(LanguageFeature):
    """The search reports of each document's kernels."""

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self._applicable: dict[tuple[int, str, int, int], bool] = {}

    async def document_open(self, doc: KernelDocument) -> None:
        await self.load_saved(doc.uri, doc.kernel_file)

    async def document_save(self, doc: KernelDocument) -> None:
        await self.load_saved(doc.uri, doc.kernel_file)

    async def load_saved(self, uri: str, kernel_file: KernelFile) -> None:
        """Offer the persisted results of kernels whose file still matches (after a restart);
        kernels with a matching report or a running search are skipped."""
        st = self.ctx.docs.state(uri)
        settings = self.ctx.settings(uri)
        for kernel in kernel_file.kernels:
            name = kernel.name
            if name in st.reports and self.ctx.docs.report_matches(
                st.reports[name], kernel_file, name
            ):
                continue
            if self.ctx.jobs.active_job(uri, name) is not None:
                continue
            try:
                report = await self.ctx.adapter.saved_report(settings, kernel_file, name)
            except Exception as exc:
                log.warning("could not read saved results for %s: %s", name, exc)
                continue
            if report is not None:  # warm the match cache off the event loop
                await asyncio.to_thread(self.ctx.docs.report_matches, report, kernel_file, name)
                st.reports[name] = report
                log.info("restored %d saved improvement(s) of %s", len(report.candidates), name)

    def store(self, uri: str, kernel: str, report: SearchReport) -> None:
        """Keep the report of a search that just ended (its experiences are now in memory)."""
        self.ctx.docs.state(uri).reports[kernel] = report
        self.ctx.adapter.memory_changed()

    def offered(self, uri: str, kernel_file: KernelFile, kernel: str) -> SearchReport | None:
        """The kernel's report when it holds improvements and still matches the kernel's text."""
        report = self.ctx.docs.state(uri).reports.get(kernel)
        if (
            report is not None
            and report.candidates
            and self.ctx.docs.report_matches(report, kernel_file, kernel)
        ):
            return report
        return None

    async def offered_candidates(
        self, uri: str, kernel_file: KernelFile, kernel: str
    ) -> list[Candidate]:
        """The improvements still worth offering, best first: those of :meth:`offered` whose
        edit can still be applied to the document and is not already in it (an applied
        launcher-only improvement leaves the kernel's text as the search saw it, so the report
        still matches: this retires it). A first look at a document version runs in a thread
        (a three-way merge per candidate); later ones are cached."""
        report = self.offered(uri, kernel_file, kernel)
        if report is None:
            return []
        source = kernel_file.source
        keys = [
            (hash(report.original_source), c.id, hash(c.source), hash(source))
            for c in report.candidates
        ]
        missing = [
            (k, c)
            for k, c in zip(keys, report.candidates, strict=True)
            if k not in self._applicable
        ]
        if missing:
            found = await asyncio.to_thread(
                lambda: [applicable(report.original_source, c.source, source) for _, c in missing]
            )
            if len(self._applicable) > _APPLICABLE_CACHE:
                self._applicable.clear()
            self._applicable.update((k, ok) for (k, _), ok in zip(missing, found, strict=True))
        return [c for k, c in zip(keys, report.candidates, strict=True) if self._applicable.get(k)]

    def candidate(
        self, uri: str, kernel: str, candidate_id: str
    ) -> tuple[SearchReport, Candidate] | None:
        """The kernel's report and its candidate ``candidate_id``, or None when unknown."""
        report = self.ctx.docs.state(uri).reports.get(kernel)
        if report is None:
            return None
        cand = next((c for c in report.candidates if c.id == candidate_id), None)
        return (report, cand) if cand is not None else None

    async def cmd_clear_results(self, *args: Any) -> dict[str, Any]:
        """``accelopt.clearResults [uri?]``: forget the reports and profiles of one document (of
        all without ``uri``) and delete the saved results."""
        (uri,) = command_args("accelopt.clearResults", args, [], ["uri"])
        docs = self.ctx.docs
        if uri in docs.states:
            states = [docs.states[uri]]
        else:
            states = [] if uri else list(docs.states.values())
        reports = profiles = 0
        for st in states:
            reports += len(st.reports)
            profiles += len(st.profiles)
            self._clear(st)
        cleared = await self._clear_saved(uri)
        self.ctx.refresh_lenses()
        return {"cleared": cleared, "reports": reports, "profiles": profiles}

    def _clear(self, st: DocState) -> None:
        st.reports.clear()
        st.profiles.clear()
        st.profile_diagnostics.clear()
        self.ctx.feature(DiagnosticsFeature).publish(st.uri)

    async def _clear_saved(self, uri: str | None) -> int:
        """Delete the saved results of ``uri`` (all of them without), once per memory
        directory in use; returns how many were deleted."""
        cleared = 0
        seen: set[str] = set()
        for settings in [self.ctx.settings(uri)] if uri else self.ctx.config.all_settings():
            key = str(settings.resolved_memory_dir())
            if key in seen:
                continue
            seen.add(key)
            try:
                path = uri_path(uri) if uri else None
                cleared += await self.ctx.adapter.clear_results(settings, path)
            except Exception as exc:
                log.warning("could not clear saved results: %s", exc)
        return cleared

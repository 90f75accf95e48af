"""The run folder of one search (issue 30): its summary, report, plans and every agent call.

:class:`RunRecorder` takes the proposer's call records
(:meth:`accelopt_core.proposers.agents.AgentProposer.record_calls`) and the search's report, and
writes them into a :class:`~accelopt_core.memory.runs.RunLog`, in order, on one worker thread of
its own (never on the event loop). A run folder that cannot be written becomes one warning of
the report; the search goes on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any

from accelopt_core.proposers import CallRecord
from accelopt_core.search.report import SearchReport

log = logging.getLogger("accelopt.search")


class RunRecorder:
    """Writes one search's run folder.

    Args:
        store: an :class:`accelopt_core.memory.runs.RunStore`.
        summary: the run's fixed facts (``path``, ``kernel``, ``target``, ``proposer``,
            ``store_prompts``).

    Attributes:
        run_id: the folder's name once :meth:`start` made it ("" before, or when none is kept).
        warning: why the run folder is incomplete, or None.
    """

    def __init__(self, store: Any, summary: dict[str, Any]) -> None:
        self._store = store
        self._summary = dict(summary)
        self._log: Any = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: list[concurrent.futures.Future[None]] = []
        self._buffer: list[dict[str, Any]] = []  # calls before the folder exists
        self.plans: list[dict[str, Any]] = []
        self.calls = 0
        self.cost_usd = 0.0
        self.run_id = ""
        self.warning: str | None = None
        self._report: SearchReport | None = None
        self._written_calls = -1

    @classmethod
    def for_search(cls, store: Any, search: Any, proposer: Any) -> RunRecorder:
        """The recorder of ``search`` (a :class:`~accelopt_core.search.BeamSearch`: its file,
        kernel and target), fed the calls of ``proposer`` when it records them
        (``record_calls``)."""
        recorder = cls(
            store,
            {
                "path": search.original.path,
                "kernel": search.kernel.name,
                "target": search.target_name,
                "proposer": getattr(proposer, "name", type(proposer).__name__),
                "store_prompts": getattr(getattr(proposer, "llm", None), "store_prompts", None),
            },
        )
        record_calls = getattr(proposer, "record_calls", None)
        if record_calls is not None:
            record_calls(recorder.call)
        return recorder

    async def start(self) -> None:
        """Create the run folder (evicting the oldest runs) on the worker thread."""
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="accelopt-run")
        summary = {**self._summary, "calls": 0, "cost_usd": 0.0}
        try:
            loop = asyncio.get_running_loop()
            self._log = await loop.run_in_executor(self._pool, self._store.create, summary)
        except Exception as exc:  # MemoryUnavailable, ...: the search goes on without a folder
            self._fail(exc)
        if self._log is not None:
            self.run_id = self._log.id
            for record in self._buffer:
                self._submit(self._log.append_call, record)
        self._buffer.clear()

    def call(self, record: CallRecord) -> None:
        """One agent call ended: count it, keep a plan's title, append it to the transcript."""
        self.calls += 1
        self.cost_usd += record.cost_usd
        if record.verdict == "plan":
            self.plans.append({"call": record.n, "title": record.detail})
        data = record.to_dict()
        if self._log is None and self._pool is None:
            self._buffer.append(data)
        elif self._log is not None:
            self._submit(self._log.append_call, data)

    async def finish(self, report: SearchReport) -> None:
        """Write the report (with the plans) and the run's summary; ``report.run_id`` names
        the folder, and a problem writing it becomes one of its warnings."""
        if self._log is None:
            return
        report.run_id = self.run_id
        self._report = report
        self._submit(self._log.write_report, report.to_dict() | {"plans": list(self.plans)})
        self._summary.update(
            finished_at=time.time(),
            stopped_reason=report.stopped_reason,
            best_speedup=report.best.speedup if report.best else None,
            candidates=len(report.candidates),
            failed=len(report.failed_candidates),
            tokens=report.tokens.get("total", {}).get("total_tokens", 0),
        )
        await self._flush()
        if self.warning:
            report.warnings.append(self.warning)

    async def close(self) -> None:
        """Write the final call count, cost and report (the summarizer may have run after
        :meth:`finish`, and the memory's experiences are known only now) and stop the worker
        thread."""
        if self._log is not None and (
            self._written_calls != self.calls or self._report is not None
        ):
            if self._report is not None:  # its experiences and tokens are final only now
                data = self._report.to_dict() | {"plans": list(self.plans)}
                self._submit(self._log.write_report, data)
            await self._flush()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await asyncio.get_running_loop().run_in_executor(None, pool.shutdown)

    async def _flush(self) -> None:
        """Write the summary with the current counts and wait for every write so far."""
        self._written_calls = self.calls
        summary = {
            "id": self.run_id,
            **self._summary,
            "calls": self.calls,
            "cost_usd": round(self.cost_usd, 6),
        }
        self._submit(self._log.write_summary, summary)
        pending, self._pending = self._pending, []
        for future in pending:
            try:
                await asyncio.wrap_future(future)
            except Exception as exc:
                self._fail(exc)

    def _submit(self, write: Callable[[Any], None], data: Any) -> None:
        if self._pool is None:
            return
        try:
            self._pending.append(self._pool.submit(write, data))
        except RuntimeError:  # the pool was shut down: the run is over
            pass

    def _fail(self, exc: Exception) -> None:
        if self.warning is None:
            self.warning = f"the run's transcript was not kept: {exc}"
            log.warning("%s", self.warning)

"""Run folders: what each search did, kept on disk for ``accelopt runs`` (issue 30).

Every search gets a folder ``<memoryDir>/runs/<id>/`` (the id is the start time and a random
suffix, ``20250131-142501-3fa2c1``, so names sort by age) holding plain files:

- ``run.json``: the summary ``accelopt runs`` lists: ``id``, ``path``, ``kernel``, ``target``,
  ``proposer``, ``started_at`` / ``finished_at`` (Unix s), ``stopped_reason``, ``best_speedup``,
  ``calls`` (agent calls), ``cost_usd``, ``tokens``, ``candidates`` (ranked), ``failed``,
  ``store_prompts``;
- ``report.json``: the search report (:meth:`accelopt_core.search.SearchReport.to_dict`, with
  its ``failed_candidates``) and the ``plans`` the planner proposed;
- ``transcript.jsonl``: one line per agent call
  (:meth:`accelopt_core.proposers.CallRecord.to_dict`: role, model, prompt, reply, tokens,
  latency, cost, verdict), in the order the calls ended; without prompt and reply when
  ``llm.storePrompts`` is false.

Plain files rather than diskcache (which the memory itself uses): a run is written once, in
order, and read whole, and a folder per run is what one opens to look at a run. Storage is
bounded: when a run starts, the oldest runs beyond ``search.keepRuns`` (default 50), or beyond
:data:`MAX_BYTES` in all, are deleted. Every method raises
:class:`~accelopt_core.memory.store.MemoryUnavailable` on a disk failure, with the directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelopt_core.memory.store import MemoryUnavailable

if TYPE_CHECKING:
    from accelopt_core.settings import Settings

__all__ = ["MAX_BYTES", "RunLog", "RunStore"]

#: Most bytes all run folders may take together; the oldest go first past it.
MAX_BYTES = 256 * 2**20
RUN_FILE, REPORT_FILE, TRANSCRIPT_FILE = "run.json", "report.json", "transcript.jsonl"


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file renamed over it)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, allow_nan=False, default=str)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class RunLog:
    """The files of one run's folder. Not thread-safe: one writer (the search's recorder, on
    its own worker thread) at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.id = folder.name
        self._identity: dict[str, Any] = {}

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Replace ``run.json``; the ``id`` and ``started_at`` of the first summary written
        are kept in later ones (the store orders runs by them). Raises MemoryUnavailable on
        a disk failure."""
        if not self._identity:
            self._identity = {k: summary[k] for k in ("id", "started_at") if k in summary}
        data = {**summary, **self._identity}
        self._guard(lambda: _write_json(self.folder / RUN_FILE, data))

    def write_report(self, report: dict[str, Any]) -> None:
        """Replace ``report.json``. Raises MemoryUnavailable on a disk failure."""
        self._guard(lambda: _write_json(self.folder / REPORT_FILE, report))

    def append_call(self, record: dict[str, Any]) -> None:
        """Append one call to ``transcript.jsonl``. Raises MemoryUnavailable on a disk
        failure."""
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"

        def write() -> None:
            with open(self.folder / TRANSCRIPT_FILE, "a", encoding="utf-8") as fh:
                fh.write(line)

        self._guard(write)

    def _guard(self, action: Any) -> None:
        try:
            action()
        except (OSError, TypeError, ValueError) as exc:
            raise MemoryUnavailable(f"run folder {self.folder}: {exc}") from None


class RunStore:
    """The run folders under ``directory``, the ``keep`` newest kept (:data:`MAX_BYTES` in all).

    Args:
        directory: ``<memoryDir>/runs`` (created on the first run).
        keep: runs kept (``search.keepRuns``); 0 keeps none.
        max_bytes: most bytes all runs may take.
    """

    def __init__(self, directory: Path | str, keep: int = 50, max_bytes: int = MAX_BYTES) -> None:
        self.directory = Path(directory).expanduser()
        self.keep = keep
        self.max_bytes = max_bytes

    @classmethod
    def for_settings(cls, settings: Settings) -> RunStore:
        """The store in ``settings.resolved_memory_dir() / "runs"`` keeping
        ``settings.search.keep_runs`` runs (nothing touches the disk before a run starts)."""
        return cls(settings.resolved_memory_dir() / "runs", settings.search.keep_runs)

    # -- writing -----------------------------------------------------------------------------
    def create(self, summary: dict[str, Any], now: float | None = None) -> RunLog | None:
        """A new run's folder with its ``run.json`` (``summary`` plus ``id`` and
        ``started_at``), after evicting the oldest runs so that this one fits the bounds; None
        (and every run evicted) when ``keep`` is 0. Raises MemoryUnavailable."""
        now = time.time() if now is None else now
        if self.keep <= 0:
            self.evict(0)
            return None
        self.evict(self.keep - 1)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
        folder = self.directory / f"{stamp}-{secrets.token_hex(3)}"
        try:
            folder.mkdir(parents=True)
        except OSError as exc:
            raise MemoryUnavailable(
                f"runs at {self.directory}: cannot create a run: {exc}"
            ) from None
        log = RunLog(folder)
        log.write_summary({"id": log.id, "started_at": now, **summary})
        return log

    def evict(self, keep: int) -> int:
        """Delete the oldest runs until at most ``keep`` remain and all of them take at most
        ``max_bytes``; the number deleted."""
        runs = self._folders()
        doomed = runs[: max(0, len(runs) - keep)]
        kept = runs[len(doomed) :]
        sizes = {p: _size(p) for p in kept}
        while kept and sum(sizes[p] for p in kept) > self.max_bytes:
            doomed.append(kept.pop(0))
        for folder in doomed:
            shutil.rmtree(folder, ignore_errors=True)
        return len(doomed)

    # -- reading -----------------------------------------------------------------------------
    def list(self) -> list[dict[str, Any]]:
        """The ``run.json`` of every run, newest first (unreadable ones skipped)."""
        out = []
        for folder in reversed(self._folders()):
            summary = _read_json(folder / RUN_FILE)
            if isinstance(summary, dict):
                out.append({**summary, "id": folder.name})
        return out

    def find(self, run_id: str) -> Path:
        """The folder of the run whose id is or starts with ``run_id``.

        Raises KeyError naming the problem: no such run, or a prefix several runs share."""
        runs = [p for p in self._folders() if p.name.startswith(run_id)] if run_id else []
        exact = [p for p in runs if p.name == run_id]
        if exact:
            return exact[0]
        if not runs:
            raise KeyError(f"no run {run_id!r} in {self.directory}")
        if len(runs) > 1:
            names = ", ".join(p.name for p in runs[:5])
            raise KeyError(f"{run_id!r} names {len(runs)} runs ({names}): give more of the id")
        return runs[0]

    def load(self, run_id: str) -> dict[str, Any]:
        """A run as ``{"run": run.json, "report": report.json or {}, "transcript": [call,
        ...]}`` (a transcript line that cannot be read is skipped). Raises KeyError (see
        :meth:`find`)."""
        folder = self.find(run_id)
        summary = _read_json(folder / RUN_FILE)
        report = _read_json(folder / REPORT_FILE)
        calls: list[dict[str, Any]] = []
        with contextlib.suppress(OSError):
            for line in (folder / TRANSCRIPT_FILE).read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError):
                    call = json.loads(line)
                    if isinstance(call, dict):
                        calls.append(call)
        return {
            "run": {**(summary if isinstance(summary, dict) else {}), "id": folder.name},
            "report": report if isinstance(report, dict) else {},
            "transcript": calls,
        }

    def _folders(self) -> list[Path]:
        """Run folders, oldest first: by name (the start time leads, to the second), then by
        ``run.json``'s ``started_at`` (two runs started in the same second)."""
        try:
            found = [p for p in self.directory.iterdir() if p.is_dir()]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryUnavailable(f"runs at {self.directory}: {exc}") from None
        return sorted(found, key=lambda p: (p.name[:_STAMP], _started_at(p), p.name))


#: Characters of a run id that are its start time (``20261126-152715``).
_STAMP = 15


def _started_at(folder: Path) -> float:
    """``started_at`` of the run in ``folder`` (0 when its ``run.json`` cannot say)."""
    summary = _read_json(folder / RUN_FILE)
    value = summary.get("started_at") if isinstance(summary, dict) else None
    return float(value) if isinstance(value, (int, float)) else 0.0


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _size(folder: Path) -> int:
    """Bytes of the files in ``folder`` (recursively; unreadable ones count 0)."""
    total = 0
    for p in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file():
                total += p.stat().st_size
    return total

"""Where ``accelopt report`` finds a search (issue 32): a run kept in ``<memoryDir>/runs``
(by id, or the last search on a kernel file), or a report saved as JSON (``accelopt optimize
--json > FILE.json``, ``accelopt runs show ID --json``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["ReportNotFound", "find_report"]


class ReportNotFound(LookupError):
    """No search report matches; the message says what was looked for and where."""


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _from_json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportNotFound(f"{path}: not a readable JSON report: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("report"), dict):  # runs show --json
        data = data["report"]
    if not isinstance(data, dict) or not isinstance(data.get("baseline"), dict):
        raise ReportNotFound(
            f"{path}: not a search report (expected the JSON of 'accelopt optimize --json' "
            "or 'accelopt runs show ID --json')"
        )
    return data


def _load_run(runs: Any, run_id: str) -> tuple[dict[str, Any], str]:
    run = runs.load(run_id)  # KeyError: no such run, or an ambiguous prefix
    report = run.get("report") or {}
    if not isinstance(report.get("baseline"), dict):
        raise ReportNotFound(
            f"run {run['run']['id']} has no report yet (the search is still running, or it "
            "stopped before writing one)"
        )
    return report, f"run {run['run']['id']}"


def find_report(
    source: str | None, runs: Any, kernel: str | None = None
) -> tuple[dict[str, Any], str]:
    """The report dict (:meth:`accelopt_core.search.SearchReport.to_dict`) named by
    ``source``, and where it came from (``run 20250131-142501-3fa2c1``, ``FILE.json``).

    Args:
        source: None (the newest run), a run id or a unique prefix of one, a kernel file (the
            newest run of a search on it; of ``kernel`` when given) or a ``.json`` report.
        runs: the :class:`accelopt_core.memory.RunStore` to look in.
        kernel: with a kernel file, the kernel whose search is wanted.

    Raises:
        ReportNotFound: nothing matches (the message says what and where).
        MemoryUnavailable: the runs folder cannot be read.
    """
    if source and Path(source).expanduser().is_file():
        path = Path(source).expanduser()
        if path.suffix == ".json":
            return _from_json_file(path), str(path)
        wanted = _real(str(path))
        for summary in runs.list():
            if _real(str(summary.get("path") or "")) != wanted:
                continue
            if kernel and summary.get("kernel") != kernel:
                continue
            return _load_run(runs, summary["id"])
        what = f"of {kernel} in {path}" if kernel else f"on {path}"
        raise ReportNotFound(f"no search {what} is kept in {runs.directory}")
    if source:
        try:
            return _load_run(runs, source)
        except KeyError as exc:
            raise ReportNotFound(
                f"{exc.args[0]}; give a run id (accelopt runs), a kernel file or a .json report"
            ) from None
    for summary in runs.list():
        try:
            return _load_run(runs, summary["id"])
        except ReportNotFound:
            continue
    raise ReportNotFound(f"no search is kept in {runs.directory} (run accelopt optimize first)")

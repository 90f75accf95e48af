"""Unit tests of the server's own logic: the three-way rebase of a candidate onto an edited
document, minimal text edits, secret redaction, and the job manager's queueing / cancellation /
debouncing (with a scripted search object in place of a beam search)."""

from __future__ import annotations

import asyncio

import pytest
from pygls.workspace.position_codec import PositionCodec

from accelopt_server.edits import RebaseConflict, rebase, text_edits
from accelopt_server.jobs import JobManager
from accelopt_server.logs import Redactor
from tests.lsp_fixtures import apply_text_edits

BASE = "".join(f"line {i}\n" for i in range(1, 21))
CAND = BASE.replace("line 10\n", "line 10 FAST\nline 10b\n")


def test_rebase_identity_and_edits_elsewhere() -> None:
    assert rebase(BASE, CAND, BASE) == CAND
    current = "# header\n" + BASE.replace("line 19\n", "line 19 (user)\n")
    merged = rebase(BASE, CAND, current)
    assert merged == "# header\n" + CAND.replace("line 19\n", "line 19 (user)\n")


def test_rebase_refuses_when_the_rewritten_lines_changed() -> None:
    with pytest.raises(RebaseConflict, match="lines 10"):
        rebase(BASE, CAND, BASE.replace("line 10\n", "line 10 (user)\n"))
    with pytest.raises(RebaseConflict):  # the context line next to the change moved away
        rebase(BASE, CAND, BASE.replace("line 11\n", ""))


def test_rebase_at_file_boundaries() -> None:
    cand = BASE + "tail\n"
    # the candidate appends while the user edited the top: merged
    assert rebase(BASE, cand, "# user\n" + BASE) == "# user\n" + cand
    # both appended at the end: a conflict, refused rather than guessing the order
    with pytest.raises(RebaseConflict):
        rebase(BASE, cand, BASE + "# user\n")
    # the candidate prepends; the user changed the first line: refused (it anchors there)
    with pytest.raises(RebaseConflict):
        rebase(BASE, "head\n" + BASE, BASE.replace("line 1\n", "line one\n"))


def test_text_edits_are_minimal_and_exact() -> None:
    current = "# header\n" + BASE
    merged = rebase(BASE, CAND, current)
    edits = text_edits(current, merged, PositionCodec())
    assert len(edits) == 1 and edits[0].range.start.line == 10
    assert apply_text_edits(current, edits) == merged


def test_redactor_removes_keys_and_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "s3cret-value-123")
    redact = Redactor()
    redact.update(["MY_KEY", "UNSET_ENV"])
    text = redact("key s3cret-value-123 Authorization: Bearer abcdef123456 sk-ABCDEFGHIJKLMN")
    assert "s3cret" not in text and "abcdef123456" not in text and "sk-ABCDEFGH" not in text


class ScriptedSearch:
    """Stands in for BeamSearch: runs until cancelled or released; records what happened."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = False
        self.started = asyncio.Event()

    def subscribe(self, callback) -> None:  # noqa: ANN001
        self.callback = callback

    def cancel(self) -> None:
        self.cancelled = True
        self.release.set()

    async def run(self):  # noqa: ANN201
        self.started.set()
        await self.release.wait()
        return type(
            "Report",
            (),
            {"stopped_reason": "cancelled" if self.cancelled else "completed", "best": None},
        )()


async def test_jobs_one_per_kernel_capacity_and_cancel() -> None:
    jobs = JobManager(lambda: 1, cancel_grace_s=0.5)
    a, b = ScriptedSearch(), ScriptedSearch()
    done: list[str] = []
    job_a, started = jobs.start_search("u", "k1", 1, a, on_done=lambda j: done.append(j.id))
    assert started
    again, started_again = jobs.start_search("u", "k1", 1, ScriptedSearch())
    assert again is job_a and not started_again
    job_b, _ = jobs.start_search("u", "k2", 1, b, on_done=lambda j: done.append(j.id))
    await a.started.wait()
    await asyncio.sleep(0.05)
    assert job_a.state == "running" and job_b.state == "queued"  # capacity 1
    assert jobs.cancel(job_a)
    await asyncio.wait_for(b.started.wait(), 2)
    assert job_a.state == "cancelled" and job_b.state == "running"
    b.release.set()
    await asyncio.wait_for(job_b.task, 2)
    assert job_b.state == "finished" and done == [job_a.id, job_b.id]
    assert not jobs.cancel(job_b)


async def test_profile_debounce_newer_cancels_older() -> None:
    jobs = JobManager()
    ran: list[int] = []

    async def run(n: int) -> None:
        await asyncio.sleep(0.05)
        ran.append(n)

    first = jobs.schedule_profile("doc", lambda: run(1), 0.05)
    second = jobs.schedule_profile("doc", lambda: run(2), 0.05)
    await asyncio.wait_for(second, 2)
    assert first.cancelled() and ran == [2]
    await jobs.close()

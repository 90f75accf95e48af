"""The three-way rebase of a candidate onto an edited document, and minimal text edits."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from accelopt_core.textdiff import split_lines
from accelopt_server.edits import RebaseConflict, from_lsp_position, rebase, text_edits
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


def test_from_lsp_position_accepts_the_position_after_the_last_line() -> None:
    codec = PositionCodec()

    def at(text: str, line: int, character: int) -> tuple[int, int] | None:
        pos = types.Position(line=line, character=character)
        return from_lsp_position(split_lines(text), codec, pos)

    # the end of a whole-document range {0:0, N:0}: after the final newline
    assert at(BASE, 20, 0) == (21, 0)
    assert at(BASE, 20, 7) == (21, 0)  # a column past the (empty) line's end is its end
    assert at("a\nbc", 2, 0) == (2, 2)  # no final newline: the end of the last line
    assert at("", 0, 0) == (1, 0)
    assert at(BASE, 19, 3) == (20, 3)  # an ordinary position is unchanged
    assert at(BASE, 19, 99) == (20, 7)  # past the line's end: its end
    assert at(BASE, 21, 0) is None  # outside the document

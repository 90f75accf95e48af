"""Text edits for code actions: carry a candidate onto the document as it is now.

A search ran on the file as it was (its ``original_source``); since then the user may have edited
other parts of the file. :func:`rebase` replays the candidate's changes onto the current text (a
line-based three-way merge) only where the lines the candidate changes are still exactly as the
search saw them; anything else is a conflict and the edit is refused rather than risk
corrupting the file. :func:`text_edits` turns the result into minimal LSP ``TextEdit`` hunks
(:func:`accelopt_core.textdiff.minimal_hunks`) in the client's position encoding.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from difflib import SequenceMatcher

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition

from accelopt_core.textdiff import SourceRange, minimal_hunks, split_lines


class RebaseConflict(ValueError):
    """The lines a candidate changes were edited since the search ran (message says which)."""


def _line_map(base: list[str], current: list[str]) -> dict[int, int]:
    """base line index -> current line index for lines that are unchanged between the two."""
    mapping: dict[int, int] = {}
    matcher = SequenceMatcher(None, base, current, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            mapping[block.a + k] = block.b + k
    return mapping


def rebase(base: str, candidate: str, current: str) -> str:
    """Apply the change ``base -> candidate`` to ``current`` (line-based three-way merge).

    Every changed region of ``base``, with one line of context on each side, must still be present
    unchanged and contiguous in ``current``; insertions at the very start or end of the file are
    anchored at that boundary. With ``current == base`` the result is ``candidate`` exactly.

    Returns:
        the merged text.
    Raises:
        RebaseConflict: a region the candidate rewrites was edited (1-based base line numbers).
    """
    if current == base:
        return candidate
    base_lines = split_lines(base)
    cand_lines = split_lines(candidate)
    cur_lines = split_lines(current)
    mapping = _line_map(base_lines, cur_lines)
    replacements: list[tuple[int, int, list[str]]] = []
    matcher = SequenceMatcher(None, base_lines, cand_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lo = max(i1 - 1, 0)
        hi = min(i2 + 1, len(base_lines))
        if lo == hi:  # empty base
            raise RebaseConflict("the file was empty when the search ran")
        start = mapping.get(lo)
        ok = start is not None and all(mapping.get(lo + k) == start + k for k in range(hi - lo))
        # A change at the file boundary must stay at the boundary.
        if ok and i1 == 0 and start != 0:
            ok = False
        if ok and i2 == len(base_lines) and start + (hi - lo) != len(cur_lines):
            ok = False
        if not ok:
            raise RebaseConflict(
                f"lines {i1 + 1}-{max(i2, i1 + 1)} changed since the search ran; "
                "run the search again on the current file"
            )
        cur_start = start + (i1 - lo)
        replacements.append((cur_start, cur_start + (i2 - i1), cand_lines[j1:j2]))
    merged = list(cur_lines)
    for s, e, new in sorted(replacements, key=lambda r: r[0], reverse=True):
        merged[s:e] = new
    return "".join(merged)


@functools.lru_cache(maxsize=16)
def source_lines(source: str) -> tuple[str, ...]:
    """``source`` split into lines with their endings
    (:func:`accelopt_core.textdiff.split_lines`), remembered for the last few texts: every
    hover and code-action request converts positions against the document's lines, and a
    string's hash is computed once, so a repeated look-up costs O(1), not a split of the
    file."""
    return tuple(split_lines(source))


def to_lsp_position(
    lines: Sequence[str], codec: PositionCodec, line0: int, col: int
) -> types.Position:
    """A 0-based line and code-point column -> an LSP position in the client's encoding.
    Past the last line it is the end of the document."""
    if line0 >= len(lines):
        if not lines:
            return types.Position(line=0, character=0)
        last = lines[-1]
        if last.endswith("\n"):
            return types.Position(line=len(lines), character=0)
        return codec.position_to_client_units(lines, ServerTextPosition(len(lines) - 1, len(last)))
    text = lines[line0].rstrip("\r\n")
    return codec.position_to_client_units(
        lines, ServerTextPosition(line0, min(max(col, 0), len(text)))
    )


def to_lsp_range(lines: Sequence[str], codec: PositionCodec, src_range: SourceRange) -> types.Range:
    """An :class:`accelopt_core.textdiff.SourceRange` (1-based lines, 0-based code-point columns,
    end exclusive) -> an LSP ``Range`` in the client's position encoding."""
    return types.Range(
        start=to_lsp_position(lines, codec, src_range.start_line - 1, src_range.start_col),
        end=to_lsp_position(lines, codec, src_range.end_line - 1, src_range.end_col),
    )


def from_lsp_position(
    lines: Sequence[str], codec: PositionCodec, position: types.Position
) -> tuple[int, int] | None:
    """An LSP position -> (1-based line, 0-based code-point column), or None when it lies
    outside the document.

    ``line == len(lines)`` is inside: it is the position after the last line (the end of a
    whole-document range ``{0:0, N:0}``), returned as the end of the document: line
    ``len(lines) + 1``, column 0 when the text ends with a newline (or is empty), else the end
    of the last line. A column past the end of a line means the end of the line (LSP 3.17,
    ``Position``)."""
    if position.line < 0 or position.line > len(lines) or position.character < 0:
        return None
    if position.line == len(lines):
        if not lines or lines[-1].endswith(("\n", "\r")):
            return len(lines) + 1, 0
        return len(lines), len(lines[-1])
    server = codec.position_from_client_units(
        lines, types.Position(line=position.line, character=position.character)
    )
    return server.line + 1, server.character


def text_edits(current: str, new: str, codec: PositionCodec) -> list[types.TextEdit]:
    """Minimal ``TextEdit`` hunks turning ``current`` into ``new``
    (:func:`accelopt_core.textdiff.minimal_hunks`), positions in the client's encoding."""
    lines = split_lines(current)
    return [
        types.TextEdit(range=to_lsp_range(lines, codec, rng), new_text=text)
        for rng, text in minimal_hunks(current, new)
    ]

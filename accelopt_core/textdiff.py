"""Text positions and line diffs: the one place that splits source text into lines, turns
(line, column) into string offsets, and computes the hunks and diffs between two texts.

Used by kernel discovery (ranges), the server (minimal ``TextEdit`` hunks, documents), the CLI
and the search (``git diff``-style previews). Standard library only.

Positions: :class:`SourceRange` lines are 1-based; columns are 0-based indices into the line as a
Python ``str`` (code points); the end is exclusive. The LSP layer converts code points to UTF-16
(pygls' position codec). Lines are split on ``\\n``, ``\\r\\n`` and ``\\r`` like Python's tokenizer
and LSP.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "SourceRange",
    "split_lines",
    "offset_of",
    "minimal_hunks",
    "apply_hunks",
    "unified_diff",
]

_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, order=True)
class SourceRange:
    """A span of source text.

    ``start_line``/``end_line`` are 1-based; ``start_col``/``end_col`` are 0-based code-point
    columns; the end is exclusive (as in :mod:`ast`'s ``end_col_offset``). Ranges order by
    their start, then their end.
    """

    start_line: int
    start_col: int
    end_line: int
    end_col: int

    @property
    def start(self) -> tuple[int, int]:
        """(1-based line, 0-based column) of the first character."""
        return (self.start_line, self.start_col)

    @property
    def end(self) -> tuple[int, int]:
        """(1-based line, 0-based column) just past the last character."""
        return (self.end_line, self.end_col)

    def contains(self, line: int, col: int) -> bool:
        """True when (1-based ``line``, 0-based ``col``) lies in the range, its end included
        (a cursor just after the last character still counts)."""
        return self.start <= (line, col) <= self.end


def split_lines(source: str) -> list[str]:
    """Lines of ``source`` with their line endings kept, split on ``\\n``, ``\\r\\n`` and
    ``\\r`` (as Python's tokenizer and LSP do; unlike :meth:`str.splitlines`, form feeds and
    Unicode separators do not end a line). ``""`` gives ``[]``."""
    if not source:
        return []
    out: list[str] = []
    pos = 0
    for m in _LINE_SPLIT.finditer(source):
        out.append(source[pos : m.end()])
        pos = m.end()
    if pos < len(source):
        out.append(source[pos:])
    return out


def offset_of(lines: Sequence[str], line: int, col: int) -> int:
    """String offset of (1-based ``line``, code-point ``col``) in the text whose
    :func:`split_lines` are ``lines``. Positions past the end clamp: a line before the first
    gives 0, a line after the last gives the text's length, a column past a line's end gives
    the end of that line (after its line ending)."""
    if line < 1:
        return 0
    if line > len(lines):
        return sum(len(t) for t in lines)
    base = sum(len(t) for t in lines[: line - 1])
    return base + min(col, len(lines[line - 1]))


def _line_start(lines: list[str], index: int) -> tuple[int, int]:
    """Position of the start of line ``index`` (0-based), or the end of the text when
    ``index == len(lines)``."""
    if index < len(lines):
        return (index + 1, 0)
    if not lines:
        return (1, 0)
    last = lines[-1]
    if last.endswith(("\n", "\r")):
        return (len(lines) + 1, 0)
    return (len(lines), len(last))


def minimal_hunks(old: str, new: str) -> list[tuple[SourceRange, str]]:
    """Line-based replacement hunks (difflib.SequenceMatcher) that turn ``old`` into ``new``.

    Each hunk replaces the text between two positions of ``old`` (ranges in ascending order,
    non-overlapping, usually whole lines) by the given text; applied back to front
    (:func:`apply_hunks`) they reproduce ``new`` exactly. Equal texts give ``[]``.
    """
    if old == new:
        return []
    a, b = split_lines(old), split_lines(new)
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    hunks: list[tuple[SourceRange, str]] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        start = _line_start(a, i1)
        end = _line_start(a, i2)
        hunks.append((SourceRange(*start, *end), "".join(b[j1:j2])))
    return hunks


def apply_hunks(text: str, hunks: Iterable[tuple[SourceRange, str]]) -> str:
    """Apply replacement hunks (as from :func:`minimal_hunks`) to ``text``, back to front.
    Ranges are positions in ``text``; ones past its end clamp (:func:`offset_of`)."""
    lines = split_lines(text)
    for rng, repl in sorted(hunks, key=lambda h: h[0], reverse=True):
        start = offset_of(lines, rng.start_line, rng.start_col)
        end = offset_of(lines, rng.end_line, rng.end_col)
        text = text[:start] + repl + text[end:]
    return text


def _marked_last_line(lines: list[str]) -> Iterator[str]:
    """``lines``, the last one followed by git's "No newline at end of file" marker when it
    has no line ending."""
    for i, line in enumerate(lines):
        if i == len(lines) - 1 and not line.endswith(("\n", "\r")):
            yield line + "\n\\ No newline at end of file\n"
        else:
            yield line


def unified_diff(old: str, new: str, path: str) -> str:
    """A ``git diff``-style unified diff (``a/path`` -> ``b/path``, 3 lines of context);
    ``""`` when the texts are equal."""
    a = list(_marked_last_line(split_lines(old)))
    b = list(_marked_last_line(split_lines(new)))
    out = difflib.unified_diff(a, b, f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)

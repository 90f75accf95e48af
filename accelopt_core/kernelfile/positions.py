"""Source positions of :mod:`ast` nodes and syntax errors, as :class:`SourceRange`.

:mod:`ast` reports UTF-8 byte columns; :class:`Positions` converts them to code-point columns,
so non-ASCII text before a token does not shift ranges.
"""

from __future__ import annotations

import ast

from accelopt_core.kernelfile.model import KernelDiagnostic
from accelopt_core.textdiff import SourceRange, split_lines

__all__ = ["Positions", "syntax_diagnostic"]


class Positions:
    """Converts :mod:`ast` (line, UTF-8 byte column) pairs of one source text to
    :class:`SourceRange` code-point columns. ``lines`` are the text's :func:`split_lines`."""

    def __init__(self, source: str) -> None:
        self.lines = split_lines(source)

    def _line(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def col(self, line: int, byte_col: int) -> int:
        """Code-point column of UTF-8 byte column ``byte_col`` on 1-based ``line``."""
        if line < 1 or line > len(self.lines):
            return max(byte_col, 0)
        text = self.lines[line - 1]
        if text.isascii():
            return byte_col
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    def node(self, node: ast.AST) -> SourceRange:
        """The range :mod:`ast` gives ``node`` (an empty range at its start when it has no end)."""
        line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or line
        end_col = getattr(node, "end_col_offset", None)
        start = self.col(line, getattr(node, "col_offset", 0))
        end = self.col(end_line, end_col) if end_col is not None else start
        return SourceRange(line, start, end_line, end)

    def stmt(self, node: ast.stmt) -> SourceRange:
        """A statement's range; for a decorated def or class it starts at the first ``@``."""
        rng = self.node(node)
        decorators = getattr(node, "decorator_list", None)
        if not decorators:
            return rng
        first = min(decorators, key=lambda d: (d.lineno, d.col_offset))
        line = first.lineno
        col = self.col(line, first.col_offset)
        at = self._line(line).rfind("@", 0, col + 1)
        return SourceRange(line, at if at >= 0 else col, rng.end_line, rng.end_col)

    def def_name(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> SourceRange:
        """Range of the identifier after ``def`` / ``class``."""
        line = node.lineno
        text = self._line(line)
        start_col = self.col(line, node.col_offset)
        keyword = "class" if isinstance(node, ast.ClassDef) else "def"
        at = text.find(keyword, start_col)
        at = text.find(node.name, at + len(keyword)) if at >= 0 else -1
        if at < 0:
            at = start_col
        return SourceRange(line, at, line, at + len(node.name))


def syntax_diagnostic(exc: BaseException) -> KernelDiagnostic:
    """A ``syntax-error`` diagnostic for what :func:`ast.parse` raised: a SyntaxError located
    at its (line, column), on that line only and at least one character wide; anything else
    (ValueError for NUL bytes, RecursionError, MemoryError) at the start of the file."""
    if not isinstance(exc, SyntaxError):
        msg = str(exc) or type(exc).__name__
        return KernelDiagnostic(
            f"cannot parse: {msg}", SourceRange(1, 0, 1, 0), "error", "syntax-error"
        )
    # SyntaxError offsets are 1-based code-point columns of the line already.
    line = exc.lineno or 1
    col = max((exc.offset or 1) - 1, 0)
    end_line = getattr(exc, "end_lineno", None) or line
    end_col = getattr(exc, "end_offset", None)
    end_col = max(end_col - 1, col) if end_col and end_line == line else col
    if end_col == col:
        end_col = col + 1
    text = (exc.msg or "invalid syntax").strip()
    return KernelDiagnostic(
        f"syntax error: {text}", SourceRange(line, col, line, end_col), "error", "syntax-error"
    )

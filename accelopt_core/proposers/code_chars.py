"""Characters models put into code that Python refuses, normalized (issue 53).

Chat front ends, gateways and the models themselves put characters into code that look right and
do not parse: a no-break space (U+00A0) or another Unicode space in the indentation, a zero-width
space or joiner (U+200B..U+200D, U+2060, U+FEFF) between tokens, typographic quotes (``“”‘’``)
where the code had ``"`` and ``'``. Outside a string literal or a comment, each of them is a
syntax error in Python (``invalid non-printable character U+00A0``), so replacing them there never
changes the meaning of code that parses. Inside a string literal or a comment they are left
alone: there they may be meant.

What is inside a literal is read by a small scanner over Python's literal syntax (quotes, string
prefixes, triple quotes, backslash escapes, comments), not by :mod:`tokenize`: the code being
normalized is exactly code that does not tokenize yet, and ``tokenize`` stops at the first such
character since Python 3.12 (its C tokenizer raises). A typographic quote outside a literal opens
one: it becomes the straight quote, and so does the typographic quote that closes it.

:func:`normalize_code` returns the code and one note per kind of change (what, where, how many
times, on which lines), which the parser puts on the Sample and the agents into the run's
transcript (:attr:`~accelopt_core.proposers.base.CallRecord.notes`).
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict

#: Zero-width characters, removed: zero-width space, non-joiner, joiner, word joiner, BOM.
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
#: Typographic quotes and the straight quote each stands for.
CURLY_QUOTES = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"'}  # fmt: skip


def _unicode_space(ch: str) -> bool:
    """A space separator other than the ASCII space (U+00A0, U+2000..U+200A, U+3000 ...)."""
    return ch != " " and unicodedata.category(ch) == "Zs"


def normalize_line_ends(text: str) -> tuple[str, list[str]]:
    """``text`` with CRLF and lone CR line ends turned into LF, and a note when there were any."""
    crlf = text.count("\r\n")
    cr = text.count("\r") - crlf
    if not crlf and not cr:
        return text, []
    kinds = " and ".join(f"{n} {k}" for n, k in ((crlf, "CRLF"), (cr, "CR")) if n)
    return text.replace("\r\n", "\n").replace("\r", "\n"), [f"line ends: {kinds} read as LF"]


class _Scan:
    """One pass over code: the output characters and the changes made, by kind."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.out: list[str] = []
        self.changes: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.line = 1

    def change(self, ch: str, what: str, new: str) -> None:
        self.changes[(ch, what)].append(self.line)
        self.out.append(new)

    def run(self) -> str:
        code, i, n = self.code, 0, len(self.code)
        indent = True  # before the first token of the line
        while i < n:
            ch = code[i]
            if ch == "\n":
                self.line, indent = self.line + 1, True
                self.out.append(ch)
                i += 1
            elif ch in ZERO_WIDTH:
                self.change(ch, "removed", "")
                i += 1
            elif _unicode_space(ch):
                self.change(ch, "in the indentation" if indent else "between tokens", " ")
                i += 1
            elif ch in " \t\f\\":
                self.out.append(ch)
                i += 1
            elif ch == "#":
                end = code.find("\n", i)
                end = n if end < 0 else end
                self.out.append(code[i:end])
                i, indent = end, False
            elif ch in "'\"" or ch in CURLY_QUOTES:
                i, indent = self._string(i), False
            else:
                self.out.append(ch)
                i, indent = i + 1, False
        return "".join(self.out)

    def _string(self, i: int) -> int:
        """Copy the string literal opening at ``code[i]`` (a straight or typographic quote);
        the index after it (its end, the end of its line when unterminated, or of the code)."""
        code, n = self.code, len(self.code)
        ch = code[i]
        quote = CURLY_QUOTES.get(ch, ch)
        closers = {quote}
        if ch != quote:  # a typographic quote opened it: a typographic or straight one closes it
            self.change(ch, "outside string literals", quote)
            closers |= {c for c, q in CURLY_QUOTES.items() if q == quote}
        else:
            self.out.append(ch)
        triple = ch == quote and code.startswith(quote * 3, i)
        if triple:
            self.out.append(quote * 2)
            i += 3
        else:
            i += 1
        while i < n:
            c = code[i]
            if c == "\\" and i + 1 < n:
                if code[i + 1] == "\n":
                    self.line += 1
                self.out.append(code[i : i + 2])
                i += 2
                continue
            if c == "\n":
                if not triple:  # unterminated: the literal ends with its line
                    return i
                self.line += 1
            if triple and code.startswith(quote * 3, i):
                self.out.append(quote * 3)
                return i + 3
            if not triple and c in closers:
                if c != quote:
                    self.change(c, "outside string literals", quote)
                else:
                    self.out.append(c)
                return i + 1
            self.out.append(c)
            i += 1
        return i


def normalize_code(code: str) -> tuple[str, list[str]]:
    """``code`` with the characters Python refuses outside literals and comments normalized:
    Unicode spaces become spaces, zero-width characters go, typographic quotes become straight
    ones; literals and comments are left as written.

    Returns ``(code, notes)``: one note per kind of change, e.g. ``"4 × U+00A0 NO-BREAK SPACE
    in the indentation replaced by a space (lines 3-6)"``; ``[]`` when nothing changed (then
    the code is returned as given). Never raises."""
    if code.isascii():
        return code, []
    scan = _Scan(code)
    text = scan.run()
    notes = []
    for (ch, what), lines in scan.changes.items():
        name = unicodedata.name(ch, "UNNAMED")
        if what == "removed":
            action = "removed"
        elif ch in CURLY_QUOTES:
            action = f"{what} replaced by {CURLY_QUOTES[ch]}"
        else:
            action = f"{what} replaced by a space"
        notes.append(f"{len(lines)} × U+{ord(ch):04X} {name} {action} ({_lines(lines)})")
    return text, notes


def _lines(lines: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``"lines 3-5, 9"`` (``"line 3"`` for one)."""
    runs: list[list[int]] = []
    for ln in sorted(set(lines)):
        if runs and ln == runs[-1][1] + 1:
            runs[-1][1] = ln
        else:
            runs.append([ln, ln])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:8])
    if len(runs) > 8:
        text += ", ..."
    word = "line" if len(runs) == 1 and runs[0][0] == runs[0][1] else "lines"
    return f"{word} {text}"

"""Markdown from user and kernel text: :func:`escape` and :func:`code`.

Every text that did not come from this server's own templates (messages of an evaluation, plan
titles and rules of the LLM or the memory, kernel and file names, paths, tolerances such as
``1e-05*max|ref| + 0.0001*|ref|``) goes into a hover or ``accelopt.showMemory`` through one
of these two, so that it reads in the editor exactly as it was written: no ``*`` or ``_``
turned into emphasis, no ``<tag>`` swallowed as HTML, no ``#`` or ``- `` starting a heading or
a list. CommonMark (and the ``marked`` renderer VS Code's hovers use) lets a backslash escape
any ASCII punctuation character, which is what :func:`escape` relies on.
"""

from __future__ import annotations

import re

__all__ = ["code", "escape"]

#: Characters that start inline markup anywhere in a line: emphasis (``*`` ``_``), code
#: (`````), links and images (``[`` ``]``), HTML and autolinks (``<`` ``>``), entities (``&``),
#: strikethrough (``~``), table cells (``|``) and the escape character itself.
_INLINE = re.compile(r"([\\`*_\[\]<>&~|])")
#: What starts a block at the beginning of a line (CommonMark 4.2-4.3, 5.1-5.2): a quote, a
#: heading (``#`` to ``######`` before a space or the end), a list item (``-``, ``+``, ``1.``,
#: ``1)`` before a space or the end), a setext underline or thematic break (a line of ``=`` or
#: ``-``). ``0.02 ms`` or ``-1e-3`` start no block and stay as written.
_BLOCK_START = re.compile(
    r"^(\s*)(>|#{1,6}(?=\s|$)|[-+](?=\s|$)|\d{1,9}[.)](?=\s|$)|=+(?=\s*$)|-+(?=\s*$))"
)


def escape(text: str, *, line_start: bool = False) -> str:
    """``text`` as Markdown that renders as exactly ``text`` (line breaks become soft breaks).
    ``line_start``: the text begins a line, so its first line must not open a block either
    (``1. x``, ``- x``); else only its later lines are guarded.

    Example: ``escape("1e-05*max|ref| + 0.0001*|ref|")`` ->
    ``1e-05\\*max\\|ref\\| + 0.0001\\*\\|ref\\|``; ``escape("add_gelu_kernel")`` ->
    ``add\\_gelu\\_kernel``.
    """
    lines = []
    for i, line in enumerate(_INLINE.sub(r"\\\1", text).split("\n")):
        match = _BLOCK_START.match(line) if i or line_start else None
        if match is not None:
            indent, marker = match.groups()
            # "1." -> "1\." ; "-" -> "\-": the marker no longer opens a block
            marker = f"{marker[:-1]}\\{marker[-1]}"
            line = indent + marker + line[match.end() :]
        lines.append(line)
    return "\n".join(lines)


def code(text: str) -> str:
    """``text`` as one Markdown code span, rendered verbatim in a monospace font.

    The fence is one backtick longer than the longest run of backticks inside, padded with a
    space when the text starts or ends with a backtick (CommonMark 6.1); line breaks become
    spaces (a code span is inline). Example: ``code("a`b")`` -> ``` ``a`b`` ```.
    """
    flat = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat.strip() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"

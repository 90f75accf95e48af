"""Code blocks of an executor or fixer reply, read as CommonMark (issue 53), and bare code: the
third form of :mod:`accelopt_core.proposers.parsing` (its module docstring has the rules), with
the helpers the parsers share (normalizing code with notes, parsing it, naming a syntax error).

- :func:`fenced_blocks`: the fenced code blocks of a reply (markdown-it-py), and whether one was
  left open at its end (the reply was cut off).
- :func:`code_from_blocks`: those blocks (or bare code: :func:`bare_code`) merged into the
  current source by top-level name (:mod:`~accelopt_core.proposers.merging`), or a failed
  :class:`~accelopt_core.proposers.base.Sample` saying why.
"""

from __future__ import annotations

import ast
import re

from markdown_it import MarkdownIt

from accelopt_core.proposers.base import Sample
from accelopt_core.proposers.code_chars import normalize_code
from accelopt_core.proposers.merging import defines_code, merge_code, unused_additions

FRAGMENT = "the reply's code defines no function or class (a fragment cannot be merged)"

#: A candidate's code and its parsed module.
Code = tuple[str, ast.Module]

_PY_LANGS = {"", "python", "py", "python3", "py3", "triton", "nki", "pycon", "ipython"}
#: Languages never read as Python code (diffs are read by the diff path).
_OTHER_LANGS = {"diff", "patch", "udiff", "json"}
#: CommonMark without raw HTML: a tag line (``<answer>``) is text, so a fence after it is a fence.
_MARKDOWN = MarkdownIt("commonmark", {"html": False})
FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.M)
_FENCE_CLOSE = re.compile(r"^[ \t>]*(`{3,}|~{3,})[ \t]*$")
_INFO_LANG = re.compile(r"^[{.\s]*([\w+#-]*)")
#: A line that starts a Python statement a module's code begins with.
_CODE_START = re.compile(r"^(import |from \S+ import |@|def |async def |class |[A-Za-z_]\w* = )")


def fenced_blocks(reply: str) -> tuple[list[tuple[str, str]], bool]:
    """The fenced code blocks of ``reply`` as CommonMark reads them (markdown-it-py), as
    ``(language, body)`` pairs in order, and whether a fence was left open at the end of the
    reply (the reply was cut off inside a block; that block is not returned).

    ``language`` is the first word of the info string, lower case (``""`` without one); ``body``
    has the indentation of its container (list item, block quote, indented fence) removed.
    An indented code block that holds fences (a reply indented as a whole) is read again
    without its indentation, and so is a reply whose only fence is indented 4 columns or more
    under a paragraph line (CommonMark reads it as the paragraph's text). A fence closed by the
    end of its list item or block quote is a block like any other."""
    text = reply.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    blocks: list[tuple[str, str]] = []
    cut_off = False
    for token in _MARKDOWN.parse(text):
        if token.type == "code_block" and FENCE_OPEN.match(token.content):
            inner, inner_cut = fenced_blocks(token.content)
            blocks += inner
            cut_off |= inner_cut
            continue
        if token.type != "fence" or token.map is None:
            continue
        start, end = token.map
        if not _closed(token.markup, lines, start, end):
            cut_off = True
            continue
        m = _INFO_LANG.match(token.info)
        blocks.append(((m.group(1) if m else "").lower(), token.content))
    if not blocks and not cut_off and (opener := FENCE_OPEN.search(text)):
        # a fence indented 4+ columns right after a paragraph line continues the paragraph
        # in CommonMark; read from that line on, without its indentation
        rest = text[opener.start() :].split("\n")
        indent = len(rest[0]) - len(rest[0].lstrip(" \t"))
        if indent >= 4:
            return fenced_blocks("\n".join(_dedent(line, indent) for line in rest))
    return blocks, cut_off


def _dedent(line: str, width: int) -> str:
    """``line`` without up to ``width`` leading spaces or tabs."""
    stripped = line.lstrip(" \t")
    return line[min(width, len(line) - len(stripped)) :]


def _closed(markup: str, lines: list[str], start: int, end: int) -> bool:
    """Whether the fence ``markup`` opened on line ``start`` (its token ends before ``end``) was
    closed: by its closing line, or by the end of its container before the end of the reply.
    CommonMark closes a fence left open at the end of the document; here that is a cut."""
    if end - start >= 2:
        m = _FENCE_CLOSE.match(lines[end - 1])
        if m and m.group(1)[0] == markup[0] and len(m.group(1)) >= len(markup):
            return True
    return any(line.strip() for line in lines[end:])


def _is_code(lang: str, body: str) -> bool:
    """A block to read as Python: any Python tag or none, or another language's tag on a body
    that parses and defines a function or class."""
    if not body.strip() or lang in _OTHER_LANGS:
        return False
    if lang in _PY_LANGS:
        return True
    tree = parse_module(normalize_code(body)[0])
    return isinstance(tree, ast.Module) and defines_code(tree)


def normalized_code(code: str, where: str, notes: list[str]) -> str:
    """``code`` normalized (:func:`normalize_code`), each change noted as ``where: change``."""
    code, changes = normalize_code(code)
    notes += [f"{where}: {change}" for change in changes]
    return code


def parse_module(code: str) -> ast.Module | SyntaxError:
    """The module's AST, or the SyntaxError that stops it (null bytes included)."""
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # null bytes
        return SyntaxError(str(exc))


def module_functions(tree: ast.Module) -> set[str]:
    """Names of the module-level functions (``def`` and ``async def``)."""
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def describe_syntax_error(exc: SyntaxError, what: str) -> str:
    where = f" line {exc.lineno}" if exc.lineno else ""
    return f"{what} has a syntax error{where}: {exc.msg}"


def code_from_blocks(
    answer: str,
    current_source: str,
    entry: str | None,
    notes: list[str],
    cut: str | None,
) -> Sample | Code | None:
    """Code blocks (or bare code) merged into ``current_source``: the new code and its tree, a
    failed Sample, or None (no code at all). ``cut``: why the reply may end early (a wrapper
    tag left open, the output token limit), which code with no end marker cannot rule out."""
    blocks, cut_off = fenced_blocks(answer)
    code = [
        normalized_code(body, f"code block {n}", notes)
        for n, (lang, body) in enumerate(blocks, 1)
        if _is_code(lang, body)
    ]
    if not code:
        if cut_off:
            return Sample(None, error="reply was cut off inside a code block (no closing fence)")
        bare = bare_code(answer, notes)
        if bare is None:
            return None
        if cut:
            return Sample(None, error=f"reply was cut off ({cut}): its code may be incomplete")
        code = [bare[0]]
    parsed = [(body, tree) for body in code if isinstance(tree := parse_module(body), ast.Module)]
    usable = [(body, tree) for body, tree in parsed if defines_code(tree)]
    if not usable:
        if parsed:
            return Sample(None, error=FRAGMENT)
        exc = parse_module(max(code, key=len))
        if not isinstance(exc, SyntaxError):
            exc = SyntaxError("invalid syntax")
        return Sample(None, error=describe_syntax_error(exc, "the code block"))
    current = parse_module(current_source)
    if not isinstance(current, ast.Module):  # nothing to merge into: the last block is it
        return usable[-1]
    try:
        merged = merge_code(current_source, current, usable, entry)
    except SyntaxError as exc:
        return Sample(None, error=describe_syntax_error(exc, "the merged source"))
    unused = unused_additions(merged)
    if unused:
        names = ", ".join(f"`{n}`" for n in unused)
        keep = f" (the launcher `{entry}` keeps its name)" if entry else ""
        return Sample(None, error=f"the reply only adds {names}, which nothing uses{keep}")
    return merged.source, merged.tree


def bare_code(reply: str, notes: list[str]) -> Code | None:
    """A reply that is nothing but Python (no fences), or holds it from its first line that
    starts a statement (``import``, ``def``, ``@``, ...) to a later line (prose before and
    after left out): accepted when that code, normalized, parses and defines a module-level
    function. The longest such code wins."""
    text = reply.strip("\n")
    if not text.strip():
        return None
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
    tries = [(0, len(lines))]  # the whole reply, then from its first statement on
    tries += [(start, end) for end in range(len(lines), start, -1) if lines[end - 1].strip()][:20]
    normalized: dict[int, tuple[list[str], list[str]]] = {}  # start -> (lines, changes)
    for first, end in tries:
        if first not in normalized:
            changes: list[str] = []
            code = normalized_code("\n".join(lines[first:]), "the code", changes)
            normalized[first] = (code.split("\n"), changes)
        code = "\n".join(normalized[first][0][: end - first])
        tree = parse_module(code)
        if isinstance(tree, ast.Module) and module_functions(tree):
            changes = []  # normalized again, alone: the notes name only the lines kept
            exact = normalized_code("\n".join(lines[first:end]), "the code", changes)
            if exact == code:
                notes += changes
            return code + "\n", tree
    return None

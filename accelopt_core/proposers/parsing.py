"""Pure functions that turn agent replies into plans, samples and rules (and tell when two plan
titles name the same plan: :func:`title_key`).

Nothing here calls a model or raises on a bad reply: a reply that holds no usable code becomes
``Sample(source=None, error=<why>)`` with a message the search shows to the user (and logs with
the candidate). The only exceptions are :func:`parse_plan_reply` / :func:`parse_rule_reply` on
an empty reply (ValueError), which the proposer turns into "fewer plans" / a fallback rule.

Executor and fixer replies come in two forms (see ``prompts/executor.txt``):

1. one fenced code block (```` ```python ````, ```` ```py ````, or an untagged fence) holding
   the complete module. With several blocks, the largest one that parses (and defines the
   launcher, when it is known) is taken; an unclosed fence means the reply was cut off.
2. SEARCH/REPLACE edit blocks (``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE``, the
   format of aider), applied in order to the current source. A SEARCH part must match a
   contiguous run of whole lines: exactly first (the first occurrence wins), then ignoring
   leading and trailing whitespace on every line, in which case the replacement is re-indented
   by the difference in indentation of the first line.
"""

from __future__ import annotations

import ast
import re

from accelopt_core.kernelfile import KernelFile, restore_harness
from accelopt_core.proposers.base import Plan, Rule, Sample

NO_CODE = "reply held no code"
NO_OP = "edit is a no-op"
TITLE_MAX = 80

#: A candidate's code and its parsed module.
_Code = tuple[str, ast.Module]

_PY_LANGS = {"", "python", "py", "python3", "py3", "triton", "nki"}
_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*$", re.M)
_EDIT_START = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH\b[^\n]*$", re.M)
_EDIT_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_EDIT_END = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE\b")
_TITLE_LINE = re.compile(r"^[\s>#*_-]*title[\s*_]*:[\s*_]*(.+)$", re.I)
_RULE_LINE = re.compile(r"^[\s>#*_-]*rule[\s*_]*:[\s*_]*(.*)$", re.I)
_SECTION_END = re.compile(
    r"^[\s>#*_-]*(slow|fast|original|optimized)[\w ]*(pattern|code|version)?[\s*_]*:", re.I
)


# -- code blocks -----------------------------------------------------------------------------
def fenced_blocks(reply: str) -> tuple[list[tuple[str, str]], bool]:
    """The fenced blocks of ``reply`` as ``(language, body)`` pairs, in order, and whether a
    fence was left open (the reply was cut off inside a block)."""
    blocks: list[tuple[str, str]] = []
    lines = reply.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        if j >= len(lines):
            return blocks, True
        blocks.append((lang, "\n".join(lines[i + 1 : j]) + "\n"))
        i = j + 1
    return blocks, False


def _parse(code: str) -> ast.Module | SyntaxError:
    """The module's AST, or the SyntaxError that stops it (null bytes included)."""
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # null bytes
        return SyntaxError(str(exc))


def _functions(tree: ast.Module) -> set[str]:
    """Names of the module-level functions (``def`` and ``async def``)."""
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def _describe(exc: SyntaxError, what: str) -> str:
    where = f" line {exc.lineno}" if exc.lineno else ""
    return f"{what} has a syntax error{where}: {exc.msg}"


def _code_from_blocks(reply: str, entry: str | None) -> Sample | _Code | None:
    """A full-module reply: the chosen code and its tree, a failed Sample, or None (no
    block)."""
    blocks, cut_off = fenced_blocks(reply)
    code = [body for lang, body in blocks if lang in _PY_LANGS and body.strip()]
    if not code:
        if cut_off:
            return Sample(None, error="reply was cut off inside a code block (no closing fence)")
        return None
    parsed: list[tuple[bool, int, str, ast.Module]] = []
    for body in code:
        tree = _parse(body)
        if isinstance(tree, ast.Module):
            parsed.append((bool(entry) and entry in _functions(tree), len(body), body, tree))
    if parsed:
        _, _, body, tree = max(parsed, key=lambda p: p[:3])
        return body, tree
    exc = _parse(max(code, key=len))
    if not isinstance(exc, SyntaxError):
        exc = SyntaxError("invalid syntax")
    return Sample(None, error=_describe(exc, "the code block"))


# -- SEARCH/REPLACE --------------------------------------------------------------------------
def edit_blocks(reply: str) -> tuple[list[tuple[list[str], list[str]]], str | None]:
    """The SEARCH/REPLACE blocks of ``reply`` as (search lines, replace lines), and an error
    when a block is incomplete (no ``=======`` or no ``>>>>>>> REPLACE``)."""
    lines = reply.splitlines()
    blocks: list[tuple[list[str], list[str]]] = []
    i = 0
    while i < len(lines):
        if not _EDIT_START.match(lines[i]):
            i += 1
            continue
        n = len(blocks) + 1
        j = i + 1
        while j < len(lines) and not _EDIT_DIVIDER.match(lines[j]):
            if _EDIT_START.match(lines[j]) or _EDIT_END.match(lines[j]):
                break
            j += 1
        if j >= len(lines) or not _EDIT_DIVIDER.match(lines[j]):
            return blocks, f"SEARCH/REPLACE block {n} is incomplete: no ======= divider"
        k = j + 1
        while k < len(lines) and not _EDIT_END.match(lines[k]):
            if _EDIT_START.match(lines[k]):
                break
            k += 1
        if k >= len(lines) or not _EDIT_END.match(lines[k]):
            return blocks, f"SEARCH/REPLACE block {n} is incomplete: no >>>>>>> REPLACE line"
        blocks.append((lines[i + 1 : j], lines[j + 1 : k]))
        i = k + 1
    return blocks, None


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _find(src: list[str], search: list[str], key) -> int:
    n = len(search)
    want = [key(s) for s in search]
    for i in range(len(src) - n + 1):
        if [key(s) for s in src[i : i + n]] == want:
            return i
    return -1


def _reindent(replace: list[str], search_first: str, source_first: str) -> list[str]:
    have, want = _indent(search_first), _indent(source_first)
    if have == want:
        return replace
    if want.startswith(have):  # the source is indented deeper: add the difference
        extra = want[len(have) :]
        return [extra + line if line.strip() else line for line in replace]
    if have.startswith(want):  # the SEARCH text was indented deeper: remove the difference
        extra = have[len(want) :]
        return [line[len(extra) :] if line.startswith(extra) else line for line in replace]
    return replace


def apply_edits(
    source: str, blocks: list[tuple[list[str], list[str]]]
) -> tuple[str | None, str | None]:
    """Apply SEARCH/REPLACE blocks in order. Returns (new source, None) or (None, error naming
    the block and the first line of its SEARCH text)."""
    src = source.splitlines()
    trailing_newline = source.endswith("\n")
    for n, (search_raw, replace_raw) in enumerate(blocks, 1):
        search = _trim_blank(search_raw)
        replace = _trim_blank(replace_raw)
        if not search:
            return None, f"SEARCH/REPLACE block {n} has an empty SEARCH part"
        at = _find(src, search, lambda s: s)
        if at >= 0:
            src[at : at + len(search)] = replace
            continue
        at = _find(src, search, str.strip)
        if at >= 0:
            src[at : at + len(search)] = _reindent(replace, search[0], src[at])
            continue
        first = search[0].strip()
        return None, (
            f"SEARCH/REPLACE block {n} does not apply: its SEARCH text starting "
            f"{first!r} is not in the current source"
        )
    return "\n".join(src) + ("\n" if trailing_newline or not src else ""), None


# -- the reply parsers -----------------------------------------------------------------------
def parse_code_reply(
    reply: str,
    current_source: str,
    *,
    original: KernelFile | None = None,
    entry: str | None = None,
) -> Sample:
    """Turn an executor/fixer reply into a candidate module.

    Args:
        reply: the model's answer (full module in a fenced block, or SEARCH/REPLACE blocks;
            raw code without fences is accepted when it parses and defines a function).
        current_source: the source the edit blocks apply to (the parent or failing candidate).
        original: the user's parsed file; when given, its harness is restored into the
            result with :func:`accelopt_core.kernelfile.restore_harness`.
        entry: the launcher name the result must define (module-level ``def``), if known.

    Returns:
        ``Sample(source, tree=<source parsed>)`` with the complete module (the tree is what
        the search's id and the gate read: the candidate is parsed once, here), or
        ``Sample(None, error)`` where error is
        one of: "reply held no code", "edit is a no-op", "... has a syntax error line N: ...",
        "SEARCH/REPLACE block N does not apply: its SEARCH text starting '...' ...",
        "reply was cut off ...", "the code defines no launcher `name`". Never raises.
    """
    reply = reply or ""
    if _EDIT_START.search(reply):
        found = _code_from_edits(reply, current_source)
    else:
        found = _code_from_blocks(reply, entry)
        if found is None:
            found = _bare_code(reply)
    if found is None:
        return Sample(None, error=NO_CODE)
    if isinstance(found, Sample):
        return found
    return _candidate(*found, current_source, original, entry)


def _code_from_edits(reply: str, current_source: str) -> _Code | Sample:
    """An edit reply: ``current_source`` with its SEARCH/REPLACE blocks applied, or a failed
    Sample (incomplete or non-matching block, no-op, syntax error)."""
    blocks, problem = edit_blocks(reply)
    if problem:
        return Sample(None, error=problem)
    source, problem = apply_edits(current_source, blocks)
    if source is None:
        return Sample(None, error=problem)
    if source == current_source:
        return Sample(None, error=NO_OP)
    tree = _parse(source)
    if isinstance(tree, SyntaxError):
        return Sample(None, error=_describe(tree, "the edited source"))
    return source, tree


def _candidate(
    source: str,
    tree: ast.Module,
    current_source: str,
    original: KernelFile | None,
    entry: str | None,
) -> Sample:
    """The reply's code (``source``, parsed as ``tree``) as a candidate: the original harness
    restored, the launcher ``entry`` defined, and different from ``current_source``; else a
    failed Sample saying why. The Sample carries the candidate's tree: the reply's own when the
    harness was already verbatim, else the restored module's (parsed once here)."""
    if original is not None:
        try:
            restored = restore_harness(source, original, tree=tree)
        except ValueError as exc:
            return Sample(None, error=f"cannot restore the harness: {exc}")
        if restored != source:
            parsed = _parse(restored)
            if isinstance(parsed, SyntaxError):  # restore_harness should have caught it
                return Sample(None, error=f"the candidate does not parse: {parsed}")
            source, tree = restored, parsed
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    if entry and entry not in _functions(tree) | classes:  # a class: ModelNew, Fn (.apply)
        return Sample(None, error=f"the code defines no launcher `{entry}`")
    if source.strip() == current_source.strip():
        return Sample(None, error=NO_OP)
    return Sample(source, tree=tree)


def _bare_code(reply: str) -> _Code | None:
    """A reply that is nothing but Python (no fences): accepted when it parses and defines a
    module-level function."""
    text = reply.strip("\n")
    if not text.strip():
        return None
    tree = _parse(text)
    if isinstance(tree, ast.Module) and _functions(tree):
        return text + "\n", tree
    return None


# -- titles and rules ------------------------------------------------------------------------
def title_key(title: str) -> str:
    """What makes two titles the same plan: lower case, punctuation and markdown marks
    dropped, whitespace collapsed (``"**Fuse** the loads!"`` -> ``"fuse the loads"``)."""
    return " ".join(re.sub(r"[^\w]+", " ", title.lower()).split())


def _clean_title(line: str) -> str:
    line = line.strip()
    line = re.sub(r"^(#+|>|[-*+]\s|\d+[.)]\s)\s*", "", line).strip()
    line = line.strip("*_` ").strip()
    m = _TITLE_LINE.match(line)
    if m:
        line = m.group(1).strip().strip("*_` ").strip()
    line = " ".join(line.split())
    if len(line) > TITLE_MAX:
        cut = line[: TITLE_MAX - 3].rsplit(" ", 1)[0]
        line = (cut or line[: TITLE_MAX - 3]).rstrip(" ,;:-") + "..."
    return line


def _title(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        m = _TITLE_LINE.match(ln)
        if m and m.group(1).strip(" *_`"):
            return _clean_title(m.group(1))
    for ln in lines:
        if _FENCE_OPEN.match(ln):
            continue
        title = _clean_title(ln)
        if title:
            return title
    return ""


def parse_plan_reply(text: str) -> Plan:
    """A planner reply as a :class:`Plan`: ``title`` from the ``Title:`` line, else the first
    non-empty line (markdown marks removed, at most 80 characters); ``text`` the whole reply,
    stripped. Raises ValueError on an empty reply."""
    body = (text or "").strip()
    title = _title(body)
    if not body or not title:
        raise ValueError("the planner's reply was empty")
    return Plan(title=title, text=body)


def parse_rule_reply(text: str) -> Rule:
    """A summarizer reply as a :class:`Rule`: ``title`` as for plans; ``rule`` the text of the
    ``Rule:`` section (up to the slow/fast patterns), else everything after the title line;
    the slow/fast patterns themselves are not part of the rule. Raises ValueError on an empty
    reply."""
    body = (text or "").strip()
    title = _title(body)
    if not body or not title:
        raise ValueError("the summarizer's reply was empty")
    return Rule(title=title, rule=_rule_text(body.splitlines()) or title)


def _rule_text(lines: list[str]) -> str:
    """The ``Rule:`` section of a summarizer reply (else what follows the first non-empty
    line), up to the slow/fast patterns or a code fence; '' when there is none."""
    rule_lines: list[str] = []
    start = next((i for i, ln in enumerate(lines) if _RULE_LINE.match(ln)), None)
    if start is not None:
        m = _RULE_LINE.match(lines[start])
        assert m is not None
        rule_lines.append(m.group(1))
    else:
        start = next(i for i, ln in enumerate(lines) if ln.strip())
    for ln in lines[start + 1 :]:
        if _SECTION_END.match(ln) or _FENCE_OPEN.match(ln):
            break
        rule_lines.append(ln)
    return "\n".join(rule_lines).strip().strip("*").strip()

"""Pure functions that turn agent replies into plans, samples and rules (and tell when two plan
titles name the same plan: :func:`title_key`).

Nothing here calls a model or raises on a bad reply: a reply that holds no usable code becomes
``Sample(source=None, error=<why>)`` with a message the search shows to the user (and logs with
the candidate). The only exceptions are :func:`parse_plan_reply` / :func:`parse_rule_reply` on
an empty reply (ValueError), which the proposer turns into "fewer plans" / a fallback rule.

Executor and fixer replies, after the model's reasoning is taken off
(:func:`~accelopt_core.proposers.replies.strip_reasoning`), CRLF and CR line ends are read as LF,
a structured-output reply (a JSON object) is replaced by the code of its string fields
(:func:`~accelopt_core.proposers.replies.json_answer`) and wrapper tags (``<answer>``,
``<code>``, ``<solution>``, ``<file>``) are taken off
(:func:`~accelopt_core.proposers.replies.unwrap_tags`), come in these forms (see
``prompts/executor.txt``):

1. SEARCH/REPLACE edit blocks (``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE``, the
   format of aider), applied in order to the current source. A SEARCH part must match a
   contiguous run of whole lines: exactly first (the first occurrence wins), then ignoring
   leading and trailing whitespace on every line, in which case the replacement is re-indented
   by the difference in indentation of the first line.
2. unified diffs (```` ```diff ```` blocks or a bare diff), read with unidiff, each hunk applied
   like a SEARCH/REPLACE block (:mod:`~accelopt_core.proposers.replies`).
3. code blocks as CommonMark defines them, read with markdown-it-py (issue 53,
   :mod:`~accelopt_core.proposers.codeblocks`): fences of backticks or tildes, at the top level or
   nested in list items and block quotes (their indentation removed as CommonMark removes it), with
   any info string (``python``, ``py``, ``triton``, none, ...; a block tagged with another language
   counts when it parses and defines a function or class); or bare code (the reply, or its lines
   from the first that starts a statement, parses as Python and defines a function). The complete
   module, or only what changed (the launcher, the kernel, both in two blocks, a new helper), merged
   into the current source by top-level name (:mod:`~accelopt_core.proposers.merging`). Blocks with
   a syntax error are skipped when another block is usable; blocks that define no function or class
   (snippets, usage) are never merged; a fence still open at the end of the reply means the reply
   was cut off (CommonMark would close it there: the parser looks for its closing line itself).

The code of every form is normalized before it is parsed
(:func:`~accelopt_core.proposers.code_chars.normalize_code`: Unicode spaces, zero-width
characters and typographic quotes outside string literals); each change is a note on the Sample
(:attr:`~accelopt_core.proposers.base.Sample.notes`), which the agents copy into the run's
transcript.
"""

from __future__ import annotations

import ast
import difflib
import re

from accelopt_core.kernelfile import KernelFile, restore_harness
from accelopt_core.proposers.base import Plan, Rule, Sample
from accelopt_core.proposers.code_chars import normalize_line_ends
from accelopt_core.proposers.codeblocks import (
    FENCE_OPEN,
    Code,
    code_from_blocks,
    describe_syntax_error,
    fenced_blocks,
    module_functions,
    normalized_code,
    parse_module,
)
from accelopt_core.proposers.replies import (
    Edit,
    diff_edits,
    diff_texts,
    json_answer,
    strip_reasoning,
    unwrap_tags,
)

NO_CODE = "reply held no code"
NO_OP = "edit is a no-op"
TITLE_MAX = 80

_EDIT_START = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH\b[^\n]*$", re.M)
_EDIT_DIVIDER = re.compile(r"^[ \t]*={5,9}[ \t]*$")
_EDIT_END = re.compile(r"^[ \t]*>{5,9}[ \t]*REPLACE\b")
_TITLE_LINE = re.compile(r"^[\s>#*_-]*title[\s*_]*:[\s*_]*(.+)$", re.I)
_RULE_LINE = re.compile(r"^[\s>#*_-]*rule[\s*_]*:[\s*_]*(.*)$", re.I)
_SECTION_END = re.compile(
    r"^[\s>#*_-]*(slow|fast|original|optimized)[\w ]*(pattern|code|version)?[\s*_]*:", re.I
)


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


def _find(src: list[str], search: list[str], key, near: int | None = None) -> int:
    """Where ``search`` matches a run of ``src`` (compared by ``key``): the first match, or
    with ``near`` (a 0-based line) the match closest to it; -1 when none."""
    n = len(search)
    want, keys = [key(s) for s in search], [key(s) for s in src]
    found = [i for i in range(len(src) - n + 1) if keys[i : i + n] == want]
    if not found:
        return -1
    return found[0] if near is None else min(found, key=lambda i: (abs(i - near), i))


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


def _keep_unchanged(replace: list[str], search: list[str], found: list[str]) -> list[str]:
    """``replace`` with each line the edit left unchanged (equal to its SEARCH line but for
    surrounding whitespace) taken verbatim from the source lines ``found``."""
    matcher = difflib.SequenceMatcher(
        None, [s.strip() for s in search], [r.strip() for r in replace], autojunk=False
    )
    out = list(replace)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.b + k] = found[block.a + k]
    return out


def apply_edits(
    source: str,
    blocks: list[tuple[list[str], list[str]]] | list[Edit],
    what: str = "SEARCH/REPLACE block",
) -> tuple[str | None, str | None]:
    """Apply edits in order: SEARCH/REPLACE blocks ``(search lines, replace lines)``, or diff
    hunks ``(old lines, new lines, 1-based old-file line or None)`` whose line picks the
    closest match when the lines occur more than once (shifted by the earlier hunks' growth).
    Returns (new source, None) or (None, error naming the edit (``what`` N) and the first
    line of its text)."""
    src = source.splitlines()
    trailing_newline = source.endswith("\n")
    shift = 0
    for n, edit in enumerate(blocks, 1):
        search, replace = _trim_blank(edit[0]), _trim_blank(edit[1])
        hint = edit[2] if len(edit) > 2 else None  # type: ignore[misc]
        near = hint - 1 + shift if isinstance(hint, int) else None
        if not search:
            return None, f"{what} {n} has an empty SEARCH part"
        at = _find(src, search, lambda s: s, near)
        if at < 0:
            at = _find(src, search, str.strip, near)
            if at >= 0:
                found = src[at : at + len(search)]
                replace = _keep_unchanged(_reindent(replace, search[0], src[at]), search, found)
        if at < 0:
            first = search[0].strip()
            return None, (
                f"{what} {n} does not apply: its {'SEARCH text' if near is None else 'lines'} "
                f"starting {first!r} {'is' if near is None else 'are'} not in the current source"
            )
        src[at : at + len(search)] = replace
        shift += len(replace) - len(search)
    return "\n".join(src) + ("\n" if trailing_newline or not src else ""), None


# -- the reply parsers -----------------------------------------------------------------------
def parse_code_reply(
    reply: str,
    current_source: str,
    *,
    original: KernelFile | None = None,
    entry: str | None = None,
    cut: bool = False,
) -> Sample:
    """Turn an executor/fixer reply into a candidate module.

    Args:
        reply: the model's answer in any form of the module docstring (reasoning in
            ``<think>`` tags is taken off first; raw code without fences is accepted when it
            parses and defines a function).
        current_source: the source the edit blocks apply to (the parent or failing candidate).
        original: the user's parsed file; when given, its harness is restored into the
            result with :func:`accelopt_core.kernelfile.restore_harness`.
        entry: the launcher name the result must define (module-level ``def``), if known.
        cut: the reply stopped at the output token limit (``finish_reason: "length"``): code
            with no end marker (bare code) is then refused, since it may be incomplete.

    Returns:
        ``Sample(source, tree=<source parsed>, notes=[...])`` with the complete module (the
        tree is what the search's id and the gate read: the candidate is parsed once, here;
        the notes say what was normalized), or ``Sample(None, error, notes=[...])`` where
        error is one of: "reply held no code", "edit is a no-op", "... has a syntax error line
        N: ...", "SEARCH/REPLACE block N does not apply: its SEARCH text starting '...' ...",
        "diff hunk N does not apply ...", "the diff cannot be read: ...", "reply was cut off
        ...", "the reply ended inside the model's reasoning ...", "the reply is a JSON object
        with no code in its fields", :data:`~accelopt_core.proposers.codeblocks.FRAGMENT`,
        "the reply only adds `name`, which nothing uses", "the code defines no launcher
        `name`". Never raises.
    """
    answer, problem = strip_reasoning(reply or "")
    if problem:
        return Sample(None, error=problem)
    answer, notes = normalize_line_ends(answer)
    structured, problem = json_answer(answer)
    if problem:
        return Sample(None, error=problem, notes=notes)
    if structured is not None:
        answer = structured
        notes.append("the reply is a JSON object: its code fields were read")
    answer, open_tag = unwrap_tags(answer)
    why_cut = f"<{open_tag}> is never closed" if open_tag else None
    if cut:
        why_cut = "at the output token limit"
    found = _code_from_answer(answer, current_source, entry, notes, why_cut)
    if found is None:
        found = Sample(None, error=NO_CODE)
    if not isinstance(found, Sample):
        found = _candidate(*found, current_source, original, entry)
    found.notes = notes + found.notes
    return found


def _code_from_answer(
    answer: str, current_source: str, entry: str | None, notes: list[str], cut: str | None
) -> Code | Sample | None:
    """The code of an answer in the form it has (edits, diffs, blocks): see
    :func:`parse_code_reply`."""
    if _EDIT_START.search(answer):
        return _code_from_edits(answer, current_source, notes)
    if diffs := diff_texts(fenced_blocks(answer)[0], answer):
        return _code_from_diffs(diffs, current_source, notes)
    return code_from_blocks(answer, current_source, entry, notes, cut)


def _code_from_edits(reply: str, current_source: str, notes: list[str]) -> Code | Sample:
    """An edit reply: ``current_source`` with its SEARCH/REPLACE blocks applied, or a failed
    Sample (incomplete or non-matching block, no-op, syntax error)."""
    blocks, problem = edit_blocks(reply)
    if problem:
        return Sample(None, error=problem)
    edits = _normalized_edits(blocks, "SEARCH/REPLACE block", notes)
    return _edited(current_source, *apply_edits(current_source, edits))


def _code_from_diffs(diffs: list[str], current_source: str, notes: list[str]) -> Code | Sample:
    """A diff reply: ``current_source`` with the hunks of every diff applied in order, or a
    failed Sample (unreadable diff, hunk that does not apply, no-op, syntax error)."""
    edits: list[Edit] = []
    for diff in diffs:
        found, problem = diff_edits(diff)
        if problem:
            return Sample(None, error=problem)
        edits += found
    edits = _normalized_edits(edits, "diff hunk", notes)
    return _edited(current_source, *apply_edits(current_source, edits, "diff hunk"))


def _normalized_edits(
    edits: list[tuple[list[str], list[str]]] | list[Edit], what: str, notes: list[str]
) -> list[Edit]:
    """Each edit's lines to find and lines that replace them normalized
    (:func:`~accelopt_core.proposers.code_chars.normalize_code`), each change noted with the
    edit's number."""
    out: list[Edit] = []
    for n, edit in enumerate(edits, 1):
        search, replace = edit[0], edit[1]
        hint = edit[2] if len(edit) > 2 else None  # type: ignore[misc]
        search = normalized_code("\n".join(search), f"{what} {n} (SEARCH)", notes).split("\n")
        replace = normalized_code("\n".join(replace), f"{what} {n}", notes).split("\n")
        out.append((search, replace, hint))
    return out


def _edited(current_source: str, source: str | None, problem: str | None) -> Code | Sample:
    """The result of applying edits to ``current_source`` as code and tree, or a failed Sample
    (``problem``, no-op, syntax error)."""
    if source is None:
        return Sample(None, error=problem)
    if source == current_source:
        return Sample(None, error=NO_OP)
    tree = parse_module(source)
    if isinstance(tree, SyntaxError):
        return Sample(None, error=describe_syntax_error(tree, "the edited source"))
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
            parsed = parse_module(restored)
            if isinstance(parsed, SyntaxError):  # restore_harness should have caught it
                return Sample(None, error=f"the candidate does not parse: {parsed}")
            source, tree = restored, parsed
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    if entry and entry not in module_functions(tree) | classes:  # a class: ModelNew, Fn (.apply)
        return Sample(None, error=f"the code defines no launcher `{entry}`")
    if source.strip() == current_source.strip():
        return Sample(None, error=NO_OP)
    return Sample(source, tree=tree)


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
        if FENCE_OPEN.match(ln):
            continue
        title = _clean_title(ln)
        if title:
            return title
    return ""


def _answer(text: str) -> str:
    """``text`` without its reasoning, stripped; ValueError when it held nothing else."""
    answer, problem = strip_reasoning(text or "")
    if problem:
        raise ValueError(problem)
    return answer.strip()


def parse_plan_reply(text: str) -> Plan:
    """A planner reply as a :class:`Plan`: ``title`` from the ``Title:`` line, else the first
    non-empty line (markdown marks removed, at most 80 characters); ``text`` the whole reply,
    stripped, its reasoning taken off. Raises ValueError on an empty reply (or one that is all
    reasoning)."""
    body = _answer(text)
    title = _title(body)
    if not body or not title:
        raise ValueError("the planner's reply was empty")
    return Plan(title=title, text=body)


def parse_rule_reply(text: str) -> Rule:
    """A summarizer reply as a :class:`Rule`: ``title`` as for plans; ``rule`` the text of the
    ``Rule:`` section (up to the slow/fast patterns), else everything after the title line;
    the slow/fast patterns themselves are not part of the rule. Its reasoning is taken off first.
    Raises ValueError on an empty reply (or one that is all reasoning)."""
    body = _answer(text)
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
        if _SECTION_END.match(ln) or FENCE_OPEN.match(ln):
            break
        rule_lines.append(ln)
    return "\n".join(rule_lines).strip().strip("*").strip()

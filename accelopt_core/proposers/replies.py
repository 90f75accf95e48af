"""What a model wraps around its answer, taken off before the answer is parsed: reasoning
(:func:`strip_reasoning`), structured output (:func:`json_answer`), XML-like tags
(:func:`unwrap_tags`) and unified diffs (:func:`diff_texts`, :func:`diff_edits`).

Reasoning. Local servers (vLLM, llama.cpp, Ollama) started without a reasoning parser leave a
reasoning model's thoughts in the message ``content``: ``<think>...</think>`` before the answer,
or only the closing ``</think>`` when the chat template opened the tag in the prompt. Code
fences inside the reasoning are drafts, never the answer. ``<thinking>`` and ``<reasoning>``
tags are treated alike, and so is the Harmony format's final channel (``<|channel|>final
<|message|>``, gpt-oss on servers that do not split it). A ``reasoning_content`` field is never
read (:mod:`accelopt_core.proposers.llm`).

Structured output (issue 53). A reply that is a JSON object (bare, or the only thing in a
```` ```json ```` block), as endpoints asked for a response format send it, holds its code in
string fields: each field that holds a code block, an edit or a diff is taken as written, each one
that parses as Python and defines a function or class becomes a code block, and so does any
multi-line field named like code (``code``, ``source``, ``kernel``, ...) so that its syntax error
is reported; prose fields (``explanation``) are left out. An object that stops in the middle is a
reply cut off.

Tags (issue 53). ``<answer>``, ``<solution>``, ``<code>``, ``<file ...>`` (and ``<final_answer>``,
``<python>``, ``<source>``) around the answer or its code are taken off, innermost first: content
holding a fence, an edit or a diff is kept as Markdown; content of several lines that parses as
Python, or any multi-line content of a code tag (``<code>``, ``<file>``, ``<python>``,
``<source>``), becomes a fenced block; one-line content (``<code>tl.sum</code>`` in prose) stays
as it is. HTML entities in a code tag's content are decoded when the decoded code parses and the
raw one does not.

Unified diffs (```` ```diff ```` / ```` ```patch ```` blocks, or a bare diff) are parsed with
`unidiff <https://pypi.org/project/unidiff/>`_, after their hunk headers are recounted: models
write ``@@ ... @@`` without numbers and miscount the lines, and unidiff refuses a hunk that
contradicts its header rather than guessing. A blank line inside a hunk is a blank context line
and a line without a prefix is context (models drop the leading space). Each hunk then becomes
one SEARCH/REPLACE edit (its context and removed lines -> its context and added lines), applied
by :func:`accelopt_core.proposers.parsing.apply_edits` with the same whitespace tolerance; the
header's old-file line number only breaks ties between several places the lines match.
"""

from __future__ import annotations

import ast
import html
import json
import re
from typing import Any

import unidiff

from accelopt_core.proposers.merging import defines_code

#: An edit: (lines to find, lines that replace them, 1-based line hint or None).
Edit = tuple[list[str], list[str], int | None]

_REASONING_BLOCK = re.compile(
    r"<(think|thinking|reasoning)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL
)
_REASONING_CLOSE = re.compile(r"</(think|thinking|reasoning)\s*>", re.IGNORECASE)
_REASONING_OPEN = re.compile(r"<(think|thinking|reasoning)\b[^>]*>", re.IGNORECASE)
_HARMONY_FINAL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>", re.IGNORECASE)
_HARMONY_END = re.compile(r"<\|(end|return|call)\|>")

_HUNK = re.compile(r"^@@(?:\s*-(\d+)(?:,\d+)?\s+\+(\d+)(?:,\d+)?)?[^@]*@@.*$|^@@\s*$")
_FILE_OLD = re.compile(r"^--- (?!-)")
_FILE_NEW = re.compile(r"^\+\+\+ ")
_DIFF_LANGS = {"diff", "patch", "udiff"}

_CODE_TAGS = ("code", "file", "python", "source")
_WRAPPER_TAGS = ("answer", "solution", "final_answer", *_CODE_TAGS)
_TAG_NAMES = "|".join(_WRAPPER_TAGS)
#: A wrapper element with no other wrapper's opening tag inside (innermost first).
_WRAPPER = re.compile(
    rf"<({_TAG_NAMES})\b[^<>\n]*>((?:(?!<(?:{_TAG_NAMES})\b[^<>\n]*>).)*?)</\1\s*>",
    re.IGNORECASE | re.DOTALL,
)
_WRAPPER_OPEN = re.compile(rf"<({_TAG_NAMES})\b[^<>\n]*>", re.IGNORECASE)
_WRAPPER_CLOSE = re.compile(rf"</({_TAG_NAMES})\s*>", re.IGNORECASE)
_MARKDOWN_CODE = re.compile(r"^[ \t>]*(`{3,}|~{3,})|^[ \t]*<{5,9}[ \t]*SEARCH\b", re.M)
_JSON_FENCE = re.compile(r"^(`{3,}|~{3,})[ \t]*(json)?[ \t]*\n(.*)\n\1[ \t]*$", re.I | re.S)
#: The start of a JSON object: a brace, then a quoted key and its colon.
_JSON_START = re.compile(r'^\{\s*"[^"\n]*"\s*:')
#: JSON fields whose multi-line text is code even when it does not parse.
_CODE_FIELDS = frozenset(
    ("code", "source", "source_code", "kernel", "module", "python", "file", "content",
     "implementation", "solution", "answer", "launcher", "patch", "diff", "edit", "edits")
)  # fmt: skip


# -- reasoning -------------------------------------------------------------------------------
def strip_reasoning(reply: str) -> tuple[str, str | None]:
    """``reply`` without the model's reasoning, and an error when nothing but reasoning is
    there.

    Closed ``<think>...</think>`` blocks are removed wherever they are; then everything up to
    the last lone closing tag (the template opened it) goes; with a Harmony final channel,
    only its message is kept. Returns ``(answer, None)``, or ``("", reason)`` when a tag
    opened and never closed (the reply ended inside the reasoning). Never raises."""
    text = reply or ""
    final = list(_HARMONY_FINAL.finditer(text))
    if final:
        text = _HARMONY_END.split(text[final[-1].end() :], maxsplit=1)[0]
    text = _REASONING_BLOCK.sub("", text)
    closes = list(_REASONING_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _REASONING_OPEN.search(text)
    if opened:
        tag = opened.group(1).lower()
        return "", (
            f"the reply ended inside the model's reasoning (<{tag}> without </{tag}>): "
            "it held no answer"
        )
    return text, None


# -- structured output and tags -------------------------------------------------------------
def _holds_markdown_code(text: str) -> bool:
    """True when ``text`` holds a fence line, a SEARCH/REPLACE block or a unified diff."""
    return bool(_MARKDOWN_CODE.search(text)) or looks_like_diff(text)


def _python_code(text: str) -> bool:
    """True when ``text`` parses as Python and defines a top-level function or class."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return defines_code(tree)


def as_fence(code: str) -> str:
    """``code`` as a fenced Python block (a fence longer than any backtick run inside it)."""
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"\n{fence}python\n{code.strip(chr(10))}\n{fence}\n"


def json_answer(answer: str) -> tuple[str | None, str | None]:
    """The code of a structured-output reply: ``(markdown, None)`` when ``answer`` is a JSON
    object or array (bare, or alone in a ```` ```json ```` block) holding code in string fields
    (see the module docstring; the fields in document order), ``(None, None)`` when it is not
    JSON, ``(None, why)`` when it is JSON that stops in the middle (a reply cut off) or holds no
    code. Never raises."""
    text = answer.strip()
    fenced = _JSON_FENCE.match(text)
    if fenced and fenced.group(3).lstrip()[:1] in ("{", "["):
        text = fenced.group(3).strip()
    if text[:1] not in ("{", "["):
        return None, None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if _JSON_START.match(text) and not text.endswith("}"):
            return None, f"reply was cut off inside a JSON object ({exc.msg})"
        return None, None
    parts = [part for key, value in _strings(data) if (part := _json_part(key, value))]
    if not parts:
        return None, "the reply is a JSON object with no code in its fields"
    return "\n".join(parts), None


def _strings(data: Any, key: str = "") -> list[tuple[str, str]]:
    """Every string of a JSON value with the name of the field that holds it, in order."""
    if isinstance(data, str):
        return [(key, data)]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in _strings(v, str(k))]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v, key)]
    return []


def _json_part(key: str, value: str) -> str | None:
    """A JSON string field as Markdown: as written, as a fenced block, or None (prose)."""
    if _holds_markdown_code(value):
        return "\n" + value + "\n"
    if _python_code(value) or (key.lower() in _CODE_FIELDS and "\n" in value.strip()):
        return as_fence(value)
    return None


def unwrap_tags(answer: str) -> tuple[str, str | None]:
    """``answer`` with its wrapper tags taken off (see the module docstring), and the name of a
    wrapper opened and never closed (the reply was cut inside it), else None; the content of
    such a wrapper is left as written (its tag removed). Never raises."""
    text = answer
    for _ in range(8):  # innermost first; nesting deeper than this is not a model's answer
        new = _WRAPPER.sub(_unwrapped, text)
        if new == text:
            break
        text = new
    opened = _WRAPPER_OPEN.search(text)
    if opened is None:
        return _WRAPPER_CLOSE.sub("\n", text), None
    rest = _WRAPPER_CLOSE.sub("\n", text[opened.end() :])
    return text[: opened.start()] + "\n" + rest, opened.group(1).lower()


def _unwrapped(match: re.Match[str]) -> str:
    return _unwrapped_content(match.group(1).lower(), match.group(2))


def _unwrapped_content(tag: str, inner: str) -> str:
    """The content of a ``<tag>`` element as Markdown (see the module docstring)."""
    if _holds_markdown_code(inner):
        return "\n" + inner + "\n"
    if "\n" not in inner.strip():
        return inner
    code = inner
    if tag in _CODE_TAGS and re.search(r"&(lt|gt|amp|quot|#\d+);", inner):
        decoded = html.unescape(inner)
        if _python_code(decoded):  # ``a &lt; b`` parses too (``a & lt; b``): never meant
            code = decoded
    if tag in _CODE_TAGS or _python_code(code):
        return as_fence(code)
    return "\n" + inner + "\n"


# -- unified diffs ---------------------------------------------------------------------------
def looks_like_diff(text: str) -> bool:
    """True when ``text`` holds a hunk header (``@@ -a,b +c,d @@`` or ``@@ ... @@``) followed by
    a removed or added line: no Python line starts with ``@@``."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if _HUNK.match(line):
            return any(ln[:1] in "+-" and ln.strip() not in "+-" for ln in lines[i + 1 :])
    return False


def diff_texts(blocks: list[tuple[str, str]], reply: str) -> list[str]:
    """The unified diffs of a reply: every fenced block tagged ``diff``/``patch``/``udiff``, or
    untagged / python-tagged holding a diff (``blocks``: :func:`~.parsing.fenced_blocks`'s
    ``(language, body)`` pairs); else the bare reply when it is a diff; else ``[]``."""
    found = [
        body
        for lang, body in blocks
        if lang in _DIFF_LANGS or (lang in ("", "python", "py") and looks_like_diff(body))
    ]
    if found:
        return found
    if not blocks and looks_like_diff(reply):
        return [reply]
    return []


def diff_edits(diff: str) -> tuple[list[Edit], str | None]:
    """The hunks of ``diff`` as edits ``(search lines, replace lines, old-file line or None)``,
    in order, every file of the diff included (the candidate is one module); or ``([], why)``
    when unidiff cannot read it or a hunk has no context or removed line to place it by."""
    text = _recounted(diff)
    try:
        patch = unidiff.PatchSet(text)
    except unidiff.UnidiffParseError as exc:
        return [], f"the diff cannot be read: {exc}"
    edits: list[Edit] = []
    for n, hunk in enumerate((h for f in patch for h in f), 1):
        old = [ln.value.rstrip("\r\n") for ln in hunk if ln.is_context or ln.is_removed]
        new = [ln.value.rstrip("\r\n") for ln in hunk if ln.is_context or ln.is_added]
        if not any(s.strip() for s in old):
            return [], f"diff hunk {n} has no context or removed line to place it by"
        edits.append((old, new, hunk.source_start or None))
    if not edits:
        return [], "the diff holds no hunk"
    return edits, None


def _recounted(diff: str) -> str:
    """``diff`` with file headers where they are missing and each hunk header rewritten with the
    counts of its body (a start of 0 where the header had no numbers)."""
    lines = diff.splitlines()
    out: list[str] = []
    if not any(_FILE_OLD.match(ln) for ln in lines):
        out += ["--- a/candidate.py", "+++ b/candidate.py"]
    i = 0
    while i < len(lines):
        m = _HUNK.match(lines[i])
        if not m:
            if _FILE_OLD.match(lines[i]) or _FILE_NEW.match(lines[i]):
                out.append(lines[i])
            i += 1
            continue
        body, i = _hunk_body(lines, i + 1)
        old = sum(1 for ln in body if ln[0] in " -")
        new = sum(1 for ln in body if ln[0] in " +")
        src, dst = (int(m.group(1)), int(m.group(2))) if m.group(1) else (0, 0)
        out.append(f"@@ -{src},{old} +{dst},{new} @@")
        out += body
    return "\n".join(out) + "\n"


def _hunk_body(lines: list[str], i: int) -> tuple[list[str], int]:
    """The body lines of the hunk starting at ``lines[i]`` (each with its prefix; a blank or
    unprefixed line as context) and the index after it."""
    body: list[str] = []
    while i < len(lines):
        line = lines[i]
        if _HUNK.match(line) or line.startswith("diff "):
            break
        if _FILE_OLD.match(line) and i + 1 < len(lines) and _FILE_NEW.match(lines[i + 1]):
            break
        if line.startswith("\\"):  # "\ No newline at end of file"
            i += 1
            continue
        body.append(line if line[:1] in (" ", "-", "+") else " " + line)
        i += 1
    while body and not body[-1].strip():  # trailing blank lines of the reply, not context
        body.pop()
    return body, i

"""What a model wraps around its answer, taken off before the answer is parsed: reasoning
(:func:`strip_reasoning`) and unified diffs (:func:`diff_texts`, :func:`diff_edits`).

Reasoning. Local servers (vLLM, llama.cpp, Ollama) started without a reasoning parser leave a
reasoning model's thoughts in the message ``content``: ``<think>...</think>`` before the answer,
or only the closing ``</think>`` when the chat template opened the tag in the prompt. Code
fences inside the reasoning are drafts, never the answer. ``<thinking>`` and ``<reasoning>``
tags are treated alike, and so is the Harmony format's final channel (``<|channel|>final
<|message|>``, gpt-oss on servers that do not split it). A ``reasoning_content`` field is never
read (:mod:`accelopt_core.proposers.llm`).

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

import re

import unidiff

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

"""The docs site's sources for its tests: the reference generator (``docs/_gen/reference.py``,
loaded by path as MkDocs loads it) and the pages' checked snippets."""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: ``<!-- check -->`` or ``<!-- file: NAME -->`` and the fenced block under it (indented alike).
_MARKED = re.compile(
    r"^(?P<indent>[ \t]*)<!-- (?P<what>check|file: (?P<name>[\w.\-/]+)) -->\n"
    r"(?P=indent)```(?P<info>[\w-]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
    re.M | re.S,
)


@cache
def reference() -> ModuleType:
    """``docs/_gen/reference.py``, the MkDocs hook that writes the Reference pages."""
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "_gen" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Snippet:
    """One ``<!-- check -->`` console block of a page, with the files the page writes before it
    (``<!-- file: NAME -->`` blocks, in page order)."""

    page: str
    line: int
    info: str
    text: str
    files: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def steps(self) -> list[tuple[str, str]]:
        """``(command, expected output)`` for each ``$ command`` line of the block."""
        steps: list[tuple[str, list[str]]] = []
        for line in self.text.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
            else:
                raise AssertionError(f"{self.id}: output before any '$ command' line")
        return [(cmd, "\n".join(out)) for cmd, out in steps]


def _dedent(body: str, indent: str) -> str:
    return "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))


def snippets() -> list[Snippet]:
    """Every checked snippet of ``docs/**/*.md``."""
    found: list[Snippet] = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text("utf-8")
        files: dict[str, str] = {}
        for m in _MARKED.finditer(text):
            body = _dedent(m.group("body"), m.group("indent"))
            if m.group("name"):
                files[m.group("name")] = body
                continue
            line = text.count("\n", 0, m.start()) + 1
            page = str(path.relative_to(DOCS))
            found.append(Snippet(page, line, m.group("info"), body, dict(files)))
    return found


def check_markers() -> list[str]:
    """``page:line`` of each ``<!-- check -->`` that no fenced block follows (a typo would
    otherwise leave a snippet unchecked)."""
    bad = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text("utf-8")
        marked = {text.count("\n", 0, m.start()) + 1 for m in _MARKED.finditer(text)}
        for i, line in enumerate(text.splitlines(), 1):
            if re.match(r"\s*<!-- (check|file:)", line) and i not in marked:
                bad.append(f"{path.relative_to(DOCS)}:{i}")
    return bad


def output_pattern(expected: str) -> re.Pattern[str]:
    """The regular expression a command's output must match in full: each line as written
    (trailing blanks ignored), a line ``...`` for any number of lines, ``...`` inside a line for
    any text on that line."""
    parts = []
    for line in expected.splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts))

"""What the Reference generators share (``docs/_gen/reference.py`` is the MkDocs hook): the
repository root, the marker of an undescribed item, markdown table cells."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: What a field, key or item without a description renders as (the test fails on it).
UNDESCRIBED = "(no description yet: add one in docs/_gen/)"
GENERATED_NOTE = (
    '!!! note "Generated"\n    This page is generated from the sources when the site is '
    "built (`docs/_gen/reference.py`); edit the source it names, not this page.\n"
)


def cell(text: Any) -> str:
    """``text`` as one markdown table cell: one line, reST literals and roles as code, pipes
    escaped."""
    text = " ".join(str(text).split())
    text = re.sub(r":[a-z]+:`~?(?:[\w.]+\.)?([\w]+)`", r"`\1`", text)
    return text.replace("``", "`").replace("|", "\\|")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"

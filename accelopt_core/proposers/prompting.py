"""The agents' prompt files (``accelopt_core/proposers/prompts/*.txt``) and how they are filled.

Each role's file starts with ``ROLE: <role>`` (the LLM test double routes on it), then the
system prompt, a line ``=== USER ===``, and the user-message template. Placeholders are
``{{name}}``; values are inserted in one pass (a value that itself contains ``{{...}}`` is not
expanded again). Files are read with :mod:`importlib.resources`, so they work from a wheel.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

ROLE_FILES = ("planner", "executor", "summarizer", "fixer")
USER_MARKER = "=== USER ==="
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@cache
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.txt`` (``planner``, ``triton_api``, ``profile_glossary``...).
    Raises FileNotFoundError for an unknown name."""
    path = resources.files("accelopt_core.proposers").joinpath("prompts", f"{name}.txt")
    return path.read_text(encoding="utf-8")


def placeholders(name: str) -> set[str]:
    """The ``{{name}}`` placeholders a prompt file uses."""
    return set(_PLACEHOLDER.findall(load_prompt(name)))


def fill(template: str, values: dict[str, str]) -> str:
    """Replace every ``{{key}}`` in ``template``. Raises KeyError naming a missing value."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(f"prompt placeholder {{{{{key}}}}} has no value")
        return str(values[key])

    return _PLACEHOLDER.sub(sub, template)


def render(role: str, values: dict[str, str]) -> list[dict[str, str]]:
    """Chat messages ``[system, user]`` for ``role`` with ``values`` filled in.

    Raises KeyError when a placeholder has no value (a programming error, caught by tests)."""
    text = load_prompt(role)
    system, sep, user = text.partition(f"\n{USER_MARKER}\n")
    if not sep:
        raise ValueError(f"prompt file {role}.txt has no '{USER_MARKER}' line")
    return [
        {"role": "system", "content": fill(system, values).strip() + "\n"},
        {"role": "user", "content": fill(user, values).strip() + "\n"},
    ]


def api_note(backend: str) -> str:
    """The short API note for ``triton`` or ``nki`` (Triton's for anything else)."""
    return load_prompt("nki_api" if backend == "nki" else "triton_api").strip()

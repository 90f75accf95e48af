"""The docs' doctest-like snippets (issue 51): every ``<!-- check -->`` console block of
``docs/`` is run, command by command, in a fresh folder, and its output must match what the page
shows (``...`` elides). A page's ``<!-- file: NAME -->`` blocks above a snippet are written
into that folder first; ``examples/`` is there too. Only quick commands are marked (each well
under a few seconds)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.docs.docs_pages import ROOT, Snippet, check_markers, output_pattern, snippets

SNIPPETS = snippets()


def _environment(home: Path, memory: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_CACHE_HOME=str(home / ".cache"),
        ACCELOPT_MEMORY_DIR=str(memory),
        COLUMNS="200",  # long temporary paths stay on one line
        TERM="dumb",
        NO_COLOR="1",
        PYTHONUNBUFFERED="1",  # stdout and stderr in the order they were written
    )
    return env


def run_snippet(snippet: Snippet, tmp_path: Path) -> list[str]:
    """Run each command of ``snippet``; the mismatches, as messages (empty when all match)."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    for name, text in snippet.files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, "utf-8")
    env = _environment(home, tmp_path / "memory")
    problems = []
    for command, expected in snippet.steps():
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=60,
        )
        output = "\n".join(line.rstrip() for line in done.stdout.splitlines()) + "\n"
        if not output_pattern(expected).fullmatch(output):
            problems.append(
                f"$ {command}\n--- the page shows:\n{expected}\n--- it printed:\n{output}"
            )
    return problems


def test_the_docs_have_checked_snippets() -> None:
    pages = {s.page for s in SNIPPETS}
    assert len(SNIPPETS) >= 8, [s.id for s in SNIPPETS]
    for page in ("getting-started.md", "guides/memory.md", "guides/configuration.md",
                 "guides/llm-server.md", "troubleshooting.md"):  # fmt: skip
        assert page in pages, f"{page} has no checked snippet"
    assert all(s.info == "console" and s.steps() for s in SNIPPETS), [s.id for s in SNIPPETS]


def test_every_check_marker_has_its_block() -> None:
    assert check_markers() == []


def test_output_pattern_elides_lines_and_text() -> None:
    pattern = output_pattern("usage: x\n...\nerror: no ... here\n")
    assert pattern.fullmatch("usage: x\na\nb\nerror: no id abc here\n")
    assert pattern.fullmatch("usage: x\nerror: no id here\n")
    assert not pattern.fullmatch("usage: x\nerror: no id there\n")
    assert not pattern.fullmatch("usage: y\nerror: no id here\n")
    assert not output_pattern("a ... b\n").fullmatch("a x\ny b\n")  # ... stays on its line


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_snippet_output_matches_the_page(snippet: Snippet, tmp_path: Path) -> None:
    problems = run_snippet(snippet, tmp_path)
    assert problems == [], "\n\n".join(problems)

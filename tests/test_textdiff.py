"""Text positions and line diffs (accelopt_core.textdiff)."""

from __future__ import annotations

import random

from accelopt_core.textdiff import (
    SourceRange,
    apply_hunks,
    minimal_hunks,
    offset_of,
    split_lines,
    unified_diff,
)


def _random_text(rng: random.Random) -> str:
    words = ["a", "b = 1", "", "    x", "def f():", "é", "return", "  "]
    eol = rng.choice(["\n", "\r\n"])
    lines = [rng.choice(words) for _ in range(rng.randint(0, 12))]
    text = eol.join(lines)
    if lines and rng.random() < 0.5:
        text += eol
    return text


def test_minimal_hunks_reproduce_new_text() -> None:
    rng = random.Random(1234)
    for _ in range(400):
        old = _random_text(rng)
        lines = split_lines(old)
        new_lines = list(lines)
        for _ in range(rng.randint(0, 3)):
            op = rng.choice(["ins", "del", "rep"])
            i = rng.randint(0, len(new_lines))
            if op == "ins":
                new_lines.insert(i, rng.choice(["z = 2\n", "q\n", "é\r\n"]))
            elif new_lines and i < len(new_lines):
                if op == "del":
                    del new_lines[i]
                else:
                    new_lines[i] = "changed\n"
        new = "".join(new_lines) + rng.choice(["", "tail"])
        hunks = minimal_hunks(old, new)
        assert apply_hunks(old, hunks) == new, (old, new, hunks)
        if old == new:
            assert hunks == []
        starts = [h[0] for h in hunks]
        assert starts == sorted(starts)


def test_minimal_hunks_touch_only_changed_lines() -> None:
    old = "a\nb\nc\nd\ne\n"
    new = "a\nb\nC\nd\ne\nf\n"
    hunks = minimal_hunks(old, new)
    assert hunks == [
        (SourceRange(3, 0, 4, 0), "C\n"),
        (SourceRange(6, 0, 6, 0), "f\n"),
    ]
    # No final newline: the end of the last line is addressed by its length.
    assert minimal_hunks("x = 1", "x = 2") == [(SourceRange(1, 0, 1, 5), "x = 2")]
    assert minimal_hunks("", "a\n") == [(SourceRange(1, 0, 1, 0), "a\n")]


def test_unified_diff() -> None:
    diff = unified_diff("a\nb\nc\n", "a\nB\nc\n", "softmax.py")
    assert diff.splitlines() == [
        "--- a/softmax.py",
        "+++ b/softmax.py",
        "@@ -1,3 +1,3 @@",
        " a",
        "-b",
        "+B",
        " c",
    ]
    assert unified_diff("same\n", "same\n", "x.py") == ""
    assert "\\ No newline at end of file" in unified_diff("a\nb", "a\nc", "x.py")


def test_offset_of_clamps_past_the_ends() -> None:
    text = "ab\r\ncé\nlast"
    lines = split_lines(text)
    assert offset_of(lines, 1, 1) == 1
    assert offset_of(lines, 2, 1) == text.index("é")
    assert offset_of(lines, 0, 5) == 0
    # A column past a line's end addresses the start of the next line (after the line ending).
    assert offset_of(lines, 2, 99) == text.index("last")
    assert offset_of(lines, 9, 0) == len(text)
    assert offset_of([], 1, 0) == 0


def test_source_range_contains_its_end() -> None:
    rng = SourceRange(2, 4, 3, 1)
    assert rng.contains(2, 4) and rng.contains(2, 80) and rng.contains(3, 1)
    assert not rng.contains(2, 3) and not rng.contains(3, 2) and not rng.contains(1, 9)
    assert (rng.start, rng.end) == ((2, 4), (3, 1))

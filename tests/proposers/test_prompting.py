"""The agents' prompts (accelopt_core.proposers.prompting): the prompt files, filling them, and
the values that fill them. Pure functions; no model involved."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers.prompting import (
    MAX_ERROR_CHARS,
    ROLE_FILES,
    error_excerpt,
    fill,
    format_error,
    format_experiences,
    format_profile,
    load_prompt,
    placeholders,
    proposal_hint,
    render,
)


def test_prompt_files_start_with_their_role() -> None:
    for role in ROLE_FILES:
        assert load_prompt(role).splitlines()[0] == f"ROLE: {role}"


def test_fill_inserts_values_once_and_names_a_missing_one() -> None:
    assert fill("a {{x}} b", {"x": "{{y}}"}) == "a {{y}} b"  # a value is not expanded again
    with pytest.raises(KeyError, match="y"):
        fill("{{x}} {{y}}", {"x": "1"})


def test_render_gives_system_and_user_messages_with_every_placeholder_filled() -> None:
    values = {name: f"<{name}>" for name in placeholders("executor")}
    system, user = render("executor", values)
    assert system["role"] == "system" and user["role"] == "user"
    assert "{{" not in system["content"] + user["content"]
    assert "<source>" in user["content"]


def test_proposal_hint_only_for_parallel_plans_and_each_differs() -> None:
    assert proposal_hint(0, 1) == ""
    hints = [proposal_hint(i, 3) for i in range(3)]
    assert hints[0].startswith("This is proposal 1 of 3") and len(set(hints)) == 3


def test_profile_of_an_interpreter_run_says_its_latency_means_nothing() -> None:
    result = EvalResult(status="ok", latency_ms=3.0, timing="interpreter", tflops=0.01)
    text = format_profile(result, result)
    assert "latency: 3 ms median" in text and "timing: interpreter" in text
    assert "says nothing about GPU speed" in text and "achieved: 0.01 TFLOP/s" in text
    assert "speedup" not in text  # the baseline itself: no speedup line


def test_profile_of_a_failure_starts_with_its_status() -> None:
    text = format_profile(EvalResult.failure("incorrect", "mismatch at [0]"))
    assert text.splitlines()[0] == "status: incorrect (mismatch at [0])"


def test_experiences_one_line_each_with_their_tags() -> None:
    exps = [
        SimpleNamespace(title="Fuse", rule="Fuse", speedup=1.5, kernel_name="k", device=None),
        SimpleNamespace(title="Tile", rule="Tile by 64.", device="H100"),
    ]
    assert (
        format_experiences(exps, positive=True) == "- [1.50x, k] Fuse\n- [H100] Tile: Tile by 64."
    )
    assert format_experiences([], positive=True) == "(none yet)"
    assert format_experiences([], positive=False) == "(none recorded)"


def test_error_for_the_fixer_keeps_the_line_and_the_tail_of_a_long_message() -> None:
    result = EvalResult.failure("compile_error", "x" * MAX_ERROR_CHARS + "the cause")
    result.line = 7
    text = format_error(result)
    assert text.startswith("line: 7\nmessage:\n...\n") and text.endswith("the cause")
    assert len(text) < MAX_ERROR_CHARS + 40


def test_error_excerpt_marks_the_failing_line() -> None:
    source = "".join(f"line{i}\n" for i in range(1, 11))
    assert error_excerpt(source, 5, context=1) == (
        "# Failing line 5:\n   4 | line4\n>> 5 | line5\n   6 | line6\n"
    )
    assert error_excerpt(source, None) == "" and error_excerpt(source, 11) == ""

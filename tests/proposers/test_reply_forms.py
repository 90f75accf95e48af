"""Issue 30: every reply a model plausibly writes becomes a candidate, or a reason.

Pure functions (:mod:`accelopt_core.proposers.parsing`, ``.replies``, ``.merging``); the styles
are the scripted replies of tests/reply_styles.py about examples/triton/softmax.py."""

from __future__ import annotations

import ast

import pytest

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.proposers.codeblocks import FRAGMENT
from accelopt_core.proposers.merging import merge_code
from accelopt_core.proposers.parsing import (
    NO_CODE,
    apply_edits,
    parse_code_reply,
    parse_plan_reply,
    parse_rule_reply,
)
from accelopt_core.proposers.replies import diff_edits, strip_reasoning
from accelopt_core.search.candidate import candidate_id
from tests.reply_styles import (
    HELPER_AND_KERNEL,
    NEW,
    ORIGINAL,
    PROSE,
    SAME_CHANGE,
    SOFTMAX,
    STYLES,
    WIDE_KERNEL,
    fence,
)

KF = parse_kernel_file(ORIGINAL, str(SOFTMAX))


def parse(reply: str, current: str = ORIGINAL):
    return parse_code_reply(reply, current, original=KF, entry="softmax")


# -- every style -----------------------------------------------------------------------------
@pytest.mark.parametrize("style", SAME_CHANGE)
def test_each_style_of_the_launcher_change_gives_the_same_candidate(style: str) -> None:
    sample = parse(STYLES[style])
    assert sample.error is None, sample.error
    # the same candidate as the search counts it (normalized source: a whole-module reply
    # without the harness gets it back without the file's "# --- benchmark harness" comment)
    assert candidate_id(sample.source) == candidate_id(NEW)
    assert ast.dump(sample.tree) == ast.dump(ast.parse(NEW))  # parsed once, and right
    if style not in ("bare_code", "think", "lone_close_think"):  # partial: merged in place
        assert sample.source == NEW


def test_kernel_only_keeps_the_launcher_and_the_harness() -> None:
    sample = parse(STYLES["kernel_only"])
    assert sample.error is None
    assert WIDE_KERNEL.rstrip() in sample.source
    assert "    BLOCK_SIZE = 16\n" in sample.source  # the launcher is the original's
    assert sample.source.endswith(ORIGINAL[ORIGINAL.index("# --- benchmark harness") :])


def test_a_new_helper_kernel_is_added_before_the_kernel_that_calls_it() -> None:
    sample = parse(STYLES["helper_kernel"])
    assert sample.error is None
    src = sample.source
    assert src.index("def _exp_shifted(") < src.index("def softmax_kernel(")
    assert src.count("@triton.jit") == 2 and src.count("def softmax(x):") == 1
    assert HELPER_AND_KERNEL.rstrip() in src


def test_prose_only_is_no_code() -> None:
    assert parse(PROSE).error == NO_CODE


# -- reasoning -------------------------------------------------------------------------------
def test_reasoning_blocks_and_a_lone_close_are_taken_off() -> None:
    assert strip_reasoning("<think>a ```x``` b</think>answer") == ("answer", None)
    assert strip_reasoning("<THINKING>x</THINKING>\nanswer") == ("\nanswer", None)
    assert strip_reasoning("opened by the template\n</think>\nanswer") == ("\nanswer", None)
    final = "<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final"
    assert strip_reasoning(final + "<|message|>the answer<|return|>") == ("the answer", None)


def test_reasoning_that_never_closes_is_an_answerless_reply() -> None:
    sample = parse("<think>Let me try\n" + fence(NEW))  # cut off while thinking
    assert sample.source is None
    assert sample.error == (
        "the reply ended inside the model's reasoning (<think> without </think>): it held no answer"
    )


def test_plan_and_rule_replies_lose_their_reasoning() -> None:
    plan = parse_plan_reply("<think>Title: wrong idea\nno</think>\nTitle: wider blocks\nWiden.")
    assert plan.title == "wider blocks" and "wrong idea" not in plan.text
    rule = parse_rule_reply("thinking...</think>Title: widen\nRule: use 64-wide blocks.")
    assert rule.title == "widen" and rule.rule == "use 64-wide blocks."
    with pytest.raises(ValueError, match="reasoning"):
        parse_plan_reply("<think>Title: still thinking")


# -- unified diffs ---------------------------------------------------------------------------
def test_a_hunk_whose_lines_occur_twice_goes_where_its_header_says() -> None:
    source = "a = 1\nx = 0\n\nb = 2\nx = 0\n"
    diff = "@@ -5,1 +5,1 @@\n-x = 0\n+x = 5\n"
    edits, problem = diff_edits(diff)
    assert problem is None
    assert apply_edits(source, edits, "diff hunk") == ("a = 1\nx = 0\n\nb = 2\nx = 5\n", None)


def test_a_diff_that_does_not_apply_names_the_hunk() -> None:
    diff = "```diff\n@@ -1,1 +1,1 @@\n-    BLOCK_SIZE = 32\n+    BLOCK_SIZE = 64\n```\n"
    sample = parse(diff)
    assert sample.source is None
    assert sample.error == (
        "diff hunk 1 does not apply: its lines starting 'BLOCK_SIZE = 32' are not in the "
        "current source"
    )


def test_a_diff_hunk_is_whitespace_tolerant_like_search_replace() -> None:
    # indented by 2 instead of 4, trailing blanks: matched ignoring them, re-indented
    diff = "```diff\n@@ @@\n   BLOCK_SIZE = 16   \n+  assert n_cols > 0\n```\n"
    sample = parse(diff)
    assert sample.error is None
    assert "    BLOCK_SIZE = 16\n    assert n_cols > 0\n" in sample.source


@pytest.mark.parametrize(
    ("diff", "why"),
    [
        ("@@ -1,0 +1,1 @@\n+import math\n", "diff hunk 1 has no context or removed line"),
        ("--- a/x.py\n+++ b/x.py\n", "the diff holds no hunk"),
    ],
)
def test_unplaceable_or_empty_diffs_are_reasons(diff: str, why: str) -> None:
    edits, problem = diff_edits(diff)
    assert edits == [] and problem is not None and problem.startswith(why)


# -- merging by name -------------------------------------------------------------------------
def test_merging_replaces_in_place_adds_imports_and_new_names() -> None:
    source = "import a\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return f()\n\n\nX = 1\n"
    block = "import b\n\n\ndef h():\n    return 2\n\n\ndef g():\n    return f() + h()\n"
    merged = merge_code(source, ast.parse(source), [(block, ast.parse(block))])
    assert merged.changed == {"g"} and merged.added == {"h"} and not merged.whole
    assert merged.source == (
        "import a\nimport b\n\n\ndef f():\n    return 1\n\n\ndef h():\n    return 2\n\n\n"
        "def g():\n    return f() + h()\n\n\nX = 1\n"
    )


def test_a_block_defining_everything_replaces_the_module() -> None:
    source = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    block = "def g():\n    return 3\n\n\ndef f():\n    return 4\n"  # reordered
    merged = merge_code(source, ast.parse(source), [(block, ast.parse(block))])
    assert merged.whole and merged.source == block


def test_snippets_are_not_merged_and_a_fragment_alone_is_a_reason() -> None:
    snippet = fence("BLOCK_SIZE = 64\n")
    assert parse(snippet).error == FRAGMENT
    # a usage example next to the real answer is left out
    sample = parse(fence("out = softmax(torch.randn(4, 8))\n") + STYLES["launcher_only"])
    assert sample.source == NEW


def test_a_block_with_a_syntax_error_is_skipped_when_another_is_usable() -> None:
    broken = "def softmax(x:\n    pass\n"
    sample = parse(fence(broken) + STYLES["two_blocks"])
    assert sample.source == NEW


def test_harness_names_in_a_partial_reply_are_not_merged() -> None:
    tampered = STYLES["launcher_only"].replace(
        "```\n", "\n\ndef reference(x):\n    return x\n```\n", 1
    )
    sample = parse(tampered)
    assert sample.error is None and sample.source == NEW  # the original reference stays


def test_a_main_guard_and_calls_in_a_partial_reply_are_not_merged() -> None:
    reply = STYLES["launcher_only"].replace(
        "```\n", '\n\nif __name__ == "__main__":\n    print(softmax(torch.randn(4, 8)))\n```\n', 1
    )
    sample = parse(reply)
    assert sample.error is None and sample.source == NEW and "__main__" not in sample.source


def test_a_diff_inside_the_reasoning_is_a_draft_not_the_answer() -> None:
    draft = fence("@@ @@\n-    BLOCK_SIZE = 16\n+    BLOCK_SIZE = 4096\n", "diff")
    sample = parse(f"<think>\nmaybe\n{draft}too big\n</think>\n" + STYLES["search_replace"])
    assert sample.error is None and sample.source == NEW


def test_a_diff_that_breaks_the_syntax_names_the_line() -> None:
    diff = fence("@@ @@\n-    BLOCK_SIZE = 16\n+    BLOCK_SIZE = (16\n", "diff")
    sample = parse(diff)
    assert sample.source is None
    assert (sample.error or "").startswith("the edited source has a syntax error line ")


def test_a_module_without_the_harness_and_its_helpers_is_a_whole_module() -> None:
    # the harness's own helper `_large` (and SHAPES) left out, as the executor may: still the
    # whole module, so its own module-level statements and comments are kept as written
    module = "# my rewrite\n" + STYLES["bare_code"] + "\nprint('imported')\n"
    sample = parse(fence(module))
    assert sample.error is None
    assert sample.source.startswith("# my rewrite\n")
    assert "\nprint('imported')\n" in sample.source and "def _large(" in sample.source

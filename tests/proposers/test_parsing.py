"""Reply parsing of the agents (accelopt_core.proposers.parsing): code blocks, SEARCH/REPLACE
edits, plan and rule replies. Pure functions; no model involved."""

from __future__ import annotations

import ast

import pytest

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.proposers.parsing import (
    NO_CODE,
    NO_OP,
    TITLE_MAX,
    apply_edits,
    edit_blocks,
    parse_code_reply,
    parse_plan_reply,
    parse_rule_reply,
    title_key,
)

KERNELS = """import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    return out
"""

HARNESS = """

def get_inputs(seed, device):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(1000, generator=g).to(device)
    y = torch.randn(1000, generator=g).to(device)
    return x, y


def reference(x, y):
    return x + y


BENCH = {"entry": add, "rtol": 1e-5, "atol": 1e-5}
"""

SOURCE = KERNELS + HARNESS


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```\n"


def edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


# -- full-module replies ---------------------------------------------------------------------
@pytest.mark.parametrize("lang", ["python", "py", "python3", ""])
def test_fenced_module_is_taken(lang: str) -> None:
    new = SOURCE.replace("BLOCK=64", "BLOCK=256").replace("cdiv(n, 64)", "cdiv(n, 256)")
    sample = parse_code_reply(f"Here is the kernel:\n{fence(new, lang)}Done.", SOURCE)
    assert sample.error is None
    assert sample.source == new


def test_non_python_blocks_are_ignored() -> None:
    sample = parse_code_reply("Run this:\n" + fence("pip install triton\n", "bash"), SOURCE)
    assert sample.source is None and sample.error == NO_CODE


@pytest.mark.parametrize("reply", ["", "   ", "I would increase BLOCK to 256 and fuse the loads."])
def test_reply_without_code(reply: str) -> None:
    sample = parse_code_reply(reply, SOURCE)
    assert sample == type(sample)(None, error=NO_CODE)


def test_largest_parsing_block_that_defines_the_entry_wins() -> None:
    new = KERNELS.replace("BLOCK=64", "BLOCK=128").replace("cdiv(n, 64)", "cdiv(n, 128)")
    snippet = "offs = pid * BLOCK + tl.arange(0, BLOCK)\n"
    broken_but_large = new + "\ndef oops(:\n" + "    pass\n" * 40
    reply = (
        "The idea:\n"
        + fence(snippet)
        + "A draft:\n"
        + fence(broken_but_large)
        + "Final:\n"
        + fence(new)
        + "Usage:\n"
        + fence("out = add(x, y)\n" * 60)  # larger, parses, but does not define `add`
    )
    sample = parse_code_reply(reply, SOURCE, entry="add")
    assert sample.error is None and sample.source == new


def test_block_with_syntax_error_names_the_line() -> None:
    bad = KERNELS.replace("    mask = offs < n\n", "    mask = offs < n)\n")
    sample = parse_code_reply(fence(bad), SOURCE)
    assert sample.source is None
    line = bad.splitlines().index("    mask = offs < n)") + 1
    assert f"syntax error line {line}" in (sample.error or "")


def test_reply_cut_off_inside_a_block() -> None:
    sample = parse_code_reply("```python\nimport triton\n@triton.jit\ndef k(", SOURCE)
    assert sample.source is None and "cut off" in (sample.error or "")


def test_identical_module_is_a_no_op() -> None:
    sample = parse_code_reply(fence(SOURCE), SOURCE)
    assert sample.source is None and sample.error == NO_OP


def test_renamed_launcher_is_a_failure() -> None:
    # merged by name, the rename only adds `add_fast`, which nothing calls: no candidate
    renamed = KERNELS.replace("def add(x, y):", "def add_fast(x, y):")
    sample = parse_code_reply(fence(renamed), SOURCE, entry="add")
    assert sample.source is None
    assert sample.error == (
        "the reply only adds `add_fast`, which nothing uses (the launcher `add` keeps its name)"
    )


def test_bare_code_without_fences_is_accepted() -> None:
    new = KERNELS.replace("BLOCK=64", "BLOCK=128")
    sample = parse_code_reply(new, SOURCE)
    assert sample.source == new


def test_harness_is_restored_from_the_original() -> None:
    original = parse_kernel_file(SOURCE, "add.py")
    tampered = (
        KERNELS.replace("BLOCK=64", "BLOCK=128").replace("cdiv(n, 64)", "cdiv(n, 128)")
        + "\n\ndef reference(x, y):\n    return x * 0\n"
    )
    sample = parse_code_reply(fence(tampered), SOURCE, original=original, entry="add")
    assert sample.error is None and sample.source is not None
    tree = ast.parse(sample.source)
    defs = {n.name: ast.unparse(n) for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert defs["reference"] == "def reference(x, y):\n    return x + y"  # the original's
    assert "get_inputs" in defs  # the omitted harness came back
    assert 'BENCH = {"entry": add' in sample.source
    assert "BLOCK=128" in sample.source  # the candidate's launcher is kept


@pytest.mark.parametrize("tampered", [False, True], ids=["harness-verbatim", "harness-restored"])
@pytest.mark.parametrize("form", ["fence", "edit", "bare"])
def test_the_sample_carries_its_source_parsed_once(form: str, tampered: bool) -> None:
    """The tree the search and the gate read is the candidate's final source (after harness
    restoration), parsed: the same module ``ast.parse`` gives for it."""
    original = parse_kernel_file(SOURCE, "add.py")
    new = SOURCE.replace("BLOCK=64", "BLOCK=128")
    if tampered:
        new = new.replace("return x + y\n\n\nBENCH", "return x * 0\n\n\nBENCH")
    if form == "edit":
        reply = edit(
            "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)\n",
            "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=128)\n",
        )
        if tampered:
            reply += edit("    return x + y\n", "    return x * 0\n")
    else:
        reply = fence(new) if form == "fence" else new
    sample = parse_code_reply(reply, SOURCE, original=original, entry="add")
    assert sample.error is None and sample.source is not None and sample.tree is not None
    assert "return x + y" in sample.source and "BLOCK=128" in sample.source
    assert ast.dump(sample.tree) == ast.dump(ast.parse(sample.source))
    assert ast.unparse(sample.tree) == ast.unparse(ast.parse(sample.source))


def test_a_failed_sample_carries_no_tree() -> None:
    sample = parse_code_reply(
        fence(KERNELS.replace("def add(x, y):", "def plus(x, y):")), SOURCE, entry="add"
    )
    assert sample.source is None and sample.tree is None


# -- SEARCH/REPLACE --------------------------------------------------------------------------
def test_exact_edit_applies() -> None:
    reply = "Widen the block.\n" + edit(
        "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)\n",
        "    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4)\n",
    )
    sample = parse_code_reply(reply, SOURCE, entry="add")
    assert sample.error is None
    assert sample.source == SOURCE.replace(
        "add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)",
        "add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4)",
    )


def test_edits_apply_in_order_inside_a_fence() -> None:
    first = edit(
        "    x = tl.load(x_ptr + offs, mask=mask)\n", "    xv = tl.load(x_ptr + offs, mask=mask)\n"
    )
    second = edit(
        "    tl.store(out_ptr + offs, x + y, mask=mask)\n",
        "    tl.store(out_ptr + offs, xv + y, mask=mask)\n",
    )
    sample = parse_code_reply("```python\n" + first + second + "```\n", SOURCE)
    assert sample.error is None and sample.source is not None
    assert "xv = tl.load" in sample.source and "xv + y" in sample.source
    assert "x + y, mask" not in sample.source
    assert sample.source.endswith("\n")


def test_whitespace_tolerant_edit_reindents_the_replacement() -> None:
    # the model dropped the function-body indentation and added trailing spaces
    reply = edit(
        "mask = offs < n   \nx = tl.load(x_ptr + offs, mask=mask)\n",
        "mask = offs < n\nx = tl.load(x_ptr + offs, mask=mask, other=0.0)\n",
    )
    sample = parse_code_reply(reply, SOURCE)
    assert sample.error is None and sample.source is not None
    assert "\n    x = tl.load(x_ptr + offs, mask=mask, other=0.0)\n" in sample.source
    ast.parse(sample.source)


def test_edit_that_does_not_apply_names_its_first_line() -> None:
    reply = edit("    z = tl.load(z_ptr + offs)\n    w = z * 2\n", "    w = 0\n")
    sample = parse_code_reply(reply, SOURCE)
    assert sample.source is None
    assert sample.error == (
        "SEARCH/REPLACE block 1 does not apply: its SEARCH text starting "
        "'z = tl.load(z_ptr + offs)' is not in the current source"
    )


def test_second_block_failing_is_reported_with_its_number() -> None:
    reply = edit("    n = x.numel()\n", "    n = x.numel()  # elements\n") + edit(
        "    nothing_like_this()\n", "    pass\n"
    )
    sample = parse_code_reply(reply, SOURCE)
    assert sample.source is None and (sample.error or "").startswith("SEARCH/REPLACE block 2")


def test_no_op_edit() -> None:
    line = "    n = x.numel()\n"
    sample = parse_code_reply(edit(line, line), SOURCE)
    assert sample.source is None and sample.error == NO_OP


def test_incomplete_edit_block() -> None:
    reply = "<<<<<<< SEARCH\n    n = x.numel()\n=======\n    n = x.shape[0]\n"
    sample = parse_code_reply(reply, SOURCE)
    assert sample.source is None
    assert sample.error == "SEARCH/REPLACE block 1 is incomplete: no >>>>>>> REPLACE line"


def test_empty_search_part_is_refused() -> None:
    sample = parse_code_reply(edit("", "import math\n"), SOURCE)
    assert sample.source is None and "empty SEARCH" in (sample.error or "")


def test_edit_that_breaks_syntax_names_the_line() -> None:
    sample = parse_code_reply(edit("    n = x.numel()\n", "    n = x.numel(\n"), SOURCE)
    assert sample.source is None
    assert (sample.error or "").startswith("the edited source has a syntax error line ")


def test_edit_keeps_the_harness_when_original_given() -> None:
    original = parse_kernel_file(SOURCE, "add.py")
    reply = edit("    return x + y\n", "    return x - y\n")  # tries to change the reference
    sample = parse_code_reply(reply, SOURCE, original=original, entry="add")
    # the harness is restored, so the edit changes nothing that counts
    assert sample.source is None and sample.error == NO_OP


def test_apply_edits_replaces_the_first_occurrence_only() -> None:
    src = "a = 1\nb = 2\na = 1\n"
    blocks, problem = edit_blocks(edit("a = 1\n", "a = 3\n"))
    assert problem is None
    assert apply_edits(src, blocks) == ("a = 3\nb = 2\na = 1\n", None)


# -- plans and rules -------------------------------------------------------------------------
def test_plan_title_from_title_line() -> None:
    reply = (
        "Title: Fuse the three passes into one online pass\nWhy: three HBM reads\nSteps:\n1. ..."
    )
    plan = parse_plan_reply(reply)
    assert plan.title == "Fuse the three passes into one online pass"
    assert plan.text == reply


@pytest.mark.parametrize(
    "reply",
    [
        "**Title:** Use larger blocks\n\nSteps...",
        "## Use larger blocks\nSteps...",
        "\n\n**Use larger blocks**\nbecause ...",
        "1. Use larger blocks\n2. and more warps",
    ],
)
def test_plan_title_markdown_is_stripped(reply: str) -> None:
    assert parse_plan_reply(reply).title.startswith("Use larger blocks")


def test_long_plan_title_is_trimmed() -> None:
    plan = parse_plan_reply("Title: " + "increase the block size " * 20)
    assert len(plan.title) <= TITLE_MAX and plan.title.endswith("...")
    assert plan.title.startswith("increase the block size")


def test_titles_that_differ_only_in_case_punctuation_and_spacing_are_the_same_plan() -> None:
    assert title_key("**Widen** the block to 1024!") == title_key("widen the  block to 1024")
    assert title_key("Use 8 warps") != title_key("Use 4 warps")


@pytest.mark.parametrize("reply", ["", "  \n\n "])
def test_empty_plan_reply_raises(reply: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        parse_plan_reply(reply)


def test_rule_reply_in_the_prompted_format() -> None:
    reply = (
        "Title: Fuse max, sum and normalize passes\n"
        "Rule: When a row reduction reads the input in several passes, keep a running max\n"
        "and rescaled sum in one pass (online softmax). Halves HBM traffic.\n"
        "Slow pattern:\n```python\nm = tl.max(x)\n```\nFast pattern:\n```python\nm_new = ...\n```\n"
    )
    rule = parse_rule_reply(reply)
    assert rule.title == "Fuse max, sum and normalize passes"
    assert rule.rule == (
        "When a row reduction reads the input in several passes, keep a running max\n"
        "and rescaled sum in one pass (online softmax). Halves HBM traffic."
    )


def test_rule_reply_in_accelopt_bold_format() -> None:
    reply = (
        "**Hoist the scale out of the K loop**\n"
        "Multiply once after accumulation instead of every iteration.\n"
        "Original code:\n```\nacc += a * s\n```\n"
    )
    rule = parse_rule_reply(reply)
    assert rule.title == "Hoist the scale out of the K loop"
    assert rule.rule == "Multiply once after accumulation instead of every iteration."


def test_empty_rule_reply_raises() -> None:
    with pytest.raises(ValueError):
        parse_rule_reply("")

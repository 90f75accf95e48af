"""Issue 53: code in replies read as a Markdown reader reads it (CommonMark, markdown-it-py),
the characters models put into code normalized and noted, the wrappers around code (tags,
structured output, bare code), and a reply cut at the output token limit continued once.

The parser tests are pure (:mod:`accelopt_core.proposers.parsing`); the cut-reply tests run the
real openai client (:class:`~accelopt_core.proposers.llm.LLMClient`, the agents) against the
scripted LLM TEST DOUBLE on loopback (tests/llm_double.py)."""

from __future__ import annotations

import ast
import functools
import html
import json
import textwrap
from pathlib import Path

import pytest

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.proposers import Plan
from accelopt_core.proposers.code_chars import normalize_code
from accelopt_core.proposers.codeblocks import fenced_blocks
from accelopt_core.proposers.llm import CONTINUE_PROMPT, LLMClient
from accelopt_core.proposers.parsing import NO_CODE, parse_code_reply
from accelopt_core.settings import LLMSettings
from tests.llm_double import LLMDouble, status, text
from tests.llm_double import llm_double as llm_double  # noqa: F401  (fixture)
from tests.proposers.test_agents import WIDE, make_ctx, make_proposer
from tests.reply_styles import ADDED_53, CUT_FIRST, CUT_REST, NEW, ORIGINAL, SOFTMAX, STYLES

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*/*.py"))
KF = parse_kernel_file(ORIGINAL, str(SOFTMAX))
MARK = "_rewritten = 1  # as the model rewrote it"


def parse(reply: str, current: str = ORIGINAL, **kw):
    return parse_code_reply(reply, current, original=KF, entry="softmax", **kw)


# -- CommonMark code blocks ------------------------------------------------------------------
@pytest.mark.parametrize(
    "opener",
    ["```python", "```py", "```python3", "```triton", "```", "~~~", "~~~ py", "```Python",
     "````python title=softmax.py", "``` {.python}", "```none", "```text"],
)  # fmt: skip
def test_a_fence_of_backticks_or_tildes_with_any_info_string(opener: str) -> None:
    closer = opener[: len(opener) - len(opener.lstrip("`~"))]
    sample = parse(f"Here it is:\n{opener}\n{NEW}{closer}\nDone.")
    assert sample.error is None and sample.source == NEW


def test_a_block_in_another_language_is_code_only_when_it_is_python() -> None:
    reply = "```bash\npython bench.py\n```\n```cuda\n__global__ void k() {}\n```\n"
    assert parse(reply).error == NO_CODE


@pytest.mark.parametrize("style", ADDED_53)
def test_each_added_form_gives_the_launcher_change(style: str) -> None:
    sample = parse(STYLES[style])
    assert sample.error is None and sample.source == NEW


def test_fences_in_list_items_and_quotes_lose_their_container_indentation() -> None:
    reply = (
        "1. First:\n\n   ```python\n   def a():\n       return 1\n   ```\n"
        "   - nested:\n\n     ~~~\n     def b():\n         return 2\n     ~~~\n"
        "> > ```py\n> > def c():\n> >     return 3\n> > ```\n"
    )
    blocks, cut = fenced_blocks(reply)
    assert not cut
    assert blocks == [
        ("python", "def a():\n    return 1\n"),
        ("", "def b():\n    return 2\n"),
        ("py", "def c():\n    return 3\n"),
    ]


def test_a_fence_inside_a_longer_fence_is_content() -> None:
    code = 'def f():\n    """Usage:\n\n    ```python\n    f()\n    ```\n    """\n    return 1\n'
    blocks, cut = fenced_blocks(f"````python\n{code}````\n")
    assert blocks == [("python", code)] and not cut


def test_a_reply_indented_as_a_whole_is_read_without_its_indentation() -> None:
    reply = "Answer:\n\n" + textwrap.indent(STYLES["whole_module"], "    ")
    sample = parse(reply)
    assert sample.error is None and sample.source == NEW


def test_a_fence_indented_under_a_paragraph_line_is_still_read() -> None:
    # CommonMark reads these lines as the paragraph's continuation; models mean a code block
    body = "def f():\n    pass\n\n    return 1\n"
    reply = "Here:\n" + textwrap.indent(f"```python\n{body}```\n", "    ") + "Done.\n"
    assert fenced_blocks(reply) == ([("python", body)], False)
    assert fenced_blocks("Here:\n    ```python\n    def f():\n") == ([], True)


@pytest.mark.parametrize("sep", ["\r\n", "\r"])
def test_crlf_and_cr_line_ends_are_read_and_noted(sep: str) -> None:
    sample = parse(STYLES["whole_module"].replace("\n", sep))
    assert sample.error is None and sample.source == NEW
    kind = "CRLF" if sep == "\r\n" else "CR"
    assert any(n.startswith("line ends: ") and kind in n for n in sample.notes)


# -- cut inside a block: CommonMark closes it at the end, the parser does not -----------------
@pytest.mark.parametrize(
    "reply",
    [
        "```python\nimport triton\n\ndef softmax(x):\n    return x",
        "~~~python\ndef softmax(x):\n    return x\n```\n",  # a backtick line closes no tilde fence
        "````python\ndef softmax(x):\n    return x\n```\n",  # nor a shorter one
        "1. The launcher:\n\n   ```python\n   def softmax(x):\n       return x\n",
        "> ```python\n> def softmax(x):\n>     return x\n",
        "Here:\n```python\n",  # cut right after the opening line
    ],
    ids=["top", "tilde", "longer", "list", "quote", "opener-only"],
)
def test_a_fence_open_at_the_end_is_a_cut_reply(reply: str) -> None:
    sample = parse(reply)
    assert sample.source is None
    assert sample.error == "reply was cut off inside a code block (no closing fence)"


def test_a_fence_closed_by_the_end_of_its_list_item_is_complete() -> None:
    reply = "- The launcher:\n\n  ```python\n" + textwrap.indent(
        "import triton\n\n\n" + NEW[NEW.index("def softmax(x):") : NEW.index("# --- bench")],
        "  ",
    )
    reply = reply.rstrip() + "\n\nThat is all.\n"
    blocks, cut = fenced_blocks(reply)
    assert not cut and len(blocks) == 1
    assert parse(reply).source == NEW


# -- characters ------------------------------------------------------------------------------
def test_unicode_spaces_zero_width_and_curly_quotes_are_normalized_and_noted() -> None:
    sample = parse(STYLES["unicode_chars"])
    assert sample.error is None and sample.source == NEW
    notes = " | ".join(sample.notes)
    assert "U+00A0 NO-BREAK SPACE in the indentation replaced by a space" in notes
    assert "U+200B ZERO WIDTH SPACE removed" in notes
    assert 'U+201C LEFT DOUBLE QUOTATION MARK outside string literals replaced by "' in notes
    assert all(n.startswith("code block ") for n in sample.notes)


def test_literals_and_comments_keep_their_characters() -> None:
    code = (
        "def f(x):\n"
        "\u2003\u2003return g('it\u2019s\u00a0here', \"\u201cq\u201d\")  # don\u2019t\u00a0touch\n"
        'S = """a\n\u00a0\u00a0b ‘c’"""\n'
    )
    out, notes = normalize_code(code)
    ast.parse(out)
    assert out == code.replace("\u2003\u2003", "  ", 1)
    assert notes == ["2 × U+2003 EM SPACE in the indentation replaced by a space (line 2)"]


def test_a_curly_quote_opens_and_closes_a_literal_outside_one() -> None:
    out, notes = normalize_code('x = f(\u2018a\u2019, \u201cb\u201d)\ny = \u201cc"\n')
    assert out == 'x = f(\'a\', "b")\ny = "c"\n' and len(notes) == 4


def test_valid_code_is_returned_unchanged() -> None:
    assert normalize_code(NEW) == (NEW, [])
    assert normalize_code("s = '\u00a0'\n") == ("s = '\u00a0'\n", [])


def test_an_edit_with_no_break_spaces_applies_and_is_noted() -> None:
    reply = STYLES["search_replace"].replace(
        "    BLOCK_SIZE = 64", "\u00a0" * 4 + "BLOCK_SIZE = 64"
    )
    sample = parse(reply)
    assert sample.error is None and sample.source == NEW
    assert sample.notes == [
        "SEARCH/REPLACE block 1: 4 × U+00A0 NO-BREAK SPACE in the indentation replaced by a "
        "space (line 1)"
    ]


# -- the wrappers, for every example kernel --------------------------------------------------
def _changed(source: str, name: str) -> str:
    """The top-level function ``name`` of ``source`` (with its decorators) with a statement
    (:data:`MARK`) put before its first one: what a model sends back for that function."""
    tree = ast.parse(source)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    lines = source.splitlines(keepends=True)
    first = lines[node.body[0].lineno - 1]
    indent = first[: len(first) - len(first.lstrip())]
    body = lines[start - 1 : node.end_lineno]
    body.insert(node.body[0].lineno - start, f"{indent}{MARK}\n")
    return "".join(body)


@functools.cache
def _example_reply(path: Path) -> tuple[str, str, object]:
    """(source, the kernel and the launcher as a model rewrote them, its KernelFile)."""
    source = path.read_text(encoding="utf-8")
    kf = parse_kernel_file(source, str(path))
    assert kf.harness is not None
    entry = kf.harness.entry
    code = _changed(source, kf.kernels[0].name) + "\n\n" + _changed(source, entry)
    return source, code, kf


FORMS = {
    "tilde": lambda c: f"~~~\n{c}~~~\n",
    "info_string": lambda c: f"```python title=kernel.py\n{c}```\n",
    "list_item": lambda c: "1. The code:\n\n" + textwrap.indent(f"```py\n{c}```\n", "   "),
    "block_quote": lambda c: textwrap.indent(f"```\n{c}```\n", "> ", lambda _: True),
    "crlf": lambda c: f"Here:\r\n```python\r\n{c}```\r\n".replace("\n", "\r\n").replace(
        "\r\r", "\r"
    ),
    "answer_tag": lambda c: f"<answer>\n{c}</answer>",
    "code_tag": lambda c: f"The rewrite:\n<code>\n{c}</code>\nDone.",
    "solution_fenced": lambda c: f"<solution>\n```python\n{c}```\n</solution>",
    "file_tag": lambda c: f'<file path="kernel.py">\n{c}</file>',
    "nested_tags": lambda c: f"<answer>\nThe code:\n<code>\n{c}</code>\n</answer>",
    "html_escaped": lambda c: f"<code>\n{html.escape(c)}</code>",
    "json": lambda c: json.dumps({"explanation": "one pass", "code": c}),
    "json_fenced": lambda c: "```json\n" + json.dumps({"solution": c}, indent=2) + "\n```\n",
    "json_files": lambda c: json.dumps({"files": [{"path": "kernel.py", "content": c}]}),
    "bare": lambda c: c,
    "bare_with_prose": lambda c: f"Here is the new code:\n\n{c}\nIt should be faster.\n",
}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_wrapper_form_for_every_example(path: Path, form: str) -> None:
    source, code, kf = _example_reply(path)
    entry = kf.harness.entry  # type: ignore[attr-defined]
    plain = parse_code_reply(f"```python\n{code}```\n", source, original=kf, entry=entry)
    assert plain.error is None and plain.source is not None and plain.source.count(MARK) == 2
    sample = parse_code_reply(FORMS[form](code), source, original=kf, entry=entry)
    assert sample.error is None, sample.error
    assert sample.source == plain.source
    assert ast.dump(sample.tree) == ast.dump(ast.parse(plain.source))


def test_a_one_line_code_tag_in_prose_is_prose() -> None:
    reply = "Use <code>tl.sum</code> instead of a loop.\n" + STYLES["whole_module"]
    sample = parse(reply)
    assert sample.error is None and sample.source == NEW


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ('{"code": "import triton\\ndef softmax(x):\\n    ret', "reply was cut off inside a JSON"),
        ('{"explanation": "make the block wider"}', "the reply is a JSON object with no code"),
        ("<code>\nimport triton\n\n\ndef softmax(x):\n    return x\n", "<code> is never closed"),
    ],
    ids=["json-cut", "json-prose", "open-tag"],
)
def test_a_wrapper_cut_or_empty_is_a_reason(reply: str, why: str) -> None:
    sample = parse(reply)
    assert sample.source is None and why in (sample.error or "")


def test_a_reply_that_only_starts_with_a_brace_is_not_json() -> None:
    reply = "{BLOCK_SIZE} should be 64:\n\n" + STYLES["whole_module"]
    sample = parse(reply)
    assert sample.error is None and sample.source == NEW


def test_bare_code_cut_at_the_token_limit_is_refused() -> None:
    bare = STYLES["bare_with_prose"]
    assert parse(bare).source == NEW
    sample = parse(bare, cut=True)
    assert sample.source is None
    assert sample.error == (
        "reply was cut off (at the output token limit): its code may be incomplete"
    )
    assert parse(STYLES["whole_module"], cut=True).source == NEW  # a closed fence is complete


# -- a reply cut at the output token limit ---------------------------------------------------
EXECUTOR = [
    {"role": "system", "content": "ROLE: executor\nYou write code."},
    {"role": "user", "content": "widen the block"},
]


def _client(double: LLMDouble, **overrides) -> LLMClient:
    return LLMClient(LLMSettings.model_validate(double.llm_settings(**overrides)))


async def test_a_cut_reply_gets_one_continuation(llm_double: LLMDouble) -> None:
    llm_double.queue(
        text(CUT_FIRST, finish_reason="length", prompt_tokens=50, completion_tokens=100),
        text(CUT_REST, prompt_tokens=80, completion_tokens=60),
    )
    client = _client(llm_double)
    done = await client.complete("executor", EXECUTOR)
    first, second = llm_double.requests
    assert done.text == CUT_FIRST + CUT_REST and done.finish_reason == "stop"
    assert second.messages == [
        *EXECUTOR,
        {"role": "assistant", "content": CUT_FIRST},
        {"role": "user", "content": CONTINUE_PROMPT},
    ]
    assert (done.usage.calls, done.usage.prompt_tokens, done.usage.completion_tokens) == (
        2,
        130,
        160,
    )
    assert client.total().calls == 2
    assert done.notes == [
        f"cut at the output token limit after {len(CUT_FIRST)} characters; continued once "
        f"({len(CUT_REST)} characters, ended: stop)"
    ]
    assert parse(done.text).source == NEW


async def test_a_continuation_cut_again_leaves_the_reply_cut(llm_double: LLMDouble) -> None:
    llm_double.queue(text("```python\nimport torch\n", finish_reason="length"),
                     text("import triton\n", finish_reason="length"), "never asked")  # fmt: skip
    done = await _client(llm_double).complete("executor", EXECUTOR)
    assert len(llm_double.requests) == 2 and done.finish_reason == "length"
    assert done.notes[-1].endswith("continued once (14 characters, cut again)")


async def test_a_failed_continuation_keeps_the_cut_reply(llm_double: LLMDouble) -> None:
    llm_double.queue(text(CUT_FIRST, finish_reason="length"), status(500))
    done = await _client(llm_double, maxRetries=0).complete("executor", EXECUTOR)
    assert done.text == CUT_FIRST and done.finish_reason == "length"
    assert "not continued: " in done.notes[0] and "500" in done.notes[0]


async def test_a_spent_budget_asks_for_no_continuation(llm_double: LLMDouble) -> None:
    llm_double.queue(text(CUT_FIRST, finish_reason="length", prompt_tokens=10,
                          completion_tokens=90))  # fmt: skip
    client = LLMClient(LLMSettings.model_validate(llm_double.llm_settings()), max_tokens=100)
    done = await client.complete("executor", EXECUTOR)
    assert len(llm_double.requests) == 1 and done.finish_reason == "length"
    assert "token budget of 100 tokens is spent" in done.notes[0]


async def test_a_cut_plan_is_not_continued(llm_double: LLMDouble) -> None:
    llm_double.queue(text("Title: widen\nUse a wider", finish_reason="length"), "more")
    planner = [{"role": "system", "content": "ROLE: planner\nPlan."}, EXECUTOR[1]]
    done = await _client(llm_double).complete("planner", planner)
    assert len(llm_double.requests) == 1 and done.finish_reason == "length" and not done.notes


async def test_the_transcript_shows_the_continuation_and_the_normalized_characters(
    llm_double: LLMDouble,
) -> None:
    nbsp = WIDE.replace("    out = torch.empty_like(x)", "\u00a0" * 4 + "out = torch.empty_like(x)")
    module = f"```python\n{nbsp}```\n"
    half = len(module) // 2
    llm_double.queue(text(module[:half], finish_reason="length"), module[half:], role="executor")
    proposer = make_proposer(llm_double)
    calls = []
    proposer.record_calls(calls.append)
    [sample] = await proposer.implement(make_ctx(), Plan(title="widen", text="Widen."), 1)
    assert sample.source is not None and "\u00a0" not in sample.source
    assert sample.usage.calls == 2 and len(llm_double.requests) == 2
    [record] = calls
    assert record.verdict == "candidate" and record.reply == module
    assert record.notes[0].startswith("cut at the output token limit after ")
    assert record.notes[1] == (
        "code block 1: 4 × U+00A0 NO-BREAK SPACE in the indentation replaced by a space "
        f"(line {nbsp.splitlines().index(chr(0xA0) * 4 + 'out = torch.empty_like(x)') + 1})"
    )
    assert record.to_dict()["notes"] == record.notes


async def test_a_continued_reply_that_still_fails_says_it_was_cut(llm_double: LLMDouble) -> None:
    # the model starts over instead of continuing: the joined block does not parse
    llm_double.queue(
        text("```python\ndef add(x, y):\n    return (", finish_reason="length"),
        f"```python\n{WIDE}```\n",
        role="executor",
    )
    [sample] = await make_proposer(llm_double).implement(make_ctx(), Plan("widen", "Widen."), 1)
    assert sample.source is None and len(llm_double.requests) == 2
    assert (sample.error or "").startswith("the code block has a syntax error line ")
    assert (sample.error or "").endswith(
        "(the reply was cut off at the output token limit and continued once)"
    )

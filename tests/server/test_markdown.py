"""The one Markdown helper (accelopt_server/markdown.py) and its use in the hover (issue 23):
user and kernel text renders as written, checked with a real CommonMark renderer
(markdown-it-py, the parser behind rich)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.onsite.protocol import EvalResult
from accelopt_server import present
from accelopt_server.markdown import code, escape

MD = MarkdownIt("commonmark")
ELEMENTWISE = Path(__file__).resolve().parents[2] / "examples" / "triton" / "elementwise.py"
TOLERANCE = "max abs error 0.5 > 1e-05*max|ref| + 0.0001*|ref|"

TEXTS = [
    TOLERANCE,
    "add_gelu_kernel",
    "__init__ and *args, **kwargs",
    "# not a heading",
    "- not a list\n+ nor this\n1. nor this\n2) nor this",
    "a line\n=== not a setext heading",
    "> not a quote",
    "<b>not html</b> &amp; [not](a link) ![nor](an image) ~~kept~~ `not code`",
    "back\\slash and a | table | cell",
    "x[0] 16→20 (x: 16×63)",
]


@pytest.mark.parametrize("text", TEXTS)
def test_escaped_text_renders_as_written(text: str) -> None:
    rendered = MD.render(escape(text, line_start=True))
    paragraph = rendered.removeprefix("<p>").removesuffix("</p>\n")
    assert rendered.startswith("<p>") and "<p>" not in paragraph  # one paragraph, no block
    assert html.unescape(paragraph) == text


@pytest.mark.parametrize("text", ["a`b", "`starts", "ends`", "``double`` x", "plain_name*"])
def test_code_span_renders_verbatim(text: str) -> None:
    assert MD.renderInline(code(text)) == f"<code>{html.escape(text, quote=False)}</code>"


def test_inline_text_keeps_a_leading_number_plain() -> None:
    assert escape("0.02 ms · correct") == "0.02 ms · correct"
    assert (
        MD.render("Last profile: " + escape("0.02 ms\n1. x"))
        == "<p>Last profile: 0.02 ms\n1. x</p>\n"
    )


def test_hover_keeps_the_tolerance_and_the_kernel_name_as_written() -> None:
    kf = parse_kernel_file(ELEMENTWISE.read_text(), str(ELEMENTWISE))
    kernel = kf.kernel("add_gelu_kernel")
    failed = EvalResult(status="incorrect", timing="interpreter", device="cpu", message=TOLERANCE)
    text = present.kernel_hover(kernel, failed, 1, 1, "", "iteration 1/2 · best 1.50x")
    rendered = html.unescape(MD.render(text))
    assert "<code>add_gelu_kernel</code>" in rendered
    assert f"Last profile: {failed.summary()} on cpu" in rendered
    assert "1e-05*max|ref| + 0.0001*|ref|" in rendered and "<em>" not in rendered
    assert "Search: iteration 1/2 · best 1.50x" in rendered

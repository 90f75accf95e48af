"""One legitimate change of examples/triton/softmax.py written in the styles real models answer
in, for the scripted LLM double (tests/llm_double.py, a TEST DOUBLE of the paid service).

The change in the launcher: a wider block (``BLOCK_SIZE = 16`` -> ``64``) and more warps
(``num_warps=1`` -> ``4``); the rows of the interpreter's shapes (at most 64 columns) then take one
chunk instead of four, so it is faster under the Triton interpreter too. Styles that only touch
the kernel widen its chunks inside the kernel (``BLOCK_SIZE * 4``) instead.

:data:`STYLES` maps a style's name to its reply; :data:`SAME_CHANGE` names the styles whose
candidate is the launcher change (so they all yield one candidate); :func:`expected_source` is
that candidate. The issue (30) lists the four styles that gave no candidate before: ``think``,
``launcher_only``, ``two_blocks`` and ``diff``.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

SOFTMAX = Path(__file__).resolve().parents[1] / "examples" / "triton" / "softmax.py"
ORIGINAL = SOFTMAX.read_text(encoding="utf-8")
_HARNESS_AT = ORIGINAL.index("# --- benchmark harness")
_KERNEL_AT = ORIGINAL.index("@triton.jit")
_LAUNCHER_AT = ORIGINAL.index("def softmax(x):")

OLD_BLOCK, NEW_BLOCK = "    BLOCK_SIZE = 16\n", "    BLOCK_SIZE = 64\n"
OLD_WARPS, NEW_WARPS = "        num_warps=1,\n", "        num_warps=4,\n"


def expected_source() -> str:
    """The whole file with the launcher change (what every :data:`SAME_CHANGE` style yields)."""
    return ORIGINAL.replace(OLD_BLOCK, NEW_BLOCK).replace(OLD_WARPS, NEW_WARPS)


NEW = expected_source()
KERNEL = ORIGINAL[_KERNEL_AT:_LAUNCHER_AT].rstrip() + "\n"
LAUNCHER = NEW[_LAUNCHER_AT : NEW.index("# --- benchmark harness")].rstrip() + "\n"
MODULE = NEW[:_HARNESS_AT].rstrip() + "\n"  # imports, kernel and launcher, no harness
PLAN = "Title: wider blocks and more warps\nRaise BLOCK_SIZE to 64 and num_warps to 4."


def fence(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```\n"


def _wide_kernel(helper: bool) -> str:
    """The kernel walking each row in chunks of ``4 * BLOCK_SIZE`` (with a helper for the
    shifted exponential when ``helper``)."""
    body = KERNEL.replace("tl.arange(0, BLOCK_SIZE)", "tl.arange(0, BLOCK_SIZE * 4)")
    body = body.replace("n_cols, BLOCK_SIZE):", "n_cols, BLOCK_SIZE * 4):")
    body = body.replace("[BLOCK_SIZE]", "[BLOCK_SIZE * 4]")
    if helper:
        body = body.replace("tl.exp(x - row_max)", "_exp_shifted(x, row_max)")
        body = "@triton.jit\ndef _exp_shifted(x, shift):\n    return tl.exp(x - shift)\n\n\n" + body
    return body


WIDE_KERNEL = _wide_kernel(helper=False)
HELPER_AND_KERNEL = _wide_kernel(helper=True)

# A first draft in the reasoning: a whole module (larger than the answer) that is wrong.
_DRAFT = MODULE.replace(
    NEW_BLOCK, "    BLOCK_SIZE = n_cols  # one chunk per row? not a power of 2\n"
)

_SEARCH_REPLACE = (
    f"<<<<<<< SEARCH\n{OLD_BLOCK}=======\n{NEW_BLOCK}>>>>>>> REPLACE\n\n"
    f"<<<<<<< SEARCH\n{OLD_WARPS}=======\n{NEW_WARPS}>>>>>>> REPLACE\n"
)

_GIT_DIFF = """--- a/softmax.py
+++ b/softmax.py
@@ -59,7 +59,7 @@ def softmax(x):
     \"\"\"Softmax over the last dimension of a 2-D fp32 tensor.\"\"\"
     n_rows, n_cols = x.shape
     out = torch.empty_like(x)
-    BLOCK_SIZE = 16
+    BLOCK_SIZE = 64
     softmax_kernel[(n_rows,)](
         out,
         x,
@@ -67,6 +67,6 @@ def softmax(x):
         out.stride(0),
         n_cols,
         BLOCK_SIZE=BLOCK_SIZE,
-        num_warps=1,
+        num_warps=4,
     )
     return out
"""
# As models often write them: no file header, no line numbers, a blank context line unprefixed.
_SLOPPY_DIFF = """@@ ... @@
     out = torch.empty_like(x)
-    BLOCK_SIZE = 16
+    BLOCK_SIZE = 64
@@ ... @@
         BLOCK_SIZE=BLOCK_SIZE,
-        num_warps=1,
+        num_warps=4,
     )
     return out

"""

#: style name -> the executor's reply.
STYLES: dict[str, str] = {
    "whole_module": "Here is the faster version.\n\n" + fence(NEW),
    "search_replace": "Two small edits:\n\n" + _SEARCH_REPLACE,
    "bare_code": MODULE,
    "think": (
        "<think>\nThe launcher uses BLOCK_SIZE = 16 with one warp. A first idea:\n"
        + fence(_DRAFT)
        + "No: tl.arange needs a power of two. 64 covers the rows, and 4 warps.\n</think>\n\n"
        + fence(MODULE)
    ),
    "lone_close_think": (
        "The rows have at most 64 columns, so the block can hold a whole row. Draft:\n"
        + fence(_DRAFT)
        + "That is not a power of two.\n</think>\nHere is the module:\n"
        + fence(MODULE)
    ),
    "launcher_only": "Only the launcher changes:\n\n" + fence("import triton\n\n\n" + LAUNCHER),
    "two_blocks": "The kernel:\n\n" + fence(KERNEL) + "\nand the launcher:\n\n" + fence(LAUNCHER),
    "diff": "The patch:\n\n" + fence(_GIT_DIFF, "diff"),
    "sloppy_diff": "```diff\n" + _SLOPPY_DIFF + "```\n",
    "kernel_only": "Widen the chunks inside the kernel:\n\n" + fence(WIDE_KERNEL),
    "helper_kernel": "With a helper kernel:\n\n" + fence(HELPER_AND_KERNEL),
}

# Issue 53: the forms models and gateways produce besides those above.
_LAUNCHER_MODULE = "import triton\n\n\n" + LAUNCHER
#: The launcher as a chat front end may paste it: no-break spaces in the indentation, a
#: zero-width space after a name; the kernel with typographic quotes around "-inf".
_NBSP_LAUNCHER = "\n".join(
    "\u00a0" * (len(ln) - len(ln.lstrip(" "))) + ln.lstrip(" ") for ln in LAUNCHER.split("\n")
).replace("BLOCK_SIZE = 64", "BLOCK_SIZE\u200b = 64")
_CURLY_KERNEL = KERNEL.replace('float("-inf")', "float(\u201c-inf\u201d)")

STYLES |= {
    "tilde_fence": "~~~ py title=softmax.py\n" + NEW + "~~~\n",
    "list_item": "1. Widen the block and use more warps:\n\n"
    + textwrap.indent(fence(_LAUNCHER_MODULE), "   ")
    + "2. Keep the kernel.\n",
    "block_quote": textwrap.indent(fence(_LAUNCHER_MODULE, "python3"), "> ", lambda _: True),
    "crlf": STYLES["two_blocks"].replace("\n", "\r\n"),
    "unicode_chars": "The kernel:\n\n" + fence(_CURLY_KERNEL) + "\nThe launcher:\n\n"
    + fence("import triton\n\n\n" + _NBSP_LAUNCHER),
    "xml_tags": "<answer>\nThe launcher:\n<code>\n" + _LAUNCHER_MODULE + "</code>\n</answer>\n",
    "json_object": json.dumps(
        {"explanation": "A wider block and more warps.", "code": _LAUNCHER_MODULE}
    ),
    "bare_with_prose": "Only the launcher changes:\n\n" + _LAUNCHER_MODULE
    + "\nThe kernel stays as it is.\n",
}  # fmt: skip
#: The styles issue 53 added (CommonMark, characters, wrappers).
ADDED_53 = (
    "tilde_fence", "list_item", "block_quote", "crlf", "unicode_chars", "xml_tags",
    "json_object", "bare_with_prose",
)  # fmt: skip

#: A reply cut at the output token limit (``finish_reason: "length"``) inside its code block,
#: and the rest the model sends when asked to continue (issue 53).
CUT_FIRST = "Here is the faster version.\n\n```python\n" + NEW[: len(NEW) // 2]
CUT_REST = NEW[len(NEW) // 2 :] + "```\n"

#: Styles whose candidate is the launcher change (:func:`expected_source`).
SAME_CHANGE = tuple(s for s in STYLES if s not in ("kernel_only", "helper_kernel"))
#: The styles issue 30 found giving no candidate before.
FAILED_BEFORE = ("think", "launcher_only", "two_blocks", "diff")
#: A reply in none of the forms: only advice.
PROSE = "You should widen the block to 64 and use 4 warps; the rest can stay as it is."

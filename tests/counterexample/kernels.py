"""Kernels of issue 52's search (tests written for it): the softmax of tests/values/kernels.py
and rewrites an LLM plausibly proposes, each marked ``[search candidate <name>]`` on its first
line.

- ``short_rows_no_max`` (wrong): a fast path for rows of at most 8 columns that skips the max
  subtraction. The harness's rows have 64 columns, every derived shape keeps 63 or 80 and every
  derived value keeps the harness's row length, so the judge's fixed list never reaches the fast
  path; only an input that is both short-rowed and of large magnitude shows it (``exp`` of a
  logit of -260 underflows to 0, and 0 / 0 is NaN): the search composes the two.
- ``short_rows_with_max`` (legitimate): the same fast path, with the max.
- ``block64`` (legitimate): block-size tuning.
"""

from __future__ import annotations

import re

from tests.values.kernels import SOFTMAX_FILE

MARKER = re.compile(r"\[search candidate (\w+)\]")

_SHORT = """
@triton.jit
def short_softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=float("-inf"))
    e = tl.exp(x{minus})
    tl.store(out_ptr + row * out_row_stride + cols, e / tl.sum(e, axis=0), mask=mask)
"""

_FAST_PATH = """    out = torch.empty_like(x)
    if n_cols <= 8:  # short rows: the whole row in one block, one pass
        short_softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=8)
        return out
    BLOCK_SIZE = 64"""

_LAUNCH = """    out = torch.empty_like(x)
    BLOCK_SIZE = 16"""


def name_of(text: str) -> str | None:
    """The candidate name in ``text`` (a source, a prompt), or None."""
    found = MARKER.search(text)
    return found.group(1) if found else None


def _candidate(name: str, kernel: str, launch: str) -> str:
    body = SOFTMAX_FILE.replace("\n\ndef softmax(x):", kernel + "\n\ndef softmax(x):", 1)
    body = body.replace(_LAUNCH, launch, 1)
    assert body != SOFTMAX_FILE
    return f"# a rewrite [search candidate {name}]\n" + body


CANDIDATES = {
    "short_rows_no_max": _candidate("short_rows_no_max", _SHORT.format(minus=""), _FAST_PATH),
    "short_rows_with_max": _candidate(
        "short_rows_with_max", _SHORT.format(minus=" - tl.max(x, axis=0)"), _FAST_PATH
    ),
    "block64": _candidate("block64", "", _LAUNCH.replace("16", "64")),
}

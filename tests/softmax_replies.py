"""Scripted LLM replies about examples/triton/softmax.py, shared by the end-to-end tests.

They are what the scripted OpenAI-compatible server (tests/llm_double.py, a TEST DOUBLE for the
paid LLM service) answers: a genuinely faster single-pass rewrite, one that fails to load, one that
is numerically wrong, one with no code, and the planner's and summarizer's replies.
"""

PLAN = "Title: single-pass online softmax\nLoad each row once, reduce max and sum in registers."
RULE = (
    "Title: keep the row in registers\nRule: when a row fits one block, load it once and fuse "
    "max, exp, sum and normalize with tl.sum."
)

FAST_REWRITE = """Here is a single-pass version.

```python
import os

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=float("-inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out
```
"""
# Loads a name that does not exist: fails when the module is loaded (compile_error).
NO_COMPILE = FAST_REWRITE.replace(
    "import triton.language as tl",
    "import triton.language as tl\nfrom triton.language import no_such_symbol",
)
# Numerically wrong: halves every probability.
WRONG = FAST_REWRITE.replace("num / tl.sum(num, axis=0)", "0.5 * num / tl.sum(num, axis=0)")
NO_CODE = "You should probably load each row once and keep it in registers."

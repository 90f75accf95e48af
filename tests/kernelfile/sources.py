"""Kernel sources and helpers shared by the kernelfile tests."""

from __future__ import annotations

import textwrap
from pathlib import Path

from accelopt_core.textdiff import SourceRange, split_lines

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def text_at(source: str, rng: SourceRange) -> str:
    """The text a SourceRange covers (code-point columns)."""
    lines = split_lines(source)
    if rng.start_line == rng.end_line:
        return lines[rng.start_line - 1][rng.start_col : rng.end_col]
    parts = [lines[rng.start_line - 1][rng.start_col :]]
    parts += lines[rng.start_line : rng.end_line - 1]
    parts.append(lines[rng.end_line - 1][: rng.end_col])
    return "".join(parts)


SOFTMAX_LIKE = src(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = tl.load(y_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x + y, mask=offs < n)


    def _launch(x, y, out):
        add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)


    def add(x, y):
        out = torch.empty_like(x)
        _launch(x, y, out)
        return out


    def get_inputs(seed: int, device: str) -> tuple:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(256, generator=g).to(device), torch.randn(256, generator=g).to(device))


    def reference(x, y):
        return x + y


    BENCH = {"entry": add, "rtol": 1e-4, "atol": 0, "flops": lambda x, y: x.numel(),
             "bytes": lambda x, y: 3 * x.numel() * 4}
    """
)


ORIGINAL = src(
    '''
    """Doc."""

    import os

    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    def scale(x):
        out = torch.empty_like(x)
        BLOCK_SIZE = 32
        scale_kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, out, x.numel(), BLOCK_SIZE=BLOCK_SIZE)
        return out


    # --- harness ---


    def _size(device):
        return 4096 if os.environ.get("BIG") else 256


    def get_inputs(seed: int, device: str) -> tuple:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(_size(device), generator=g).to(device),)


    def reference(x):
        return 2.0 * x


    BENCH = {"entry": scale, "rtol": 1e-5, "atol": 1e-6}
    '''
)
HARNESS_START = ORIGINAL.index("# --- harness ---")

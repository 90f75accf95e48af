"""Baseline fixture: elementwise add with a harness (the ORIGINAL file in worker tests)."""

import torch
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


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(200, generator=g).to(device)
    y = torch.randn(200, generator=g).to(device)
    return x, y


def reference(x, y):
    return x + y


BENCH = {
    "entry": add,
    "flops": lambda x, y: x.numel(),
    "bytes": lambda x, y: 3 * x.numel() * x.element_size(),
}

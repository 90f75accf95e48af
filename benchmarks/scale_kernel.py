"""A Triton harness whose cost follows its tensors' size: ``y = 2 * x`` on a float32 vector of
``SCALE_MIB`` MiB (64 by default), for `reference_store.py` and `profile_scale.py` (issue 50).

Its 16 programs each loop over their share of the vector in 64 Ki-element blocks, so the
kernel compiles for sm_90 in well under a second whatever the size (one block per program of
a million elements does not finish compiling). Run ``accelopt profile`` on it, or read it as
the harness file a benchmark writes next to its own copy.
"""

import os

import torch
import triton
import triton.language as tl

N = int(os.environ.get("SCALE_MIB", "64")) * 2**20 // 4
PROGRAMS = 16
BLOCK = 65536


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    start = pid * per_program
    for offset in range(0, per_program, BLOCK):
        idx = start + offset + tl.arange(0, BLOCK)
        mask = idx < n
        x = tl.load(x_ptr + idx, mask=mask)
        tl.store(y_ptr + idx, 2.0 * x, mask=mask)


def scale(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    per_program = triton.cdiv(triton.cdiv(x.numel(), PROGRAMS), BLOCK) * BLOCK
    scale_kernel[(PROGRAMS,)](x, y, x.numel(), per_program, BLOCK=BLOCK)
    return y


def get_inputs(seed, device):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(N, generator=g).to(device),)


def reference(x):
    return 2.0 * x


BENCH = {"entry": scale, "flops": lambda x: x.numel(), "bytes": lambda x: 8 * x.numel()}

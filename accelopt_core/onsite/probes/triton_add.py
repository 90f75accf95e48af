"""Probe kernel of ``accelopt target check``: element-wise add of 1000 floats, with its harness.

Package data, not a module of the onsite package (``probes/`` has no ``__init__.py``, so the
targets do not ship it as one): the CLI reads this file as text (``importlib.resources``) and
sends it as the candidate and the harness, exactly as a user's kernel file travels. Small and
fixed so that the check takes seconds even under the Triton interpreter on CPU.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y):
    """x + y for two 1-D tensors of the same shape and dtype."""
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
    return out


# --- benchmark harness ---------------------------------------------------------------------


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(1000, generator=g).to(device), torch.randn(1000, generator=g).to(device))


def reference(x, y):
    return x + y


BENCH = {
    "entry": add,
    # one add per element; read x and y, write out
    "flops": lambda x, y: x.numel(),
    "bytes": lambda x, y: 3 * x.numel() * x.element_size(),
}

"""Small real Triton kernels run in-process under the Triton interpreter, shared by the
launch-counter and timing tests (tests/onsite/test_launches.py, tests/onsite/test_timing.py).

``TRITON_INTERPRET=1`` is set for the duration of a test module (Triton 3.x reads it when a
kernel is decorated), and the sources are loaded from strings as the worker loads candidates
(:func:`accelopt_core.onsite.runtime.loading.load_module`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelopt_core.onsite.runtime.loading import load_module

CANDIDATE = "accelopt_test_candidate"
OTHER = "accelopt_test_other"

OTHER_SOURCE = """
import torch
import triton
import triton.language as tl


@triton.jit
def other_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


def launch(x, scale):
    y = torch.empty_like(x)
    other_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
    return y
"""

CANDIDATE_SOURCE = '''
import time

import torch
import triton
import triton.language as tl

import accelopt_test_other


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + 1.0, mask=mask)


SEEN_PTRS = []


def launch(x, scale):
    """y = x * scale + 1 in one launch of 64-element programs."""
    SEEN_PTRS.append(x.data_ptr())
    y = torch.empty_like(x)
    scaled_add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), scale, BLOCK=64)
    return y


def launch_run(x, scale):
    """The same through kernel.run, after a kernel.warmup (no launch)."""
    y = torch.empty_like(x)
    scaled_add_kernel.warmup(x, y, x.numel(), scale, BLOCK=64, grid=(1,))
    grid = (triton.cdiv(x.numel(), 64),)
    scaled_add_kernel.run(x, y, x.numel(), scale, BLOCK=64, grid=grid, warmup=False)
    return y


def launch_twice(x, scale):
    y = launch(x, scale)
    return launch(y, 1.0) - 1.0


def torch_only(x, scale):
    return x * scale + 1.0


def foreign(x, scale):
    return accelopt_test_other.launch(x, scale)


def nested(x, scale):
    @triton.jit
    def inner_kernel(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale + 1.0, mask=mask)

    y = torch.empty_like(x)
    inner_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), scale, BLOCK=64)
    return y


_OUT = {}


def launch_into(x, scale):
    """Honest, but writes every call's result into the same preallocated output tensor."""
    y = _OUT.setdefault(tuple(x.shape), torch.empty_like(x))
    scaled_add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), scale, BLOCK=64)
    return y


_CACHE = {}


def cached(x, scale):
    """A reward hack: the output cached by the input's data_ptr."""
    key = (x.data_ptr(), tuple(x.shape))
    if key not in _CACHE:
        _CACHE[key] = launch(x, scale)
    return _CACHE[key]


_REAL_CLOCK = time.perf_counter


def forged(x, scale):
    """A reward hack: the process clock patched to run 100x slow."""
    time.perf_counter = lambda: _REAL_CLOCK() * 0.01
    return launch(x, scale)


_REAL_CPU_CLOCK = time.process_time


def forged_cpu(x, scale):
    """A reward hack: the process's CPU clock patched to run 100x slow."""
    time.process_time = lambda: _REAL_CPU_CLOCK() * 0.01
    return launch(x, scale)
'''


@pytest.fixture(scope="module")
def interp() -> Iterator[tuple]:
    """(torch, candidate module, other module) under ``TRITON_INTERPRET=1``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        torch = pytest.importorskip("torch")
        triton = pytest.importorskip("triton")
        if not triton.knobs.runtime.interpret:
            pytest.skip("triton was imported without the interpreter")
        other = load_module(OTHER, OTHER_SOURCE, f"<test:{OTHER}>")
        candidate = load_module(CANDIDATE, CANDIDATE_SOURCE, f"<test:{CANDIDATE}>")
        yield torch, candidate, other


def inputs(torch, seed: int, n: int = 200, scale: float = 2.0) -> tuple:
    """(x, scale): ``n`` float32 values from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, generator=g, dtype=torch.float32), scale


def reference(x, scale):
    """What every honest launcher of the candidate computes."""
    return x * scale + 1.0

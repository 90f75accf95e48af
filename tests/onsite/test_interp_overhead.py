"""The interpreter's wasted work is removed without changing a result
(accelopt_core/onsite/contestant/interp_overhead.py).

One subprocess under ``TRITON_INTERPRET=1`` (a fresh Triton, whose interpreter state the
patches change for good) runs the same kernels before and after
``LaunchCounter.install()``, with Triton's ``_patch_lang`` and ``_get_np_dtype`` counted
underneath.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

KERNELS = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_row(x, factor):
    return x * factor


@triton.jit
def row_softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=float("-inf"))
    x = x - tl.max(x, axis=0)  # triton.language.standard: a helper that sees tl.core
    e = tl.exp(x)
    y = scale_row(e, 1.0 / tl.sum(e, axis=0))  # a helper of this module: sees tl
    tl.store(out_ptr + row * stride + cols, y, mask=mask)


@triton.jit
def wrap_kernel(out_ptr, a, b):
    # int32 overflow: wraps, as on a GPU without debug (Triton's check is thrown away there)
    tl.store(out_ptr + tl.program_id(0), a * b + tl.program_id(0))


def softmax(x):
    out = torch.empty_like(x)
    row_softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=64)
    return out


def wrap(a, b, programs):
    out = torch.zeros(programs, dtype=torch.int32)
    wrap_kernel[(programs,)](out, a, b)
    return out
"""

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    from triton.runtime import interpreter as ti
    from accelopt_core.onsite.contestant.launches import LaunchCounter
    from accelopt_core.onsite.runtime.loading import load_module

    def counting(name):  # count the calls of Triton's ti.<name> from here on (a 1-list)
        calls, original = [0], getattr(ti, name)
        def counted(arg):
            calls[0] += 1
            return original(arg)
        setattr(ti, name, counted)
        return calls

    passes, dtype_calls = counting("_patch_lang"), counting("_get_np_dtype")

    mod = load_module("accelopt_test_interp_kernels", sys.argv[1], "<kernels>")
    x = torch.randn(8, 50, generator=torch.Generator().manual_seed(3))

    def run():
        passes[0] = dtype_calls[0] = 0
        y = mod.softmax(x)
        softmax_passes, softmax_dtypes = passes[0], dtype_calls[0]
        w = mod.wrap(70000, 70000, 4)
        return {"softmax": y.tolist(), "softmax_passes": softmax_passes,
                "softmax_dtype_calls": softmax_dtypes,
                "wrap": w.tolist(), "sanitize": ti.interpreter_builder.options.sanitize_overflow}

    before = run()
    LaunchCounter("accelopt_test_interp_kernels").install()
    after = run()
    after_again = run()
    print(json.dumps({"before": before, "after": after, "again": after_again,
                      "reference": torch.softmax(x, dim=1).tolist()}))
    """
)


@pytest.fixture(scope="module")
def record() -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, KERNELS],
        capture_output=True, text=True, env=env, timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_results_are_the_same_bits(record: dict) -> None:
    before, after, again = record["before"], record["after"], record["again"]
    assert after["softmax"] == before["softmax"] == again["softmax"]
    got = torch.tensor(before["softmax"])
    assert torch.allclose(got, torch.tensor(record["reference"]), rtol=0, atol=1e-6)
    # 70000 * 70000 wraps in int32 the same way, with the overflow check on or off
    wrapped = [(70000 * 70000 + i + 2**31) % 2**32 - 2**31 for i in range(4)]
    assert after["wrap"] == before["wrap"] == wrapped


def test_overflow_check_is_off_and_helpers_do_not_patch_again(record: dict) -> None:
    before, after, again = record["before"], record["after"], record["again"]
    assert before["sanitize"] is True and after["sanitize"] is False
    # Triton alone: the launch's pass, then one per helper call (tl.max, tl.sum, scale_row)
    # in each of the 8 programs
    assert before["softmax_passes"] == 1 + 8 * 3
    # Installed: the launch's pass over tl, one pass over tl.core for the standard library's
    # helpers; scale_row and every later program patch nothing new
    assert after["softmax_passes"] == again["softmax_passes"] == 2


def test_the_dtype_table_is_asked_once_per_type(record: dict) -> None:
    before, after, again = record["before"], record["after"], record["again"]
    # Triton alone: every splat, load and reduction of each of the 8 programs asks
    assert before["softmax_dtype_calls"] >= 8 * 5
    # Installed: only types not seen before reach Triton's function (float32 and int32 here,
    # asked in the first launch after install); a second launch asks nothing
    assert 0 < after["softmax_dtype_calls"] <= 3
    assert again["softmax_dtype_calls"] == 0


def test_the_remembered_dtype_is_tritons_for_every_type() -> None:
    import triton.language as tl
    from triton.runtime import interpreter as ti

    from accelopt_core.onsite.contestant.interp_overhead import _remembering_np_dtype

    triton_own = getattr(ti._get_np_dtype, "__wrapped__", ti._get_np_dtype)
    remembered = _remembering_np_dtype(triton_own, tl)
    scalars = [tl.int1, tl.float16, tl.bfloat16, tl.float32, tl.float64, tl.float8e5]
    scalars += [tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64]
    types = scalars + [tl.pointer_type(tl.float32), tl.pointer_type(tl.pointer_type(tl.int8))]
    types += [tl.block_type(t, [4, 8]) for t in scalars]
    types += [tl.block_type(tl.pointer_type(tl.float16), [16])]
    for _ in range(2):  # the first round fills the memory, the second reads it
        for t in types:
            assert remembered(t) == triton_own(t), t
    assert remembered(tl.block_type(tl.uint16, [2])) is remembered(tl.uint16)
    with pytest.raises(KeyError):  # a type Triton's table does not have, then as now
        remembered(tl.void)
    with pytest.raises(KeyError):
        remembered(tl.block_type(tl.void, [2]))


def test_a_triton_without_the_internals_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime import interpreter as ti

    from accelopt_core.onsite.contestant import interp_overhead

    @dataclasses.dataclass(frozen=True)
    class Options:  # an options class whose copy fails
        sanitize_overflow: bool = True
        debug: bool = False

        def __post_init__(self) -> None:
            if not self.sanitize_overflow:
                raise TypeError("cannot be copied")

    options = Options()
    monkeypatch.setattr(ti.interpreter_builder, "options", options)
    monkeypatch.delattr(ti, "_patch_lang")
    assert interp_overhead.install() is False
    assert ti.interpreter_builder.options is options and not hasattr(ti, "_patch_lang")

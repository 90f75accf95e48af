"""TEST DOUBLE of ``nki.language``: buffers, dtypes, ``ndarray``/``zeros``, ranges, and the math
operators passed as ``op=`` to ``nki.isa`` instructions (NumPy ufuncs)."""

from __future__ import annotations

import numpy as np

from ._core import PMAX, PSUM_FMAX, Buffer, new_tensor

sbuf = Buffer("sbuf")
psum = Buffer("psum")
hbm = Buffer("hbm")
shared_hbm = Buffer("shared_hbm")
private_hbm = Buffer("private_hbm")

float32 = np.float32
float16 = np.float16
int32 = np.int32
try:  # bf16 goes through ml_dtypes, as in the simulator
    import ml_dtypes

    bfloat16 = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover - ml_dtypes comes with jax/tensorflow stacks
    bfloat16 = None


class tile_size:  # noqa: N801 - the documented name
    pmax = PMAX
    psum_fmax = PSUM_FMAX
    gemm_stationary_fmax = 128
    gemm_moving_fmax = PSUM_FMAX


def ndarray(shape, dtype, buffer=sbuf):
    """A new (NaN-filled) tensor of ``shape`` in ``buffer``."""
    return new_tensor(shape, dtype, buffer)


def zeros(shape, dtype, buffer=sbuf):
    t = new_tensor(shape, dtype, buffer)
    t.data[...] = 0
    return t


def affine_range(*args):
    return range(*args)


def sequential_range(*args):
    return range(*args)


def static_range(*args):
    return range(*args)


def ds(start, size):
    """Dynamic slice ``start:start+size``."""
    return slice(start, start + size)


def _rsqrt(x, out=None):
    return np.divide(1.0, np.sqrt(x), out=out)


add, subtract, multiply, divide = np.add, np.subtract, np.multiply, np.divide
maximum, minimum = np.maximum, np.minimum
max, min = np.maximum, np.minimum  # noqa: A001 - reduction operators by their NKI names
exp, sqrt, square, tanh, abs = np.exp, np.sqrt, np.square, np.tanh, np.abs  # noqa: A001
rsqrt = _rsqrt
copy = np.positive

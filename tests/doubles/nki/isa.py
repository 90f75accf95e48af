"""TEST DOUBLE of ``nki.isa``: destination-style instructions on NumPy tiles.

Compute instructions read and write on-chip tiles (SBUF/PSUM) only; ``dma_copy`` moves data
between HBM and SBUF. Each instruction adds to the counters the stand-in profiler reports.
"""

from __future__ import annotations

import numpy as np

from ._core import PMAX, PSUM_FMAX, Tensor, count, count_access


def _on_chip(name: str, *tensors: Tensor) -> None:
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"nisa.{name}: expected a tile, got {type(t).__name__}")
        if not t.buffer.on_chip:
            raise TypeError(
                f"nisa.{name}: operand in {t.buffer.name} (HBM); copy it into SBUF with "
                "nisa.dma_copy first"
            )


def _write(name: str, dst: Tensor, value, engine: str) -> None:
    value = np.asarray(value)
    if value.shape != dst.shape:
        raise ValueError(f"nisa.{name}: dst shape {dst.shape} != result shape {value.shape}")
    dst.data[...] = value.astype(dst.dtype)
    count_access(dst, "write")
    count(f"{engine}_instructions", 1)
    count(f"{engine}_elements", value.size)


def _read(*tensors) -> None:
    for t in tensors:
        if isinstance(t, Tensor):
            count_access(t, "read")


def _value(x):
    return x.data.astype(np.float32) if isinstance(x, Tensor) else x


def dma_copy(dst, src, **kwargs):
    """``dst = src`` through a DMA engine (HBM <-> SBUF, or on-chip); casts to dst's dtype."""
    if dst.shape != src.shape:
        raise ValueError(f"nisa.dma_copy: dst shape {dst.shape} != src shape {src.shape}")
    _read(src)
    _write("dma_copy", dst, src.data, "dma")


def tensor_copy(dst, src, **kwargs):
    _on_chip("tensor_copy", dst, src)
    _read(src)
    _write("tensor_copy", dst, src.data, "vector")


def tensor_tensor(dst, data1, data2, op, **kwargs):
    """``dst = op(data1, data2)`` element-wise on the Vector Engine (fp32 math)."""
    _on_chip("tensor_tensor", dst, data1, data2)
    _read(data1, data2)
    _write("tensor_tensor", dst, op(_value(data1), _value(data2)), "vector")
    count("hardware_flops", dst.data.size)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, **kwargs):  # fmt: skip
    """``(data op0 operand0) op1 operand1``; operands are scalars or (P, 1) tiles."""
    _on_chip("tensor_scalar", dst, data)
    _read(data)
    x = _value(data)
    x = op0(_value(operand0), x) if reverse0 else op0(x, _value(operand0))
    if op1 is not None:
        x = op1(_value(operand1), x) if reverse1 else op1(x, _value(operand1))
    _write("tensor_scalar", dst, x, "vector")
    count("hardware_flops", dst.data.size * (2 if op1 is not None else 1))


def activation(dst, op, data, bias=None, scale=1.0, **kwargs):
    """``dst = op(data * scale + bias)`` on the Scalar Engine."""
    _on_chip("activation", dst, data)
    _read(data)
    x = _value(data) * _value(scale)
    if bias is not None:
        x = x + _value(bias)
    _write("activation", dst, op(x), "scalar")
    count("hardware_flops", dst.data.size)


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, **kwargs):
    """Reduce the free axes ``axis`` of ``data`` with ``op`` (``nl.add``, ``nl.max``, ...)."""
    _on_chip("tensor_reduce", dst, data)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if 0 in axes:
        raise ValueError("nisa.tensor_reduce: the partition axis 0 cannot be reduced")
    _read(data)
    x = op.reduce(_value(data), axis=axes, keepdims=keepdims)
    _write("tensor_reduce", dst, -x if negate else x, "vector")
    count("hardware_flops", data.data.size)


def nc_matmul(dst, stationary, moving, **kwargs):
    """``dst = stationary.T @ moving`` on the Tensor Engine into a PSUM tile: the contraction
    (partition) dim <= 128, stationary free <= 128, moving free <= 512."""
    _on_chip("nc_matmul", stationary, moving)
    if dst.buffer.name != "psum":
        raise ValueError("nisa.nc_matmul: dst must be a PSUM tile")
    (k, m), (k2, n) = stationary.shape, moving.shape
    if k != k2 or k > PMAX or m > 128 or n > PSUM_FMAX:
        raise ValueError(
            f"nisa.nc_matmul: stationary {stationary.shape} / moving {moving.shape} exceed "
            f"K <= {PMAX}, M <= 128, N <= {PSUM_FMAX} or do not contract"
        )
    _read(stationary, moving)
    _write("nc_matmul", dst, _value(stationary).T @ _value(moving), "tensor")
    count("hardware_flops", 2 * k * m * n)


def nc_transpose(dst, data, **kwargs):
    """``dst = data.T`` (partition <-> free) on the Tensor Engine; both at most 128."""
    _on_chip("nc_transpose", dst, data)
    if max(data.shape) > PMAX:
        raise ValueError(f"nisa.nc_transpose: {data.shape} exceeds {PMAX} x {PMAX}")
    _read(data)
    _write("nc_transpose", dst, _value(data).T, "tensor")


def memset(dst, value, **kwargs):
    _on_chip("memset", dst)
    _write("memset", dst, np.full(dst.shape, value), "gpsimd")

"""Core of the NKI test double: tensors with a memory buffer, the 128-partition limit, the
instruction counters the stand-in profiler reports, and running a kernel on NumPy arrays."""

from __future__ import annotations

import json
import os

import numpy as np

PMAX = 128  # partitions of SBUF / PSUM
PSUM_FMAX = 512  # fp32 elements per partition of one PSUM tile (2 KiB)

#: Counters of the last kernel run (what the stand-in neuron-profile reports).
STATS: dict[str, float] = {}


class Buffer:
    """A memory: ``hbm``, ``shared_hbm``, ``private_hbm``, ``sbuf`` or ``psum``."""

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def on_chip(self) -> bool:
        return self.name in ("sbuf", "psum")

    @property
    def kind(self) -> str:
        return "hbm" if not self.on_chip else self.name

    def __repr__(self) -> str:
        return f"nl.{self.name}"


class Tensor:
    """A tensor in one buffer: a NumPy view (slicing gives views of the same memory)."""

    def __init__(self, data: np.ndarray, buffer: Buffer) -> None:
        self.data = data
        self.buffer = buffer

    shape = property(lambda self: tuple(self.data.shape))
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: self.data.ndim)

    def __getitem__(self, index) -> Tensor:
        view = self.data[index]
        if not isinstance(view, np.ndarray):
            view = self.data[index : index + 1] if isinstance(index, int) else np.asarray(view)
        return Tensor(view, self.buffer)

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.shape}, {self.dtype}, {self.buffer!r})"


def check_partitions(shape: tuple, buffer: Buffer) -> None:
    """Raise ValueError when an on-chip tile has more than 128 partitions."""
    if buffer.on_chip and shape and shape[0] > PMAX:
        raise ValueError(
            f"partition dimension {shape[0]} exceeds the {PMAX} partitions of {buffer.name.upper()}"
        )


def new_tensor(shape, dtype, buffer: Buffer) -> Tensor:
    """A NaN-filled tensor (integers: all ones bits): uninitialised memory shows when read."""
    shape = tuple(int(s) for s in shape)
    check_partitions(shape, buffer)
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        data = np.full(shape, np.nan, dtype=dtype)
    else:
        data = np.full(shape, -1, dtype=dtype)
    return Tensor(data, buffer)


def count(key: str, amount: float) -> None:
    STATS[key] = STATS.get(key, 0.0) + float(amount)


def count_access(tensor: Tensor, direction: str) -> None:
    """Bytes read or written in the tensor's memory (``hbm_read_bytes``, ``sbuf_write_bytes``)."""
    count(f"{tensor.buffer.kind}_{direction}_bytes", tensor.data.nbytes)


HBM = Buffer("hbm")


def _wrap(arg):
    if isinstance(arg, np.ndarray):
        return Tensor(arg, HBM)  # no copy: a kernel writing its input mutates it
    return arg


def _unwrap(out):
    if isinstance(out, Tensor):
        return out.data.copy()
    if isinstance(out, (tuple, list)):
        return type(out)(_unwrap(o) for o in out)
    return out


def run(fn, args, kwargs):
    """Run kernel ``fn`` on NumPy arrays (wrapped as HBM tensors); outputs come back as arrays."""
    STATS.clear()
    out = fn(*[_wrap(a) for a in args], **{k: _wrap(v) for k, v in kwargs.items()})
    return _unwrap(out)


def write_neff(name: str) -> None:
    """Under ``NEURON_RT_INSPECT_ENABLE=1``, write ``<name>.neff`` (JSON counters of the run) into
    ``NEURON_RT_INSPECT_OUTPUT_DIR``, as the Neuron runtime dumps the NEFFs it executes."""
    if os.environ.get("NEURON_RT_INSPECT_ENABLE") != "1":
        return
    out_dir = os.environ.get("NEURON_RT_INSPECT_OUTPUT_DIR") or "./output"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.neff"), "w") as f:
        json.dump({"kernel": name, "stats": STATS}, f)

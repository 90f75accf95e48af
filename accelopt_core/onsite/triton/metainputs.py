"""The compile stage's inputs without their data (issue 50, item 5).

What Triton compiles for a launch depends on the arguments' dtypes, shapes, strides and
alignment (``tt.divisibility`` 16 on a pointer, an int divisible by 16 or equal to 1) and on
the constexprs, never on the values. So the compile stage (:mod:`.compile`) asks the harness
for its inputs on torch's ``meta`` device: :func:`meta_inputs` calls ``get_inputs(seed,
device, **shape)`` with the real device name (a harness may choose its shapes by device) under
:func:`to_meta`, which makes every tensor on ``meta`` (no storage, nothing random, nothing
copied). A meta tensor's ``data_ptr()`` is its storage offset in bytes from address 0, so a
pointer is divisible by 16 exactly when the real one is (torch's allocators align every
storage to at least 64 bytes; the exchange maps storages page-aligned and keeps offsets), and
Triton's binder computes the same specialization key (``tests/onsite/triton/
test_metainputs.py`` checks it against the real and the exchanged inputs). The stage's cost
then does not grow with the inputs' size: a harness scaling a 64 MiB vector and one scaling
256 MiB make the same few kilobytes of tensor metadata.

The entry's host code runs on those meta tensors (``torch.empty_like``, views, ``stride()``
work as usual). Two cases fall back to the real inputs, made as before the change, for that
input set only (:func:`.compile._one_call`): a harness that cannot make its inputs under
:func:`to_meta` (it reads values: ``.item()``, ``nonzero``), and an entry whose host code
raises on meta tensors with an error of its own (not a compile or launch failure, which is the
verdict whatever the inputs) or launches no kernel on them (it branches on ``x.is_cuda``, reads
values). Data a harness makes outside torch (NumPy arrays) is still made; its copy to the
device is not.

Standard library only at module level.
"""

from __future__ import annotations

import contextlib

#: Name of the device every tensor is made on.
META = "meta"


#: Attribute naming the device a meta tensor stands for (``"cpu"``, ``"cuda"``).
_STANDS_FOR = "_accelopt_device"


def _kind(device) -> str:
    """The device type ``device`` names (``"cuda:0"``, ``torch.device``, or an int: CUDA)."""
    if type(device) is int:
        return "cuda"
    return str(getattr(device, "type", device)).split(":")[0]


def _stands_for(obj) -> str | None:
    """The device the first tensor in ``obj`` (an argument list) stands for, or None."""
    for value in obj:
        if isinstance(value, list | tuple):
            found = _stands_for(value)
            if found is not None:
                return found
        elif hasattr(value, "data_ptr"):
            return getattr(value, _STANDS_FOR, None) or value.device.type
    return None


def _mark(out, kind: str) -> None:
    """Note on each tensor in ``out`` the device it stands for."""
    if isinstance(out, list | tuple):
        for value in out:
            _mark(value, kind)
    elif hasattr(out, "data_ptr"):
        try:
            setattr(out, _STANDS_FOR, kind)
        except (AttributeError, RuntimeError):  # a tensor subclass with slots
            pass


def _move(torch, func, args: tuple, kwargs: dict):
    """``Tensor.to`` / ``.cuda`` / ``.cpu`` / ``.pin_memory`` on a tensor that stands for one
    on another device: the same tensor when device and dtype do not change (as torch returns
    ``self``), else a fresh ``meta`` copy (storage offset 0, strides as ``preserve_format``
    keeps them), which stands for the target device."""
    Tensor = torch.Tensor
    self_, rest = args[0], args[1:]
    source = getattr(self_, _STANDS_FOR, None) or self_.device.type
    target, dtype = None, kwargs.get("dtype")
    if func is Tensor.cuda:
        target = "cuda"
    elif func is Tensor.cpu:
        target = "cpu"
    elif func is Tensor.to:
        for value in rest:
            if isinstance(value, torch.dtype):
                dtype = value
            elif isinstance(value, Tensor):
                target, dtype = _stands_for([value]), value.dtype
            elif isinstance(value, str | torch.device) or type(value) is int:
                target = _kind(value)
        if kwargs.get("device") is not None:
            target = _kind(kwargs["device"])
    target, dtype = target or source, dtype or self_.dtype
    if target == source and dtype == self_.dtype and not kwargs.get("copy"):
        return self_
    fmt = kwargs.get("memory_format", torch.preserve_format)
    out = self_.to(device=META, dtype=dtype, memory_format=fmt, copy=True)
    _mark(out, target)
    return out


def _no_draw(torch, func, args: tuple, kwargs: dict):
    """The tensor a random draw would make, uninitialised (``torch.empty``), or None when
    ``func`` draws nothing: the draws' ``meta`` kernels import ``torch.fx.experimental.
    symbolic_shapes`` (0.7 s on the 2-core box, once per process), an empty tensor nothing."""
    Tensor = torch.Tensor
    if func in (Tensor.normal_, Tensor.uniform_, Tensor.random_, Tensor.exponential_):
        return args[0]
    if func in (torch.randn, torch.rand):
        return torch.empty(*args, **kwargs)
    if func in (torch.randn_like, torch.rand_like, torch.randint_like):
        keep = ("dtype", "device", "memory_format", "layout", "requires_grad")
        return torch.empty_like(args[0], **{k: v for k, v in kwargs.items() if k in keep})
    if func is torch.randint and args and isinstance(args[-1], tuple | list):
        return torch.empty(tuple(args[-1]), **dict({"dtype": torch.int64}, **kwargs))
    if func is torch.randperm and args:
        return torch.empty(args[0], **dict({"dtype": torch.int64}, **kwargs))
    return None


def _mode(torch):
    """A torch function mode that puts every tensor a call makes on ``meta`` and notes the
    device it stands for: a ``device=`` argument (``torch.randn(..., device="cuda")``) becomes
    ``"meta"``, ``Tensor.to(device)`` / ``.cuda()`` / ``.cpu()`` copy only when the device
    stood for or the dtype changes (:func:`_move`: so a sliced CPU tensor copied to the GPU
    starts aligned there, as on the real device), and ``generator=`` is dropped (a CPU or CUDA
    generator is refused on ``meta``, and torch's reference implementation would import
    ``torch._dynamo``: :func:`..runtime.sizes._without_generators`)."""
    from torch.overrides import TorchFunctionMode

    Tensor = torch.Tensor
    moves = {Tensor.to, Tensor.cuda, Tensor.cpu, Tensor.pin_memory}

    class _ToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = {k: v for k, v in (kwargs or {}).items() if k != "generator"}
            if func in moves:
                return _move(torch, func, args, kwargs)
            device = kwargs.get("device")
            if device is not None:
                kwargs["device"] = META
            out = _no_draw(torch, func, args, kwargs)
            if out is None:
                out = func(*args, **kwargs)
            given = _kind(device) if device is not None else META
            kind = given if given != META else _stands_for(args)
            _mark(out, kind or "cpu")
            return out

    return _ToMeta()


@contextlib.contextmanager
def to_meta(torch):
    """Within it, every tensor torch makes is on the ``meta`` device (:func:`_mode`) and
    factories without a device default to it."""
    with torch.device(META), _mode(torch):
        yield


def _all_meta(obj, torch, depth: int = 0) -> bool:
    """True when every tensor in ``obj`` (nested tuples, lists, dict values) is on ``meta``."""
    if isinstance(obj, torch.Tensor):
        return obj.device.type == META
    if depth > 8:
        return True
    if isinstance(obj, tuple | list):
        return all(_all_meta(v, torch, depth + 1) for v in obj)
    if isinstance(obj, dict):
        return all(_all_meta(v, torch, depth + 1) for v in obj.values())
    return True


def preimport() -> None:
    """Import what torch's ``meta`` kernels import on their first use
    (``torch.fx.experimental.symbolic_shapes``, through ``torch._prims_common``: 0.6-0.7 s on
    the 2-core box), so that a warm worker does it once for every compile stage it forks
    (:func:`..process.warmstack.preload`). Pure Python: no thread is started, the fork stays
    safe. Errors are left to the first use."""
    try:
        import torch.fx.experimental.symbolic_shapes  # noqa: F401
    except Exception:  # noqa: BLE001 - imported again on first use
        pass


def meta_inputs(harness, seed: int, device: str, shape: dict | None, torch) -> tuple | None:
    """``harness.get_inputs(seed, device, **shape)`` made under :func:`to_meta`: a tuple of the
    inputs, each tensor on ``meta`` with the dtype, shape, strides and storage offset of the
    real one, other values (ints, floats, strings) as the harness returns them. None when
    ``get_inputs`` raises there, returns no tuple or list, or returns a tensor torch could not
    make on ``meta`` (a NumPy array, say): the caller then makes the real inputs."""
    try:
        with to_meta(torch):
            got = harness.get_inputs(seed, device, **(shape or {}))
    except Exception:  # noqa: BLE001 - the harness needs values: the real inputs are made
        return None
    if not isinstance(got, tuple | list) or not _all_meta(got, torch):
        return None
    return tuple(got)

"""Tensors between the judge's processes, by reference (issue 50; DESIGN.md "Evaluating a
candidate", item 9).

A value (a tensor, a NumPy array, a tuple / list / dict of them, or a plain scalar) crosses as
one :class:`Segment`: an anonymous shared-memory file (``memfd_create``) holding the bytes of
every storage the value's tensors view, sealed against any further write (``F_SEAL_WRITE``,
``F_SEAL_SHRINK``, ``F_SEAL_GROW``, ``F_SEAL_SEAL``), plus a JSON *layout* that says which
tensor views which bytes. The descriptor travels over the peers' channel as ``SCM_RIGHTS``
ancillary data (:mod:`.runtime.channel`), so no file name exists that another process could
replace, and nothing is left in ``/dev/shm`` when a process dies: the kernel frees the memory
with the last descriptor or mapping. torch.multiprocessing shares CPU tensors the same way
(shared-memory file descriptors); doing it over our own channel keeps the rules below in
the judge's hands instead of in a resource-sharer thread of the sender.

The layout: ``{"size": bytes, "spec": S, "storages": [[offset, nbytes], ...], "tensors":
[{"s": storage, "dtype": "float32", "shape": [...], "stride": [...], "offset": elements},
...]}``. ``S`` mirrors the value's structure: ``{"t": i}`` a ``torch.Tensor`` (``tensors[i]``),
``{"a": i}`` a NumPy array (sent as a tensor), ``{"u": [...]}`` a tuple, ``{"l": [...]}`` a
list, ``{"d": {...}}`` a dict with string keys, ``{"v": x}`` an int / float / bool / str /
None, and ``{"x": "mod.Type"}`` a value of any other type, which is not sent: the sender
records the exact type it saw (a tensor subclass or a proxy is ``x``) and the judge rejects
it. Views keep their strides and storage offsets (a column-major or sliced input reaches the
candidate as the same view of the same bytes), and tensors that share a storage share it on
the other side too. Storages start at multiples of :data:`ALIGN` bytes, as the CPU allocator's.

Trust (docs/concepts/judging.md, "The tensor exchange"):

- A receiver maps a sealed segment privately (``MAP_PRIVATE``): it reads the sender's bytes
  without a copy, and its own writes (a candidate writing into its inputs) stay in its own
  pages. The seals make the bytes immutable for everyone, the sender included: a candidate
  that keeps its descriptor, or a mapping, cannot change what the judge reads after the call
  returned (the kernel refuses ``F_SEAL_WRITE`` while a writable shared mapping exists, so a
  sealed segment has none).
- A segment that is not sealed (a platform without ``memfd_create``: an unlinked temporary
  file instead) is copied into private memory when it is received: a copy the sender can no
  longer write.
- What a peer sends is untrusted data: the descriptor must be a regular file of the layout's
  size, every tensor's extent must lie inside its storage and every storage inside the
  segment, dtypes come from a fixed list, and the structure is bounded in depth
  (:class:`ExchangeError` otherwise). No pickle is involved.
"""

from __future__ import annotations

import mmap
import os
import stat
import tempfile
import weakref

_MAX_DEPTH = 32
#: Storages start at multiples of this many bytes inside a segment (c10's CPU alignment; the
#: page-aligned mapping keeps it), so a kernel sees the pointer alignment it saw before.
ALIGN = 64
#: Most tensors in one value, and most dimensions of one tensor.
MAX_TENSORS = 4096
MAX_DIMS = 16
#: The dtypes a segment may declare (``torch.<name>``).
DTYPES = frozenset(
    "float16 float32 float64 bfloat16 complex32 complex64 complex128 bool uint8 int8 int16 "
    "int32 int64 uint16 uint32 uint64 float8_e4m3fn float8_e5m2 float8_e4m3fnuz "
    "float8_e5m2fnuz float8_e8m0fnu".split()
)


class ExchangeError(Exception):
    """A segment from a peer that is unreadable or malformed."""


class Foreign:
    """A value of another type than a plain tensor / array / scalar (``name``: its type)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _type_name(obj) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def pack(obj, tensors: list, *, torch, numpy=None, depth: int = 0) -> dict:
    """The spec of ``obj``; its tensors are appended to ``tensors`` (detached). Exact types:
    ``type(x) is torch.Tensor`` / ``numpy.ndarray``; anything else non-scalar is ``x``, and
    so is a tensor that is not strided (sparse, nested) or lives on another device than the
    CPU or CUDA."""
    if depth > _MAX_DEPTH:
        return {"x": "nesting too deep"}
    if type(obj) is torch.Tensor:
        if obj.layout != torch.strided or obj.device.type not in ("cpu", "cuda"):
            return {"x": f"torch.Tensor ({obj.layout}, {obj.device.type})"}
        tensors.append(obj.detach())
        return {"t": len(tensors) - 1}
    if numpy is not None and type(obj) is numpy.ndarray:
        try:
            tensors.append(torch.from_numpy(numpy.ascontiguousarray(obj)))
        except (TypeError, ValueError, RuntimeError):
            return {"x": f"numpy.ndarray of {obj.dtype}"}
        return {"a": len(tensors) - 1}
    if obj is None or type(obj) in (int, float, bool, str):
        return {"v": obj}
    if isinstance(obj, (tuple, list)):
        items = [pack(o, tensors, torch=torch, numpy=numpy, depth=depth + 1) for o in obj]
        return {"u": items} if isinstance(obj, tuple) else {"l": items}
    if type(obj) is dict and all(type(k) is str for k in obj):
        return {
            "d": {
                k: pack(v, tensors, torch=torch, numpy=numpy, depth=depth + 1)
                for k, v in obj.items()
            }
        }
    return {"x": _type_name(obj)}


# -- segments ----------------------------------------------------------------------------------
def _seals() -> int:
    import fcntl

    return fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def _sealed(fd: int) -> bool:
    """True when ``fd`` is a memfd that nobody can write, grow or shrink any more."""
    try:
        import fcntl

        need = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        return fcntl.fcntl(fd, fcntl.F_GET_SEALS) & need == need
    except (OSError, AttributeError, ImportError):
        return False


def _new_fd(size: int) -> int:
    """A fresh anonymous file of ``size`` bytes: a sealable memfd, or (no ``memfd_create``) an
    unlinked temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("accelopt-exchange", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    else:
        with tempfile.TemporaryFile() as f:
            fd = os.dup(f.fileno())
    try:
        os.ftruncate(fd, size)
    except OSError:
        os.close(fd)
        raise
    return fd


class Segment:
    """One value in a shared-memory file: the descriptor ``fd`` (owned: closed by
    :meth:`close` or when the object is collected) and its ``layout`` (the module docstring).

    Made by :func:`share` (the sender) or by :func:`adopt` (the receiver, which validates).
    :meth:`value` maps it as tensors; :meth:`dup` gives a second descriptor to send on."""

    def __init__(self, fd: int, layout: dict, sealed: bool) -> None:
        self.fd = fd
        self.layout = layout
        self.sealed = sealed
        self._closer = weakref.finalize(self, _close_quietly, fd)

    @property
    def nbytes(self) -> int:
        """The segment's size in bytes."""
        return int(self.layout["size"])

    def close(self) -> None:
        """Close the descriptor (mappings made by :meth:`value` stay valid). Idempotent."""
        self._closer()

    def value(self, torch, device: str | None = None):
        """The value, its tensors on ``device`` (default CPU). On the CPU a sealed segment is
        mapped privately (no copy; writes stay in this process), an unsealed one copied into
        private memory. Raises ExchangeError when the segment cannot be mapped."""
        size = self.nbytes
        buf = None
        if size:
            try:
                if self.sealed:
                    prot = mmap.PROT_READ | mmap.PROT_WRITE
                    buf = mmap.mmap(self.fd, size, mmap.MAP_PRIVATE, prot)
                else:
                    buf = bytearray(size)
                    view, done = memoryview(buf), 0
                    while done < size:
                        got = os.preadv(self.fd, [view[done:]], done)
                        if got <= 0:
                            raise OSError("the segment is shorter than its layout")
                        done += got
            except (OSError, ValueError) as exc:
                raise ExchangeError(f"cannot map a segment: {exc}") from None
        tensors = _tensors(self.layout, buf, torch, device)
        return _unpack(self.layout["spec"], tensors, 0, torch)

    def dup(self) -> Segment:
        """Another Segment on a duplicate of the descriptor (the same bytes), to send while
        this one is kept."""
        return Segment(os.dup(self.fd), self.layout, self.sealed)

    def __repr__(self) -> str:
        return f"<Segment fd={self.fd} {self.nbytes} B{' sealed' if self.sealed else ''}>"


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def storage_bytes(torch, tensor):
    """A uint8 tensor (on ``tensor``'s device) over the whole storage ``tensor`` views."""
    return torch.empty(0, dtype=torch.uint8, device=tensor.device).set_(tensor.untyped_storage())


def share(obj, *, torch, numpy=None) -> Segment:
    """``obj`` in a new sealed segment (see the module docstring). Each distinct storage its
    tensors view is copied once (a CUDA storage straight into the shared pages); views keep
    their strides and offsets. Raises OSError when the memory cannot be had (the caller's
    failure: a full ``/dev/shm`` or memory limit)."""
    tensors: list = []
    spec = pack(obj, tensors, torch=torch, numpy=numpy)
    storages: list[list[int]] = []
    where: dict[tuple, int] = {}
    sources: list = []
    entries = []
    size = 0
    for t in tensors:
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
        key = (t.device.type, t.device.index, storage.data_ptr(), nbytes)
        if nbytes == 0 or key not in where:
            size = -(-size // ALIGN) * ALIGN
            where[key] = len(storages)
            storages.append([size, nbytes])
            sources.append(t)
            size += nbytes
        entries.append(
            {
                "s": where[key],
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "stride": list(t.stride()),
                "offset": t.storage_offset(),
            }
        )
    layout = {"size": size, "spec": spec, "storages": storages, "tensors": entries}
    fd = _new_fd(size)
    try:
        _fill(fd, size, storages, sources, torch)
        sealed = False
        if hasattr(os, "memfd_create"):
            import fcntl

            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _seals())
            sealed = True
    except BaseException:
        os.close(fd)
        raise
    return Segment(fd, layout, sealed)


def _fill(fd: int, size: int, storages: list, sources: list, torch) -> None:
    """Copy each source's storage to its offset in the file ``fd``: CPU storages with
    ``pwrite`` (the kernel copies into the pages it allocates, 1.5x faster than faulting in a
    shared mapping on the development box, ``benchmarks/exchange_hop.py``), CUDA storages
    through one shared mapping (device to host straight into the shared pages)."""
    cuda = [(o, n, src) for (o, n), src in zip(storages, sources, strict=True) if src.is_cuda]
    for (off, nbytes), src in zip(storages, sources, strict=True):
        if nbytes and not src.is_cuda:
            view = memoryview(storage_bytes(torch, src).numpy())
            done = 0
            while done < nbytes:
                done += os.pwrite(fd, view[done:], off + done)
    if not any(n for _, n, _ in cuda):
        return
    mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        dst = torch.frombuffer(mm, dtype=torch.uint8)
        for off, nbytes, src in cuda:
            if nbytes:
                dst[off : off + nbytes].copy_(storage_bytes(torch, src))
        del dst
    finally:
        mm.close()


def _int(value, what: str, low: int = 0) -> int:
    if type(value) is not int or value < low:
        raise ExchangeError(f"malformed layout: {what} {str(value)[:40]!r}")
    return value


def check_layout(layout, size: int) -> dict:
    """``layout`` when it describes a segment of ``size`` bytes: every storage inside the
    segment, every tensor's extent inside its storage, known dtypes, bounded counts. Raises
    ExchangeError naming the first problem."""
    if not isinstance(layout, dict) or set(layout) != {"size", "spec", "storages", "tensors"}:
        raise ExchangeError("malformed layout")
    if _int(layout["size"], "size") != size:
        raise ExchangeError(f"the layout says {layout['size']} bytes, the segment has {size}")
    storages, tensors = layout["storages"], layout["tensors"]
    if not isinstance(storages, list) or not isinstance(tensors, list):
        raise ExchangeError("malformed layout")
    if len(tensors) > MAX_TENSORS or len(storages) > len(tensors):
        raise ExchangeError(f"more than {MAX_TENSORS} tensors")
    for entry in storages:
        if not isinstance(entry, list) or len(entry) != 2:
            raise ExchangeError("malformed storage entry")
        off, nbytes = _int(entry[0], "storage offset"), _int(entry[1], "storage size")
        if off + nbytes > size:
            raise ExchangeError("a storage reaches past the end of the segment")
    for t in tensors:
        if not isinstance(t, dict) or set(t) != {"s", "dtype", "shape", "stride", "offset"}:
            raise ExchangeError("malformed tensor entry")
        s = _int(t["s"], "storage index")
        if s >= len(storages):
            raise ExchangeError(f"storage index {s} out of range")
        if t["dtype"] not in DTYPES:
            raise ExchangeError(f"dtype {str(t['dtype'])[:40]!r} is not accepted")
        shape, stride = t["shape"], t["stride"]
        if not isinstance(shape, list) or not isinstance(stride, list):
            raise ExchangeError("malformed tensor entry")
        if len(shape) != len(stride) or len(shape) > MAX_DIMS:
            raise ExchangeError("malformed tensor entry")
        for n in shape:
            _int(n, "dimension")
        for n in stride:
            _int(n, "stride")
        _int(t["offset"], "storage offset")
    return layout


def _tensors(layout: dict, buf, torch, device: str | None = None) -> list:
    """The tensors of a checked ``layout`` over ``buf`` (the segment's bytes, or None when it
    is empty), on ``device`` (None or ``"cpu"``: views of ``buf`` itself; else each storage is
    copied to the device once and the tensors view the copy, so strides, storage offsets and
    aliasing survive the move). Raises ExchangeError for a tensor whose extent leaves its
    storage."""
    bases: dict[int, object] = {}

    def base(s: int):
        if s not in bases:
            off, nbytes = layout["storages"][s]
            if nbytes and buf is not None:
                b = torch.frombuffer(buf, dtype=torch.uint8, count=nbytes, offset=off)
            else:
                b = torch.empty(0, dtype=torch.uint8)
            bases[s] = b if device in (None, "cpu") else b.to(device)
        return bases[s]

    out = []
    for t in layout["tensors"]:
        nbytes = layout["storages"][t["s"]][1]
        dtype = getattr(torch, t["dtype"], None)
        if not isinstance(dtype, torch.dtype):
            raise ExchangeError(f"dtype {t['dtype']!r} is not known to this torch")
        item = torch.empty(0, dtype=dtype).element_size()
        shape, stride, first = t["shape"], t["stride"], t["offset"]
        numel = 1
        for n in shape:
            numel *= n
        last = first + sum((n - 1) * s for n, s in zip(shape, stride, strict=True))
        if numel and (last + 1) * item > nbytes:
            raise ExchangeError("a tensor reaches past the end of its storage")
        flat = base(t["s"])[: nbytes // item * item].view(dtype)
        out.append(flat.as_strided(shape, stride, first if numel else 0))
    return out


def adopt(fd: int, layout) -> Segment:
    """The Segment a peer sent: ``fd`` (now owned: closed on error) with its ``layout``,
    checked against the descriptor (a regular file of the layout's size; sealed or not, as it
    is). Raises ExchangeError."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ExchangeError("a segment that is not a regular file")
        check_layout(layout, st.st_size)
    except BaseException:
        _close_quietly(fd)
        raise
    return Segment(fd, layout, _sealed(fd))


def _unpack(spec, tensors: list, depth: int, torch):
    """The value of a spec entry; raises ExchangeError for a malformed one."""
    if depth > _MAX_DEPTH or not isinstance(spec, dict) or len(spec) != 1:
        raise ExchangeError(f"malformed entry {str(spec)[:80]!r}")
    ((kind, val),) = spec.items()
    if kind in ("t", "a"):
        if type(val) is not int or not 0 <= val < len(tensors):
            raise ExchangeError(f"tensor index {val!r} out of range")
        tensor = tensors[val]
        return tensor if kind == "t" else tensor.numpy()
    if kind in ("u", "l") and isinstance(val, list):
        items = [_unpack(v, tensors, depth + 1, torch) for v in val]
        return tuple(items) if kind == "u" else items
    if kind == "d" and isinstance(val, dict):
        return {str(k): _unpack(v, tensors, depth + 1, torch) for k, v in val.items()}
    if kind == "v" and (val is None or type(val) in (int, float, bool, str)):
        return val
    if kind == "x" and isinstance(val, str):
        return Foreign(val[:200])
    raise ExchangeError(f"malformed entry {str(spec)[:80]!r}")


def foreign(obj, where: str = "") -> tuple[str, str] | None:
    """``(position, type name)`` of the first :class:`Foreign` leaf in ``obj`` (a received
    value), else None. ``position`` is ``""`` for ``obj`` itself, ``" #1"`` for item 1."""
    if isinstance(obj, Foreign):
        return where, obj.name
    items = (
        obj.items()
        if isinstance(obj, dict)
        else enumerate(obj)
        if isinstance(obj, (tuple, list))
        else ()
    )
    for key, item in items:
        found = foreign(item, f"{where} #{key}")
        if found:
            return found
    return None

"""Derived shapes (issue 22): new inputs made from the harness's own, one size symbol at a time.

A harness usually benchmarks one shape (``get_inputs`` returns a 16×64 tensor), so a candidate
that hard-codes what that shape happens to be (a literal column count, a literal grid, literal
strides, a mask dropped because 64 columns fit one block) is correct on it and wrong everywhere
else. From the inputs of one seed, :func:`plan` infers the **size symbols**: dimensions of equal
length across the input tensors are one symbol (K of A and K of B in a matmul; every dimension of
a 64×64 tensor), a dimension of length 1 is left alone. Each symbol of length ``n`` gives two
derived shapes: ``n → n - 1`` (64 → 63: a length that is not a multiple of any power-of-two
block) and ``n → n + max(1, n // 4)`` (64 → 80, 16 → 20: longer than the benchmarked one).
:func:`apply` makes the derived inputs by trimming or tiling every dimension of that symbol
(contiguous copies, so the values keep the harness's own distribution).

A derivation that cannot apply is skipped with its reason, never silently: an input that is no
torch tensor but an ``int`` equal to a symbol's length (a size argument the derivation cannot
change consistently), inputs without any tensor, a symbol past :data:`MAX_SYMBOLS`. Whether a
derived shape is *usable* (the reference runs on it and the baseline is correct on it) is decided
by the judge (:mod:`.derived_checks`), never here.

Descriptor of one derived shape (JSON; the host copies the baseline's ``used`` list into every
candidate's request)::

    {"kind": "shape", "name": "x[1] 64→63", "symbol": "d1", "from": 64, "to": 63,
     "inputs": "x: 16×63", "dims": [[0, 1]]}

``dims``: ``[input index, dimension]`` of every occurrence of the symbol. Standard library at
module level; torch is imported inside :func:`apply`.
"""

from __future__ import annotations

import math

#: Most size symbols derived per harness (two derived shapes each); the others are skipped with
#: a reason. Three covers M, N, K of a matmul and rows, columns of a row kernel.
MAX_SYMBOLS = 3
#: Largest factor by which a derived input may grow (tiling ``n → n + n // 4`` is 1.25×).
_MAX_GROWTH = 1.5
_MAX_NAME = 200


def _is_tensor(obj) -> bool:
    """A torch tensor (duck-typed as in :func:`.judge.compare.is_tensor`; NumPy arrays are not)."""
    return hasattr(obj, "data_ptr") and hasattr(obj, "dtype") and hasattr(obj, "shape")


def _is_int(obj) -> bool:
    return isinstance(obj, int) and not isinstance(obj, bool)


def parameter_names(fn) -> list[str]:
    """``fn``'s positional parameter names (the harness's ``reference``: how derived inputs
    name its inputs); ``[]`` when it has no signature."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds]


def input_names(inputs: tuple, names: list[str] | None) -> list[str]:
    """One name per input: ``names[i]`` (the reference's parameters) where given and an
    identifier, else ``arg<i>``."""
    names = list(names or [])
    out = []
    for i in range(len(inputs)):
        name = names[i] if i < len(names) else None
        out.append(name if isinstance(name, str) and name.isidentifier() else f"arg{i}")
    return out


def symbols(inputs: tuple) -> list[dict]:
    """The size symbols of ``inputs``, in order of first occurrence (input order, then
    dimension order): ``{"symbol": "d0", "length": 16, "dims": [[0, 0], ...]}``. Every
    dimension of length > 1 of a torch tensor input belongs to the symbol of its length;
    length-1 dimensions, 0-d tensors and non-tensor inputs belong to none."""
    by_length: dict[int, dict] = {}
    for i, value in enumerate(inputs):
        if not _is_tensor(value):
            continue
        for d, n in enumerate(tuple(int(s) for s in value.shape)):
            if n <= 1:
                continue
            sym = by_length.get(n)
            if sym is None:
                sym = by_length[n] = {"symbol": f"d{len(by_length)}", "length": n, "dims": []}
            sym["dims"].append([i, d])
    return list(by_length.values())


def targets(length: int) -> list[int]:
    """The lengths a symbol of ``length`` is derived to: ``length - 1`` (when that is still
    > 1) and ``length + max(1, length // 4)``. ``targets(64) == [63, 80]``."""
    out = [length - 1] if length - 1 > 1 else []
    return out + [length + max(1, length // 4)]


def _dims_text(shape: tuple[int, ...]) -> str:
    return "×".join(str(n) for n in shape) if shape else "scalar"


def _new_shape(shape: tuple[int, ...], index: int, dims: list, to: int) -> tuple[int, ...]:
    return tuple(to if [index, d] in dims else n for d, n in enumerate(shape))


def describe(inputs: tuple, names: list[str], sym: dict, to: int) -> dict:
    """The descriptor of ``sym`` derived to length ``to`` (module docstring): its name is the
    first occurrence (``x[1] 64→63``), ``inputs`` the new shapes of the inputs it changes."""
    first_input, first_dim = sym["dims"][0]
    changed = []
    for i, value in enumerate(inputs):
        if any(i == j for j, _ in sym["dims"]):
            shape = _new_shape(tuple(int(s) for s in value.shape), i, sym["dims"], to)
            changed.append(f"{names[i]}: {_dims_text(shape)}")
    return {
        "kind": "shape",
        "name": f"{names[first_input]}[{first_dim}] {sym['length']}→{to}",
        "symbol": sym["symbol"],
        "from": sym["length"],
        "to": to,
        "inputs": ", ".join(changed),
        "dims": [list(d) for d in sym["dims"]],
    }


def _size_argument(inputs: tuple, names: list[str], length: int) -> str | None:
    """Why a symbol of ``length`` cannot be derived: an ``int`` input equal to it."""
    for i, value in enumerate(inputs):
        if _is_int(value) and value == length:
            return (
                f"input #{i} ({names[i]}) is the int {value}, the length of this dimension: a "
                "size argument the derivation cannot change consistently with the tensors"
            )
    return None


def plan(inputs: tuple, names: list[str] | None = None) -> dict:
    """The derived shapes of ``inputs`` (one seed's ``get_inputs``): ``{"derived":
    [descriptor, ...], "skipped": [{"name", "why"}, ...]}`` (module docstring). ``names``:
    the reference's parameter names (``arg<i>`` where missing). Never raises for odd inputs."""
    inputs = tuple(inputs)
    names = input_names(inputs, names)
    found = symbols(inputs)
    if not found:
        kinds = ", ".join(sorted({type(v).__name__ for v in inputs})) or "none"
        why = (
            f"the inputs ({kinds}) hold no torch tensor with a dimension longer than 1: no "
            "shape to derive"
        )
        return {"derived": [], "skipped": [{"name": "all inputs", "why": why}]}
    derived: list[dict] = []
    skipped: list[dict] = []
    for k, sym in enumerate(found):
        first = sym["dims"][0]
        label = f"{names[first[0]]}[{first[1]}] ({sym['symbol']} = {sym['length']})"
        if k >= MAX_SYMBOLS:
            why = f"not derived: at most {MAX_SYMBOLS} size symbols are checked per harness"
            skipped.append({"name": label, "why": why})
            continue
        why = _size_argument(inputs, names, sym["length"])
        if why:
            skipped.append({"name": label, "why": why})
            continue
        derived.extend(describe(inputs, names, sym, to) for to in targets(sym["length"]))
    return {"derived": derived, "skipped": skipped}


def checked(desc, n_inputs: int) -> dict | None:
    """``desc`` (a descriptor from a request: untrusted JSON) reduced to its known keys with
    their types checked, or None when it is malformed or names an input past ``n_inputs``."""
    if not isinstance(desc, dict):
        return None
    dims, frm, to = desc.get("dims"), desc.get("from"), desc.get("to")
    ok = (
        isinstance(dims, list)
        and dims
        and all(
            isinstance(d, list) and len(d) == 2 and all(_is_int(x) and x >= 0 for x in d)
            for d in dims
        )
        and all(d[0] < n_inputs for d in dims)
        and _is_int(frm)
        and _is_int(to)
        and 1 < frm
        and 0 < to <= math.ceil(frm * _MAX_GROWTH) + 1
    )
    if not ok:
        return None
    out = {"kind": "shape"}
    out.update({k: str(desc.get(k) or "")[:_MAX_NAME] for k in ("name", "symbol", "inputs")})
    out.update({"from": frm, "to": to, "dims": [list(d) for d in dims]})
    for key in ("seed", "shape"):
        if key in desc:
            out[key] = desc[key]
    return out


def label(desc: dict) -> str:
    """``x[1] 64→63 (x: 16×63)``: how messages name a derived shape."""
    inputs = desc.get("inputs")
    return f"{desc.get('name')} ({inputs})" if inputs else str(desc.get("name"))


def resize(t, dim: int, to: int, torch):
    """A contiguous copy of tensor ``t`` with dimension ``dim`` trimmed (``to`` smaller: the
    first ``to`` entries) or tiled (``to`` larger: ``t`` repeated along ``dim``, then trimmed);
    same dtype and device, a leaf that requires grad when ``t`` does."""
    n = int(t.shape[dim])
    base = t.detach()
    if to > n:
        base = torch.cat([base] * math.ceil(to / n), dim=dim)
    out = base.narrow(dim, 0, to).contiguous()
    return out.requires_grad_(True) if t.requires_grad else out


def apply(inputs: tuple, desc: dict, torch) -> tuple:
    """The inputs of the derived shape ``desc``: every dimension in ``desc["dims"]`` resized
    from ``desc["from"]`` to ``desc["to"]`` (:func:`resize`); other inputs as they are.
    Raises ValueError when an input named in ``dims`` is no tensor or its dimension does not
    have length ``from`` (the harness's inputs changed since the descriptor was made)."""
    out = list(inputs)
    frm, to = int(desc["from"]), int(desc["to"])
    for index, dim in desc["dims"]:
        value = inputs[index] if index < len(inputs) else None
        if not _is_tensor(value) or dim >= value.dim() or int(value.shape[dim]) != frm:
            got = tuple(value.shape) if _is_tensor(value) else type(value).__name__
            raise ValueError(
                f"input #{index} dimension {dim} is not of length {frm} (got {got}): the "
                "harness's inputs are not those the derived shape was made from"
            )
    for index in sorted({i for i, _ in desc["dims"]}):
        t = out[index]
        for dim in sorted(d for i, d in desc["dims"] if i == index):
            t = resize(t, dim, to, torch)
        out[index] = t
    return tuple(out)

"""The judge's libraries stay the judge's: a fingerprint of the functions the reference and the
verdict rely on, taken before the original file's harness is loaded and checked after.

The judge loads the ORIGINAL file to get ``get_inputs``, ``reference`` and ``BENCH``; its
module-level code runs in the judge. If that code replaces ``torch.softmax``, ``numpy.abs`` or
``time.perf_counter`` (issue 10, "a candidate that patches the torch function the reference
uses"), the reference and the comparison would agree with a wrong kernel. In a search the
original file is the user's own; under ``accelopt profile`` the profiled file is both. A patched
library is reported, never trusted (status ``rejected``, rule :data:`POISON_RULE`).
"""

from __future__ import annotations

import sys

#: Rule of a harness that replaced a library function the judge uses.
POISON_RULE = "reference poisoning"

#: Modules and classes whose public callables are fingerprinted (those present).
_WATCHED = (
    "builtins",
    "math",
    "time",
    "numpy",
    "torch",
    "torch.nn.functional",
    "torch.testing",
)


def _watched_objects() -> list[tuple[str, object]]:
    objs: list[tuple[str, object]] = []
    for name in _WATCHED:
        mod = sys.modules.get(name)
        if mod is not None:
            objs.append((name, mod))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "Tensor"):
        objs.append(("torch.Tensor", torch.Tensor))
    numpy = sys.modules.get("numpy")
    if numpy is not None and hasattr(numpy, "ndarray"):
        objs.append(("numpy.ndarray", numpy.ndarray))
    return objs


def snapshot() -> dict[str, int]:
    """``{"torch.softmax": id(obj), ...}`` for every public attribute of the watched modules
    and classes that is callable (functions, builtins, classes). Costs a few ms with torch."""
    out: dict[str, int] = {}
    for owner, obj in _watched_objects():
        try:
            names = list(vars(obj))
        except TypeError:
            continue
        for attr in names:
            if attr.startswith("_") and attr not in ("__import__", "__getattr__"):
                continue
            try:
                value = vars(obj)[attr]
            except KeyError:
                continue
            if callable(value) or isinstance(value, (staticmethod, classmethod)):
                out[f"{owner}.{attr}"] = id(value)
    return out


def replaced(before: dict[str, int], after: dict[str, int] | None = None) -> list[str]:
    """Names in ``before`` whose object changed or disappeared since (``after``: a fresh
    :func:`snapshot` by default), sorted."""
    after = snapshot() if after is None else after
    return sorted(name for name, ident in before.items() if after.get(name) != ident)

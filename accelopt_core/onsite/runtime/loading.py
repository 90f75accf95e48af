"""Loading the original file's harness and the candidate from strings (no temporary files).

Each source is registered in :mod:`linecache` under a fake file name (``<harness:NAME>``,
``<candidate:NAME>``) so that ``inspect.getsource`` works for ``triton.jit`` and tracebacks show
the candidate's lines.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Harness:
    """The benchmark harness of the original file (DESIGN.md, "The benchmark harness").

    Attributes:
        get_inputs: ``get_inputs(seed, device) -> tuple`` of fresh inputs.
        reference: ``reference(*inputs)``, the ground truth.
        bench: a copy of ``BENCH`` (``entry``, optional ``rtol``, ``atol``, ``flops``,
            ``bytes``).
        sizes: what :func:`.sizes.apply_sizes` did to the module-level sizes (``{"sizes":
            {name: [published, used]}, "notes": [...]}``; empty: nothing).
        module: the harness module (its globals hold the sizes).
    """

    get_inputs: Callable[..., Any]
    reference: Callable[..., Any]
    bench: dict
    sizes: dict = field(default_factory=dict)
    module: Any = None


def load_module(name: str, source: str, filename: str):
    """Execute ``source`` as a fresh module ``name`` (registered in ``sys.modules``), compiled
    under ``filename``. Raises whatever the module raises while it runs."""
    import linecache
    import types

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec", dont_inherit=True), module.__dict__)
    return module


#: Module name of a standalone candidate (a request without ``files``).
CANDIDATE_MODULE = "accelopt_candidate"

#: The request keys that say where the kernel lives (:class:`.protocol.EvalRequest`).
PROJECT_KEYS = ("files", "kernel_path", "harness_path", "entry_expr", "sizes")


def project_of(req: dict) -> dict:
    """The request's project keys (``files``, ``kernel_path``, ``harness_path``,
    ``entry_expr``, ``sizes``), for the peers' set-up."""
    return {k: req.get(k) for k in PROJECT_KEYS}


def _in_project(project: dict | None) -> bool:
    return bool(project and project.get("files") and project.get("kernel_path"))


def load_harness(
    source: str, source_name: str, project: dict | None = None, *, sizes: bool = True
) -> Harness:
    """``get_inputs``, ``reference`` and ``BENCH`` of the original file: ``source`` as a
    standalone module, or, with a ``project`` (:func:`project_of`), the harness module (or the
    kernel module holding the harness) imported under its real name with the closure served
    from memory. The module-level sizes of the request's ``sizes`` are then pinned / scaled
    for the CPU interpreter (:func:`.sizes.apply_sizes`; ``sizes=False``: later, by
    :func:`rebind_sizes`). Raises what loading raises, or
    AttributeError / TypeError for a missing or malformed harness."""
    if not _in_project(project):
        harness = load_module("accelopt_harness", source, f"<harness:{source_name}>")
    else:
        from .sources import install, module_of

        path = project.get("harness_path") or project["kernel_path"]
        install({**project["files"], path: source}, {path: f"<harness:{path}>"})
        harness = importlib.import_module(module_of(path)[0])
    loaded = Harness(harness.get_inputs, harness.reference, dict(harness.BENCH), module=harness)
    if sizes:
        rebind_sizes(loaded, project)
    return loaded


def rebind_sizes(harness: Harness, project: dict | None) -> None:
    """Pin / scale the loaded harness's module-level sizes as the request's ``sizes`` says
    (:func:`.sizes.apply_sizes`; sets :attr:`Harness.sizes`). Measuring the inputs on the
    meta device may make torch replace some of its own functions lazily: the judge checks the
    harness for reference poisoning before this. Raises nothing for a bad spec."""
    from .sizes import apply_sizes

    harness.sizes = apply_sizes((project or {}).get("sizes"), harness.module)


def load_candidate(source: str, filename: str, entry: str, project: dict | None = None):
    """``(module name, entry callable)`` of the candidate. Standalone: ``source`` loaded as
    :data:`CANDIDATE_MODULE`. With a ``project``: the candidate replaces the kernel module in
    the closure and is imported under its real name (compiled as ``filename``); the entry is
    the harness module's ``BENCH["entry"]`` when the harness has its own file, else
    ``entry_expr`` (or the name ``entry``) in the candidate module; the harness module's sizes
    are rebound as in :func:`load_harness` (``ModelNew(*get_init_inputs())`` matches the
    reference's inputs). Raises what loading raises,
    AttributeError when the entry is missing, TypeError when it is not callable."""
    if not _in_project(project):
        module = load_module(CANDIDATE_MODULE, source, filename)
        return CANDIDATE_MODULE, _entry_of(module, entry, (project or {}).get("entry_expr"))
    from .sources import install, module_of

    kpath = project["kernel_path"]
    install({**project["files"], kpath: source}, {kpath: filename})
    name = module_of(kpath)[0]
    if project.get("harness_path"):
        harness = importlib.import_module(module_of(project["harness_path"])[0])
        from .sizes import apply_sizes

        apply_sizes(project.get("sizes"), harness)
        launcher = harness.BENCH["entry"]
    else:
        launcher = _entry_of(importlib.import_module(name), entry, project.get("entry_expr"))
    if not callable(launcher):
        raise TypeError(f'BENCH["entry"] is a {type(launcher).__name__}, not a callable')
    return name, launcher


def _entry_of(module, entry: str, expr: str | None):
    """``expr`` (``RMSNorm.apply``, ``functools.partial(...)``) evaluated in ``module``, or
    its attribute ``entry``."""
    if expr:
        return eval(compile(expr, "<BENCH entry>", "eval"), module.__dict__)  # noqa: S307
    return getattr(module, entry)

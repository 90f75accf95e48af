"""Loading the original file's harness and the candidate from strings (no temporary files).

Each source is registered in :mod:`linecache` under a fake file name (``<harness:NAME>``,
``<candidate:NAME>``) so that ``inspect.getsource`` works for ``triton.jit`` and tracebacks show
the candidate's lines.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Harness:
    """The benchmark harness of the original file (DESIGN.md, "The benchmark harness").

    Attributes:
        get_inputs: ``get_inputs(seed, device) -> tuple`` of fresh inputs.
        reference: ``reference(*inputs)``, the ground truth.
        bench: a copy of ``BENCH`` (``entry``, optional ``rtol``, ``atol``, ``flops``,
            ``bytes``).
    """

    get_inputs: Callable[..., Any]
    reference: Callable[..., Any]
    bench: dict


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


def load_harness(source: str, source_name: str) -> Harness:
    """``get_inputs``, ``reference`` and ``BENCH`` of the original file. Raises what loading
    raises, or AttributeError / TypeError for a missing or malformed harness."""
    harness = load_module("accelopt_harness", source, f"<harness:{source_name}>")
    return Harness(harness.get_inputs, harness.reference, dict(harness.BENCH))


def load_entry(source: str, filename: str, entry: str):
    """``(module, launcher)`` of the candidate. Raises what loading raises, or AttributeError
    when the candidate has no ``entry``."""
    module = load_module("accelopt_candidate", source, filename)
    return module, getattr(module, entry)

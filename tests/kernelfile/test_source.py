"""Whole-source helpers (accelopt_core.kernelfile.source): quick test, normalisation, fingerprints."""

from __future__ import annotations

from accelopt_core.kernelfile import normalize_source, quick_has_kernels, source_fingerprint
from tests.kernelfile.sources import SOFTMAX_LIKE


def test_quick_has_kernels() -> None:
    assert quick_has_kernels(SOFTMAX_LIKE)
    assert quick_has_kernels("import triton as tr\n@tr.jit\ndef k(): pass\n")
    assert quick_has_kernels("from triton import jit\n\n@jit\ndef k(): pass\n")
    assert quick_has_kernels("from neuronxcc import nki\n@nki.baremetal\ndef k(): pass\n")
    assert not quick_has_kernels("import torch\n\ndef f(x):\n    return x\n")
    assert not quick_has_kernels("import numba\n@numba.jit\ndef f(x):\n    return x\n")
    assert not quick_has_kernels("# triton is mentioned, but there is no decorator\n")


def test_normalize_and_fingerprint() -> None:
    a = "def f(x):\n    return x+1\n"
    b = "# a comment\ndef f( x ):\n\n    return (x + 1)  # same code\n"
    c = "def f(x):\n    return x + 2\n"
    assert normalize_source(a) == normalize_source(b) == "def f(x):\n    return x + 1"
    assert source_fingerprint(a) == source_fingerprint(b)
    assert source_fingerprint(a) != source_fingerprint(c)
    assert len(source_fingerprint(a)) == 64
    assert normalize_source("def (:") == "def (:"
    assert source_fingerprint("def (:") != source_fingerprint("def ((:")

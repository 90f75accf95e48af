"""harness_skeleton (accelopt_core.kernelfile.skeleton): a template that parses and fails loudly."""

from __future__ import annotations

import pytest

from accelopt_core.kernelfile import harness_skeleton, load_kernel_file, parse_kernel_file
from tests.kernelfile.sources import EXAMPLES, HARNESS_START, ORIGINAL


def test_harness_skeleton_parses_and_names_the_launcher() -> None:
    base = ORIGINAL[:HARNESS_START]
    kf = parse_kernel_file(base, "scale.py")
    skeleton = harness_skeleton(kf, "scale_kernel")
    assert "TODO" in skeleton
    with_harness = parse_kernel_file(base + skeleton, "scale.py")
    assert with_harness.syntax_error is None
    h = with_harness.harness
    assert h is not None and h.entry == "scale" and h.complete
    assert "def get_inputs(seed: int, device: str, n: int = 4096) -> tuple:" in skeleton
    assert "def reference(x):" in skeleton
    assert "NotImplementedError" in skeleton  # an unfinished harness fails loudly
    with pytest.raises(KeyError):
        harness_skeleton(kf, "nope")


def test_harness_skeleton_without_launcher_reports_missing_entry() -> None:
    base = ORIGINAL[: ORIGINAL.index("def scale(x):")]
    kf = parse_kernel_file(base, "k.py")
    skeleton = harness_skeleton(kf, "scale_kernel")
    kf2 = parse_kernel_file(base + skeleton, "k.py")
    assert kf2.syntax_error is None
    assert "bench-entry-invalid" in [d.code for d in kf2.diagnostics]
    nki = load_kernel_file(EXAMPLES / "nki" / "tensor_add.py")
    nki_skel = harness_skeleton(nki, "tensor_add_kernel")
    assert "numpy" in nki_skel and "torch" not in nki_skel

"""restore_harness (accelopt_core.kernelfile.splice): a candidate always gets the original harness."""

from __future__ import annotations

import ast

import pytest

from accelopt_core.kernelfile import parse_kernel_file, restore_harness
from tests.kernelfile.sources import HARNESS_START, ORIGINAL, text_at

ORIG_KF = parse_kernel_file(ORIGINAL, "scale.py")


def test_restore_harness_is_identity_on_the_original() -> None:
    assert restore_harness(ORIGINAL, ORIG_KF) == ORIGINAL


def test_restore_harness_replaces_a_tampered_harness_in_place() -> None:
    candidate = (
        ORIGINAL.replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 128")
        .replace("return 2.0 * x", "return x * 0  # cheat")
        .replace('"rtol": 1e-5', '"rtol": 1.0')
        .replace("return 4096 if", "return 1 if")
    )
    restored = restore_harness(candidate, ORIG_KF)
    assert "BLOCK_SIZE = 128" in restored  # the candidate's launcher stays
    assert restored == ORIGINAL.replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 128")


def test_restore_harness_appends_missing_harness_helpers_and_imports() -> None:
    # An LLM answer with the kernel + launcher only, and without `import os`.
    candidate = (
        ORIGINAL[:HARNESS_START]
        .replace("import os\n\n", "")
        .replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 64")
    )
    restored = restore_harness(candidate, ORIG_KF)
    ast.parse(restored)
    kf = parse_kernel_file(restored, "restored.py")
    assert kf.harness is not None and kf.harness.complete and kf.diagnostics == []
    assert "import os\n" in restored
    assert "def _size(device):" in restored
    assert restored.index("def _size(") < restored.index("def get_inputs(")
    assert restored.index("def get_inputs(") < restored.index("BENCH = {")
    assert "BLOCK_SIZE = 64" in restored
    # The comment block above the first appended piece travels with it.
    assert "# --- harness ---" in restored
    # Kernel text untouched (the import line moved nothing inside it).
    kernel_text = text_at(candidate, parse_kernel_file(candidate).kernel("scale_kernel").range)
    assert kernel_text in restored


def test_restore_harness_keeps_candidate_pieces_and_adds_missing_helper_before_them() -> None:
    candidate = ORIGINAL.replace(
        '# --- harness ---\n\n\ndef _size(device):\n    return 4096 if os.environ.get("BIG") else 256\n\n\n',
        "",
    )
    assert "_size" in candidate and "def _size" not in candidate
    restored = restore_harness(candidate, ORIG_KF)
    ns = ast.parse(restored)
    names = [getattr(s, "name", None) for s in ns.body]
    assert names.index("_size") < names.index("get_inputs")
    assert restored.count("def get_inputs(") == 1


def test_restore_harness_drops_duplicate_definitions() -> None:
    candidate = ORIGINAL + "\n\ndef reference(x):\n    return x\n"
    restored = restore_harness(candidate, ORIG_KF)
    assert restored.count("def reference(") == 1
    assert "return 2.0 * x" in restored
    ast.parse(restored)


def test_restore_harness_errors_and_no_harness() -> None:
    with pytest.raises(ValueError, match=r"candidate:2:\d+: syntax error"):
        restore_harness("x = 1\ndef (:\n", ORIG_KF)
    no_harness = parse_kernel_file(ORIGINAL[:HARNESS_START])
    assert restore_harness("x = 1\n", no_harness) == "x = 1\n"

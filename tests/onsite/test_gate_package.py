"""The static gate on a kernel module inside a package (issue 13): a changed relative import is
the user's own sibling module, allowed while it stays inside the kernel's top-level package;
outside a package, or reaching beyond it, it is still ``gate: worker access``."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.onsite.gate.precheck import precheck

MODULE = (
    Path(__file__).resolve().parents[1] / "byok" / "project" / "minikern" / "ops" / "rms_norm.py"
)
ORIGINAL = MODULE.read_text("utf-8")
IMPORT = "from ..utils import calculate_settings"


@pytest.mark.parametrize(
    ("replacement", "module", "rule"),
    [
        # a changed relative import inside the package: the user's own helper module
        ("from ..utils import MAX_FUSED_SIZE, calculate_settings", "minikern.ops.rms_norm", None),
        (
            "from .. import utils\nfrom ..utils import calculate_settings",
            "minikern.ops.rms_norm",
            None,
        ),
        # beyond the top-level package (minikern.ops.rms_norm: two levels up at most)
        ("from ... import calculate_settings", "minikern.ops.rms_norm", "gate: worker access"),
        # a standalone file has no package: any changed relative import is refused
        ("from ..utils import MAX_FUSED_SIZE, calculate_settings", None, "gate: worker access"),
    ],
)
def test_relative_imports_stay_inside_the_package(
    replacement: str, module: str | None, rule: str | None
) -> None:
    assert IMPORT in ORIGINAL
    candidate = ORIGINAL.replace(IMPORT, replacement)
    found = precheck(candidate, "rms_norm", ORIGINAL, "<candidate:rms_norm.py>", module)
    if rule is None:
        assert found is None, found
    else:
        assert found is not None and found["rule"] == rule, found
        assert found["line"] == ORIGINAL[: ORIGINAL.index(IMPORT)].count("\n") + 1

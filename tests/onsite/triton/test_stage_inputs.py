"""The compile stage makes no tensor values of its own on the CPU (issue 50, item 5): the judge
sends it the reference process's segments of its inputs (kept by the warm worker's store after
the first evaluation), and it compiles on those. Its harness here refuses to make inputs in the
stage's process (the only one of the evaluation without ``TRITON_INTERPRET``), so a stage that
called ``get_inputs`` would report no kernel and a warning."""

from __future__ import annotations

import pytest

from tests.onsite.runs import BASE, WarmRunner, make_request

pytestmark = pytest.mark.slow

#: ``get_inputs`` that fails in the compile stage's process: the judge's inputs are the only
#: way the stage can have any.
NOT_IN_STAGE = BASE.replace(
    "def get_inputs(seed: int, device: str) -> tuple:\n",
    "def get_inputs(seed: int, device: str) -> tuple:\n"
    "    import os\n"
    "    if os.environ.get('TRITON_INTERPRET') != '1':\n"
    "        raise RuntimeError('get_inputs called in the compile stage')\n",
)

#: Inputs only at ``BENCH["shapes"]``: ``get_inputs``'s defaults raise, so the judge cannot
#: send the stage its first call's inputs and the stage makes them itself, as before.
SHAPES_ONLY = (
    BASE.replace(
        "def get_inputs(seed: int, device: str) -> tuple:\n",
        "def get_inputs(seed: int, device: str, n=None) -> tuple:\n"
        "    if n is None:\n"
        "        raise TypeError('get_inputs needs n')\n",
    )
    .replace("torch.randn(200,", "torch.randn(n,")
    .replace(
        'BENCH = {\n    "entry": add,', 'BENCH = {\n    "entry": add,\n    "shapes": [{"n": 100}],'
    )
)


def _facts(result) -> dict:
    assert result.status == "ok", result.message
    return result.metrics["gpu"]


def test_the_stage_compiles_on_the_judges_inputs_kept_or_not():
    runner = WarmRunner()
    try:
        for store_mb in (None, None, 0):  # made, then kept; and with the store off
            request = make_request(
                NOT_IN_STAGE,
                harness_source=NOT_IN_STAGE,
                baseline_source=NOT_IN_STAGE,
                reference_store_mb=store_mb,
            )
            gpu = _facts(runner.run(request))
            assert [k["kernel"] for k in gpu["kernels"]] == ["add_kernel"], gpu
            assert not [w for w in gpu["warnings"] if "compile stage" in w], gpu["warnings"]
    finally:
        assert runner.close() == 0


def test_a_harness_without_default_inputs_leaves_the_stage_to_make_its_own():
    runner = WarmRunner()
    try:
        request = make_request(SHAPES_ONLY, harness_source=SHAPES_ONLY)
        gpu = _facts(runner.run(request))
        assert any("get_inputs needs n" in w for w in gpu["warnings"]), gpu["warnings"]
    finally:
        assert runner.close() == 0

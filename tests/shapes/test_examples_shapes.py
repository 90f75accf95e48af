"""Every Triton example benchmarks at least three shapes (issue 22), one of them no multiple of
the example's block sizes, small under the interpreter and GPU-sized on CUDA / ACCELOPT_SHAPE=large;
the kernel is correct on each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "triton"
#: The block sizes each example launches with (its launcher's constants).
BLOCKS = {
    "softmax": {"cols": 16},
    "rmsnorm": {"cols": 16},
    "matmul": {"M": 16, "N": 16, "K": 16},
    "elementwise": {"n": 32},
    "reduction": {"n": 64},
}

CHECK = r"""
import importlib.util, json, os, sys
import torch

report = {}
for path in sys.argv[1:]:
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location("shapes_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = []
    for shape in mod.BENCH["shapes"]:
        row = {"shape": shape}
        if os.environ.get("ACCELOPT_SHAPE") != "large":
            inputs = mod.get_inputs(1, "cpu", **shape)
            out = mod.BENCH["entry"](*inputs)
            ref = mod.reference(*[t.clone() for t in inputs])
            tol = mod.BENCH["atol"] * ref.abs().max() + mod.BENCH["rtol"] * ref.abs()
            row["close"] = bool(((out.double() - ref.double()).abs() <= tol.double()).all())
            row["numel"] = sum(t.numel() for t in inputs)
        rows.append(row)
    report[name] = rows
print("@@REPORT@@" + json.dumps(report))
"""


def _report(shape_env: str) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1", ACCELOPT_SHAPE=shape_env)
    paths = [str(EXAMPLES / f"{n}.py") for n in BLOCKS]
    proc = subprocess.run(
        [sys.executable, "-c", CHECK, *paths], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("@@REPORT@@"))
    return json.loads(line[len("@@REPORT@@") :])


@pytest.fixture(scope="module")
def small() -> dict:
    return _report("small")


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_example_is_correct_on_three_small_shapes(small: dict, name: str) -> None:
    rows = small[name]
    assert len(rows) >= 3
    assert all(r["close"] for r in rows), rows
    assert len({json.dumps(r["shape"], sort_keys=True) for r in rows}) == len(rows)
    held_out = rows[-1]["shape"]  # checked, never timed
    assert any(held_out[dim] % block for dim, block in BLOCKS[name].items()), held_out
    assert max(r["numel"] for r in rows) <= 20_000  # small under the interpreter


def test_examples_are_gpu_sized_on_cuda_or_when_asked(small: dict) -> None:
    large = _report("large")
    for name, blocks in BLOCKS.items():
        assert len(large[name]) == len(small[name]) >= 3
        for big, little in zip(large[name], small[name], strict=True):
            assert all(big["shape"][d] > 10 * little["shape"][d] for d in blocks), name
        assert any(large[name][-1]["shape"][d] % b for d, b in blocks.items()), name


def test_import_picks_gpu_sizes_only_outside_the_interpreter() -> None:
    """At import no device is known: AccelOpt sets TRITON_INTERPRET=1 for CPU runs, so the
    example asks for small shapes there even on a machine with a GPU."""
    code = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('m', sys.argv[1])\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "print(json.dumps(mod.BENCH['shapes']))\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("ACCELOPT_SHAPE", None)
    proc = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES / "softmax.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])[0] == {"rows": 16, "cols": 64}

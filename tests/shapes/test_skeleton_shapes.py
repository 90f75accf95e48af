"""The harness skeleton (in-file and bench_<module>.py) is shape-parameterized (issue 22)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from accelopt_core.kernelfile import harness_skeleton, parse_kernel_file
from accelopt_server.harnesses import harness_file_text

KERNEL = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    def scale(x):
        out = torch.empty_like(x)
        n = x.numel()
        scale_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
        return out
    """
).lstrip()

RUN = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("skel", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
ok = []
for shape in mod.BENCH["shapes"]:
    (x,) = mod.get_inputs(3, "cpu", **shape)
    ok.append([shape, list(x.shape), bool((mod.BENCH["entry"](x) == 2 * x).all())])
print(json.dumps(ok))
"""


def test_in_file_skeleton_runs_every_shape(tmp_path) -> None:
    kf = parse_kernel_file(KERNEL, "scale.py")
    skeleton = harness_skeleton(kf, "scale_kernel")
    assert "def get_inputs(seed: int, device: str, n: int = 4096) -> tuple:" in skeleton
    assert '"shapes": [{"n": 4096}, {"n": 2048}, {"n": 1001}],' in skeleton
    done = skeleton.replace(
        'raise NotImplementedError("TODO: write reference() for scale")', "return 2 * x"
    )
    full = parse_kernel_file(KERNEL + done, "scale.py")
    assert full.syntax_error is None and full.harness is not None and full.harness.complete
    path = tmp_path / "scale.py"
    path.write_text(KERNEL + done)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(path)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [r[1] for r in rows] == [[4096], [2048], [1001]]
    assert all(r[2] for r in rows)
    assert 1001 % 64 and 1001 % 16  # the held-out shape is no multiple of a block


def test_size_keyword_does_not_shadow_a_launcher_parameter() -> None:
    source = KERNEL.replace("def scale(x):", "def scale(x, n):").replace("    n = x.numel()\n", "")
    kf = parse_kernel_file(source, "scale.py")
    skeleton = harness_skeleton(kf, "scale_kernel")
    assert "def get_inputs(seed: int, device: str, n_size: int = 4096) -> tuple:" in skeleton
    assert "n = torch.randn(n_size, generator=g).to(device)" in skeleton
    assert '{"n_size": 1001}' in skeleton
    compile(skeleton, "skeleton.py", "exec")


def test_bench_file_carries_the_shapes() -> None:
    kf = parse_kernel_file(KERNEL, "scale.py")
    text = harness_file_text("pkg.scale", "scale", harness_skeleton(kf, "scale_kernel"))
    assert text.startswith('"""Benchmark harness for pkg.scale')
    assert "from pkg.scale import scale" in text
    assert '"shapes": [' in text and "n: int = 4096" in text
    compile(text, "bench_scale.py", "exec")


def test_nki_skeleton_shapes_stay_tile_multiples() -> None:
    from pathlib import Path

    from accelopt_core.kernelfile import load_kernel_file

    examples = Path(__file__).resolve().parents[2] / "examples"
    nki = load_kernel_file(examples / "nki" / "tensor_add.py")
    skeleton = harness_skeleton(nki, "tensor_add_kernel")
    assert "rows: int = 128, cols: int = 512" in skeleton
    assert "rng.standard_normal((rows, cols))" in skeleton and "torch" not in skeleton
    compile(skeleton, "s.py", "exec")

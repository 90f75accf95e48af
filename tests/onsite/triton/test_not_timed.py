"""Kernels the CPU interpreter cannot run still get an answer (issue 21, item 4): ``accelopt
profile`` exits 0 and shows the sm_90 facts of the compile stage with "not timed: the CPU
interpreter cannot run this kernel (<reason>)". Two real-world cases: a float scalar argument
cast with ``.to()`` inside the kernel (as Liger-Kernel's RMSNorm does with ``eps``) and a libdevice
call; both build for sm_90."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.hacks import private_env, run_cli

pytestmark = pytest.mark.slow

SCALE = '''"""Scale by (1 + eps), with the float scalar argument cast inside the kernel."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def scale_kernel(out_ptr, in_ptr, eps, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, BODY, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 64),)](out, x, 1e-6, n, BLOCK=64)
    return out


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(256, generator=g).to(device),)


def reference(x):
    return REFERENCE


BENCH = {"entry": scale}
'''

CASES = {
    "scalar_to": (
        "x * (1.0 + eps.to(tl.float32))",
        "x * (1.0 + 1e-6)",
        "cannot run `.to()` on the scalar argument `eps` (line 14)",
    ),
    "libdevice": (
        "libdevice.rsqrt(x * x + 1.0)",
        "torch.rsqrt(x * x + 1.0)",
        "has no libdevice: `libdevice.rsqrt` (line 14)",
    ),
}


def _file(tmp_path: Path, name: str) -> Path:
    body, reference, _ = CASES[name]
    path = tmp_path / f"{name}.py"
    path.write_text(SCALE.replace("BODY", body).replace("REFERENCE", reference))
    return path


@pytest.mark.parametrize("name", list(CASES))
def test_profile_shows_device_facts_and_not_timed(tmp_path: Path, name: str) -> None:
    path = _file(tmp_path, name)
    proc = run_cli("profile", str(path), env=private_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    out = proc.stdout
    assert "not timed: the CPU interpreter cannot run this kernel (" in out, out
    assert CASES[name][2] in out, out
    assert "time it on a GPU target" in out
    assert "GPU H100 SXM5 (sm_90), compiled ahead of time in" in out
    assert "scale_kernel [BLOCK=64, num_warps=4, num_stages=3] grid 4×1×1:" in out
    assert "registers/thread" in out and "occupancy" in out


def test_profile_json_carries_the_facts(tmp_path: Path) -> None:
    path = _file(tmp_path, "libdevice")
    proc = run_cli("profile", "--json", str(path), env=private_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["status"] == "compile_error"  # the interpreter's verdict is kept
    metrics = report["metrics"]
    assert metrics["not_timed"].startswith("the CPU interpreter cannot run this kernel (")
    gpu = metrics["gpu"]
    assert (gpu["device"], gpu["arch"]) == ("H100 SXM5", "sm_90")
    kernel = gpu["kernels"][0]
    assert kernel["kernel"] == "scale_kernel" and kernel["grid"] == [4, 1, 1]
    assert kernel["registers"] > 0 and kernel["threads"] == 128
    assert kernel["spill_stores"] == 0 and kernel["sass"]["ldg_narrow"] >= 1

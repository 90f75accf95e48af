"""The compile stage's inputs without their data (issue 50, item 5,
:mod:`accelopt_core.onsite.triton.metainputs`): Triton's specialization of every launch
(signature, ``tt.divisibility`` 16 on pointers and ints, ints equal to 1 as constants, the
kernel's hash) is the same on the stage's ``meta`` inputs as on the real inputs and on the
inputs as the candidate receives them through the exchange; the stage's memory does not grow
with the inputs' size (a 1 MiB and a 256 MiB harness), with its GPU facts present; host code
that needs values, or launches nothing on ``meta`` tensors, falls back to the real inputs and
its launches are recorded once.

Each case runs in a fresh process without ``TRITON_INTERPRET`` (``python -c``), Triton's cache
shared by the module's cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # four compile stages, each in a fresh process

ROOT = Path(__file__).resolve().parents[3]

#: A harness whose inputs exercise every part of the key: an aligned fp32 vector, a view one
#: element in (its pointer not divisible by 16), a view 4 elements in (divisible again), a
#: transposed 2-D view, fp16, a sliced CPU tensor copied with ``.to(device)`` (aligned on the
#: device it is copied to), and ints divisible by 16, equal to 1, and neither.
KEYS = """
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n), mask=offs < n)


def entry(a, b, c, m, h, moved, n16, one, seven):
    for x in (a, b, c, m.t(), h, moved):
        out = torch.empty_like(x)
        copy_kernel[(4,)](x, out, x.numel(), 1, BLOCK=64)
    copy_kernel[(1,)](a, a, n16, one, BLOCK=16)
    copy_kernel[(1,)](b, a, seven, n16, BLOCK=16)
    return a


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(1000, generator=g).to(device)
    m = torch.randn(24, 40, generator=g, device="cpu").to(device).t()
    h = torch.randn(256, generator=g).to(device=device, dtype=torch.float16)
    moved = torch.randn(33, generator=g)[1:].to(device)
    return (base, base[1:], base[4:], m, h, moved, 1024, 1, 7)


def reference(*inputs):
    return inputs[0]


BENCH = {"entry": entry}
"""

KEY_SCRIPT = """
import json, sys
from accelopt_core.onsite.triton import twin
twin.switch_to_compiler()
import torch
from accelopt_core.onsite.runtime import exchange
from accelopt_core.onsite.runtime.loading import load_harness
from accelopt_core.onsite.triton import capture
from accelopt_core.onsite.triton.devices import lookup
from accelopt_core.onsite.triton.metainputs import meta_inputs

harness = load_harness(sys.stdin.read(), "keys.py")
recorder = capture.install(lookup("H100 SXM5"))
real = tuple(harness.get_inputs(1, "cpu"))
seg = exchange.share(real, torch=torch)
sets = {"meta": meta_inputs(harness, 1, "cpu", None, torch), "real": real,
        "exchanged": tuple(seg.value(torch))}
out = {}
for name, inputs in sets.items():
    start = len(recorder.launches)
    harness.bench["entry"](*inputs)
    out[name] = {
        "launches": [[l.hash, repr(l.src.signature), repr(l.src.attrs), repr(l.src.constants)]
                     for l in recorder.launches[start:]],
        "tensors": [[str(t.device), str(t.dtype), list(t.shape), list(t.stride()),
                     t.storage_offset(), t.data_ptr() % 16]
                    for t in inputs if isinstance(t, torch.Tensor)],
        "ints": [v for v in inputs if type(v) is int],
    }
cuda = meta_inputs(harness, 1, "cuda", None, torch)  # no GPU needed: nothing is made
out["meta_cuda"] = [[t.device.type, t._accelopt_device, t.storage_offset(), list(t.stride())]
                    for t in cuda if isinstance(t, torch.Tensor)]
print("@@KEYS@@" + json.dumps(out))
"""

STAGE_SCRIPT = """
import json, os, resource, sys
from accelopt_core.onsite.triton import twin
twin.switch_to_compiler()
import torch  # noqa: F401  (imported before the stage, as in the worker)
from accelopt_core.onsite.triton.metainputs import preimport
preimport()  # as the warm worker does
from accelopt_core.onsite.triton.compile import run_stage
from accelopt_core.onsite.triton.devices import lookup

source, path = sys.stdin.read(), sys.argv[1]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
setup = {"candidate_source": source, "harness_source": source, "entry": "entry",
         "source_name": os.path.basename(path), "cand_file": path, "project": None, "seed": 1,
         "gpu": lookup("H100 SXM5")}
answer = run_stage(setup)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("@@STAGE@@" + json.dumps({"answer": answer, "grew_kib": after - before}))
"""

#: Scales a vector of ``MIB`` MiB by 2, each of 16 programs looping over its chunk.
SCALE = """
import torch
import triton
import triton.language as tl

MIB = {mib}


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    for start in range(0, CHUNK, BLOCK):
        offs = pid * CHUNK + start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def entry(x):
{host}    out = torch.empty_like(x)
    chunk = x.numel() // 16
    scale_kernel[(triton.cdiv(x.numel(), chunk),)](x, out, x.numel(), CHUNK=chunk, BLOCK=1024)
    return out


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(MIB * 262144, generator=g).to(device),)


def reference(x):
    return x * 2.0


BENCH = {{"entry": entry}}
"""


def _run(script: str, source: str, tmp: Path, cache: Path, marker: str) -> dict:
    path = tmp / "harness.py"
    path.write_text(source)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("TRITON_INTERPRET", None)
    env.pop("ACCELOPT_CPU_INPUTS", None)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        input=source,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(marker)]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len(marker) :])


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("triton-cache")


def test_specialization_key_is_the_real_calls(tmp_path, cache) -> None:
    got = _run(KEY_SCRIPT, KEYS, tmp_path, cache, "@@KEYS@@")
    meta, real, exchanged = got["meta"], got["real"], got["exchanged"]
    assert all(t[0] == "meta" for t in meta["tensors"])
    assert all(t[0] == "cpu" for t in real["tensors"])
    # the same metadata, alignment included, on every tensor: the views keep their offsets
    assert [t[1:] for t in meta["tensors"]] == [t[1:] for t in real["tensors"]]
    assert [t[1:] for t in exchanged["tensors"]] == [t[1:] for t in real["tensors"]]
    assert [t[5] for t in real["tensors"]] == [0, 4, 0, 0, 0, 4]  # b, moved: one float in
    assert meta["ints"] == real["ints"] == [1024, 1, 7]
    assert len(real["launches"]) == 8
    assert meta["launches"] == real["launches"] == exchanged["launches"]
    # for a GPU: the sliced CPU tensor is copied there, so it starts aligned (offset 0)
    assert got["meta_cuda"] == [
        ["meta", "cuda", 0, [1]],
        ["meta", "cuda", 1, [1]],
        ["meta", "cuda", 4, [1]],
        ["meta", "cuda", 0, [1, 40]],
        ["meta", "cuda", 0, [1]],
        ["meta", "cuda", 0, [1]],
    ]
    attrs = [launch[2] for launch in real["launches"]]
    assert "(0,): []" in attrs[1] and "(0,): [['tt.divisibility', 16]]" in attrs[0]


def test_stage_memory_does_not_grow_with_the_inputs(tmp_path, cache) -> None:
    small = _run(STAGE_SCRIPT, SCALE.format(mib=1, host=""), tmp_path, cache, "@@STAGE@@")
    large = _run(STAGE_SCRIPT, SCALE.format(mib=256, host=""), tmp_path, cache, "@@STAGE@@")
    for run, elements in ((small, 262144), (large, 256 * 262144)):
        gpu = run["answer"]["gpu"]
        assert gpu["launches"] == 1 and gpu["warnings"] == []
        (kernel,) = gpu["kernels"]
        assert kernel["kernel"] == "scale_kernel" and kernel["registers"] > 0
        assert kernel["grid"] == [16, 1, 1]
        assert f"CHUNK={elements // 16}," in kernel["config"]  # the real shape reached it
    # a 256 MiB input and its 256 MiB output would be 512 MiB; nothing of it is made
    assert large["grew_kib"] - small["grew_kib"] < 32 * 1024, (small, large)


@pytest.mark.parametrize(
    "host",
    [
        "    assert float(x.abs().sum().item()) >= 0.0\n",  # needs values: raises on meta
        "    if x.device.type == 'meta':\n        return x\n",  # launches nothing on meta
    ],
    ids=["reads-a-value", "launches-nothing"],
)
def test_host_code_that_needs_the_real_inputs_gets_them(tmp_path, cache, host: str) -> None:
    got = _run(STAGE_SCRIPT, SCALE.format(mib=1, host=host), tmp_path, cache, "@@STAGE@@")
    gpu = got["answer"]["gpu"]
    assert gpu["warnings"] == []
    assert gpu["launches"] == 1  # the real call's launch, recorded once
    assert [k["kernel"] for k in gpu["kernels"]] == ["scale_kernel"]

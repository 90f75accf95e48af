"""What CUDA must reject (issue 31), through ``accelopt profile`` at GPU shapes:

- a matmul that cannot launch on the device (too much shared memory per block, 2,048 threads
  per block) or cannot compile for it (``tl.dot`` with K = 8) gets exactly the verdict the
  compile stage gives it off the GPU (the stage run with CUDA hidden, for the same device from
  the table; it is what rejects such a kernel on a machine without a GPU), and Triton's own
  launch of it on the GPU fails indeed;
- the hostile candidates that aim at CUDA timing (tests/gpu/hostile.py) are never reported as
  an ``ok`` result clearly faster than the baseline, nor with their forged figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelopt_core.onsite.runtime.failures import candidate_file
from tests.adversarial.hacks import FORGED_LATENCY_MS, with_harness
from tests.gpu.hostile import CUDA_HACKS
from tests.gpu.support import (
    GPU,
    ROOT,
    SOFTMAX,
    gpu_env,
    parallel,
    profile,
    record,
    table_device,
)
from tests.onsite.triton.variants import DOT_K8, SMEM, WARPS64

pytestmark = GPU
#: What this module takes on an H100, seconds (73-75 s in the second and fourth windows); the device
#: budget skips it when less is left (conftest).
DEVICE_COST_S = 80

#: name -> (matmul variant, how the verdict's message starts, on the device of the table).
VARIANTS = {
    "shared memory": (SMEM, "cannot launch on {dev} ({arch}): shared memory per block"),
    "num_warps=64": (WARPS64, "cannot launch on {dev} ({arch}): threads per block 2,048"),
    "dot K=8": (DOT_K8, "does not compile for {arch} ({dev}):"),
}
#: Faster than the baseline by more than this is a speedup no noise explains.
NOISE_FACTOR = 4.0


def _write(work: Path, source: str, name: str) -> Path:
    path = work / name
    path.write_text(source)
    return path


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Each variant profiled on CUDA (``gpu:``), its compile stage's verdict off the GPU
    (``cpu:``, :func:`_off_gpu`) and its entry called once by Triton's own JIT and driver
    (``real:``, :func:`_real_launch`)."""
    device = table_device()
    jobs = {}
    for name, (source, _) in VARIANTS.items():
        for where in ("gpu", "cpu", "real"):
            work = tmp_path_factory.mktemp(f"variant-{where}")
            path = _write(work, source, "matmul.py")
            if where == "gpu":
                jobs[f"gpu:{name}"] = lambda p=path, w=work: profile(p, w)
            elif where == "cpu":  # CUDA hidden: the compile stage for the same device
                jobs[f"cpu:{name}"] = lambda p=path, w=work: _off_gpu(p, w, device)
            else:
                jobs[f"real:{name}"] = lambda p=path, w=work: _real_launch(p, w)
    return parallel(jobs, workers=4)


def _real_launch(path: Path, work: Path) -> dict:
    """The variant's entry called on CUDA by Triton itself (tests/gpu/loaded_kernels.py):
    ``{"rc", "error"}`` with the last line of its traceback."""
    script = Path(__file__).with_name("loaded_kernels.py")
    proc = subprocess.run(
        [sys.executable, str(script), str(path), "1"],
        capture_output=True, text=True, env=gpu_env(work), cwd=ROOT, timeout=300,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    return {"rc": proc.returncode, "error": lines[-1] if lines else ""}


#: The compile stage alone, in a process of its own: a JSON setup on stdin, its answer on the
#: ``@@STAGE@@`` line (:func:`accelopt_core.onsite.triton.compile.main_in_subprocess`).
_STAGE = "from accelopt_core.onsite.triton.compile import main_in_subprocess; main_in_subprocess()"


def _off_gpu(path: Path, work: Path, device: str) -> dict:
    """The compile stage's verdict with CUDA hidden (``CUDA_VISIBLE_DEVICES=-1``) for
    ``device``, on the examples' CPU sizes, as a machine without a GPU gives it (the
    interpreter's run is left out: the image's Triton 3.6 interpreter cannot run the
    examples' loops with NumPy 2.5)."""
    source = path.read_text()
    setup = {
        "candidate_source": source,
        "harness_source": source,
        "entry": "matmul",
        "source_name": path.name,
        "cand_file": candidate_file(path.name),
        "project": None,
        "seed": 1,
        "gpu": device,
    }
    proc = subprocess.run(
        [sys.executable, "-c", _STAGE], input=json.dumps(setup), capture_output=True, text=True,
        env=gpu_env(work, shape="small", hide_cuda=True), cwd=work, timeout=300,
    )  # fmt: skip
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@STAGE@@ ")]
    assert line, proc.stderr[-3000:]
    answer = json.loads(line[-1].split(" ", 1)[1])
    return answer.get("failure") or {"status": "no failure", "answer": answer}


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_kernel_the_device_refuses_gets_the_off_gpu_verdict(
    verdicts: dict[str, dict], name: str
) -> None:
    import torch

    from accelopt_core.onsite.triton.devices import lookup

    on_gpu, off_gpu, real = (verdicts[f"{w}:{name}"] for w in ("gpu", "cpu", "real"))
    record(
        f"refused/{name}",
        {"gpu": on_gpu.get("message"), "cpu": off_gpu.get("message"), "triton": real},
    )
    # the device itself refuses it: Triton's own launch raises (OutOfResources, or the
    # compiler's error), so the verdict below is no artefact of the compile stage
    assert real["rc"] != 0, f"Triton launched {name} on the GPU: {real}"
    dev = lookup(table_device())
    assert on_gpu["device"] == torch.cuda.get_device_name(0)
    expected = VARIANTS[name][1].format(dev=dev.name, arch=dev.arch)
    assert off_gpu["status"] == "incorrect" and off_gpu["message"].startswith(expected), off_gpu
    assert (on_gpu["status"], on_gpu["message"], on_gpu["line"]) == (
        off_gpu["status"],
        off_gpu["message"],
        off_gpu["line"],
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """``accelopt profile`` of the baseline and of each hack (with the softmax harness)."""
    jobs = {}
    for name in ["baseline", *CUDA_HACKS]:
        work = tmp_path_factory.mktemp(f"hostile-{name}")
        source = SOFTMAX.read_text() if name == "baseline" else with_harness(CUDA_HACKS[name])
        path = _write(work, source, "softmax.py")
        jobs[name] = lambda p=path, w=work: profile(p, w)
    return parallel(jobs, workers=4)


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(CUDA_HACKS))
def test_a_cuda_timing_hack_is_not_a_fast_ok_result(hostile: dict[str, dict], name: str) -> None:
    base, got = hostile["baseline"], hostile[name]
    seen = (got.get("status"), got.get("rule"), got.get("latency_ms"), got.get("message"))
    record(
        f"hostile/{name}", dict(zip(("status", "rule", "latency_ms", "message"), seen, strict=True))
    )
    assert base["status"] == "ok" and base["timing"] == "cuda", base
    if got.get("status") == "ok":
        assert got["latency_ms"] != FORGED_LATENCY_MS, f"forged figures reported: {seen}"
        assert got["latency_ms"] * NOISE_FACTOR > base["latency_ms"], (
            f"reported ok and faster than the baseline ({base['latency_ms']:.3f} ms): {seen}"
        )

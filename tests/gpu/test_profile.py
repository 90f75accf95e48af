"""``accelopt profile`` of every Triton example at GPU shapes on CUDA (issue 31), and the compile
stage's facts against the kernels CUDA really loaded.

One module fixture profiles the five examples (the real CLI, the local target, warm workers),
several at a time: the assertions hold under a shared GPU (a median between its quantiles, %
of peak under 100, the facts of the compiled code), and the device window is short. A second
fixture runs each example's entry once more with Triton's own JIT and driver
(tests/gpu/loaded_kernels.py) for the ground truth of the compile stage: registers, spills,
shared memory per launch and the driver's occupancy answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu.support import (
    EXAMPLES,
    GPU,
    ROOT,
    device_name,
    gpu_env,
    parallel,
    profile,
    record,
    summary,
    table_device,
)

pytestmark = GPU
#: What this module takes on an H100, seconds (112 s in the fourth window); the device
#: budget skips it when less is left (conftest).
DEVICE_COST_S = 120

NAMES = [p.stem for p in EXAMPLES]


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """``accelopt profile --json`` of each example, by name."""
    jobs = {}
    for path in EXAMPLES:
        work = tmp_path_factory.mktemp(f"profile-{path.stem}")
        jobs[path.stem] = lambda path=path, work=work: profile(path, work)
    return parallel(jobs, workers=3)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict]]:
    """The kernels CUDA loaded for each example's entry on the inputs of seed 1 (the seed the
    compile stage compiles for), by example name."""
    script = Path(__file__).with_name("loaded_kernels.py")

    def run(path: Path) -> list[dict]:
        work = tmp_path_factory.mktemp(f"loaded-{path.stem}")
        proc = subprocess.run(
            [sys.executable, str(script), str(path), "1"],
            capture_output=True, text=True, env=gpu_env(work), cwd=ROOT, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return parallel({p.stem: (lambda p=p: run(p)) for p in EXAMPLES}, workers=5)


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", NAMES)
def test_every_example_is_timed_on_cuda(profiles: dict[str, dict], name: str) -> None:
    got = profiles[name]
    record(f"profile/{name}", summary(got))
    assert got["status"] == "ok", (got["status"], got["message"], got["_stderr"])
    assert got["timing"] == "cuda"
    assert got["device"] == device_name()
    assert 0 < got["p20_ms"] <= got["latency_ms"] <= got["p80_ms"], got
    # % of peak from the harness's flops/bytes on the device's roofline: a real figure, and
    # never over 100 (the judge would have rejected it as implausible)
    assert got["pct_of_peak"] is not None, f"no % of peak for {got['device']}"
    assert 0 < got["pct_of_peak"] < 100, got["pct_of_peak"]
    assert got["bound"] in ("memory", "compute")
    gpu = got["metrics"]["gpu"]
    assert gpu["device"] == table_device() and gpu["kernels"], gpu


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", NAMES)
def test_the_compile_stage_facts_are_the_loaded_kernels(
    profiles: dict[str, dict], loaded: dict[str, list[dict]], name: str
) -> None:
    stage = profiles[name]["metrics"]["gpu"]["kernels"]
    truth = loaded[name]
    record(f"aot_vs_loaded/{name}", {"stage": stage[: len(truth)], "loaded": truth})
    assert truth, "the entry launched no kernel"
    # the stage lists each distinct compiled kernel in first-launch order, the default
    # inputs (of the same seed) first: those are the ones the timed run loads
    assert len(stage) >= len(truth), (stage, truth)
    for aot, real in zip(stage, truth, strict=False):
        where = f"{name}: {aot['kernel']} ({aot['config']})"
        assert aot["kernel"] == real["name"], where
        assert aot["registers"] == real["n_regs"], where
        assert aot["local_bytes"] // 4 == real["n_spills"], where
        assert aot["shared_bytes"] == real["shared"], where
        assert aot["threads"] == real["num_warps"] * 32, where
        warps = real["blocks_per_sm"] * real["num_warps"]
        assert aot["occupancy"]["warps"] == warps, (where, aot["occupancy"], real)

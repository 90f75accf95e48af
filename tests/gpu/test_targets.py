"""The targets on CUDA (issue 31): a warm worker serves one CUDA evaluation after another from
the same fork server, which holds no CUDA context of its own (a context does not survive
``fork``: each forked evaluation makes its own); the local target and the ssh agent (a real
OpenSSH server on loopback, tests/remote_fixtures.py) both time the softmax example on CUDA."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelopt_core.onsite.judge.roofline import peak_table
from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.settings import Settings
from accelopt_core.targets.local import LocalTarget
from accelopt_core.targets.ssh import SSHTarget
from tests.gpu.support import GPU, ROOT, SOFTMAX, device_name, record, summary, table_device
from tests.onsite.runs import gate_baseline
from tests.remote_fixtures import LoopbackSSHD, sshd  # noqa: F401

pytestmark = GPU
#: What this module takes on an H100, seconds (about 140 s in the fourth window: two profiles and the warm worker's three); the device
#: budget skips it when less is left (conftest).
DEVICE_COST_S = 150

CANDIDATES = ROOT / "tests" / "candidates"


@pytest.fixture(autouse=True)
def _one_gpu_at_gpu_shapes(monkeypatch: pytest.MonkeyPatch) -> None:
    """One slot on GPU 0 (every evaluation meets the same warm worker) and the examples'
    GPU-sized inputs in the workers this process starts."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("ACCELOPT_SHAPE", "large")


def add_request(name: str) -> EvalRequest:
    """A tests/candidates/ fixture against add.py's harness: 2 seeds, a short timing."""
    source = (CANDIDATES / name).read_text()
    return EvalRequest(
        candidate_source=source,
        harness_source=(CANDIDATES / "add.py").read_text(),
        entry="add",
        source_name=name,
        seeds=[1, 2],
        rep_ms=20.0,
        timeout_s=120.0,
        peaks=peak_table(),
        gpu=table_device(),
        **gate_baseline(source),
    )


def example_request(path: Path, entry: str) -> EvalRequest:
    """An example file evaluated as it is (its own original), as ``accelopt profile`` does."""
    source = path.read_text()
    return EvalRequest(
        candidate_source=source,
        harness_source=source,
        entry=entry,
        source_name=path.name,
        seeds=[1, 2],
        timeout_s=240.0,
        peaks=peak_table(),
        gpu=table_device(),
    )


@pytest.mark.timeout(300)
async def test_a_warm_worker_serves_cuda_evaluations_without_a_context_of_its_own() -> None:
    target = LocalTarget(Settings(evaluation={"warmWorkers": True}))
    assert target.devices == ["0"], target.devices
    names = ["add.py", "ok_block128.py", "add.py"]
    try:
        results = [await target.evaluate(add_request(n)) for n in names]
        (pid,) = target.warm.pids
        worker = await target.warm.take("0")
        hello = dict(worker.hello)
        target.warm.give("0", worker)
        maps = Path(f"/proc/{pid}/maps").read_text()
    finally:
        await target.close()
    record(
        "warm/evaluations",
        {
            "eval_s": [r.eval_s for r in results],
            "statuses": [r.status for r in results],
            # loading the driver library is harmless before fork; initialising it is not
            "fork_server_mapped_libcuda": "libcuda.so" in maps,
        },
    )
    assert worker.proc.pid == pid  # one fork server served all three
    assert hello["cuda_initialized"] is False, hello
    assert {"torch", "triton"} <= set(hello["preloaded"]), hello
    for name, result in zip(names, results, strict=True):
        assert result.status == "ok", (name, result.message)
        assert result.timing == "cuda" and result.device == device_name(), (name, result)


@pytest.mark.timeout(420)
async def test_local_and_ssh_targets_time_on_cuda(sshd: LoopbackSSHD) -> None:  # noqa: F811
    request = example_request(SOFTMAX, "softmax")
    local = LocalTarget(Settings(evaluation={"warmWorkers": True}))
    ssh = {
        "python": sys.executable,
        "devices": "0",
        "identityFile": str(sshd.identity_file),
        "knownHosts": str(sshd.known_hosts),
        "connectTimeoutS": 20,
    }
    remote = SSHTarget(Settings(target=sshd.url, ssh=ssh, evaluation={"warmWorkers": True}))
    try:
        here = await local.evaluate(request)
        there = await remote.evaluate(request)
    finally:
        await local.close()
        await remote.close()
    record("targets/local", summary(here.to_dict()))
    record("targets/ssh", summary(there.to_dict()))
    for name, result in (("local", here), ("ssh", there)):
        assert result.status == "ok", (name, result.message)
        assert result.timing == "cuda" and result.device == device_name(), (name, result)
        assert 0 < result.pct_of_peak < 100, (name, result.pct_of_peak)
    # the same kernel on the same GPU and inputs: the same latency within run-to-run noise
    assert 0.5 < there.latency_ms / here.latency_ms < 2.0, (here.latency_ms, there.latency_ms)

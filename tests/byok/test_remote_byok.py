"""Issue 13 over real remote targets: the test package evaluated through the Engine on the
loopback OpenSSH server and on the loopback Ray head (tests/remote_fixtures.py, no test double).

The package copy is deleted from disk after the workload is loaded, and the remote's working
directory is an empty folder elsewhere, so only the import closure shipped in the request can
make the harness's ``from minikern.ops.rms_norm import`` and the kernel module's
``from ..utils import`` resolve on the target. Nothing may be left there afterwards.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from accelopt_core.kernelfile import KernelFile
from accelopt_core.kernelfile.workload import load_workload
from accelopt_core.settings import Settings
from tests.byok.conftest import copy_project
from tests.remote_fixtures import LoopbackRayHead, LoopbackSSHD, ray_head, sshd  # noqa: F401

pytestmark = pytest.mark.slow


def _shipped_only(tmp_path: Path) -> KernelFile:
    """bench_rms_norm's workload, loaded from a package copy that is then deleted."""
    pkg = copy_project(tmp_path / "project")
    kf = load_workload(pkg / "benchmarks" / "bench_rms_norm.py")
    context = kf.context
    assert context is not None and context.kernel_path == "minikern/ops/rms_norm.py"
    assert {"minikern/utils.py", "minikern/__init__.py"} <= set(context.files)
    shutil.rmtree(pkg.parent)
    return kf


async def _profile(settings: Settings, target, kf: KernelFile):
    from accelopt_core.engine import Engine

    engine = Engine(settings, target=target)
    try:
        return await asyncio.wait_for(engine.profile(kf), 300)
    finally:
        await engine.close()
        await target.close()


async def _left_behind(*dirs: Path) -> list[Path]:
    """What is left in ``dirs`` once the remote side is done: the warm worker's scratch roots
    (issue 34) live as long as it does, until the agent has seen the channel close and ended it
    (at most 30 s)."""
    deadline = time.monotonic() + 30
    while any(list(d.iterdir()) for d in dirs) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return [p for d in dirs for p in d.iterdir()]


def _assert_ok(result) -> None:
    assert result.status == "ok", result.message
    assert "3 shapes" in result.message and "held out" in result.message


async def test_package_over_ssh_with_workdir_outside(
    sshd: LoopbackSSHD,  # noqa: F811
    tmp_path: Path,
) -> None:
    from accelopt_core.targets.ssh import SSHTarget

    kf = _shipped_only(tmp_path)
    workdir, tmpdir = tmp_path / "remote_work", tmp_path / "remote_tmp"
    workdir.mkdir()
    tmpdir.mkdir()
    settings = Settings(
        target=sshd.url,
        ssh={
            "python": sys.executable,
            "devices": "0",
            "identityFile": str(sshd.identity_file),
            "knownHosts": str(sshd.known_hosts),
            "connectTimeoutS": 10,
            "workdir": str(workdir),
        },
    ).model_copy(update={"memory_dir": str(tmp_path / "mem")})
    target = SSHTarget(settings, env={"TMPDIR": str(tmpdir)})
    info = await target.probe()
    assert info["cwd"] == str(workdir)
    result = await _profile(settings, target, kf)
    _assert_ok(result)
    assert await _left_behind(workdir, tmpdir) == []

    # the control: the same request without utils.py in the closure cannot import it there
    files = {k: v for k, v in kf.context.files.items() if k != "minikern/utils.py"}
    kf.context = replace(kf.context, files=files)
    settings = settings.model_copy(update={"memory_dir": str(tmp_path / "mem2")})  # no cache
    target = SSHTarget(settings, env={"TMPDIR": str(tmpdir)})
    control = await _profile(settings, target, kf)
    assert control.status == "runtime_error", control.message
    assert "minikern.utils" in control.message
    assert await _left_behind(workdir, tmpdir) == []


async def test_package_over_ray(
    ray_head: LoopbackRayHead,  # noqa: F811
    tmp_path: Path,
) -> None:
    pytest.importorskip("ray")
    from accelopt_core.targets import make_target

    kf = _shipped_only(tmp_path)
    settings = Settings(target=ray_head.url).model_copy(
        update={"memory_dir": str(tmp_path / "mem")}
    )
    before = {p.name for p in Path(ray_head.root).rglob("*")}
    result = await _profile(settings, make_target(settings), kf)
    _assert_ok(result)
    # no module of the package was written anywhere under the Ray head's directories
    after = {p.name for p in Path(ray_head.root).rglob("*")}
    assert not {n for n in after - before if n in {"rms_norm.py", "utils.py", "minikern"}}

"""The ssh:// target against a real OpenSSH server on 127.0.0.1 (tests/remote_fixtures.py).

The remote python is this machine's python; candidates run under the Triton interpreter. No
test double: real sshd, real asyncssh, the real worker shipped over the channel.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from accelopt_core.settings import Settings
from accelopt_core.targets import make_target
from accelopt_core.targets.base import TargetError
from accelopt_core.targets.ssh import SSHAddress, SSHTarget
from tests.remote_fixtures import (  # noqa: F401
    KEYGEN,
    LoopbackSSHD,
    processes_matching,
    ssh_env,
    sshd,
)
from tests.targets.procs import children
from tests.targets.verdicts import COMPARED, STATUSES, assert_same_verdicts, local_verdicts, request

ROOT = Path(__file__).resolve().parents[2]


def ssh_settings(server: LoopbackSSHD, warm: bool = True, **ssh) -> Settings:
    options = {
        "python": sys.executable,
        "devices": "0,1",
        "identityFile": str(server.identity_file),
        "knownHosts": str(server.known_hosts),
        "connectTimeoutS": 10,
    }
    options.update(ssh)
    return Settings(target=server.url, ssh=options, evaluation={"warmWorkers": warm})


async def wait_gone(marker: str, timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = processes_matching(marker)
        if not left:
            return []
        await asyncio.sleep(0.1)
    return processes_matching(marker)


def test_address_parsing() -> None:
    assert SSHAddress.parse("ssh://gpu-box") == SSHAddress("gpu-box", 22, None)
    assert SSHAddress.parse("ssh://ubuntu@10.0.0.5:2222") == SSHAddress("10.0.0.5", 2222, "ubuntu")
    assert SSHAddress.parse("ssh://me@[::1]:22").host == "::1"
    assert SSHAddress.parse("ssh://h:2200").keyscan == "ssh-keyscan -p 2200 h >> ~/.ssh/known_hosts"
    for bad in ("ssh://", "ssh://host:99999", "ssh://host:port", "ssh://a@b@c"):
        with pytest.raises(TargetError, match="ssh://"):
            SSHAddress.parse(bad)
    with pytest.raises(TargetError, match="devices"):
        SSHTarget(Settings(target="ssh://h", ssh={"devices": " , "}))


async def test_make_target_builds_ssh(sshd: LoopbackSSHD) -> None:  # noqa: F811
    target = make_target(ssh_settings(sshd))
    assert isinstance(target, SSHTarget) and target.capacity == 2
    info = await target.probe()
    assert info["python"] == sys.version.split()[0]
    assert info["torch"] and info["triton"]
    assert info["device_names"] == ["cpu", "cpu"]
    assert target.fingerprint.startswith(f"ssh://127.0.0.1:{sshd.port}:cpu:torch-")
    await target.close()
    await target.close()  # idempotent


@pytest.mark.slow
@pytest.mark.parametrize("warm", [False, True])
async def test_same_verdicts_as_local(sshd: LoopbackSSHD, tmp_path: Path, warm: bool) -> None:  # noqa: F811
    remote = SSHTarget(ssh_settings(sshd, warm))
    try:
        ssh_results = await asyncio.gather(*(remote.evaluate(request(n)) for n in COMPARED))
    finally:
        await remote.close()
    local = await asyncio.to_thread(local_verdicts)
    assert_same_verdicts(dict(zip(COMPARED, ssh_results, strict=True)), local)
    for r in ssh_results:
        assert r.versions.get("torch") == local["add.py"].versions.get("torch")
    assert [r.status for r in ssh_results] == STATUSES
    assert ssh_results[0].latency_ms > 0 and ssh_results[0].timing == "interpreter"
    assert ssh_results[0].max_abs_error == local["add.py"].max_abs_error
    assert all(r.eval_s and r.eval_s > 0 for r in ssh_results)


async def test_unknown_host_key_is_refused(sshd: LoopbackSSHD) -> None:  # noqa: F811
    target = SSHTarget(ssh_settings(sshd, knownHosts=str(sshd.empty_known_hosts)))
    with pytest.raises(TargetError) as info:
        await target.evaluate(request("add.py"))
    message = str(info.value)
    assert "not trust" in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {sshd.empty_known_hosts}" in message
    missing = SSHTarget(ssh_settings(sshd, knownHosts=str(sshd.root / "nope")))
    with pytest.raises(TargetError, match="does not exist.*ssh-keyscan"):
        await missing.probe()
    await target.close()


async def test_wrong_key_is_refused_without_password_prompt(
    sshd: LoopbackSSHD,  # noqa: F811
    tmp_path: Path,
) -> None:
    other = tmp_path / "other_key"
    keygen = [KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(other)]
    subprocess.run(keygen, check=True, env=ssh_env())
    target = SSHTarget(ssh_settings(sshd, identityFile=str(other)))
    with pytest.raises(TargetError, match="authentication .* failed.*public keys only"):
        await target.probe()


async def test_remote_python_missing_or_without_torch(
    sshd: LoopbackSSHD,  # noqa: F811
) -> None:
    missing = SSHTarget(ssh_settings(sshd, python="/nonexistent/python3"))
    with pytest.raises(TargetError, match="could not be started.*accelopt.ssh.python"):
        await missing.probe()
    await missing.close()
    bare = Path("/usr/bin/python3")
    if not bare.exists() or subprocess.run([bare, "-c", "import torch"]).returncode == 0:
        pytest.skip("no python without torch on this machine")
    target = SSHTarget(ssh_settings(sshd, python=str(bare)))
    info = await target.probe()
    assert info["torch"] is None
    result = await target.evaluate(request("add.py"))
    await target.close()
    assert result.status == "runtime_error"
    assert "torch" in (result.message or "")


@pytest.mark.parametrize("warm", [False, True])
async def test_cancel_kills_the_remote_candidate(sshd: LoopbackSSHD, warm: bool) -> None:  # noqa: F811
    marker = f"ACCELOPT_MARK_{uuid.uuid4().hex}"
    settings = ssh_settings(sshd, warm, devices="0")
    target = SSHTarget(settings, env={"ACCELOPT_TEST_MARK": marker})
    await target.probe()
    task = asyncio.ensure_future(target.evaluate(request("hang.py", timeout_s=120)))
    deadline = time.monotonic() + 60
    while len(processes_matching(marker)) < 3 and time.monotonic() < deadline:  # agent + worker
        await asyncio.sleep(0.1)
    assert len(processes_matching(marker)) >= 3
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(marker) == []
    # the slot is free again and the target still works
    result = await asyncio.wait_for(target.evaluate(request("add.py")), 120)
    assert result.status == "ok"
    await target.close()
    assert await wait_gone(marker) == []


async def test_warm_worker_lives_on_the_remote_and_a_killed_one_is_replaced(
    sshd: LoopbackSSHD,  # noqa: F811
) -> None:
    marker = f"ACCELOPT_MARK_{uuid.uuid4().hex}"
    target = SSHTarget(ssh_settings(sshd, devices="0"), env={"ACCELOPT_TEST_MARK": marker})
    try:
        first = await target.evaluate(request("add.py"))
        second = await target.evaluate(request("zeros.py"))
        assert [first.status, second.status] == ["ok", "incorrect"], (first, second)
        agent = target._agents["0"].hello["pid"]
        (warm,) = children(agent)  # one warm worker served both, and stays for the next
        assert first.eval_s > second.eval_s  # the second paid no python start nor import
        hung = asyncio.ensure_future(target.evaluate(request("hang.py")))
        deadline = time.monotonic() + 60
        while not children(warm) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        os.kill(warm, 9)  # the remote worker dies mid-search
        killed = await asyncio.wait_for(hung, 30)
        assert killed.status == "runtime_error" and "SIGKILL" in killed.message
        again = await target.evaluate(request("add.py"))
        assert again.status == "ok", again
        assert children(agent) and children(agent) != [warm]  # replaced, same agent
    finally:
        await target.close()
    assert await wait_gone(marker) == []


@pytest.mark.slow
async def test_killed_sshd_gives_classified_failures_then_reconnects(
    sshd: LoopbackSSHD,  # noqa: F811
) -> None:
    marker = f"ACCELOPT_MARK_{uuid.uuid4().hex}"
    target = SSHTarget(ssh_settings(sshd), env={"ACCELOPT_TEST_MARK": marker})
    assert (await target.evaluate(request("add.py"))).status == "ok"
    hung = [asyncio.ensure_future(target.evaluate(request("hang.py"))) for _ in range(2)]
    deadline = time.monotonic() + 60
    while len(processes_matching(marker)) < 6 and time.monotonic() < deadline:  # 2 x 3
        await asyncio.sleep(0.1)
    sshd.stop()
    results = await asyncio.wait_for(asyncio.gather(*hung), 30)
    for r in results:
        assert r.status == "runtime_error"
        assert r.message.startswith("connection to 127.0.0.1 lost")
    # the remote agents noticed the dropped channel and took their candidates down
    assert await wait_gone(marker) == []
    down = await target.evaluate(request("add.py"))
    assert down.status == "runtime_error" and "cannot reach" in down.message
    sshd.start()
    again = await target.evaluate(request("add.py"))
    assert again.status == "ok", again
    await target.close()


@pytest.mark.slow
async def test_worker_leaves_no_files_behind(sshd: LoopbackSSHD, tmp_path: Path) -> None:  # noqa: F811
    workdir = tmp_path / "remote_work"
    tmpdir = tmp_path / "remote_tmp"
    workdir.mkdir()
    tmpdir.mkdir()
    target = SSHTarget(
        ssh_settings(sshd, workdir=str(workdir), devices="0"), env={"TMPDIR": str(tmpdir)}
    )
    info = await target.probe()
    assert info["cwd"] == str(workdir) and info["tmpdir"] == str(tmpdir)
    results = [await target.evaluate(request(n)) for n in ("add.py", "segfault.py")]
    await target.close()
    assert [r.status for r in results] == ["ok", "runtime_error"]
    # the warm worker's scratch roots (issue 34) live as long as it does: until the agent
    # has seen the channel close and ended it
    deadline = time.monotonic() + 30
    while list(tmpdir.iterdir()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert list(workdir.iterdir()) == [] and list(tmpdir.iterdir()) == []


@pytest.mark.slow
def test_target_check_cli(sshd: LoopbackSSHD, tmp_path: Path) -> None:  # noqa: F811
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "accelopt": {
                    "ssh": {
                        "python": sys.executable,
                        "identityFile": str(sshd.identity_file),
                        "knownHosts": str(sshd.known_hosts),
                    }
                }
            }
        )
    )
    env = dict(os.environ, ACCELOPT_MEMORY_DIR=str(tmp_path / "mem"))
    cmd = [sys.executable, "-m", "accelopt_cli.main", "target", "check", sshd.url]
    proc = subprocess.run(
        [*cmd, "--settings", str(settings), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["result"]["status"] == "ok"
    assert report["target"] == sshd.url and report["info"]["device_names"] == ["cpu"]
    assert report["info"]["torch"] and report["info"]["triton"]
    human = subprocess.run(
        [*cmd, "--settings", str(settings)], capture_output=True, text=True, env=env, timeout=300
    )
    assert human.returncode == 0, human.stderr
    assert "correct" in human.stdout and "triton" in human.stdout
    refused = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1
    assert not refused.stdout.strip() or json.loads(refused.stdout)["ok"] is False
    assert "Traceback" not in refused.stderr


@pytest.mark.slow
async def test_short_search_through_ssh(sshd: LoopbackSSHD, tmp_path: Path) -> None:  # noqa: F811
    from accelopt_core.engine import Engine
    from accelopt_core.kernelfile import parse_kernel_file

    source = (ROOT / "examples" / "triton" / "softmax.py").read_text()
    settings = ssh_settings(sshd).model_copy(
        update={
            "memory_dir": str(tmp_path / "mem"),
            "search": Settings().search.model_copy(
                update={"iterations": 1, "beam_width": 1, "plans_per_candidate": 2}
            ),
        }
    )
    target = SSHTarget(settings)
    engine = Engine(settings, target=target)
    kf = parse_kernel_file(source, str(tmp_path / "softmax.py"))
    try:
        search = engine.new_search(kf, "softmax_kernel")
        report = await asyncio.wait_for(search.run(), 600)
    finally:
        await engine.close()
        await target.close()
    assert report.baseline.result.status == "ok", report.baseline.result.message
    assert report.target == settings.target
    assert report.evaluated >= 2
    assert "runtime_error" not in report.failures and "timeout" not in report.failures

"""The on-site launchers of the worker, run here without a transport: the ssh agent
(``accelopt_core.onsite.process.agent.main``, shipped as ``bundle("process.agent")``) talked to over pipes by
the ssh target's own client code, and the Ray task as Ray ships it (pickled by value)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.targets.shipping import (
    BOOTSTRAP,
    bundle,
    decode_result,
    encode_stdin,
    encode_warm,
)
from accelopt_core.targets.ssh.agent import RemoteAgent, read_hello
from tests.remote_fixtures import processes_matching
from tests.targets import verdicts
from tests.targets.procs import children


def request(name: str, **fields) -> EvalRequest:
    """:func:`tests.targets.verdicts.request` with one seed unless ``fields`` say otherwise."""
    fields.setdefault("seeds", [1])
    return verdicts.request(name, **fields)


#: How the client frames a request to the agent: a cold worker per request (``E``) or the
#: agent's warm worker (``W``).
FRAMES = {"cold": (b"E", encode_stdin), "warm": (b"W", encode_warm)}


async def roundtrip(agent: RemoteAgent, mode: str, req) -> tuple[int, bytes, bytes]:
    kind, encode = FRAMES[mode]
    return await agent.roundtrip(encode(req), kind)


async def start_agent_here(env: dict[str, str] | None = None) -> RemoteAgent:
    """The agent as the ssh target starts it (``python -c BOOTSTRAP BOOTSTRAP``, the bundle
    first on stdin), as a local process."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        BOOTSTRAP,
        BOOTSTRAP,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=Path(__file__).parent,
    )
    proc.stdin.write(bundle("process.agent"))
    hello = await asyncio.wait_for(read_hello(proc), 60)
    return RemoteAgent(device="0", conn=None, proc=proc, hello=hello)


@pytest.mark.parametrize(
    "mode", [pytest.param("cold", marks=pytest.mark.slow), "warm"]
)  # cold: two fresh Pythons, each importing torch (the full suite runs it)
async def test_agent_says_hello_runs_frames_and_exits_at_eof(mode: str) -> None:
    agent = await start_agent_here()
    proc = agent.proc
    assert agent.hello["pid"] == proc.pid
    assert agent.hello["python"] == sys.version.split()[0]
    assert agent.hello["devices"] and agent.hello["torch"]
    assert agent.hello["cwd"] == str(Path(__file__).parent)
    ok = decode_result(*_reordered(await roundtrip(agent, mode, request("add.py"))))
    assert ok.status == "ok", ok
    bad = decode_result(*_reordered(await roundtrip(agent, mode, request("zeros.py"))))
    assert bad.status == "incorrect"
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), 30) == 0


@pytest.mark.parametrize("mode", FRAMES)
async def test_eof_kills_the_running_worker_and_candidate(mode: str) -> None:
    marker = f"ACCELOPT_MARK_{uuid.uuid4().hex}"
    agent = await start_agent_here({"ACCELOPT_TEST_MARK": marker})
    reply = asyncio.ensure_future(roundtrip(agent, mode, request("hang.py")))
    deadline = time.monotonic() + 60
    while len(processes_matching(marker)) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)  # agent + (cold or warm) worker + candidate
    assert len(processes_matching(marker)) >= 3
    agent.proc.stdin.close()
    assert await asyncio.wait_for(agent.proc.wait(), 30) == 0
    deadline = time.monotonic() + 10
    while processes_matching(marker) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert processes_matching(marker) == []
    try:  # the agent may report the killed worker before it exits
        returncode, _out, _err = await reply
    except asyncio.IncompleteReadError:
        return
    assert returncode == -9  # SIGKILL


async def test_killed_warm_worker_is_a_classified_failure_and_is_replaced() -> None:
    agent = await start_agent_here()
    reply = asyncio.ensure_future(roundtrip(agent, "warm", request("hang.py")))
    deadline = time.monotonic() + 60
    while not children(agent.proc.pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    (warm,) = children(agent.proc.pid)
    while len(children(warm)) < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)  # the warm worker forked the candidate
    os.kill(warm, 9)
    killed = decode_result(*_reordered(await asyncio.wait_for(reply, 30)))
    assert killed.status == "runtime_error" and "SIGKILL" in killed.message
    again = decode_result(*_reordered(await roundtrip(agent, "warm", request("add.py"))))
    assert again.status == "ok", again
    assert children(agent.proc.pid) != [warm]  # a new warm worker
    agent.proc.stdin.close()
    assert await asyncio.wait_for(agent.proc.wait(), 30) == 0


def test_warm_host_killed_by_another_thread_reports_the_kill() -> None:
    """The agent's end-of-file handling kills the warm host from its main thread while the
    reply thread waits: the reply names SIGKILL (it once said 127, "no worker", because the
    host forgot its process before the reader saw end-of-file)."""
    import threading

    from accelopt_core.onsite.process.warmhost import WarmHost, host_argv, split_payload

    boot, body = split_payload(encode_warm(request("hang.py")))
    host = WarmHost(host_argv(BOOTSTRAP))
    host.ensure(boot)
    zygote = host.proc.pid
    replies: list[tuple[int, bytes, bytes]] = []
    reader = threading.Thread(target=lambda: replies.append(host.evaluate(body)))
    reader.start()
    deadline = time.monotonic() + 60
    while not children(zygote) and time.monotonic() < deadline:
        time.sleep(0.05)  # the zygote forked the candidate
    assert children(zygote)
    host.kill()
    reader.join(30)
    assert replies and replies[0][0] == -9, replies


def test_warm_host_replaces_a_zygote_killed_while_idle() -> None:
    """A zygote killed between requests is replaced at the next one, even while its threads
    are still exiting (``Popen.poll`` says it runs until the last thread is gone; its main
    thread is a zombie from the kill on)."""
    from accelopt_core.onsite.process.warmhost import WarmHost, exited, host_argv, split_payload

    boot, body = split_payload(encode_warm(request("add.py")))
    host = WarmHost(host_argv(BOOTSTRAP))
    try:
        host.ensure(boot)
        first = decode_result(*_reordered(host.evaluate(body)))
        assert first.status == "ok", first
        zygote = host.proc.pid
        assert not exited(zygote)
        os.kill(zygote, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not exited(zygote) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert exited(zygote)
        host.ensure(boot)
        assert host.proc.pid != zygote
        again = decode_result(*_reordered(host.evaluate(body)))
        assert again.status == "ok", again
    finally:
        host.kill()


def test_ray_task_travels_by_value(tmp_path: Path) -> None:
    """The pickled task runs in a python where this project is not importable."""
    ray = pytest.importorskip("ray")
    from accelopt_core.targets.ray import task_function

    blob = ray.cloudpickle.dumps(task_function(ray))
    program = (
        "import pickle, sys\n"
        "try:\n    import accelopt_core\nexcept ImportError:\n    pass\n"
        "else:\n    sys.exit('accelopt_core is importable here')\n"
        "task = pickle.loads(sys.stdin.buffer.read())\n"
        "print(task('import sys; print(sys.argv[1:], sys.stdin.read())', b'payload', 30))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-s", "-c", program],  # no site: no editable install
        input=blob,
        capture_output=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(Path(ray.__file__).parents[1]), "PATH": os.environ["PATH"]},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "(0, b\"['accelopt-ray-task'] payload\\n\", b'')"


def _reordered(frame: tuple[int, bytes, bytes]) -> tuple[bytes, bytes, int]:
    returncode, out, err = frame
    return out, err, returncode

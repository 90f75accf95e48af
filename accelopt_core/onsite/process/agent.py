"""What starts the worker on a remote target: the ssh target's agent and the Ray task.

Both run the worker exactly as the local target does, ``[python, "-c", BOOTSTRAP]`` with the
shipped payload (``accelopt_core.targets.shipping.encode_stdin``: the onsite bundle plus the
request) on its stdin, and hand back its stdout, stderr and return code. Standard library
only; nothing is written to disk.

**The ssh agent** (:func:`main`): one long-lived process per configured device, started by the
ssh target inside an SSH session channel as ``python -c BOOTSTRAP BOOTSTRAP`` with this
package's bundle (``bundle("agent")``) first on its stdin; ``sys.argv[1]`` is the program it
runs each worker with. Keeping it alive saves the SSH session start-up and the remote login
shell on every evaluation. When its stdin reaches end-of-file (the channel was closed because
the evaluation was cancelled or timed out, the connection dropped, sshd died), it kills the
whole process tree of the running evaluation (the worker and its candidate, found through
``/proc`` parent links, since the worker puts the candidate into its own session; elsewhere it
falls back to the worker's process group) and exits. SIGTERM and SIGHUP do the same.

Wire format of the agent (all integers little-endian), after the bundle:

- agent -> client, once at start: ``b"H"`` + u32 length + JSON (python/torch/triton/neuronxcc
  versions, the NKI stack (``nki_sdk.stack()``), device names, free disk bytes of the working and temporary directories).
- client -> agent, per evaluation: ``b"E"`` + u64 length + payload (``encode_stdin`` bytes):
  a fresh (cold) worker; or ``b"W"`` + u64 length + payload (``encode_warm`` bytes): the
  agent's warm worker (:mod:`.process.warmhost`, :mod:`.process.zygote`), started at the first ``W`` frame
  and kept for the connection's lifetime (replaced when it died or the stack changed).
- agent -> client, per evaluation: ``b"R"`` + i32 return code (negative: killed by that signal)
  + u64 stdout length + u64 stderr length + stdout + stderr (a warm answer has the same form).

**The Ray task** (:func:`run_ray_task`): a function the Ray target ships by value (cloudpickle),
run once per evaluation in a Ray worker on the node the task was placed on.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from importlib import metadata

from ..runtime import stacks as nki_sdk
from ..sandbox.launch import worker_command
from ..sandbox.scratch import sweep
from .warmhost import WarmHost, split_payload

#: In the command line of every worker the Ray task starts (and of nothing else), so the
#: worker can be told apart from other processes on the node.
RAY_TASK_MARK = "accelopt-ray-task"


def _start_worker(
    bootstrap: str, *args: str, keep: str | None = None, **popen: object
) -> subprocess.Popen:
    """``[sys.executable, "-c", bootstrap, *args]`` with stdin, stdout and stderr piped, in
    the sandbox's allowlisted environment (plus the ``keep`` names; default: those this
    process was given in :data:`..sandbox.environment.KEEP_VAR`), wrapped in bubblewrap where
    Landlock is missing (:func:`..sandbox.launch.worker_command`)."""
    argv, env = worker_command([sys.executable, "-c", bootstrap, *args], os.environ, keep)
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        **popen,
    )


# -- the Ray task ----------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Linux: this process gets SIGKILL when its parent (the Ray worker) dies."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def run_ray_task(
    bootstrap: str, payload: bytes, timeout_s: float, keep: str = ""
) -> tuple[int, bytes, bytes]:
    """Run the shipped worker on this node; the body of every Ray task of the Ray target.

    The worker (``[sys.executable, "-c", bootstrap, RAY_TASK_MARK]``, in the sandbox's
    allowlisted environment plus the ``keep`` names) gets SIGKILL when the Ray worker running
    this task dies, so Ray's forced cancellation takes it down; it does the same for its
    candidate. After ``timeout_s`` s the worker is killed.

    Returns:
        ``(returncode, stdout, stderr)`` of the worker.
    """
    proc = _start_worker(bootstrap, RAY_TASK_MARK, keep=keep, preexec_fn=_die_with_parent)
    try:
        out, err = proc.communicate(payload, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        sweep()  # the scratch directories the killed worker could not remove
    except BaseException:  # cancelled (KeyboardInterrupt) or anything else: take it down
        proc.kill()
        proc.wait()
        sweep()
        raise
    return proc.returncode, out, err


# -- the ssh agent ---------------------------------------------------------------------------


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except Exception:
        return None


def _devices() -> list[dict[str, str]]:
    """``[{index, name}]`` of the NVIDIA GPUs (nvidia-smi), else of the Neuron devices
    (``/dev/neuron*``), else one ``cpu``."""
    names = []
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        for line in done.stdout.splitlines():
            index, _, name = line.partition(",")
            if index.strip() and name.strip():
                names.append((index.strip(), name.strip()))
    except Exception:
        pass
    if names:
        return [{"index": i, "name": n} for i, n in names]
    dev = os.listdir("/dev") if os.path.isdir("/dev") else []
    cores = [d for d in dev if d.startswith("neuron")]
    if cores:
        return [{"index": str(i), "name": "neuron"} for i in range(len(cores))]
    return [{"index": "0", "name": "cpu"}]


def _free(path: str) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def hello() -> dict:
    """What the agent reports once at start (the ``H`` frame's JSON)."""
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "neuronxcc": _version("neuronxcc"),
        "devices": _devices(),
        "nki_stack": nki_sdk.stack(),
        "cwd": os.getcwd(),
        "free_cwd": _free(os.getcwd()),
        "tmpdir": tempfile.gettempdir(),
        "free_tmp": _free(tempfile.gettempdir()),
        "pid": os.getpid(),
    }


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants, from the parent links in ``/proc`` (``[root]`` when
    ``/proc`` cannot be read)."""
    kids: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [root]
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, ()))
    return out


def _read(stream, n: int) -> bytes | None:
    """Exactly ``n`` bytes from ``stream``, or None at end-of-file."""
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Agent:
    """The ssh agent's state: the worker it runs (one at a time) and its output stream.

    Args:
        bootstrap: the ``python -c`` program each worker runs.
        stdin / stdout: binary streams to the client.
    """

    def __init__(self, bootstrap: str, stdin, stdout) -> None:
        self._bootstrap = bootstrap
        self._in = stdin
        self._out = stdout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self.warm = WarmHost([sys.executable, "-c", bootstrap])

    def send(self, data: bytes) -> None:
        """Write one frame; when the client is gone, kill the evaluation and exit."""
        with self._lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, OSError):
                self.kill_current()
                os._exit(0)

    def kill_current(self) -> None:
        """SIGKILL the running (cold) worker's and the warm worker's process trees and
        process groups, and remove the scratch directories they left
        (:func:`..sandbox.scratch.sweep`)."""
        for proc in (self._proc, self.warm.proc):
            self._kill_tree(proc)
        for proc in (self._proc, self.warm.proc):
            if proc is not None:
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        sweep()

    @staticmethod
    def _kill_tree(proc: subprocess.Popen | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        for _ in range(3):
            for pid in process_tree(proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def run(self, payload: bytes) -> None:
        """Run one worker on ``payload`` and send its ``R`` frame."""
        try:
            proc = _start_worker(self._bootstrap, start_new_session=True)
        except OSError as exc:
            out, err, rc = b"", f"agent could not start the worker: {exc}".encode(), 127
        else:
            self._proc = proc
            try:
                out, err = proc.communicate(payload)
            except (BrokenPipeError, OSError):
                out, err = b"", b""
                proc.wait()
            rc = proc.returncode
            self._proc = None
        self.reply(rc, out, err)

    def reply(self, rc: int, out: bytes, err: bytes) -> None:
        """Send one ``R`` frame."""
        self.send(b"R" + struct.pack("<iQQ", rc, len(out), len(err)) + out + err)

    def run_warm(self, request: bytes) -> None:
        """Run one request on the warm worker and send its ``R`` frame."""
        self.reply(*self.warm.evaluate(request))

    def _task(self, kind: bytes, payload: bytes) -> threading.Thread:
        """The thread that runs one frame; a warm worker is (re)started here, in the main
        thread, whose life its parent-death signal follows."""
        if kind == b"E":
            return threading.Thread(target=self.run, args=(payload,), daemon=True)
        try:
            boot, request = split_payload(payload)
        except ValueError:
            boot, request = b"", payload
        self.warm.ensure(boot)
        return threading.Thread(target=self.run_warm, args=(request,), daemon=True)

    def serve(self) -> None:
        """Send the hello, then run each ``E`` / ``W`` frame's payload (one at a time, each in
        a thread so that end-of-file is seen while it runs) until end-of-file."""
        data = json.dumps(hello()).encode()
        self.send(b"H" + struct.pack("<I", len(data)) + data)
        thread = None
        while True:
            head = _read(self._in, 9)
            if head is None or head[:1] not in (b"E", b"W"):
                break
            payload = _read(self._in, struct.unpack("<Q", head[1:])[0])
            if payload is None:
                break
            if thread is not None:
                thread.join()
            thread = self._task(head[:1], payload)
            thread.start()


def main() -> None:
    """The ssh agent: serve evaluations on stdin/stdout until end-of-file, then kill the
    running evaluation and exit (``os._exit``: no interpreter teardown)."""
    agent = Agent(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
    signal.signal(signal.SIGTERM, lambda *a: (agent.kill_current(), os._exit(143)))
    signal.signal(signal.SIGHUP, lambda *a: (agent.kill_current(), os._exit(129)))
    agent.serve()
    agent.kill_current()
    agent.warm.kill()
    os._exit(0)

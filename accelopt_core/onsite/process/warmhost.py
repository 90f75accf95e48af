"""A warm worker hosted by a long-lived process on the target: the ssh agent (:mod:`.process.agent`)
for the connection's lifetime, or the Ray target's actor per device (:class:`WarmActor`).

The host receives payloads in the cold worker's form, ``bundle("zygote")`` + the request JSON
(:func:`accelopt_core.targets.shipping.encode_warm`), starts :mod:`.process.zygote` with that bundle
when it has none running (or the bundle or the installed stack changed), frames the request to
it and answers in the cold worker's form too, ``(returncode, stdout, stderr)`` with the
result as the sentinel line on stdout, so the client decodes both paths alike. A zygote that
died (or was killed) mid-request gives its exit status and stderr tail (a classified
``runtime_error`` on the client) and is replaced at the next request.

The zygote is started with ``PR_SET_PDEATHSIG`` towards the thread that starts it: call
:meth:`WarmHost.ensure` from a thread that lives as long as the host (the agent's main thread).
Standard library only; nothing is written to disk.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading
from importlib import metadata

from ..protocol import SENTINEL
from ..sandbox.launch import worker_command
from ..sandbox.scratch import sweep

_STDERR_TAIL = 4000


def exited(pid: int) -> bool:
    """The child process ``pid`` has ended or is ending, asked without reaping it.

    ``waitid`` with ``WNOWAIT`` leaves the exit status to whoever reaps it (``Popen.wait``,
    asyncio's child watcher). It answers only once every thread has exited, and a killed
    zygote's threads (torch's pools) take a while to; its main thread is a zombie (``Z`` in
    ``/proc/PID/stat``) from the kill on, so Linux's ``/proc`` is read too. False where
    neither can tell."""
    try:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
    except ChildProcessError:
        return True  # reaped already
    except (AttributeError, OSError):
        pass
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[:1]
    except FileNotFoundError:
        return os.path.exists("/proc/self/stat")  # gone from a /proc that exists: reaped
    except OSError:
        return False
    return state in ([b"Z"], [b"X"])


def split_payload(payload: bytes) -> tuple[bytes, bytes]:
    """``(bundle, request JSON)`` of a warm payload (``b"<N>\\n"`` + N bytes + request).

    Raises:
        ValueError: no length line.
    """
    end = payload.index(b"\n")
    n = int(payload[:end])
    return payload[: end + 1 + n], payload[end + 1 + n :]


def stack_versions() -> tuple:
    """Installed torch, triton, numpy, neuronxcc versions (None when missing)."""
    out = []
    for dist in ("torch", "triton", "numpy", "neuronxcc"):
        try:
            out.append(metadata.version(dist))
        except Exception:
            out.append(None)
    return tuple(out)


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the thread that started it ends."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class WarmHost:
    """One zygote kept warm by this process.

    Args:
        argv: the command that runs a shipped program (``[python, "-c", BOOTSTRAP, ...]``);
            it is started in the sandbox's allowlisted environment (plus the ``keep`` names,
            default those of this process's :data:`..sandbox.environment.KEEP_VAR`), wrapped
            in bubblewrap where Landlock is missing (:func:`..sandbox.launch.worker_command`).
    """

    def __init__(self, argv: list[str], keep: str | None = None) -> None:
        self._argv = list(argv)
        self._keep = keep
        self.proc: subprocess.Popen | None = None
        self._key: tuple | None = None
        self._stderr = bytearray()
        self._drainer: threading.Thread | None = None

    def ensure(self, boot: bytes) -> None:
        """Have a live zygote started from ``boot`` with the stack installed now (start or
        restart it; a failed start shows at :meth:`evaluate`)."""
        key = (boot, stack_versions())
        proc = self.proc
        if proc is not None and proc.poll() is None and not exited(proc.pid) and key == self._key:
            return
        self.kill()
        self._key, self._stderr = key, bytearray()
        argv, env = worker_command(self._argv, os.environ, self._keep)
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        self._drainer = threading.Thread(
            target=self._drain, args=(self.proc, self._stderr), daemon=True
        )
        self._drainer.start()
        try:
            self.proc.stdin.write(boot)
            self.proc.stdin.flush()
            self._frame(self.proc, b"H")
        except (OSError, ValueError):
            pass  # died at start: evaluate() reports its exit status and stderr

    @staticmethod
    def _drain(proc: subprocess.Popen, buf: bytearray) -> None:
        """Keep the tail of ``proc``'s stderr in ``buf`` (its own buffer) until end-of-file."""
        while chunk := proc.stderr.read1(65536):
            buf += chunk
            del buf[: max(0, len(buf) - _STDERR_TAIL)]

    @staticmethod
    def _frame(proc: subprocess.Popen, kind: bytes) -> bytes:
        """The next ``kind`` frame's body on ``proc``'s stdout. Raises OSError at
        end-of-file."""
        head = proc.stdout.read(9)
        if len(head) != 9 or head[:1] != kind:
            raise OSError("the warm worker closed its output")
        (n,) = struct.unpack("<Q", head[1:])
        body = proc.stdout.read(n)
        if len(body) != n:
            raise OSError("the warm worker closed its output")
        return body

    def evaluate(self, request: bytes) -> tuple[int, bytes, bytes]:
        """Frame ``request`` (JSON) to the zygote: ``(0, sentinel line, b"")``, or the dead
        zygote's ``(returncode, b"", stderr tail)`` (negative: the signal that killed it).

        Safe against :meth:`kill` from another thread (the agent at end-of-file): the zygote
        is held in a local for the whole exchange, so its real exit status is reported."""
        proc, stderr, drainer = self.proc, self._stderr, self._drainer
        if proc is None or drainer is None:
            return 127, b"", b"no warm worker was started"
        try:
            proc.stdin.write(b"E" + struct.pack("<Q", len(request)) + request)
            proc.stdin.flush()
            body = self._frame(proc, b"R")
        except (OSError, ValueError):
            rc = proc.wait()
            drainer.join(2.0)  # the rest of its stderr
            return rc, b"", bytes(stderr)
        return 0, b"\n" + SENTINEL.encode() + body + b"\n", b""

    def kill(self) -> None:
        """SIGKILL the zygote's process tree (its running child included), reap it and remove
        the scratch directories it could not (:func:`..sandbox.scratch.sweep`)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.kill()
        proc.wait()
        sweep()


def host_argv(bootstrap: str, *args: str) -> list[str]:
    """``[sys.executable, "-c", bootstrap, *args]``: the program a host runs its zygote with."""
    return [sys.executable, "-c", bootstrap, *args]


class WarmActor:
    """The Ray target's actor per device (its class travels by value, like the Ray task): it
    hosts one warm worker on its node for the actor's lifetime. Killing the actor kills the
    warm worker (parent-death signal) and its candidate (the same rule, one level down).

    Args:
        bootstrap: the ``python -c`` program (``accelopt_core.targets.shipping.BOOTSTRAP``).
        mark: an extra argument on the warm worker's command line (the Ray task mark).
        keep: the user's extra environment names (``accelopt.evaluation.environment``).
    """

    def __init__(self, bootstrap: str, mark: str, keep: str = "") -> None:
        self.host = WarmHost(host_argv(bootstrap, mark), keep)

    def evaluate(self, payload: bytes) -> tuple[int, bytes, bytes]:
        """Run one warm payload (``encode_warm``): ``(returncode, stdout, stderr)`` as the
        cold worker gives them."""
        boot, request = split_payload(payload)
        self.host.ensure(boot)
        return self.host.evaluate(request)

    def pids(self) -> tuple[int, int | None]:
        """``(actor pid, warm worker pid or None)`` (diagnostics, tests)."""
        proc = self.host.proc
        return os.getpid(), proc.pid if proc is not None and proc.poll() is None else None

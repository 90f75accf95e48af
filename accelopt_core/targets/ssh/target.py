"""The ``ssh://`` target: evaluations on a remote GPU or Trainium machine over asyncssh.

Nothing of this project is installed on the remote. Per configured device the target keeps one
long-lived *agent* on the remote: a small standard-library Python program (:data:`AGENT`) run
by the remote python inside an SSH session channel. The agent receives framed evaluation
payloads on its stdin (:func:`accelopt_core.targets.shipping.encode_stdin`: the worker source
plus the request), runs each one in a fresh process ``[python, "-c", BOOTSTRAP]`` (exactly what
the local target runs), and sends back the worker's stdout, stderr and exit status, which
:func:`~accelopt_core.targets.shipping.decode_result` turns into an
:class:`~accelopt_core.onsite.protocol.EvalResult`. Keeping the agent alive saves the SSH session
start-up and the remote login shell (``~/.bashrc`` with conda or pyenv init often costs
100-300 ms) on every evaluation.

When the agent's stdin reaches end-of-file (the channel was closed because the evaluation was
cancelled or timed out, the connection dropped, sshd died), it kills the whole process tree of
the running evaluation (the worker and its candidate, found through ``/proc`` parent links,
since the worker puts the candidate into its own session) and exits. The worker's own
timeout and memory limit still bound every candidate.

Wire format of the agent (all integers little-endian):

- agent -> client, once at start: ``b"H"`` + u32 length + JSON (python/torch/triton/neuronxcc
  versions, device names, free disk bytes of the working and temporary directories).
- client -> agent, per evaluation: ``b"E"`` + u64 length + payload (``encode_stdin`` bytes).
- agent -> client, per evaluation: ``b"R"`` + i32 return code (negative: killed by that signal)
  + u64 stdout length + u64 stderr length + stdout + stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import shlex
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.settings import Settings
from accelopt_core.targets.base import TargetError

#: Seconds added to ``request.timeout_s`` before the client gives up on a result and closes
#: the channel (the worker's own timeout normally answers first).
TIMEOUT_MARGIN_S = 15.0

#: Seconds the agent may take to start (remote python start + device probe) beyond the
#: connection timeout.
AGENT_START_S = 30.0

#: Below this many free bytes in the remote working or temporary directory, failures are
#: attributed to a full disk.
LOW_DISK_BYTES = 64 * 1024 * 1024

# The remote agent. Standard library only, Python >= 3.8, Linux /proc for the process tree
# (elsewhere it falls back to the worker's process group). Run as ``python -c AGENT BOOTSTRAP``.
AGENT = r"""
import json, os, shutil, signal, struct, subprocess, sys, tempfile, threading
try:
    from importlib import metadata as _md
except ImportError:
    _md = None

_out = sys.stdout.buffer
_lock = threading.Lock()
_state = {"proc": None}


def _send(data):
    with _lock:
        try:
            _out.write(data)
            _out.flush()
        except (BrokenPipeError, OSError):
            _kill_current()
            os._exit(0)


def _version(name):
    try:
        return _md.version(name) if _md else None
    except Exception:
        return None


def _devices():
    names = []
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20)
        for line in done.stdout.splitlines():
            index, _, name = line.partition(",")
            if index.strip() and name.strip():
                names.append((index.strip(), name.strip()))
    except Exception:
        pass
    if names:
        return [{"index": i, "name": n} for i, n in names]
    cores = [d for d in os.listdir("/dev") if d.startswith("neuron")] if os.path.isdir("/dev") else []
    if cores:
        return [{"index": str(i), "name": "neuron"} for i in range(len(cores))]
    return [{"index": "0", "name": "cpu"}]


def _free(path):
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _hello():
    info = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "neuronxcc": _version("neuronxcc"),
        "devices": [] if "--no-probe" in sys.argv[2:] else _devices(),
        "cwd": os.getcwd(),
        "free_cwd": _free(os.getcwd()),
        "tmpdir": tempfile.gettempdir(),
        "free_tmp": _free(tempfile.gettempdir()),
        "pid": os.getpid(),
    }
    data = json.dumps(info).encode()
    _send(b"H" + struct.pack("<I", len(data)) + data)


def _tree(root):
    kids = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return [root]
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
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


def _kill_current():
    proc = _state["proc"]
    if proc is None or proc.poll() is not None:
        return
    for _ in range(3):
        for pid in _tree(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _run(payload):
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", sys.argv[1]], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        out, err, rc = b"", ("agent could not start the worker: %s" % exc).encode(), 127
    else:
        _state["proc"] = proc
        try:
            out, err = proc.communicate(payload)
        except (BrokenPipeError, OSError):
            out, err = b"", b""
            proc.wait()
        rc = proc.returncode
        _state["proc"] = None
    _send(b"R" + struct.pack("<iQQ", rc, len(out), len(err)) + out + err)


def _read(n):
    data = b""
    while len(data) < n:
        chunk = sys.stdin.buffer.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _main():
    _hello()
    signal.signal(signal.SIGTERM, lambda *a: (_kill_current(), os._exit(143)))
    signal.signal(signal.SIGHUP, lambda *a: (_kill_current(), os._exit(129)))
    thread = None
    while True:
        head = _read(9)
        if head is None or head[:1] != b"E":
            break
        payload = _read(struct.unpack("<Q", head[1:])[0])
        if payload is None:
            break
        if thread is not None:
            thread.join()
        thread = threading.Thread(target=_run, args=(payload,), daemon=True)
        thread.start()
    _kill_current()
    os._exit(0)


_main()
"""


@dataclass(frozen=True)
class SSHAddress:
    """A parsed ``ssh://[user@]host[:port]`` spec (port 22 and the current user by default)."""

    host: str
    port: int = 22
    user: str | None = None

    @classmethod
    def parse(cls, spec: str) -> SSHAddress:
        """Parse the target spec. Raises TargetError for a malformed spec (bad port, no host)."""
        m = re.fullmatch(r"ssh://(?:([^@/]+)@)?(\[[^\]]+\]|[^:/@]+)(?::(\d+))?/?", spec.strip())
        if not m:
            raise TargetError(
                f"invalid ssh target {spec!r}: expected ssh://[user@]host[:port], "
                "e.g. ssh://ubuntu@gpu-box:22"
            )
        user, host, port = m.groups()
        host = host.strip("[]")
        port_n = int(port) if port else 22
        if not 0 < port_n < 65536:
            raise TargetError(f"invalid ssh target {spec!r}: port {port_n} out of range")
        return cls(host=host, port=port_n, user=user)

    @property
    def keyscan(self) -> str:
        """The command that adds this host's key to ~/.ssh/known_hosts."""
        return self.keyscan_into("~/.ssh/known_hosts")

    def keyscan_into(self, known_hosts: str) -> str:
        """The command that adds this host's key to the file ``known_hosts``."""
        port = f"-p {self.port} " if self.port != 22 else ""
        return f"ssh-keyscan {port}{self.host} >> {known_hosts}"

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port != 22 else ""
        return f"{user}{self.host}{port}"


class _Unreachable(Exception):
    """The host cannot be reached right now (transient: the evaluation fails, the next retries)."""


@dataclass
class _Agent:
    """One running remote agent (one device, one SSH channel)."""

    device: str
    conn: Any
    proc: Any
    hello: dict[str, Any]

    @property
    def alive(self) -> bool:
        return (
            not self.conn.is_closed()
            and self.proc.exit_status is None
            and not (self.proc.stdout.at_eof())
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.proc.close()


def _remote_command(python: str, workdir: str | None, device: str, env: dict[str, str]) -> str:
    from accelopt_core.targets.shipping import BOOTSTRAP

    assigns = {"CUDA_VISIBLE_DEVICES": device, "NEURON_RT_VISIBLE_CORES": device, **env}
    parts = []
    if workdir:
        parts.append(f"cd {shlex.quote(workdir)} &&")
    parts.append("exec env")
    parts.extend(shlex.quote(f"{k}={v}") for k, v in assigns.items())
    parts.extend([shlex.quote(python), "-c", shlex.quote(AGENT), shlex.quote(BOOTSTRAP)])
    return " ".join(parts)


def _looks_like_disk_full(text: str | None) -> bool:
    return bool(text) and ("No space left on device" in text or "[Errno 28]" in text)


class SSHTarget:
    """Evaluate candidates on a remote machine reached with ``ssh://[user@]host[:port]``.

    Settings used: ``settings.target`` (the spec), ``settings.ssh`` (python, workdir, devices,
    identity_file, known_hosts, connect_timeout_s). One SSH connection per target, opened on
    first use, reused, and re-opened after a failure. Host keys are verified against
    ``settings.ssh.known_hosts`` (default ``~/.ssh/known_hosts``); an unknown host is refused
    (no trust on first use). Keys come from ``identity_file`` or the SSH agent and default key
    files; password and keyboard-interactive authentication are never attempted.

    Capacity is the number of configured devices; each evaluation runs pinned to one free
    device (``CUDA_VISIBLE_DEVICES`` and ``NEURON_RT_VISIBLE_CORES`` set to it, and
    ``request.device`` set to it).

    Args:
        settings: the whole settings model.
        env: extra environment variables for the remote agent and worker (e.g. ``TMPDIR``).

    Raises:
        TargetError: from the constructor for a malformed spec or empty device list; from
            :meth:`evaluate` / :meth:`probe` when the host key is unknown or changed, when
            authentication fails, or when the remote python cannot be started.
    """

    def __init__(self, settings: Settings, *, env: dict[str, str] | None = None) -> None:
        self.name = settings.target
        self.address = SSHAddress.parse(settings.target)
        self._opts = settings.ssh
        self._env = dict(env or {})
        self.devices = [d.strip() for d in settings.ssh.devices.split(",") if d.strip()]
        if not self.devices:
            raise TargetError("accelopt.ssh.devices is empty: name at least one device, e.g. 0")
        self._free: asyncio.Queue[str] = asyncio.Queue()
        for device in self.devices:
            self._free.put_nowait(device)
        self._agents: dict[str, _Agent] = {}
        self._conn: Any = None
        self._conn_lock = asyncio.Lock()
        self._hello: dict[str, Any] | None = None
        self._closed = False

    # -- protocol -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Number of configured devices (one evaluation per device at a time)."""
        return len(self.devices)

    @property
    def fingerprint(self) -> str:
        """``ssh://host:port:<device names>:torch-X:triton-Y`` once the remote was probed
        (:meth:`probe` or the first evaluation); before that ``ssh://host:port:devices=...``."""
        host = f"ssh://{self.address.host}:{self.address.port}"
        if self._hello is None:
            return f"{host}:devices={','.join(self.devices)}"
        h = self._hello
        names = ",".join(sorted(set(self._device_names(h))))
        stack = f"torch-{h.get('torch')}:triton-{h.get('triton')}"
        if h.get("neuronxcc"):
            stack += f":neuronxcc-{h['neuronxcc']}"
        return f"{host}:{names}:{stack}"

    async def probe(self) -> dict[str, Any]:
        """Connect (if needed), start the agent of the first free device and return what it
        reported: ``python``, ``executable``, ``torch``, ``triton``, ``neuronxcc`` versions
        (None when missing), ``devices`` (list of {index, name} on the remote),
        ``device_names`` (names of the configured devices), ``free_cwd`` / ``free_tmp``
        (bytes), ``cwd``, ``tmpdir``.

        Raises:
            TargetError: unknown host key, failed authentication, unreachable host, remote
                python missing.
        """
        device = await self._free.get()
        try:
            try:
                agent = await self._agent(device)
            except _Unreachable as exc:
                raise TargetError(str(exc)) from exc
        finally:
            self._free.put_nowait(device)
        info = dict(agent.hello)
        info["device_names"] = self._device_names(info)
        return info

    async def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one candidate on a free remote device.

        Returns a failure result (never raises) for a bad candidate and for transient
        infrastructure failures: ``runtime_error`` "connection to HOST lost: ..." when the
        connection drops (the next evaluation reconnects), "cannot reach HOST: ..." when it
        cannot connect, "remote disk full ..." when the remote disk is full, ``timeout`` when
        no result arrives within ``request.timeout_s`` + :data:`TIMEOUT_MARGIN_S`.
        Cancelling the awaiting task closes the channel; the remote agent then kills the
        worker and its candidate.

        Raises:
            TargetError: the target is unusable (host key, authentication, remote python).
        """
        from accelopt_core.targets.shipping import decode_result, encode_stdin

        if self._closed:
            raise TargetError(f"target {self.name} is closed")
        started = time.perf_counter()
        device = await self._free.get()
        try:
            try:
                agent = await self._agent(device)
            except _Unreachable as exc:
                return EvalResult.failure("runtime_error", str(exc), eval_s=_since(started))
            req = dataclasses.replace(request, device=device)
            payload = encode_stdin(req)
            try:
                frame = await asyncio.wait_for(
                    self._roundtrip(agent, payload), request.timeout_s + TIMEOUT_MARGIN_S
                )
            except asyncio.TimeoutError:
                self._drop_agent(device)
                return EvalResult.failure(
                    "timeout",
                    f"no result from {self.address.host} within "
                    f"{request.timeout_s + TIMEOUT_MARGIN_S:.0f} s; the evaluation was stopped",
                    eval_s=_since(started),
                )
            except asyncio.CancelledError:
                self._drop_agent(device)
                raise
            except Exception as exc:  # asyncssh.Error, ConnectionLost, IncompleteReadError
                self._drop_agent(device)
                await self._forget_connection_if_closed(agent.conn)
                return EvalResult.failure(
                    "runtime_error",
                    f"connection to {self.address.host} lost: {_describe(exc)}",
                    eval_s=_since(started),
                )
            returncode, out, err = frame
            result = decode_result(out, err, returncode)
            result = self._classify_infrastructure(result, agent.hello, err)
            result.eval_s = _since(started)
            return result
        finally:
            self._free.put_nowait(device)

    async def close(self) -> None:
        """Close every agent channel (the agents kill their evaluations and exit) and the
        connection. Idempotent."""
        self._closed = True
        for device in list(self._agents):
            self._drop_agent(device)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 5)

    # -- internals ------------------------------------------------------------------------
    def _device_names(self, hello: dict[str, Any]) -> list[str]:
        by_index = {d.get("index"): d.get("name") for d in hello.get("devices", [])}
        only = [d.get("name") for d in hello.get("devices", [])]
        names = []
        for device in self.devices:
            name = by_index.get(device)
            if name is None:
                name = only[0] if len(set(only)) == 1 else f"device{device}"
            names.append(str(name))
        return names

    def _drop_agent(self, device: str) -> None:
        agent = self._agents.pop(device, None)
        if agent is not None:
            agent.close()

    async def _forget_connection_if_closed(self, conn: Any) -> None:
        await asyncio.sleep(0)
        if self._conn is conn and conn.is_closed():
            self._conn = None

    async def _roundtrip(self, agent: _Agent, payload: bytes) -> tuple[int, bytes, bytes]:
        agent.proc.stdin.write(b"E" + struct.pack("<Q", len(payload)) + payload)
        head = await agent.proc.stdout.readexactly(21)
        if head[:1] != b"R":
            raise ConnectionError(f"unexpected reply from the remote agent: {head[:16]!r}")
        rc, n_out, n_err = struct.unpack("<iQQ", head[1:])
        body = await agent.proc.stdout.readexactly(n_out + n_err) if n_out + n_err else b""
        return rc, body[:n_out], body[n_out:]

    def _classify_infrastructure(
        self, result: EvalResult, hello: dict[str, Any], stderr: bytes
    ) -> EvalResult:
        """Re-label failures that come from the remote machine, not the candidate."""
        if result.ok:
            return result
        text = f"{result.message or ''}\n{stderr[-4000:].decode(errors='replace')}"
        if _looks_like_disk_full(text):
            free = min(
                (v for v in (hello.get("free_cwd"), hello.get("free_tmp")) if v is not None),
                default=None,
            )
            where = f" ({free // (1024 * 1024)} MiB free)" if free is not None else ""
            return EvalResult.failure(
                "runtime_error",
                f"remote disk full on {self.address.host}{where}: {result.message}",
                device=result.device,
                versions=result.versions,
            )
        return result

    async def _connection(self) -> Any:
        async with self._conn_lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._conn = None
            for device in list(self._agents):
                self._drop_agent(device)
            self._conn = await self._connect()
            return self._conn

    async def _connect(self) -> Any:
        import asyncssh

        addr, opts = self.address, self._opts
        shown = opts.known_hosts or "~/.ssh/known_hosts"
        known_hosts = Path(shown).expanduser()
        keyscan = addr.keyscan_into(shown)
        if not known_hosts.is_file():
            raise TargetError(
                f"cannot verify the host key of {addr.host}: {known_hosts} does not exist. "
                f"Add the host with `{keyscan}` (then compare `ssh-keygen -lf {shown}` with "
                "the fingerprint the machine's owner reports) or set accelopt.ssh.knownHosts."
            )
        kwargs: dict[str, Any] = {
            "port": addr.port,
            "known_hosts": str(known_hosts),
            "preferred_auth": "publickey",
            "password": None,
            "kbdint_auth": False,
            "connect_timeout": opts.connect_timeout_s,
            "keepalive_interval": 15,
            "keepalive_count_max": 3,
        }
        if addr.user:
            kwargs["username"] = addr.user
        if opts.identity_file:
            key = Path(opts.identity_file).expanduser()
            if not key.is_file():
                raise TargetError(f"accelopt.ssh.identityFile {key} does not exist")
            kwargs["client_keys"] = [str(key)]
        try:
            return await asyncio.wait_for(
                asyncssh.connect(addr.host, **kwargs), opts.connect_timeout_s + 5
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            raise TargetError(
                f"the host key of {addr.host} (port {addr.port}) is not in {known_hosts} or does "
                f"not match it ({exc.reason}). AccelOpt does not trust unknown hosts. If this is "
                f"the right machine, add its key with `{keyscan}` and compare "
                f"`ssh-keygen -lf {shown}` with the fingerprint the machine's owner reports. "
                "A changed key can mean the machine was reinstalled, or an attack: ask first."
            ) from exc
        except asyncssh.PermissionDenied as exc:
            raise TargetError(
                f"SSH authentication to {addr} failed ({exc.reason}): AccelOpt uses public keys "
                "only (the SSH agent or accelopt.ssh.identityFile); check that your key is in "
                "the remote ~/.ssh/authorized_keys and that `ssh -o BatchMode=yes "
                f"{'-p ' + str(addr.port) + ' ' if addr.port != 22 else ''}"
                f"{addr.user + '@' if addr.user else ''}{addr.host} true` works."
            ) from exc
        except (OSError, asyncssh.Error, asyncio.TimeoutError) as exc:
            raise _Unreachable(f"cannot reach {addr}: {_describe(exc)}") from exc

    async def _agent(self, device: str) -> _Agent:
        agent = self._agents.get(device)
        if agent is not None and agent.alive:
            return agent
        self._drop_agent(device)
        conn = await self._connection()
        cmd = _remote_command(self._opts.python, self._opts.workdir, device, self._env)
        try:
            proc = await conn.create_process(cmd, encoding=None)
        except Exception as exc:
            await self._forget_connection_if_closed(conn)
            raise _Unreachable(f"connection to {self.address.host} lost: {_describe(exc)}") from exc
        try:
            hello = await asyncio.wait_for(
                self._read_hello(proc), self._opts.connect_timeout_s + AGENT_START_S
            )
        except asyncio.CancelledError:
            proc.close()
            raise
        except Exception as exc:  # EOF, timeout, asyncssh.ConnectionLost, bad hello
            proc.close()
            stderr = b""
            with contextlib.suppress(Exception):
                stderr = await asyncio.wait_for(proc.stderr.read(), 2)
            status = proc.exit_status
            tail = stderr.decode(errors="replace").strip()[-1500:]
            import asyncssh

            lost = (asyncssh.ConnectionLost, asyncssh.DisconnectError, ConnectionError)
            if conn.is_closed() or isinstance(exc, lost):
                await self._forget_connection_if_closed(conn)
                raise _Unreachable(
                    f"connection to {self.address.host} lost: {_describe(exc)}"
                ) from exc
            if status == 127 or "not found" in tail or "No such file" in tail:
                raise TargetError(
                    f"the remote python {self._opts.python!r} could not be started on "
                    f"{self.address.host} (exit {status}): {tail or 'no output'}. Set "
                    "accelopt.ssh.python to the interpreter that has torch and triton "
                    "(or the Neuron SDK)."
                ) from exc
            if _looks_like_disk_full(tail):
                raise _Unreachable(f"remote disk full on {self.address.host}: {tail}") from exc
            raise TargetError(
                f"the remote agent did not start on {self.address.host} with "
                f"{self._opts.python!r} (exit {status}): {tail or _describe(exc)}"
            ) from exc
        agent = _Agent(device=device, conn=conn, proc=proc, hello=hello)
        self._agents[device] = agent
        self._hello = hello
        return agent

    @staticmethod
    async def _read_hello(proc: Any) -> dict[str, Any]:
        head = await proc.stdout.readexactly(5)
        if head[:1] != b"H":
            raise ConnectionError(f"unexpected output from the remote agent: {head!r}")
        (n,) = struct.unpack("<I", head[1:])
        return json.loads(await proc.stdout.readexactly(n))


def _since(t0: float) -> float:
    return time.perf_counter() - t0


def _describe(exc: BaseException) -> str:
    text = str(exc) or getattr(exc, "reason", "") or ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


__all__ = ["AGENT", "SSHAddress", "SSHTarget", "TIMEOUT_MARGIN_S"]

"""Real remote endpoints on loopback for the SSH and Ray target tests.

- :class:`LoopbackSSHD` / the ``sshd`` fixture: Debian's OpenSSH server (``/usr/sbin/sshd``, or
  the one unpacked into ``ACCELOPT_TEST_SSH_ROOT``) started as ``sshd -D -e -f
  <tmp>/sshd_config -p <free port>``, listening on 127.0.0.1 only, with a throwaway ed25519
  host key, a throwaway ed25519 user key in a temporary ``authorized_keys`` and its own
  ``known_hosts`` line (``[127.0.0.1]:PORT <hostkey>``). Password and keyboard-interactive
  authentication are off. It logs in the current user
  (root here: ``PermitRootLogin prohibit-password``). It can be killed and restarted on the
  same port (:meth:`LoopbackSSHD.stop` / :meth:`LoopbackSSHD.start`) to test reconnection.
- :class:`LoopbackRayHead` / the ``ray_head`` fixture: a CPU-only Ray head on 127.0.0.1
  (``ray start --head --block ... --num-cpus 2``) with a Ray client server port; teardown
  stops this head's processes only, so a second test run on the machine keeps its own.

No test double here: these are the real servers. Tests using them skip (with the reason) when
the binary is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: A folder Debian's OpenSSH packages were unpacked into (``dpkg-deb -x``; .device/gpu-check
#: does so on a GPU machine whose image has no sshd, from the ``.debs/`` that
#: .device/fetch-debs downloads): its sshd, ssh-keygen and libraries are used instead of the
#: system's. Unset: the system's ``/usr/sbin/sshd`` and ``ssh-keygen`` on PATH.
SSH_ROOT = os.environ.get("ACCELOPT_TEST_SSH_ROOT")
SSHD = f"{SSH_ROOT}/usr/sbin/sshd" if SSH_ROOT else "/usr/sbin/sshd"
KEYGEN = f"{SSH_ROOT}/usr/bin/ssh-keygen" if SSH_ROOT else "ssh-keygen"


def ssh_env() -> dict[str, str] | None:
    """The environment of sshd and ssh-keygen: with :data:`SSH_ROOT`, its libraries first on
    ``LD_LIBRARY_PATH`` (for those two processes only; the sessions sshd starts get an
    environment of its own making, without it); else None (this process's)."""
    if not SSH_ROOT:
        return None
    libs = [f"{SSH_ROOT}/usr/lib/x86_64-linux-gnu", f"{SSH_ROOT}/lib/x86_64-linux-gnu"]
    old = os.environ.get("LD_LIBRARY_PATH")
    return dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(libs + ([old] if old else [])))


def ssh_installed() -> bool:
    """Whether :data:`SSHD` and :data:`KEYGEN` are there."""
    return Path(SSHD).exists() and (Path(KEYGEN).exists() or shutil.which(KEYGEN) is not None)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout_s: float = 10.0) -> bool:
    """True once something accepts TCP connections on 127.0.0.1:port, False after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _session_cache() -> list[str]:
    """``SetEnv XDG_CACHE_HOME=...`` of the test session (tests/hermetic.py), for sshd's
    sessions: sshd gives them the login user's HOME from the password database, and the
    remote side's compile caches would go to that user's real ``~/.cache`` (and fail on a
    read-only one). Nothing outside a session that set it."""
    cache = os.environ.get("XDG_CACHE_HOME")
    return [f"SetEnv XDG_CACHE_HOME={cache}"] if cache and " " not in cache else []


@dataclass
class LoopbackSSHD:
    """One OpenSSH server on 127.0.0.1 with throwaway keys under ``root``.

    Attributes:
        root: temporary directory holding the config, keys, known_hosts and pid file.
        port: TCP port it listens on (fixed across restarts).
        user: the login user (the current user).
        identity_file: the client's private key.
        known_hosts: a known_hosts file that trusts this server's host key.
        empty_known_hosts: a known_hosts file that trusts nothing (for the refusal test).
    """

    root: Path
    port: int = field(default_factory=free_port)
    user: str = field(default_factory=getpass.getuser)
    proc: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        host_key = self.root / "host_ed25519"
        user_key = self.root / "id_ed25519"
        for key in (host_key, user_key):
            subprocess.run(
                [KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                check=True,
                capture_output=True,
                env=ssh_env(),
            )
        self.identity_file = user_key
        (self.root / "authorized_keys").write_text((self.root / "id_ed25519.pub").read_text())
        host_pub = (self.root / "host_ed25519.pub").read_text().split()
        self.known_hosts = self.root / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.empty_known_hosts = self.root / "known_hosts_empty"
        self.empty_known_hosts.write_text("")
        self.config = self.root / "sshd_config"
        self.config.write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
                    f"PidFile {self.root / 'sshd.pid'}",
                    "StrictModes no",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PubkeyAuthentication yes",
                    "UsePAM no",
                    "PermitRootLogin prohibit-password",
                    "MaxSessions 32",
                    "MaxStartups 32",
                    "LogLevel ERROR",
                    *_session_cache(),
                    "",
                ]
            )
        )
        # privilege separation directory
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """The target spec, ``ssh://user@127.0.0.1:PORT``."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start sshd (again) on :attr:`port`; waits until it accepts connections."""
        if self.proc is not None and self.proc.poll() is None:
            return
        # sshd re-execs itself and insists on an absolute path
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config), "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=open(self.root / "sshd.log", "ab"),  # noqa: SIM115
            start_new_session=True,
            env=ssh_env(),
        )
        if not wait_port(self.port):
            self.stop()
            log = (self.root / "sshd.log").read_text(errors="replace")
            raise RuntimeError(f"sshd did not start on port {self.port}: {log[-2000:]}")

    def stop(self) -> None:
        """Kill sshd: the listener and every per-connection sshd process below it, as a
        crashed server or a dropped network would. The session's own processes (the remote
        agents) are left to notice the closed channel themselves."""
        if self.proc is None:
            return
        doomed = [p for p in process_tree(self.proc.pid) if _comm(p) == "sshd"]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.proc = None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants (Linux /proc parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


#: (pid, start time) -> the environment credited to a process whose own cannot be read
#: (:func:`processes_matching`).
_CREDITED: dict[tuple[int, int], bytes] = {}


def processes_matching(*markers: str) -> list[int]:
    """PIDs of live processes whose command line or environment mentions every one of
    ``markers`` (used to check that no candidate survives). Zombies are ignored.

    Not as root, the environment of a non-dumpable process (the warm worker's zygote, and the
    supervisors and candidates it forks) cannot be read. Such a process is credited with the
    environment of its nearest readable ancestor, which it inherited (forks; the allowlisted
    environment keeps ``ACCELOPT_*``), and keeps it once seen, even after it is orphaned."""
    procs: dict[int, tuple[int, int, bytes, bytes | None]] = {}  # pid: ppid, start, cmd, env
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            try:
                env: bytes | None = (entry / "environ").read_bytes()
            except PermissionError:
                env = None
            procs[int(entry.name)] = (int(fields[1]), int(fields[19]), cmdline, env)
        except (OSError, IndexError, ValueError):
            continue
    pids = []
    for pid, (ppid, start, cmdline, env) in procs.items():
        if env is None:
            env = _CREDITED.get((pid, start))
            up = ppid
            while env is None and up in procs:
                env, up = procs[up][3], procs[up][0]
            if env is None:
                continue
            _CREDITED[(pid, start)] = env
        if all(m.encode() in cmdline + env for m in markers):
            pids.append(pid)
    return pids


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[LoopbackSSHD]:
    """A running loopback OpenSSH server (see :class:`LoopbackSSHD`); killed at teardown."""
    if not ssh_installed():
        pytest.skip(f"openssh-server ({SSHD}, {KEYGEN}) is not installed")
    server = LoopbackSSHD(tmp_path / "sshd")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _term_with_parent() -> None:
    """Linux: this process gets SIGTERM when the thread that started it exits
    (``PR_SET_PDEATHSIG``), so a test run killed outright does not leave its Ray head running."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)


@dataclass
class LoopbackRayHead:
    """A CPU-only Ray head on 127.0.0.1 (GCS port and Ray client server port).

    The head runs in the foreground (``ray start --head --block``) in a session of its own,
    with :attr:`token` in its environment, which every Ray process it starts inherits (raylet,
    GCS, client server, workers, and the workers and candidates their tasks start).
    :meth:`stop` stops this head only: ``ray stop`` would stop every Ray process of the
    machine, a second test run's head included. The head gets SIGTERM when the thread that
    called :meth:`start` exits (a test run killed outright): call it from a thread that lives
    as long as the head.

    Attributes:
        root: Ray's temp dir for this head (``--temp-dir``); ``head.log`` holds its output.
        num_cpus: CPUs the head advertises.
        port: GCS port (``ray start --port``).
        client_port: Ray client server port; the target spec is ``ray://127.0.0.1:client_port``.
        token: a unique string in the environment of this head's processes.
    """

    root: Path
    num_cpus: int = 2
    port: int = field(default_factory=free_port)
    client_port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: f"ACCELOPT_RAY_HEAD_{uuid.uuid4().hex}")
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"ray://127.0.0.1:{self.client_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"  # SIGTERM: stop at once
        env["ACCELOPT_TEST_RAY_HEAD"] = self.token
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the head and wait for its client server port.

        Raises:
            RuntimeError: ``ray start`` exited, or the client port did not open in time
                (with the tail of ``head.log``).
        """
        ray = str(Path(sys.executable).with_name("ray"))
        if not Path(ray).exists():
            ray = shutil.which("ray") or "ray"
        cmd = [
            ray,
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--port={self.port}",
            f"--ray-client-server-port={self.client_port}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--object-store-memory={200 * 1024 * 1024}",
            f"--temp-dir={self.root}",
        ]
        self.root.mkdir(parents=True, exist_ok=True)
        log = self.root / "head.log"
        with log.open("wb") as out:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
                preexec_fn=_term_with_parent,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if wait_port(self.client_port, timeout_s=1.0):
                return
        tail = log.read_text(errors="replace")[-3000:]
        self.stop()
        raise RuntimeError(f"the Ray head did not come up (ray start --block): {tail}")

    def processes(self, marker: str = "") -> list[int]:
        """PIDs of this head's live processes (:attr:`token` in their environment) whose
        command line or environment also mentions ``marker``."""
        return processes_matching(self.token, marker)

    def stop(self) -> None:
        """Stop this head: SIGTERM to ``ray start --block`` (it stops the processes it
        started), then SIGKILL to whatever of this head is left. Idempotent."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while (left := processes_matching(self.token)) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackRayHead]:
    """A running loopback Ray head (module scope: starting Ray takes seconds)."""
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'accelopt[ray]'")
    # Ray's socket paths must stay short (AF_UNIX limit of 107 bytes)
    root = Path(f"/tmp/ray_{os.getpid()}_{free_port()}")
    head = LoopbackRayHead(root)
    head.start()
    try:
        yield head
    finally:
        head.stop()
        shutil.rmtree(root, ignore_errors=True)

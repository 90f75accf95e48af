"""The sandbox's parts one by one (issue 34, accelopt_core/onsite/sandbox/): the allowlisted
environment, Landlock, the network namespace, the seccomp fallback, bubblewrap, and the warning
when a part is missing. Each confinement runs for real in a forked child of the test process
(it is irrevocable); the hostile candidates that meet all of it through the worker are in
tests/adversarial/test_escapes.py."""

from __future__ import annotations

import errno
import json
import os
import pwd
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from accelopt_core.onsite.runtime.device import gpu_visible
from accelopt_core.onsite.sandbox import (
    bwrap,
    environment,
    landlock,
    launch,
    netns,
    paths,
    policy,
    seccomp,
)
from accelopt_core.onsite.sandbox.environment import confined_environ, keep_names
from accelopt_core.settings import Settings
from accelopt_core.targets.local import discover_gpus
from accelopt_core.targets.sandbox import keep, local_worker
from tests.onsite.runs import BASE, MODES, connections, listener, run_worker, unix_listener

LANDLOCK = landlock.abi()
needs_landlock = pytest.mark.skipif(
    LANDLOCK < landlock.MIN_ABI,
    reason=f"Landlock ABI {LANDLOCK} here (needs {landlock.MIN_ABI}: Linux 5.19 or later)",
)


def in_child(body: Callable[[], object]) -> object:
    """``body()`` in a forked child (its confinement stays there); its JSON-able return value,
    or the exception it raised, re-raised here as an AssertionError."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            out = {"value": body()}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    out = json.loads(data)
    assert "error" not in out, out.get("error")
    return out["value"]


def attempt(action: Callable[[], object]) -> str:
    """``"ok"`` or the errno name the action failed with."""
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc))
    return "ok"


def write(path: str | Path) -> Callable[[], object]:
    return lambda: Path(path).write_text("marker")


# --- the environment ----------------------------------------------------------------------


def test_the_environment_keeps_what_the_stack_needs_and_drops_secrets() -> None:
    env = {
        "PATH": "/usr/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "PYTHONPATH": "/src",
        "TRITON_CACHE_DIR": "/c",
        "CUDA_VISIBLE_DEVICES": "0",
        "NEURON_RT_VISIBLE_CORES": "0",
        "HOME": "/home/me",
        "OPENAI_API_KEY": "sk-secret",
        "NVIDIA_API_KEY": "nvapi-secret",  # a stack prefix, but a secret's name
        "TRITON_TOKEN": "t",
        "HF_TOKEN": "hf",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
        "GITHUB_TOKEN": "gh",
        "DATABASE_URL": "postgres://u:p@h/db",
    }
    kept = confined_environ(env)
    assert set(kept) == {
        "PATH",
        "LANG",
        "LC_ALL",
        "LD_LIBRARY_PATH",
        "PYTHONPATH",
        "TRITON_CACHE_DIR",
        "CUDA_VISIBLE_DEVICES",
        "NEURON_RT_VISIBLE_CORES",
        "HOME",
    }


def test_names_the_user_adds_are_kept_exactly_or_by_prefix_without_secrets() -> None:
    env = {"MYLIB_THREADS": "4", "MYLIB_TOKEN": "t", "DATA_ROOT": "/d", "OTHER": "x"}
    kept = confined_environ(env, keep_names("MYLIB_*, DATA_ROOT bad-name"))
    assert kept == {
        "MYLIB_THREADS": "4",
        "DATA_ROOT": "/d",
        environment.KEEP_VAR: "MYLIB_*,DATA_ROOT",
    }
    # a worker started by an agent finds the names in its own environment
    assert confined_environ(kept) == kept


def test_the_api_key_variables_never_reach_a_worker_even_when_named(monkeypatch) -> None:
    settings = Settings.model_validate(
        {
            "llm": {"apiKeyEnv": "CUDA_LLM", "executor": {"apiKeyEnv": "MY_EXECUTOR_KEY"}},
            "evaluation": {"environment": ["MY_EXECUTOR_KEY", "EXTRA_VAR"]},
        }
    )
    assert keep(settings) == "EXTRA_VAR"
    for name, value in {"CUDA_LLM": "sk-1", "MY_EXECUTOR_KEY": "sk-2", "EXTRA_VAR": "x"}.items():
        monkeypatch.setenv(name, value)
    _, env = local_worker([sys.executable, "-c", "pass"], settings)
    assert "CUDA_LLM" not in env and "MY_EXECUTOR_KEY" not in env  # CUDA_* would pass
    assert env["EXTRA_VAR"] == "x"


def test_the_names_the_user_adds_travel_to_the_ssh_agent_but_no_api_key() -> None:
    from accelopt_core.targets.ssh.agent import remote_command
    from accelopt_core.targets.ssh.target import SSHTarget

    settings = Settings.model_validate(
        {"target": "ssh://me@box", "evaluation": {"environment": ["MY_VAR", "OPENAI_API_KEY"]}}
    )
    command = remote_command("python3", None, "0", SSHTarget(settings)._env)
    assert f"{environment.KEEP_VAR}=MY_VAR " in command and "OPENAI_API_KEY" not in command
    # the agent starts each worker with them (its own environment: what the command set)
    _, env = launch.worker_command(["python3"], {environment.KEEP_VAR: "MY_VAR", "MY_VAR": "1"})
    assert env["MY_VAR"] == "1"


def test_a_setting_that_names_no_variable_is_replaced_by_the_default() -> None:
    from accelopt_core.settings import load_settings

    settings, issues = load_settings({"evaluation": {"environment": ["OK_NAME", "rm -rf"]}})
    assert settings.evaluation.environment == []
    assert [i.key for i in issues] == ["accelopt.evaluation.environment"]
    assert "rm -rf" in issues[0].message


def test_the_compile_caches_move_to_a_private_temporary_root_when_home_is_unusable(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # no directory can be made beneath a file, not even by root
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"XDG_CACHE_HOME": str(blocker / "cache"), "TMPDIR": str(tmp)}
    caches = environment.compile_caches(env)
    root = tmp / f"accelopt-compile-{os.getuid()}"
    assert caches["TRITON_CACHE_DIR"] == str(root / "triton")
    assert caches["CUDA_CACHE_PATH"] == str(root / "cuda")
    assert root.is_dir() and root.stat().st_mode & 0o777 == 0o700
    # a variable the user set stays as set; a usable cache home is used
    assert environment.compile_caches(dict(env, TRITON_CACHE_DIR="/mine"))["TRITON_CACHE_DIR"] == (
        "/mine"
    )
    usable = environment.compile_caches({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert usable["TRITON_CACHE_DIR"] == str(tmp_path / "xdg" / "accelopt" / "compile" / "triton")
    # a fallback root others can enter (someone made it first, to plant entries) is not used
    root.chmod(0o755)
    elsewhere = Path(environment.compile_caches(env)["TRITON_CACHE_DIR"]).parent
    assert elsewhere != root and elsewhere.name.startswith("accelopt-compile-")
    assert elsewhere.stat().st_mode & 0o777 == 0o700


# --- Landlock -------------------------------------------------------------------------------


@needs_landlock
def test_landlock_allows_writes_only_beneath_the_writable_paths(tmp_path: Path) -> None:
    w, r, secret = (tmp_path / d for d in ("w", "r", "secret"))
    for d in (w / "a", w / "b", r, secret):
        d.mkdir(parents=True)
    (r / "data").write_text("readable")
    (secret / "key").write_text("sk-secret")
    outside = tmp_path / "outside"
    readable = paths.python_paths(os.environ) + [str(r), "/usr", "/lib", "/lib64", "/etc"]

    def body() -> dict[str, str]:
        landlock.restrict(readable, [str(w)])
        (w / "a" / "f").write_text("x")
        child = subprocess.run(
            [sys.executable, "-c", f"open({str(outside)!r}, 'w')"], capture_output=True
        )
        return {
            "inside": attempt(write(w / "new")),
            # Triton's cache: a file written in a temporary directory, then moved (REFER)
            "rename across directories": attempt(lambda: os.replace(w / "a" / "f", w / "b" / "f")),
            "outside": attempt(write(outside)),
            "read allowed": attempt(lambda: (r / "data").read_text()),
            "read elsewhere": attempt(lambda: (secret / "key").read_text()),
            "list elsewhere": attempt(lambda: os.listdir(secret)),
            "child process": "refused" if b"PermissionError" in child.stderr else "wrote",
        }

    assert in_child(body) == {
        "inside": "ok",
        "rename across directories": "ok",
        "outside": "EACCES",
        "read allowed": "ok",
        "read elsewhere": "EACCES",
        "list elsewhere": "EACCES",
        "child process": "refused",
    }
    assert not outside.exists()


class FakeCudaTorch:
    """Stands for a CUDA build of torch in :func:`gpu_visible` (which reads only
    ``torch.version.cuda``)."""

    class version:  # noqa: N801 - torch's own spelling
        cuda = "12.8"


def _cuda_node() -> bool:
    return any(n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev"))


@needs_landlock
def test_the_judge_reads_the_python_environment_but_not_the_home_directory(
    tmp_path: Path,
) -> None:
    home = pwd.getpwuid(os.getuid()).pw_dir
    outside = tmp_path / "outside"

    def body() -> dict[str, str]:
        from accelopt_core.onsite.judge.peers import new_dirs

        state = policy.setup_worker()
        shared = Path(state["caches"][0])
        (shared / "entry").write_text("compiled by the worker")
        dirs, other = new_dirs(), new_dirs()  # another evaluation of the same worker
        policy.confine_judge(dirs)
        numpy = subprocess.run([sys.executable, "-c", "import numpy"], capture_output=True)
        return {
            "filesystem": state["filesystem"],
            "HOME": os.environ["HOME"] == dirs["cwd"] == os.getcwd(),
            "scratch": attempt(write(Path(dirs["cwd"]) / "f")),
            "another evaluation's scratch": attempt(write(Path(other["cwd"]) / "f")),
            "shared compiler cache": attempt(write(shared / "probe")),
            "shared compiler cache, read": attempt(lambda: (shared / "entry").read_text()),
            "own compiler cache": attempt(write(Path(os.environ["TRITON_CACHE_DIR"]) / "p")),
            "own compiler cache is the evaluation's": str(
                Path(os.environ["TRITON_CACHE_DIR"]).parent == Path(dirs["root"]) / "caches"
            ),
            "/dev/null": attempt(write("/dev/null")),
            "the test's directory": attempt(write(outside)),
            "home listing": attempt(lambda: os.listdir(home)),
            "/dev listing": attempt(lambda: os.listdir("/dev")),  # CUDA's nodes are found so
            "/dev/urandom": attempt(lambda: open("/dev/urandom", "rb").read(8)),
            "/dev/kmsg": attempt(lambda: open("/dev/kmsg", "rb")),  # nor a raw disk
            "gpu_visible": gpu_visible(FakeCudaTorch) == _cuda_node(),
            "python import": "ok" if numpy.returncode == 0 else numpy.stderr.decode()[-300:],
        }

    out = in_child(body)
    assert str(out.pop("filesystem")).startswith("landlock")
    assert out == {
        "HOME": True,
        "scratch": "ok",
        "another evaluation's scratch": "EACCES",
        "shared compiler cache": "EACCES",
        "shared compiler cache, read": "ok",
        "own compiler cache": "ok",
        "own compiler cache is the evaluation's": "True",
        "/dev/null": "ok",
        "the test's directory": "EACCES",
        "home listing": "EACCES",
        "/dev listing": "ok",
        "/dev/urandom": "ok",
        "/dev/kmsg": "EACCES",
        "gpu_visible": True,
        "python import": "ok",
    }


#: What the CUDA driver's initialisation does (seen with an LD_PRELOAD shim on an H100, driver
#: 580, .device/sandbox-probe --trace): name a helper thread with ``fopen(".../comm", "wb")``.
#: Landlock refusing it made ``cudaGetDeviceCount`` fail with error 304 in every judge.
NAME_A_THREAD = """
import threading
def name_a_thread():
    started, done = threading.Event(), threading.Event()
    t = threading.Thread(target=lambda: (started.set(), done.wait()))
    t.start()
    started.wait()
    comm = f"/proc/self/task/{t.native_id}/comm"
    try:
        with open(comm, "wb") as f:
            f.write(b"cuda-EvtHandlr")
        with open(comm) as f:
            return f.read().strip()
    except OSError as exc:
        return type(exc).__name__
    finally:
        done.set()
        t.join()
"""


@needs_landlock
def test_a_confined_judge_and_its_candidates_name_their_threads_as_the_cuda_driver_does() -> None:
    def body() -> dict[str, str]:
        from accelopt_core.onsite.judge.peers import new_dirs

        policy.setup_worker()
        policy.confine_judge(new_dirs())
        scope: dict = {}
        exec(NAME_A_THREAD, scope)
        candidate = subprocess.run(  # another process, forked after the judge was confined
            [sys.executable, "-c", NAME_A_THREAD + "print(name_a_thread())"],
            capture_output=True,
            text=True,
        )
        return {
            "judge": scope["name_a_thread"](),
            "candidate": candidate.stdout.strip() or candidate.stderr[-300:],
            # files beneath /proc are written, never made: procfs and the rule agree
            "new file in /proc/self": attempt(write("/proc/self/accelopt-marker")),
        }

    out = in_child(body)
    assert out.pop("new file in /proc/self") != "ok"
    assert out == {"judge": "cuda-EvtHandlr", "candidate": "cuda-EvtHandlr"}


def candidate_attempts(actions: dict[str, str], pass_fds: tuple[int, ...] = ()) -> dict[str, str]:
    """Run each Python statement of ``actions`` in a new process (a candidate, forked after the
    caller's confinement): ``{name: "ok" or the strerror it failed with}``."""
    code = (
        "import json, os\n"
        "def attempt(f):\n"
        "    try:\n        f()\n        return 'ok'\n"
        "    except OSError as e:\n        return os.strerror(e.errno)\n"
        "print(json.dumps({"
        + ", ".join(f"{name!r}: attempt(lambda: {act})" for name, act in actions.items())
        + "}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, pass_fds=pass_fds
    )
    return json.loads(done.stdout or "{}") or {"error": done.stderr[-300:]}


@needs_landlock
def test_the_systems_settings_under_proc_stay_read_only_in_the_sandbox() -> None:
    """The rule that lets CUDA name its threads covers all of /proc; as root (this test's CI),
    a sysctl would pass the kernel's own check: the worker's mount namespace keeps it
    read-only, and nothing of that namespace reaches the test's."""
    mounts = Path("/proc/self/mountinfo").read_text()
    sysctl = "/proc/sys/vm/swappiness"
    same = Path(sysctl).read_text()  # written back unchanged, should the sandbox fail

    def body() -> dict[str, str]:
        from accelopt_core.onsite.judge.peers import new_dirs

        state = policy.setup_worker()
        policy.confine_judge(new_dirs())
        out = candidate_attempts(
            {
                "sysctl": f"open({sysctl!r}, 'w').write({same!r})",
                "sysrq": "open('/proc/sysrq-trigger', 'w')",
                "read": "open('/proc/meminfo').read()",
                "own comm": "open('/proc/self/comm', 'w').write('cand')",
            }
        )
        return {**out, "procfs": str(state["procfs"]), "note": str(policy.note())}

    out = in_child(body)
    assert out.pop("procfs").startswith("read-only but the processes"), out
    refused = os.strerror(errno.EROFS) if os.geteuid() == 0 else out["sysctl"]
    assert out == {
        "sysctl": refused,
        "sysrq": refused if os.path.exists("/proc/sysrq-trigger") else "No such file or directory",
        "read": "ok",
        "own comm": "ok",
        "note": "None",
    }
    assert out["sysctl"] != "ok"
    assert Path("/proc/self/mountinfo").read_text() == mounts


@needs_landlock
def test_the_proc_rule_reaches_no_file_through_procs_links(tmp_path: Path) -> None:
    """``/proc/self/root``, ``/proc/self/cwd`` and ``/proc/self/fd/N`` lead out of ``/proc``:
    Landlock judges the file they lead to, not the ``/proc`` path, so the rule that lets CUDA
    write beneath ``/proc`` opens nothing else."""
    target = tmp_path / "outside.txt"
    target.write_text("original")

    def body() -> dict[str, str]:
        from accelopt_core.onsite.judge.peers import new_dirs

        fd = os.open(target, os.O_RDONLY)  # a read-only descriptor the candidate inherits
        policy.setup_worker()
        policy.confine_judge(new_dirs())
        up = "/".join([".."] * 12)  # from the scratch working directory up to /
        links = {
            "root": f"/proc/self/root{target}",
            "cwd": f"/proc/self/cwd/{up}{target}",
            "fd": f"/proc/self/fd/{fd}",
        }
        actions = {k: f"open({p!r}, 'w').write('overwritten')" for k, p in links.items()}
        return candidate_attempts(actions, pass_fds=(fd,))

    denied = os.strerror(errno.EACCES)
    assert in_child(body) == {"root": denied, "cwd": denied, "fd": denied}
    assert target.read_text() == "original"


def test_the_home_directories_are_cut_out_of_the_readable_tree(tmp_path: Path) -> None:
    for d in ("a", "b/c", "home/user/venv/lib", "home/user/.ssh", "home/other"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "home" / "user" / ".ssh")
    out = paths.everything_but([str(tmp_path / "home" / "user")], str(tmp_path))
    assert out == [str(tmp_path / d) for d in ("a", "b", "home/other")]
    # this machine: nothing readable is in a home directory, but the Python environment
    homes = paths.homes(os.environ)
    assert os.path.realpath(os.path.expanduser("~")) in homes and "/" not in homes
    python = paths.python_paths(os.environ)
    readable = paths.readable(os.environ)
    assert all(paths.under(p, readable) for p in python)  # covered, one way or another
    assert all(p in python for p in readable if paths.under(os.path.realpath(p), homes))


# --- no network -----------------------------------------------------------------------------


def test_a_network_namespace_reaches_no_listener_of_the_host() -> None:
    srv = listener()
    port = srv.getsockname()[1]

    def body() -> dict[str, str]:
        how = netns.enter()
        inner = socket.socket()
        inner.bind(("127.0.0.1", 0))
        inner.listen(1)
        return {
            "how": how,
            "host listener": attempt(lambda: socket.create_connection(("127.0.0.1", port), 2)),
            "own loopback": attempt(lambda: socket.create_connection(inner.getsockname(), 2)),
            "outside": attempt(lambda: socket.create_connection(("192.0.2.1", 80), 2)),
        }

    try:
        out = in_child(body)
    except AssertionError as exc:
        pytest.skip(f"no network namespace here: {exc}")
    assert out["host listener"] in ("ECONNREFUSED", "ENETUNREACH")
    assert out["own loopback"] == "ok"  # an offline machine, not a broken one
    assert out["outside"] == "ENETUNREACH"
    assert connections(srv) == 0
    srv.close()


def test_the_seccomp_filter_refuses_inet_sockets_to_the_process_and_its_children() -> None:
    srv = listener()
    port = srv.getsockname()[1]
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)"

    def body() -> dict[str, str]:
        seccomp.deny_inet_sockets()
        child = subprocess.run([sys.executable, "-c", connect], capture_output=True)
        return {
            "AF_INET": attempt(lambda: socket.socket(socket.AF_INET)),
            "AF_INET6": attempt(lambda: socket.socket(socket.AF_INET6)),
            "AF_UNIX": attempt(lambda: socket.socket(socket.AF_UNIX).close()),
            "socketpair": attempt(lambda: [s.close() for s in socket.socketpair()]),
            "pipe": attempt(os.pipe),
            "child": "refused" if b"PermissionError" in child.stderr else "connected",
        }

    assert in_child(body) == {
        "AF_INET": "EPERM",
        "AF_INET6": "EPERM",
        "AF_UNIX": "ok",
        "socketpair": "ok",
        "pipe": "ok",
        "child": "refused",
    }
    assert connections(srv) == 0
    srv.close()


def test_the_unix_socket_filter_holds_on_every_thread_and_in_children() -> None:
    """A Unix socket named by a path (here one this test listens on) is out of reach of every
    thread of a process that ran :func:`seccomp.deny_unix_sockets`, a thread started before
    it included, and of the processes it starts; socketpair(), pipes and other families
    stay."""
    import threading

    path = f"/tmp/accelopt-unix-{os.getpid()}.sock"
    srv = unix_listener(path)
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect({path!r})"

    def body() -> dict[str, str]:
        seen: dict[str, str] = {}
        ready, go = threading.Event(), threading.Event()

        def earlier_thread() -> None:
            ready.set()
            go.wait()
            seen["earlier thread"] = attempt(lambda: socket.socket(socket.AF_UNIX).connect(path))

        thread = threading.Thread(target=earlier_thread)
        thread.start()
        ready.wait()
        seccomp.deny_unix_sockets()
        go.set()
        thread.join()
        child = subprocess.run([sys.executable, "-c", connect], capture_output=True)
        return {
            **seen,
            "AF_UNIX": attempt(lambda: socket.socket(socket.AF_UNIX).connect(path)),
            "AF_INET": attempt(lambda: socket.socket(socket.AF_INET).close()),
            "socketpair": attempt(lambda: [s.close() for s in socket.socketpair()]),
            "pipe": attempt(os.pipe),
            "child": "refused" if b"PermissionError" in child.stderr else "connected",
        }

    try:
        out = in_child(body)
        assert out == {
            "earlier thread": "EPERM",
            "AF_UNIX": "EPERM",
            "AF_INET": "ok",
            "socketpair": "ok",
            "pipe": "ok",
            "child": "refused",
        }
        assert connections(srv) == 0
    finally:
        srv.close()
        Path(path).unlink(missing_ok=True)


def _verdict(rows: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0) -> int:
    """What the classic-BPF program answers for one system call (a small interpreter of the
    four instructions it uses)."""
    data, pc, acc = {0: nr, 4: arch, 16: arg0}, 0, 0
    while True:
        code, jt, jf, k = rows[pc]
        if code == 0x20:  # ld [k]
            acc, pc = data[k], pc + 1
        elif code in (0x15, 0x35):  # jeq / jge
            pc += 1 + (jt if (acc == k if code == 0x15 else acc >= k) else jf)
        else:  # ret k
            return k


@pytest.mark.parametrize(
    "machine, nr, arg0, allowed",
    [
        ("x86_64", 41, socket.AF_INET, False),
        ("x86_64", 41, socket.AF_INET6, False),
        ("x86_64", 41, socket.AF_UNIX, True),
        ("x86_64", 0, socket.AF_INET, True),  # read(), whatever its first argument
        ("x86_64", 425, 0, False),  # io_uring_setup
        ("x86_64", 0x40000000 | 41, socket.AF_UNIX, False),  # the x32 ABI
        ("aarch64", 198, socket.AF_INET, False),
        ("aarch64", 198, socket.AF_UNIX, True),
        ("aarch64", 41, socket.AF_INET, True),  # 41 is not socket() there
    ],
)
def test_the_seccomp_program_refuses_exactly_inet_sockets(machine, nr, arg0, allowed) -> None:
    verdict = _verdict(seccomp.program(machine), seccomp.AUDIT_ARCH[machine], nr, arg0)
    assert verdict == (seccomp.RET_ALLOW if allowed else seccomp.RET_EPERM)


@pytest.mark.parametrize(
    "machine, nr, arg0, allowed",
    [
        ("x86_64", 41, socket.AF_UNIX, False),
        ("x86_64", 41, socket.AF_INET, True),
        ("x86_64", 53, socket.AF_UNIX, True),  # socketpair()
        ("x86_64", 425, 0, False),  # io_uring_setup
        ("aarch64", 198, socket.AF_UNIX, False),
        ("aarch64", 199, socket.AF_UNIX, True),  # socketpair()
    ],
)
def test_the_unix_program_refuses_exactly_unix_sockets(machine, nr, arg0, allowed) -> None:
    rows = seccomp.program(machine, (seccomp.AF_UNIX,))
    verdict = _verdict(rows, seccomp.AUDIT_ARCH[machine], nr, arg0)
    assert verdict == (seccomp.RET_ALLOW if allowed else seccomp.RET_EPERM)


def test_the_seccomp_program_refuses_another_abi_and_knows_its_architectures() -> None:
    i386 = 0x40000003
    assert _verdict(seccomp.program("x86_64"), i386, 1) == seccomp.RET_EPERM
    with pytest.raises(OSError, match="riscv64"):
        seccomp.program("riscv64")


# --- bubblewrap and the warning ---------------------------------------------------------------


def test_bubblewrap_confines_the_worker_where_landlock_is_missing(tmp_path: Path) -> None:
    path, why = bwrap.usable()
    if path is None:
        pytest.skip(why)
    srv = listener()
    port = srv.getsockname()[1]
    home = pwd.getpwuid(os.getuid()).pw_dir
    marker = f"accelopt-bwrap-{os.getpid()}"
    script = (
        "import json, os, socket, sys\n"
        "def attempt(f):\n"
        "    try:\n        f()\n        return 'ok'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "out = {\n"
        f"  'home': attempt(lambda: open({home!r} + '/{marker}', 'w')),\n"
        f"  'tests dir': attempt(lambda: open({str(tmp_path)!r} + '/{marker}', 'w')),\n"
        f"  'tmp': attempt(lambda: open('/tmp/{marker}', 'w')),\n"
        f"  'net': attempt(lambda: socket.create_connection(('127.0.0.1', {port}), 2)),\n"
        "  'key': os.environ.get('OPENAI_API_KEY'),\n"
        f"  'home listing': attempt(lambda: os.listdir({home!r})),\n"
        "  'numpy': attempt(lambda: __import__('numpy')),\n"
        "}\n"
        "print(json.dumps(out))\n"
    )
    env = dict(os.environ, OPENAI_API_KEY="sk-secret", **{environment.OFF_VAR: "landlock"})
    argv, env = launch.worker_command([sys.executable, "-c", script], env)
    assert argv[0] == path and "OPENAI_API_KEY" not in env
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["home"] != "ok" and out["tests dir"] != "ok" and out["net"] != "ok"
    assert out["tmp"] == "ok"  # its own /tmp, gone with it
    assert out["key"] is None and out["numpy"] == "ok"
    assert not (Path(home) / marker).exists() and not (Path("/tmp") / marker).exists()
    assert not (tmp_path / marker).exists() and connections(srv) == 0
    srv.close()


def test_a_missing_part_becomes_one_warning_that_says_why() -> None:
    def body() -> dict:
        os.environ[environment.OFF_VAR] = "all"
        policy.setup_worker()
        return {"note": policy.note(), "describe": policy.describe()}

    out = in_child(body)
    note = out["note"]
    assert note.startswith(policy.NOTE_PREFIX)
    assert "no filesystem confinement (Landlock turned off; bubblewrap turned off)" in note
    assert "no network isolation (turned off)" in note
    assert "Unix sockets named by a path reachable (turned off)" in note
    assert policy.warning_in(["other", note]) == note and policy.warning_in(["other"]) is None
    assert out["describe"]["environment"] == "allowlist"
    assert out["describe"]["network"] == "none: turned off"
    assert out["describe"]["unix_sockets"] == "none: turned off"


@needs_landlock
def test_a_complete_sandbox_gives_no_warning() -> None:
    def body() -> dict:
        os.environ.pop(environment.OFF_VAR, None)
        policy.setup_worker()
        return {"note": policy.note(), "describe": policy.describe()}

    out = in_child(body)
    assert out["note"] is None
    assert out["describe"]["filesystem"].startswith("landlock (ABI ")
    assert out["describe"]["network"] in ("user+network namespace", "network namespace")
    assert out["describe"]["unix_sockets"] == "seccomp filter (no AF_UNIX sockets)"


# --- the GPU tier ---------------------------------------------------------------------------


@pytest.mark.skipif(not discover_gpus(), reason="no CUDA GPU here (nvidia-smi lists none)")
@pytest.mark.parametrize("mode", MODES)
def test_a_candidate_runs_on_the_gpu_inside_the_sandbox(mode: str) -> None:
    """CUDA needs its device nodes (/dev/nvidia*, writable) and the driver's libraries
    (readable): the sandbox allows exactly those, and the result says nothing is missing."""
    result, _ = run_worker(BASE, source_name="add.py", seeds=[1, 2], mode=mode)
    assert result.status == "ok" and result.timing == "cuda", result.message
    assert policy.warning_in(result.warnings) is None, result.warnings

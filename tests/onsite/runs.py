"""Running the evaluation worker for real in tests: the candidate fixtures of tests/candidates/,
the request they are sent with, and the batch of worker runs several test modules share.

Two modes: ``cold`` (a fresh ``python -c BOOTSTRAP`` per request, the shipped worker) and
``warm`` (requests framed to a warm worker, :mod:`accelopt_core.onsite.process.zygote`, that forks one
child per request): :class:`WarmRunner`."""

from __future__ import annotations

import functools
import itertools
import json
import queue
import socket
import struct
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.targets.shipping import bundle, decode_result, encode_stdin, worker_argv

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
WORKER_MODULE_ARGV = [sys.executable, "-m", "accelopt_core.onsite.process.worker"]


def src(name: str) -> str:
    return (CANDIDATES / name).read_text()


def line_of(source: str, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    for i, line in enumerate(source.splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in source")


def alive(pid: int) -> bool:
    """True while ``pid`` is a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


MODES = ("cold", "warm")


def listener() -> socket.socket:
    """A loopback listener a sandboxed candidate must not reach (never accepting: a connection
    that reaches it waits in its backlog, counted by :func:`connections`)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    srv.setblocking(False)
    return srv


def unix_listener(path: str) -> socket.socket:
    """A Unix socket named ``path`` that a sandboxed candidate must not reach (as
    :func:`listener`; the caller removes the file)."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    srv.setblocking(False)
    return srv


def connections(srv: socket.socket) -> int:
    """How many connections reached ``srv``."""
    n = 0
    while True:
        try:
            srv.accept()[0].close()
        except BlockingIOError:
            return n
        n += 1


#: Environment for a test whose candidate writes a report (its pid, what it saw) to a file the
#: test reads: the sandbox's filesystem confinement (Landlock, and bubblewrap in its place) is
#: turned off for that run. tests/onsite/test_sandbox.py proves the confinement itself.
UNCONFINED_FILES = {"ACCELOPT_SANDBOX_OFF": "landlock,bwrap"}


class WarmRunner:
    """A warm worker (``python -c BOOTSTRAP`` + ``bundle("process.zygote")``) driven synchronously:
    :meth:`run` sends one request frame and reads its result frame."""

    def __init__(self, argv=None, env=None, cwd=None) -> None:
        self.proc = subprocess.Popen(
            argv or worker_argv(sys.executable),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.proc.stdin.write(bundle("process.zygote"))
        self.proc.stdin.flush()
        self.hello = json.loads(self._frame(b"H"))

    def _frame(self, kind: bytes) -> bytes:
        head = self.proc.stdout.read(9)
        assert head[:1] == kind, f"no {kind!r} frame from the warm worker: {head!r}"
        return self.proc.stdout.read(struct.unpack("<Q", head[1:])[0])

    def run_raw(self, request: EvalRequest | dict) -> dict:
        """The result frame's JSON (a probe's ``devices`` included)."""
        body = json.dumps(request.to_dict() if isinstance(request, EvalRequest) else request)
        self.proc.stdin.write(b"E" + struct.pack("<Q", len(body)) + body.encode())
        self.proc.stdin.flush()
        return json.loads(self._frame(b"R"))

    def run(self, request: EvalRequest | dict) -> EvalResult:
        return EvalResult.from_dict(self.run_raw(request))

    def close(self) -> int:
        """End-of-file: the worker exits; its exit status."""
        self.proc.stdin.close()
        return self.proc.wait(30)


#: Fixtures that test the supervisor with what the static gate rejects (a hang that writes its
#: pid to a file, a ctypes segfault, ``os._exit``). They are sent with themselves as the gate's
#: baseline: the gate judges only what a candidate changes relative to its baseline, so they
#: reach the supervisor (:func:`gate_baseline`).
SELF_GATED = ("hang.py", "segfault.py", "exit3.py")


def gate_baseline(candidate: str) -> dict:
    """``{"baseline_source": candidate}`` when ``candidate`` is a :data:`SELF_GATED` fixture's
    source, else ``{}`` (request fields)."""
    if any(candidate == src(name) for name in SELF_GATED):
        return {"baseline_source": candidate}
    return {}


def make_request(candidate: str, **fields) -> EvalRequest:
    fields = {**gate_baseline(candidate), **fields}
    fields.setdefault("seeds", [1, 2])
    fields.setdefault("rep_ms", 5.0)
    fields.setdefault("timeout_s", 90.0)
    fields.setdefault("harness_source", BASE)
    return EvalRequest(candidate_source=candidate, entry="add", **fields)


def run_worker(
    candidate: str,
    *,
    argv: list[str] | None = None,
    env: dict | None = None,
    cwd: str | None = None,
    mode: str = "cold",
    runner: WarmRunner | None = None,
    **fields,
) -> tuple[EvalResult, subprocess.CompletedProcess | WarmRunner]:
    """One request through the cold worker, or (``mode="warm"``) a warm one: ``runner`` or
    a new one (closed afterwards)."""
    request = make_request(candidate, **fields)
    if mode == "warm" or runner is not None:
        warm = runner or WarmRunner(argv, env, cwd)
        try:
            return warm.run(request), warm
        finally:
            if runner is None:
                assert warm.close() == 0
    proc = subprocess.run(
        argv or worker_argv(sys.executable),
        # python -m ...worker reads the bare request JSON; python -c BOOTSTRAP the shipped form
        input=request.to_json().encode() if argv == WORKER_MODULE_ARGV else encode_stdin(request),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=request.timeout_s + 60,
    )
    return decode_result(proc.stdout, proc.stderr, proc.returncode), proc


#: Candidates the supervisor classifies (stdout noise, a signal, an exit status, the memory
#: limit): its handling differs between the cold worker and the warm one, so both run them.
PROCESS_BATCH = {
    "prints": dict(source_name="prints.py"),
    "segfault": dict(source_name="segfault.py"),
    "exit3": dict(source_name="exit3.py"),
    "alloc": dict(source_name="alloc.py", memory_limit_mb=1024),
}
#: Candidates the child's evaluation judges (compile errors, wrong results, a correct one): the
#: same code in the child on both paths, so they run on the warm path (the default) only.
JUDGED_BATCH = {
    "ok_block128": dict(source_name="ok_block128.py"),
    "kernel_compile_error": dict(source_name="kernel_compile_error.py"),
    "load_error": dict(source_name="load_error.py"),
    "zeros": dict(source_name="zeros.py"),
    "mutates": dict(source_name="mutates.py"),
    "wrong_shape": dict(source_name="wrong_shape.py"),
    "wrong_dtype": dict(source_name="wrong_dtype.py"),
    "nan": dict(source_name="nan.py"),
}


@functools.cache
def run_batch(mode: str = "cold") -> dict[str, EvalResult]:
    """The batch's results, once per test process and mode: cold, :data:`PROCESS_BATCH`
    through the shipped worker, 2 at a time; warm, :data:`PROCESS_BATCH` and
    :data:`JUDGED_BATCH` one after another on ONE warm worker (the judged candidates after the
    ones that crashed, exited or ate memory in its slot), which must survive them all."""
    if mode == "warm":
        batch = {**PROCESS_BATCH, **JUDGED_BATCH}
        runner = WarmRunner()
        out = {n: run_worker(src(f"{n}.py"), runner=runner, **batch[n])[0] for n in batch}
        assert runner.proc.poll() is None, "a candidate took the warm worker down"
        assert runner.close() == 0
        return out

    def one(name: str) -> tuple[str, EvalResult]:
        return name, run_worker(src(f"{name}.py"), **PROCESS_BATCH[name])[0]

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, PROCESS_BATCH))


class SharedWarmRunner:
    """A :class:`WarmRunner` that takes requests from any thread, several in flight at once,
    as the local target sends them (``N`` frames with ids, answered by ``A`` frames; a reader
    thread hands each answer to its caller)."""

    def __init__(self) -> None:
        made: queue.Queue = queue.Queue()

        def keeper() -> None:
            # the worker's parent-death signal follows the THREAD that started it (a pool's
            # thread that ends would kill it): this thread lives as long as the process
            try:
                made.put(WarmRunner())
            except BaseException as exc:  # noqa: BLE001 - raised in the caller
                made.put(exc)
            threading.Event().wait()

        threading.Thread(target=keeper, daemon=True).start()
        runner = made.get()
        if isinstance(runner, BaseException):
            raise runner
        self.runner: WarmRunner = runner
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, list] = {}  # id -> [threading.Event, the result body]
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.runner.proc.stdout
        while len(head := out.read(9)) == 9:
            body = out.read(struct.unpack("<Q", head[1:])[0])
            if head[:1] == b"A":
                slot = self._waiting.pop(struct.unpack("<I", body[:4])[0], None)
                if slot is not None:
                    slot[1] = body[4:]
                    slot[0].set()
        for slot in list(self._waiting.values()):  # the worker ended: nobody waits forever
            slot[0].set()

    def run(self, request: EvalRequest, timeout: float) -> EvalResult:
        """The result of ``request``.

        Raises:
            TimeoutError: no answer within ``timeout`` seconds.
            RuntimeError: the warm worker ended without answering.
        """
        slot: list = [threading.Event(), None]
        with self._lock:
            rid = next(self._ids)
            self._waiting[rid] = slot
            frame = struct.pack("<I", rid) + request.to_json().encode()
            self.runner.proc.stdin.write(b"N" + struct.pack("<Q", len(frame)) + frame)
            self.runner.proc.stdin.flush()
        if not slot[0].wait(timeout):
            raise TimeoutError(f"no answer from the shared warm worker within {timeout:g} s")
        if slot[1] is None:
            raise RuntimeError("the shared warm worker ended without an answer")
        return EvalResult.from_dict(json.loads(slot[1]))


@functools.cache
def shared_runner() -> SharedWarmRunner:
    """This test process's :class:`SharedWarmRunner`, started at the first call; its end of
    the pipe closes when the process exits, and the worker with it."""
    return SharedWarmRunner()


def run_entry(candidate: str, harness: str, entry: str, **fields) -> EvalResult:
    """One evaluation of ``candidate`` (launcher ``entry``) against ``harness`` on the test
    process's shared warm worker (:func:`shared_runner`; the judge is the same code as in a
    cold worker, which tests/onsite/test_worker.py and test_supervisor.py run): 2 seeds and no
    timing unless ``fields`` say otherwise."""
    fields.setdefault("timing", "none")
    fields.setdefault("seeds", [1, 2])
    fields.setdefault("timeout_s", 120.0)
    req = EvalRequest(
        candidate_source=candidate,
        harness_source=harness,
        entry=entry,
        rep_ms=5.0,
        source_name="k.py",
        **fields,
    )
    return shared_runner().run(req, timeout=2 * req.timeout_s + 60)

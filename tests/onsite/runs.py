"""Running the evaluation worker for real in tests: the candidate fixtures of tests/candidates/,
the request they are sent with, and the batch of worker runs several test modules share."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.targets.shipping import decode_result, encode_stdin, worker_argv

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
BASE = (CANDIDATES / "add.py").read_text()
WORKER_MODULE_ARGV = [sys.executable, "-m", "accelopt_core.onsite.worker"]


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


def run_worker(
    candidate: str,
    *,
    argv: list[str] | None = None,
    env: dict | None = None,
    cwd: str | None = None,
    **fields,
) -> tuple[EvalResult, subprocess.CompletedProcess]:
    fields.setdefault("seeds", [1, 2])
    fields.setdefault("rep_ms", 5.0)
    fields.setdefault("timeout_s", 90.0)
    request = EvalRequest(candidate_source=candidate, harness_source=BASE, entry="add", **fields)
    proc = subprocess.run(
        argv or worker_argv(sys.executable),
        # python -m ...worker reads the bare request JSON; python -c BOOTSTRAP the shipped form
        input=request.to_json().encode() if argv == WORKER_MODULE_ARGV else encode_stdin(request),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=fields["timeout_s"] + 60,
    )
    return decode_result(proc.stdout, proc.stderr, proc.returncode), proc


# Candidates that run in a worker process, all started together (2 at a time) once per session.
BATCH = {
    "ok_block128": dict(source_name="ok_block128.py"),
    "kernel_compile_error": dict(source_name="kernel_compile_error.py"),
    "load_error": dict(source_name="load_error.py"),
    "segfault": dict(source_name="segfault.py"),
    "exit3": dict(source_name="exit3.py"),
    "alloc": dict(source_name="alloc.py", memory_limit_mb=1024),
    "prints": dict(source_name="prints.py"),
    "zeros": dict(source_name="zeros.py"),
    "mutates": dict(source_name="mutates.py"),
    "wrong_shape": dict(source_name="wrong_shape.py"),
    "wrong_dtype": dict(source_name="wrong_dtype.py"),
    "nan": dict(source_name="nan.py"),
}


def run_batch() -> dict[str, EvalResult]:
    """Every candidate of :data:`BATCH` through the shipped worker, 2 at a time."""

    def one(name: str) -> tuple[str, EvalResult]:
        return name, run_worker(src(f"{name}.py"), **BATCH[name])[0]

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, BATCH))

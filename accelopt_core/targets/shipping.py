"""How the worker travels to a target: the one wire format shared by local, ssh and ray.

A target starts ``worker_argv(python)`` (``python -c BOOTSTRAP``) and writes
``encode_stdin(request)`` to its stdin::

    b"<N>\\n" + <N bytes: UTF-8 source of accelopt_core/worker.py> + <request JSON>

BOOTSTRAP reads the length line and the source, and ``exec``s it as ``__main__``; the worker's
``main()`` then reads the rest of stdin as the request and prints one line
``@@ACCELOPT_RESULT@@ {json}`` as the last line of stdout. :func:`decode_result` turns the
process's output into an :class:`~accelopt_core.results.EvalResult`. Nothing is written to disk
on the target, and the target needs only a Python >= 3.10 with torch + triton (or the Neuron SDK).
"""

from __future__ import annotations

from importlib import resources

from accelopt_core import worker as _worker
from accelopt_core.results import EvalRequest, EvalResult

#: Text of accelopt_core/worker.py, shipped to the target on every evaluation.
WORKER_SOURCE: str = resources.files("accelopt_core").joinpath("worker.py").read_text("utf-8")

#: ``python -c`` program: read "<N>\n", then N bytes of worker source, exec it as __main__.
BOOTSTRAP: str = (
    "import sys;_r=sys.stdin.buffer;_n=int(_r.readline());"
    "exec(compile(_r.read(_n).decode('utf-8'),'accelopt_worker.py','exec'),"
    "{'__name__':'__main__'})"
)

SENTINEL: str = _worker.SENTINEL


def worker_argv(python: str) -> list[str]:
    """The command that runs the worker with ``python`` (a path or a name on PATH)."""
    return [python, "-c", BOOTSTRAP]


def encode_stdin(request: EvalRequest | dict) -> bytes:
    """stdin for :func:`worker_argv`: length line, worker source, request JSON (UTF-8).

    ``request`` may also be a plain dict such as ``{"probe": True}`` (device names and
    versions of the target, returned as an ``ok`` result with extra ``devices``)."""
    import json

    source = WORKER_SOURCE.encode("utf-8")
    body = request.to_json() if isinstance(request, EvalRequest) else json.dumps(request)
    return f"{len(source)}\n".encode() + source + body.encode("utf-8")


def _exit_description(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        return f"was killed by {_worker._signal_name(-returncode)}"
    if returncode == 127:
        return "exited with code 127 (python not found on the target?)"
    return f"exited with code {returncode}"


def decode_result(stdout: bytes, stderr: bytes, returncode: int | None) -> EvalResult:
    """The worker's result from its stdout (the last sentinel line).

    Without a valid result line: a ``runtime_error`` naming the exit code or signal and the
    stderr tail (e.g. ``No module named torch`` when the target's python lacks torch). Never
    raises.
    """
    data = _worker.parse_result_line(stdout)
    if data is not None:
        try:
            return EvalResult.from_dict(data)
        except (TypeError, ValueError) as exc:
            return EvalResult.failure("runtime_error", f"malformed worker result: {exc}")
    tail = _worker._tail(stderr or b"", 1500)
    return EvalResult.failure(
        "runtime_error",
        f"the worker {_exit_description(returncode)} without a result"
        + (f"; stderr: {tail}" if tail else ""),
    )


def decode_probe(stdout: bytes) -> dict | None:
    """The raw dict of a probe reply (``devices``, ``versions``, ``timing``), or None."""
    return _worker.parse_result_line(stdout)

"""How on-site code travels to a target: the one wire format shared by local, ssh and ray.

Everything that runs on the target lives in the package :mod:`accelopt_core.onsite` (standard
library only, plus the kernel's own stack). A target starts ``worker_argv(python)``
(``python -c BOOTSTRAP``) and writes ``encode_stdin(request)`` to its stdin::

    b"<N>\\n" + <N bytes: JSON bundle of the onsite package's sources> + <request JSON>

BOOTSTRAP reads the length line and the bundle, installs an import hook that serves those
sources as the package ``accelopt_onsite`` from memory, imports the bundle's main module and
calls its ``main()``; the worker's ``main()`` then reads the rest of stdin as the request and
prints one line ``@@ACCELOPT_RESULT@@ {json}`` as the last line of stdout. :func:`decode_result`
turns the process's output into an :class:`~accelopt_core.onsite.protocol.EvalResult`. Nothing is
written to disk on the target, and the target needs only a Python >= 3.10 with torch + triton
(or the Neuron SDK).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from accelopt_core.onsite import protocol as _protocol
from accelopt_core.onsite.protocol import EvalRequest, EvalResult

#: The package name the onsite sources are imported under on the target.
PACKAGE = "accelopt_onsite"

#: ``python -c`` program: read "<N>\n" and an N-byte JSON bundle ``{"modules": {name: source},
#: "packages": [name, ...], "main": name}``, serve those modules from memory, run main's main().
BOOTSTRAP: str = """\
import sys, json, importlib.abc, importlib.util
_r = sys.stdin.buffer
_b = json.loads(_r.read(int(_r.readline())).decode('utf-8'))
class _Onsite(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name not in _b['modules']:
            return None
        spec = importlib.util.spec_from_loader(name, self, is_package=name in _b['packages'])
        spec.origin = '<' + name.replace('.', '/') + '.py>'
        spec.has_location = False
        return spec
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        name = module.__spec__.name
        exec(compile(_b['modules'][name], module.__spec__.origin, 'exec'), module.__dict__)
sys.meta_path.insert(0, _Onsite())
importlib.import_module(_b['main']).main()
"""


def _walk(node, prefix: str, modules: dict[str, str], packages: list[str]) -> None:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.is_dir() and child.joinpath("__init__.py").is_file():
            name = f"{prefix}.{child.name}"
            packages.append(name)
            modules[name] = child.joinpath("__init__.py").read_text("utf-8")
            _walk(child, name, modules, packages)
        elif child.name.endswith(".py") and child.name != "__init__.py":
            modules[f"{prefix}.{child.name[:-3]}"] = child.read_text("utf-8")


@functools.cache
def onsite_sources() -> tuple[dict[str, str], tuple[str, ...]]:
    """The onsite package's modules as ``({module name: source}, package names)``, named under
    :data:`PACKAGE` (read once per process from the installed package; ~100 KB)."""
    root = resources.files("accelopt_core.onsite")
    modules = {PACKAGE: root.joinpath("__init__.py").read_text("utf-8")}
    packages = [PACKAGE]
    _walk(root, PACKAGE, modules, packages)
    return modules, tuple(packages)


@functools.cache
def bundle(main: str = "process.worker") -> bytes:
    """The length-prefixed bundle that BOOTSTRAP reads: every onsite module, and ``main`` (a
    module of :mod:`accelopt_core.onsite`, e.g. ``"process.worker"``) whose ``main()`` it runs.

    Raises:
        KeyError: ``main`` is not a module of the onsite package.
    """
    modules, packages = onsite_sources()
    name = f"{PACKAGE}.{main}"
    if name not in modules:
        raise KeyError(f"no onsite module {main!r}")
    body = json.dumps({"modules": modules, "packages": list(packages), "main": name}).encode()
    return f"{len(body)}\n".encode() + body


def worker_argv(python: str) -> list[str]:
    """The command that runs the worker with ``python`` (a path or a name on PATH)."""
    return [python, "-c", BOOTSTRAP]


def encode_stdin(request: EvalRequest | dict) -> bytes:
    """stdin for :func:`worker_argv`: the onsite bundle, then the request JSON (UTF-8).

    ``request`` may also be a plain dict such as ``{"probe": True}`` (device names and
    versions of the target, returned as an ``ok`` result with extra ``devices``)."""
    body = request.to_json() if isinstance(request, EvalRequest) else json.dumps(request)
    return bundle("process.worker") + body.encode("utf-8")


def encode_warm(request: EvalRequest | dict) -> bytes:
    """A warm worker's payload (the ssh agent's ``W`` frame, the Ray actor's argument): the
    onsite bundle with :mod:`accelopt_core.onsite.process.zygote` as main, then the request JSON."""
    body = request.to_json() if isinstance(request, EvalRequest) else json.dumps(request)
    return bundle("process.zygote") + body.encode("utf-8")


def _exit_description(returncode: int | None) -> str:
    if returncode is None:
        return "did not exit"
    if returncode < 0:
        return f"was killed by {_protocol.signal_name(-returncode)}"
    if returncode == 127:
        return "exited with code 127 (python not found on the target?)"
    return f"exited with code {returncode}"


def decode_result(stdout: bytes, stderr: bytes, returncode: int | None) -> EvalResult:
    """The worker's result from its stdout (the last sentinel line).

    Without a valid result line: a ``runtime_error`` naming the exit code or signal and the
    stderr tail (e.g. ``No module named torch`` when the target's python lacks torch). Never
    raises.
    """
    data = _protocol.parse_result_line(stdout)
    if data is not None:
        try:
            return EvalResult.from_dict(data)
        except (TypeError, ValueError) as exc:
            return EvalResult.failure("runtime_error", f"malformed worker result: {exc}")
    tail = _protocol.tail(stderr or b"", 1500)
    return EvalResult.failure(
        "runtime_error",
        f"the worker {_exit_description(returncode)} without a result"
        + (f"; stderr: {tail}" if tail else ""),
    )


def decode_probe(stdout: bytes) -> dict | None:
    """The raw dict of a probe reply (``devices``, ``versions``, ``timing``), or None."""
    return _protocol.parse_result_line(stdout)


def ship_by_value(ray: Any) -> None:
    """Register the onsite modules the Ray task and actor use (the agent, the warm host, the
    sandbox's launcher and what it imports) with Ray's cloudpickle, to be pickled by value:
    the Ray nodes have none of them (they get the bundle only with a payload)."""
    from accelopt_core.onsite.process import agent, warmhost
    from accelopt_core.onsite.sandbox import bwrap, environment, landlock, launch, paths, scratch

    for module in (agent, warmhost, launch, environment, paths, bwrap, landlock, scratch):
        ray.cloudpickle.register_pickle_by_value(module)

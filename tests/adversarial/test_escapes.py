"""The sandbox against the ``escape_*`` candidates (issue 34): model-written code that reads the
API key, writes outside its scratch directory (the user's real home, /tmp, /dev/shm), reaches a
loopback listener or a Unix socket named by a path, or starts a shell, through several doors
each.

- The static gate rejects what a kernel rewrite has no reason to contain, naming the rule. Four
  candidates passed it until issue 53 (a denylist cannot close every door of the standard
  library); the import allowlist now rejects them as ``gate: module not allowed``. So do the
  ``write_*`` candidates (a standard-library module that writes a file and was on no list) and
  the ``stack_*`` ones (torch, triton and numpy alone: ``numpy.ctypeslib``, the Triton compile
  cache's manager, ``torch.os``, ...), each naming the module or the name.
- At run time every candidate meets the sandbox: through the local target exactly as a search
  runs it (warm workers, and one cold one), with the gate judging nothing (the candidate as its
  own baseline, as ``accelopt profile`` does with a file): the sandbox must hold for code the
  gate does not see, whatever the gate says. The worker's starter has the API key in its
  environment. Afterwards: the marker file exists nowhere outside the scratch directories, the
  test's listeners (TCP on loopback, a Unix socket in /tmp) got no connection, and the key
  appears in no result.
- ``accelopt profile`` (the real CLI, a subprocess whose environment holds the key) on a file
  that reads the key from the CLI's own ``/proc/PID/environ``; and the one-time warning when
  the sandbox is turned off.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from accelopt_core.onsite.gate.precheck import precheck
from accelopt_core.onsite.sandbox import bwrap, landlock
from accelopt_core.onsite.sandbox.environment import OFF_VAR
from accelopt_core.onsite.sandbox.policy import NOTE_PREFIX
from tests.adversarial.hacks import (
    ESCAPE_GATE as GATE,
)
from tests.adversarial.hacks import (
    HACKS,
    ROOT,
    SOFTMAX,
    escape_source,
    private_env,
    run_cli,
    settings_file,
    with_harness,
)
from tests.onsite.runs import connections, listener, unix_listener

ESCAPES = sorted(n for n in HACKS if n.startswith("escape_"))

HOME = pwd.getpwuid(os.getuid()).pw_dir

#: How each ends at run time: ``(status, text in its message)``. A shell's failed redirection
#: is no error of the candidate's (its result is ``ok``, its files are not there); reading the
#: key from the environment finds none and writes into the scratch ``HOME``, which rejects it
#: (issue 53: ``wrote ~/...``), as does a write the sandbox refused (``tried to write``).
#: torch.hub's download runs in the candidate process and in the compile stage at once: the
#: first refused connection ends the candidate's call (``Connection refused``), while the
#: stage may already have left its ``.partial`` file in its ``HOME`` (``wrote ~/weights.pt...
#: in the compile stage``). Whichever the judge hears first is its verdict; both stop it.
ALSO = {"escape_torch_hub": ("rejected", "wrote ~/weights.pt")}
RUNTIME = {
    "escape_ctypes_system": ("ok", None),
    "escape_env_key": ("rejected", "wrote ~/accelopt-escape-"),
    "escape_etree_home": ("rejected", f"tried to write {HOME}/accelopt-escape-"),
    "escape_logging_home": ("rejected", f"tried to write {HOME}/accelopt-escape-"),
    "escape_numpy_save": ("rejected", f"tried to write {HOME}/accelopt-escape-"),
    "escape_proc_environ": ("runtime_error", "Permission denied"),
    "escape_pydoc_shell": ("ok", None),
    "escape_shutil_ssh": ("runtime_error", None),
    "escape_socket": ("runtime_error", "Connection refused"),
    "escape_subprocess": ("ok", None),
    "escape_torch_hub": ("runtime_error", "Connection refused"),
    "escape_unix_socket": ("runtime_error", "Operation not permitted"),
    "escape_xml_url": ("runtime_error", "Connection refused"),
}

needs_landlock = pytest.mark.skipif(
    landlock.abi() < landlock.MIN_ABI,
    reason=f"no Landlock ABI {landlock.MIN_ABI} here: the filesystem part is bubblewrap's or a "
    "warning (tests/onsite/test_sandbox.py)",
)


def test_every_escape_has_its_verdicts() -> None:
    assert sorted(GATE) == sorted(RUNTIME) == ESCAPES
    assert sorted(ALLOWLIST) == sorted(n for n in HACKS if n.startswith(("write_", "stack_")))


@pytest.mark.parametrize("name", ESCAPES)
def test_the_gate_rejects_what_a_kernel_has_no_reason_to_contain(name: str) -> None:
    verdict = precheck(HACKS[name], "softmax", SOFTMAX.read_text(), "softmax.py")
    assert (verdict or {}).get("rule") == GATE[name], verdict


_NOT_ALLOWED = "gate: module not allowed"

#: Issue 53: each ``write_*`` and ``stack_*`` candidate's rule and what its message names (the
#: module, or the name inside torch / triton / numpy). Every one passed the gate before issue 53,
#: or met only "gate: torch compute" for a call that a module-level statement would have made
#: unseen.
ALLOWLIST = {
    "write_aifc": (_NOT_ALLOWED, "'aifc'"),
    "write_cgitb": (_NOT_ALLOWED, "'cgitb'"),
    "write_compileall": (_NOT_ALLOWED, "'compileall'"),
    "write_cprofile": (_NOT_ALLOWED, "'cProfile'"),
    "write_distutils": (_NOT_ALLOWED, "'distutils.file_util'"),
    "write_etree": (_NOT_ALLOWED, "'xml.etree.ElementTree'"),
    "write_io_c": (_NOT_ALLOWED, "'_io'"),
    "write_lib2to3": (_NOT_ALLOWED, "'lib2to3.refactor'"),
    "write_profile": (_NOT_ALLOWED, "'profile'"),
    "write_pstats": (_NOT_ALLOWED, "'pstats'"),
    "write_py_compile": (_NOT_ALLOWED, "'py_compile'"),
    "write_pyio": (_NOT_ALLOWED, "'_pyio'"),
    "write_readline": (_NOT_ALLOWED, "'readline'"),
    "write_sunau": (_NOT_ALLOWED, "'sunau'"),
    "write_syslog": (_NOT_ALLOWED, "'syslog'"),
    "write_trace": (_NOT_ALLOWED, "'trace'"),
    "write_uu": (_NOT_ALLOWED, "'uu'"),
    "write_venv": (_NOT_ALLOWED, "'venv'"),
    "write_wave": (_NOT_ALLOWED, "'wave'"),
    "write_zipapp": (_NOT_ALLOWED, "'zipapp'"),
    "stack_array_ctypes": ("gate: ctypes", ".ctypes._ctypes"),
    "stack_ctypeslib_alias": ("gate: ctypes", "m.ctypeslib"),
    "stack_ctypeslib_constant": ("gate: ctypes", "np.ctypeslib"),
    "stack_ctypeslib_getattr": ("gate: dynamic getattr", "'ctypes' + 'lib'"),
    "stack_ctypeslib_import": ("gate: ctypes", "'numpy.ctypeslib'"),
    "stack_ctypeslib_reduce": ("gate: dynamic getattr", "'getattr'"),
    "stack_ctypeslib_system": ("gate: ctypes", "np.ctypeslib.load_library"),
    "stack_from_torch_import_os": ("gate: shell", "torch.os.system"),
    "stack_numpy_f2py": ("gate: ctypes", "numpy.f2py"),
    "stack_numpy_ma_fromfile": ("gate: file I/O", "np.rec.fromfile"),
    "stack_numpy_testing_extbuild": ("gate: ctypes", "numpy.testing.extbuild"),
    "stack_torch_compile": ("gate: ctypes", "torch.compile"),
    "stack_torch_inductor_codecache": ("gate: ctypes", "torch._inductor.codecache"),
    "stack_torch_jiterator": ("gate: ctypes", "torch.cuda.jiterator"),
    "stack_torch_memory_snapshot": ("gate: file I/O", "torch.cuda.memory._dump_snapshot"),
    "stack_torch_os": ("gate: shell", "torch.os.system"),
    "stack_torch_profiler": ("gate: file I/O", "torch.profiler"),
    "stack_torch_pyfilewriter": ("gate: file I/O", "torch._C.PyTorchFileWriter"),
    "stack_torch_share_memory": ("gate: file I/O", "share_memory_"),
    "stack_triton_build": ("gate: ctypes", "triton.runtime.build.compile_module_from_src"),
    "stack_triton_cache": ("gate: file I/O", "'triton.runtime.cache'"),
    "stack_triton_cache_attr": ("gate: file I/O", "triton.runtime.cache.get_cache_manager"),
    "stack_triton_compile": ("gate: ctypes", "triton.compile"),
    "stack_triton_knobs_hook": ("gate: ctypes", "triton.knobs.runtime.launch_enter_hook"),
    "stack_triton_testing_subprocess": ("gate: concurrency", "triton.testing.subprocess.run"),
}


@pytest.mark.parametrize("name", sorted(ALLOWLIST))
def test_the_allowlist_and_the_stack_denylist_reject_each_door_naming_it(name: str) -> None:
    """Issue 53: rejected by the rule, on the line of the import or the call, the message
    naming the module or the name (and, for a module on no list, the setting that allows it)."""
    rule, named = ALLOWLIST[name]
    source = HACKS[name]
    verdict = precheck(source, "softmax", SOFTMAX.read_text(), "softmax.py")
    assert verdict is not None and verdict["rule"] == rule, verdict
    assert named in verdict["message"], verdict["message"]
    # on the line of the import or the call it names
    line = source.splitlines()[verdict["line"] - 1].replace('"', "'")
    assert named.strip("'").split(".")[-1] in line, (line, verdict["message"])
    if rule == _NOT_ALLOWED:
        assert "accelopt.gate.allowModules" in verdict["message"]


def _places(marker: str, work: Path) -> list[Path]:
    """Where the escapes put their marker, outside any scratch directory."""
    out = []
    for folder in (Path(HOME), Path("/tmp"), Path("/dev/shm"), work):
        out += [folder / marker, folder / f"{marker}.npy"]
    return out


#: Evaluates the jobs on stdin (JSON) through the local target, as a search does; prints the
#: results (JSON). Run as a process of its own, whose environment holds the API key.
_DRIVER = """
import asyncio, json, sys
from pathlib import Path
from accelopt_core.evaluation import Evaluator
from accelopt_core.settings import Settings
from accelopt_core.targets.local import LocalTarget

ORIGINAL = Path(sys.argv[1]).read_text()
jobs = json.loads(sys.stdin.read())

async def run(warm, todo):
    settings = Settings.model_validate({"evaluation": {
        "seeds": 1, "warmupMs": 1, "repMs": 5, "timeoutS": 90, "cpuSlots": 2,
        "warmWorkers": warm}})
    target = LocalTarget(settings)
    evaluator = Evaluator(target, settings)

    async def one(job):
        kw = dict(source_name="softmax.py")
        if job["via"] == "gate":
            result = await evaluator.evaluate(ORIGINAL, job["source"], "softmax", **kw)
        else:  # the gate judges what differs from the baseline: here nothing
            request = evaluator.build_request(
                ORIGINAL, job["source"], "softmax", baseline_source=job["source"], **kw)
            result = await target.evaluate(request)
        return job["key"], result.to_dict()

    try:
        return dict(await asyncio.gather(*(one(j) for j in todo)))
    finally:
        await target.close()

async def main():
    out = await run(True, [j for j in jobs if j["warm"]])
    out.update(await run(False, [j for j in jobs if not j["warm"]]))
    print(json.dumps(out))

asyncio.run(main())
"""


def _drive(work: Path, jobs: Callable[[str, int], list[dict]], **env_extra: str) -> dict:
    """Run ``jobs`` (made by ``jobs(marker, port)``) through :data:`_DRIVER` in a process whose
    environment holds an API key; the results, the markers found outside the scratch
    directories, the connections the test's listener got, the secret and the output."""
    marker = f"accelopt-escape-{uuid.uuid4().hex[:12]}"
    secret = f"sk-accelopt-{uuid.uuid4().hex}"
    srv = listener()
    unix = unix_listener(f"/tmp/{marker}.sock")  # where escape_unix_socket connects
    env = dict(os.environ, OPENAI_API_KEY=secret, ACCELOPT_SHAPE="small")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop(OFF_VAR, None)
    env.update(env_extra)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, str(SOFTMAX)],
            input=json.dumps(jobs(marker, srv.getsockname()[1])),
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
            timeout=900,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return {
            "results": json.loads(done.stdout.strip().splitlines()[-1]),
            "escaped": [str(p) for p in _places(marker, work) if p.exists()],
            "connections": connections(srv) + connections(unix),
            "secret": secret,
            "output": done.stdout + done.stderr,
        }
    finally:
        srv.close()
        unix.close()
        Path(f"/tmp/{marker}.sock").unlink(missing_ok=True)
        for path in _places(marker, work):  # a failed sandbox must not leave them behind
            if path.is_file():
                path.unlink()


def _job(name: str, marker: str, port: int, via: str, warm: bool, key: str) -> dict:
    source = SOFTMAX.read_text() if name == "original" else escape_source(name, marker, port)
    return {"key": f"{name}/{key}", "source": source, "via": via, "warm": warm}


@pytest.fixture(scope="module")
def escapes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Every escape through warm workers with the gate judging nothing, the four that pass the
    gate with the gate in front, two through a cold worker."""

    def jobs(marker: str, port: int) -> list[dict]:
        out = [_job(n, marker, port, "self", True, "runtime") for n in ESCAPES]
        out += [_job(n, marker, port, "gate", True, "gate") for n in ESCAPES if GATE[n] is None]
        cold = ("escape_proc_environ", "escape_etree_home")  # none passes the gate since #53
        return out + [_job(n, marker, port, "self", False, "cold") for n in cold]

    return _drive(tmp_path_factory.mktemp("escapes"), jobs)


@pytest.mark.slow
@needs_landlock
def test_no_marker_outside_the_scratch_directory_and_no_connection(escapes: dict) -> None:
    assert escapes["escaped"] == []
    assert escapes["connections"] == 0
    assert escapes["secret"] not in escapes["output"]


@pytest.mark.slow
@needs_landlock
@pytest.mark.parametrize("name", ESCAPES)
def test_each_escape_is_stopped_at_run_time(escapes: dict, name: str) -> None:
    keys = [k for k in escapes["results"] if k.split("/")[0] == name]
    assert keys, f"{name} was not evaluated"
    for key in keys:
        result = escapes["results"][key]
        status, text = RUNTIME[name]
        if name in ALSO and result["status"] == ALSO[name][0]:
            status, text = ALSO[name]
        assert result["status"] == status, (key, result["message"])
        assert text is None or text in (result["message"] or ""), (key, result["message"])
        assert not any(w.startswith(NOTE_PREFIX) for w in result["warnings"]), result["warnings"]
        assert escapes["secret"] not in json.dumps(result)


def _profile(path: Path, work: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**private_env(work), **extra}
    env.pop(OFF_VAR, None)
    env.update(extra)
    return run_cli(
        "profile", str(path), "--settings", str(settings_file(work)), env=env, cwd=work,
        timeout=280,
    )  # fmt: skip


@pytest.mark.slow
@needs_landlock
def test_profile_of_a_file_that_reads_the_cli_environment_leaks_nothing(tmp_path: Path) -> None:
    """The file is its own original, so the gate judges none of it: only the sandbox stands
    between its code and the CLI process's environment, which holds the API key."""
    marker = f"accelopt-escape-{uuid.uuid4().hex[:12]}"
    secret = f"sk-accelopt-{uuid.uuid4().hex}"
    path = tmp_path / "softmax.py"
    path.write_text(with_harness(escape_source("escape_proc_environ", marker, 9)))
    try:
        proc = _profile(path, tmp_path, OPENAI_API_KEY=secret)
        assert proc.returncode == 1, proc.stderr[-2000:]
        said = " ".join(proc.stdout.split())  # rich wraps long lines
        assert "Permission denied" in said and "/environ" in said, said
        assert secret not in proc.stdout + proc.stderr
        assert [p for p in _places(marker, tmp_path) if p.exists()] == []
    finally:
        for p in _places(marker, tmp_path):
            if p.is_file():
                p.unlink()


@pytest.mark.slow
def test_profile_warns_once_when_the_sandbox_is_off(tmp_path: Path) -> None:
    path = tmp_path / "softmax.py"
    path.write_text(SOFTMAX.read_text())
    off = _profile(path, tmp_path, **{OFF_VAR: "all"})
    assert off.returncode == 0, off.stderr[-2000:]
    said = " ".join(off.stderr.split())  # rich wraps long lines
    assert said.count(NOTE_PREFIX.strip()) == 1, said
    assert "no filesystem confinement" in said and "no network isolation" in said
    if landlock.abi() >= landlock.MIN_ABI:  # a fresh directory: no cached verdict
        other = tmp_path / "on"
        other.mkdir()
        (other / "softmax.py").write_text(SOFTMAX.read_text())
        on = _profile(other / "softmax.py", other)
        assert on.returncode == 0 and NOTE_PREFIX not in on.stderr, on.stderr[-2000:]
    # the verdict cached by the first run is served without a warning about how it ran
    again = _profile(path, tmp_path)
    assert again.returncode == 0 and NOTE_PREFIX not in again.stderr, again.stderr[-2000:]


@pytest.mark.slow
def test_bubblewrap_in_place_of_landlock_ranks_the_original_and_stops_escapes(
    tmp_path: Path,
) -> None:
    """Where the kernel has no Landlock (turned off here), the starters run the worker under
    bubblewrap: the original still evaluates, the escapes still leave nothing behind."""
    path, why = bwrap.usable()
    if path is None:
        pytest.skip(why)
    names = ("escape_etree_home", "escape_proc_environ", "escape_xml_url", "escape_pydoc_shell")

    def jobs(marker: str, port: int) -> list[dict]:  # the gate judging nothing (issue 53)
        out = [_job("original", marker, port, "self", True, "bwrap")]
        return out + [_job(n, marker, port, "self", True, "bwrap") for n in names]

    run = _drive(tmp_path, jobs, **{OFF_VAR: "landlock"})
    assert run["escaped"] == [] and run["connections"] == 0
    assert run["secret"] not in run["output"]
    original = run["results"].pop("original/bwrap")
    assert original["status"] == "ok", original["message"]
    assert not any(w.startswith(NOTE_PREFIX) for w in original["warnings"])  # a whole sandbox
    # under bubblewrap the home is read-only and a write into the worker's private /tmp, outside
    # the evaluation's directories, is refused too: both are rejected, naming the path (issue
    # 53); /proc is the worker's own PID namespace (no process there holds the key)
    stopped = {
        "escape_etree_home": f"tried to write {HOME}/accelopt-escape-",
        "escape_xml_url": "Connection refused",
        "escape_proc_environ": "tried to write /tmp/accelopt-escape-",
        "escape_pydoc_shell": None,
    }
    for key, result in run["results"].items():
        text = stopped[key.split("/")[0]]
        assert text is None or text in (result["message"] or ""), (key, result["message"])
        assert (result["status"] == "ok") == (text is None), (key, result["message"])

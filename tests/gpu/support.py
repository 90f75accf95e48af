"""What the CUDA tier (issue 31) shares: the skip rule, the real CLI run at GPU shapes, the
figures file the device check collects, and a thread pool for runs that may share the GPU.

Every test module of the tier sets ``pytestmark = GPU``: marked ``gpu`` and skipped, with the
reason, where ``torch.cuda.is_available()`` is false (CI and every machine without a CUDA GPU).
``.device/gpu-check`` runs the tier on a lent H100/H200 with ``ACCELOPT_GPU_FIGURES`` naming a
JSON file: the tests write what they measured there (:func:`record`), and the check copies it
into its summary. No test double anywhere in the tier: the real CLI, targets, sshd and GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "triton").glob("*.py"))
SOFTMAX = ROOT / "examples" / "triton" / "softmax.py"
MATMUL = ROOT / "examples" / "triton" / "matmul.py"


def cuda_missing() -> str | None:
    """Why the tier cannot run here, or None when a CUDA GPU is usable."""
    try:
        import torch
    except ImportError as exc:
        return f"torch is not installed ({exc}): the GPU tier needs torch with CUDA"
    if not torch.cuda.is_available():
        return (
            "torch.cuda.is_available() is False: the GPU tier needs a CUDA GPU "
            "(.device/gpu-check runs it on a lent H100/H200)"
        )
    return None


_WHY = cuda_missing()
#: ``pytestmark`` of every module of the tier.
GPU = [pytest.mark.gpu, pytest.mark.skipif(_WHY is not None, reason=_WHY or "")]


def device_name() -> str:
    """``torch.cuda.get_device_name(0)`` (``NVIDIA H100 80GB HBM3``)."""
    import torch

    return torch.cuda.get_device_name(0)


def table_device() -> str:
    """The compile stage's table name of the GPU here (``H100 SXM5``)."""
    import torch

    from accelopt_core.onsite.triton.devices import from_runtime

    dev = from_runtime(device_name(), torch.cuda.get_device_capability(0))
    assert dev is not None, f"{device_name()} is not in the compile stage's device table"
    return dev.name


def _path_without_ncu(path: str) -> str:
    """``PATH`` minus the folders that hold ``ncu`` (a profile should not pay for Nsight
    Compute's replays unless the test is about them); ``nvidia-smi`` stays findable."""
    keep = [d for d in path.split(os.pathsep) if d and not os.access(Path(d, "ncu"), os.X_OK)]
    smi = shutil.which("nvidia-smi", path=path)
    if smi and shutil.which("nvidia-smi", path=os.pathsep.join(keep)) is None:
        keep.append(str(Path(smi).parent))  # the same folder: ncu comes back with it
    return os.pathsep.join(keep)


def gpu_env(
    work: Path, *, ncu: bool = False, shape: str = "large", hide_cuda: bool = False
) -> dict[str, str]:
    """The environment of a CLI run in ``work``: no inherited ``ACCELOPT_*`` variable, the
    memory, user config and temporary directory inside ``work``, ``ACCELOPT_SHAPE`` =
    ``shape`` (the examples' GPU-sized inputs), the repository first on ``PYTHONPATH``,
    ``ncu`` off ``PATH`` unless asked for, and with ``hide_cuda`` no GPU visible
    (``CUDA_VISIBLE_DEVICES=-1``: the run is the one a machine without a GPU makes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELOPT_")}
    env.pop("TRITON_INTERPRET", None)
    env["ACCELOPT_MEMORY_DIR"] = str(work / "memory")
    env["ACCELOPT_CONFIG"] = str(work / "no-user-config.toml")
    env["ACCELOPT_SHAPE"] = shape
    env["TMPDIR"] = str(work / "tmp")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    if not ncu:
        env["PATH"] = _path_without_ncu(env.get("PATH", ""))
    if hide_cuda:
        env["CUDA_VISIBLE_DEVICES"] = "-1"
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    return env


#: Evaluations of the tier: 2 correctness seeds (of each BENCH shape), the default timing
#: (25 ms warm-up, 100 ms of repetitions), room for GPU-sized inputs and first compiles.
SETTINGS = {"evaluation": {"seeds": 2, "timeoutS": 240, "warmWorkers": True}}


def settings_file(work: Path, **evaluation: Any) -> Path:
    """:data:`SETTINGS` (``evaluation`` fields replaced) as a JSON settings file in ``work``
    (its ``accelopt`` section: top-level keys outside it are not read)."""
    path = work / "gpu-settings.json"
    data = {"accelopt": {"evaluation": {**SETTINGS["evaluation"], **evaluation}}}
    path.write_text(json.dumps(data))
    return path


def cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 400) -> dict:
    """``accelopt <args> --json`` through its real entry point in ``cwd``: the JSON it printed,
    with ``_stderr`` (its tail) and ``_rc``. Fails the test on a traceback or no JSON."""
    proc = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stdout.strip(), f"no JSON (exit {proc.returncode}): {proc.stderr[-3000:]}"
    data = json.loads(proc.stdout)
    data["_stderr"], data["_rc"] = proc.stderr[-2000:], proc.returncode
    return data


def profile(path: Path, work: Path, *extra: str, **env_options: Any) -> dict:
    """``accelopt profile PATH --json`` at GPU shapes with the tier's settings."""
    env = gpu_env(work, **env_options)
    return cli(
        "profile", str(path), "--settings", str(settings_file(work)), *extra, env=env, cwd=work
    )


class Results(dict):
    """Results of :func:`parallel` by job name; a job that raised raises again when its
    result is read, so one failed run fails its own test, not its neighbours'."""

    def __getitem__(self, name: str) -> Any:
        value = super().__getitem__(name)
        if isinstance(value, BaseException):
            raise value
        return value


def parallel(jobs: dict[str, Callable[[], Any]], workers: int = 6) -> Results:
    """Run the ``jobs`` (name -> call) on a thread pool; their :class:`Results`."""
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(jobs)))) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return Results({name: f.exception() or f.result() for name, f in futures.items()})


def record(key: str, value: Any) -> None:
    """Put ``value`` under ``key`` in the JSON file named by ``ACCELOPT_GPU_FIGURES`` (the
    device check's figures; nothing without it)."""
    target = os.environ.get("ACCELOPT_GPU_FIGURES")
    if not target:
        return
    path = Path(target)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=1, default=str))


def summary(result: dict) -> dict:
    """The figures of one evaluation result worth keeping: status, timing, latency with its
    quantiles, % of peak, bound, throughput, the device, the judge's phases (s, where the
    evaluation's wall time went), the compile stage's kernels and the sandbox's warnings (what
    it could not close on that machine: an empty list is the whole sandbox, Unix sockets
    included)."""
    keys = ("status", "rule", "message", "timing", "device", "latency_ms", "p20_ms", "p80_ms")
    keys += ("pct_of_peak", "bound", "gbps", "tflops", "eval_s")
    out = {k: result.get(k) for k in keys if k in result}
    out["phases_s"] = (result.get("metrics") or {}).get("phases_s")
    out["sandbox"] = [w for w in result.get("warnings") or [] if w.startswith("sandbox:")]
    gpu = (result.get("metrics") or {}).get("gpu") or {}
    out["kernels"] = [
        {k: e.get(k) for k in ("kernel", "config", "registers", "local_bytes", "shared_bytes")}
        | {"occupancy": (e.get("occupancy") or {}).get("percent")}
        for e in gpu.get("kernels") or []
    ]
    return out

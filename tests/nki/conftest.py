"""The NKI test double on the path of subprocesses only (tests/doubles: the ``nki`` package and
the stand-in ``neuron-profile``), and a worker run helper."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelopt_core.onsite.judge.roofline import peak_table
from accelopt_core.onsite.protocol import EvalRequest, EvalResult
from accelopt_core.targets.shipping import decode_result, encode_stdin, worker_argv

ROOT = Path(__file__).resolve().parents[2]
DOUBLES = ROOT / "tests" / "doubles"
EXAMPLES = ROOT / "examples" / "nki"


def double_env(**extra: str) -> dict[str, str]:
    """os.environ with tests/doubles first on PYTHONPATH and tests/doubles/bin first on PATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(DOUBLES), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(DOUBLES / "bin"), env.get("PATH", "")])
    for key in ("NKI_SIMULATOR", "ACCELOPT_NKI_MODE", "NKI_DOUBLE_DEVICE"):
        env.pop(key, None)
    env.update(extra)
    return env


def device_env(tmp_path: Path, times: str | None = None) -> dict[str, str]:
    """The double as a trn1 NeuronDevice, optionally with scripted profiler times (s)."""
    extra = {
        "ACCELOPT_NKI_MODE": "device",
        "NKI_DOUBLE_DEVICE": "1",
        "NEURON_PLATFORM_TARGET_OVERRIDE": "trn1",
    }
    if times:
        extra["NEURON_PROFILE_DOUBLE_TIMES"] = times
        # relative: in the judge's working directory, the only place its sandbox lets it write
        extra["NEURON_PROFILE_DOUBLE_STATE"] = "profiler-count"
    return double_env(**extra)


def run_nki(candidate: str, harness: str, entry: str, env: dict, **fields) -> EvalResult:
    """One evaluation through the shipped worker, in a subprocess with ``env``."""
    fields.setdefault("seeds", [1, 2])
    fields.setdefault("rep_ms", 5.0)
    fields.setdefault("timeout_s", 90.0)
    request = EvalRequest(
        candidate_source=candidate, harness_source=harness, entry=entry, peaks=peak_table(),
        **fields,
    )  # fmt: skip
    proc = subprocess.run(
        worker_argv(sys.executable),
        input=encode_stdin(request),
        capture_output=True,
        env=env,
        timeout=fields["timeout_s"] + 60,
    )
    return decode_result(proc.stdout, proc.stderr, proc.returncode)


@pytest.fixture
def example():
    return lambda name: (EXAMPLES / f"{name}.py").read_text()

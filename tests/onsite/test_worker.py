"""The evaluation worker end to end through its entry points: the shipped bootstrap
(``python -c BOOTSTRAP`` + bundle), ``python -m accelopt_core.onsite.process.worker`` and the probe,
run for real under the Triton interpreter on CPU tensors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from accelopt_core.onsite import protocol
from accelopt_core.onsite.protocol import HARNESS_VERSION
from accelopt_core.targets.shipping import BOOTSTRAP, decode_result, encode_stdin, worker_argv
from tests.onsite.runs import (
    BASE,
    MODES,
    WORKER_MODULE_ARGV,
    WarmRunner,
    line_of,
    run_worker,
    src,
)

# --- correct candidates --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_correct_candidate_is_timed_in_the_interpreter_and_leaves_no_files(tmp_path, mode):
    home, tmp, cwd = (tmp_path / d for d in ("home", "tmp", "cwd"))
    for d in (home, tmp, cwd):
        d.mkdir()
    env = dict(os.environ, HOME=str(home), TMPDIR=str(tmp))
    env.pop("TRITON_CACHE_DIR", None)
    env.pop("XDG_CACHE_HOME", None)  # the sandbox's caches follow it; here: under HOME
    result, proc = run_worker(
        BASE, env=env, cwd=str(cwd), source_name="add.py", seeds=[1, 2, 3], mode=mode
    )
    assert result.status == "ok", result.message
    assert result.timing == "interpreter"
    assert "interpreter" in result.message
    assert 0 < result.p20_ms <= result.latency_ms <= result.p80_ms
    assert result.max_abs_error == 0.0 and result.max_rel_error == 0.0
    assert result.device == "cpu" and result.pct_of_peak is None
    assert {"python", "torch", "triton"} <= set(result.versions)
    assert result.harness_version == HARNESS_VERSION == protocol.HARNESS_VERSION
    # 3 * 200 float32 elements moved per call: GB/s = bytes / latency
    assert result.gbps == pytest.approx(3 * 200 * 4 / (result.latency_ms * 1e-3) / 1e9)
    if mode == "cold":  # the warm worker answers in frames, not a sentinel line
        assert proc.stdout.decode().strip().splitlines()[-1].startswith(protocol.SENTINEL)
    # nothing but the worker's shared compiler caches (issue 34: ~/.cache/accelopt/compile,
    # Triton's in triton/), and nothing the evaluation compiled in them: it compiled into
    # caches of its own, removed with its scratch directory (issue 53)
    cache = home / ".cache" / "accelopt" / "compile"
    leftovers = [
        p
        for d in (home, tmp, cwd)
        for p in d.rglob("*")
        if not (p.is_relative_to(cache) or cache.is_relative_to(p))
    ]
    assert leftovers == []
    assert not any(p.suffix == ".cubin" for p in (cache / "triton").rglob("*"))


@pytest.mark.slow  # shares the session's batch of worker runs
def test_other_correct_candidate(judged):
    result = judged["ok_block128"]
    assert result.status == "ok", result.message
    # where the evaluation's time went, phase by phase, in the order the phases ended (a
    # baseline's request lists no derived inputs: it finds them after its timing)
    phases = result.metrics["phases_s"]
    order = ["start", "load", "correctness", "compile_stage_wait", "timing", "derived_inputs"]
    assert list(phases) == [*order, "gpu_facts"]
    assert all(s >= 0 for s in phases.values()), phases
    assert phases["correctness"] > 0 and phases["timing"] > 0, phases


@pytest.mark.slow  # shares the session's batch of worker runs
def test_failed_evaluations_carry_no_phases(judged):
    assert "phases_s" not in (judged["zeros"].metrics or {})


# --- the static gate through the worker ----------------------------------------------------


@pytest.mark.parametrize(
    "name, needle, words",
    [
        ("torch_ref.py", "return torch.add(x, y)", "torch.add"),
        ("try_except.py", "try:", "try/except"),
        ("downcast.py", "tl.float16", "precision downcast"),
        ("no_launch.py", "def add(x, y):", "does not launch"),
    ],
)
def test_gate_rejects_with_line_via_the_worker_file(name, needle, words):
    # The worker also runs from the installed package: python3 -m ...onsite.worker < request.
    result, _ = run_worker(src(name), argv=WORKER_MODULE_ARGV, source_name=name)
    assert result.status == "rejected"
    assert words in result.message
    assert result.line == line_of(src(name), needle)


# --- what the target lacks, bad requests, the probe ----------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_missing_torch_on_the_target_is_reported(mode):
    # -S: no site-packages, as on a bare remote python without torch
    argv = [sys.executable, "-S", "-c", BOOTSTRAP]
    result, _ = run_worker(src("ok_block128.py"), argv=argv, mode=mode)
    assert result.status == "runtime_error"
    assert "torch is not installed" in result.message


def test_no_result_line_names_the_exit_code_and_stderr():
    r = decode_result(b"", b"python3: can't open file\nModuleNotFoundError: torch\n", 1)
    assert r.status == "runtime_error"
    assert "exited with code 1" in r.message and "ModuleNotFoundError" in r.message
    assert "SIGKILL" in decode_result(b"", b"", -9).message


def test_bad_request_still_gets_one_result_line():
    proc = subprocess.run(WORKER_MODULE_ARGV, input=b"{not json", capture_output=True, timeout=60)
    result = decode_result(proc.stdout, proc.stderr, proc.returncode)
    assert result.status == "runtime_error" and "bad request" in result.message


@pytest.mark.parametrize("mode", MODES)
def test_probe_reports_devices_and_versions(mode):
    if mode == "warm":
        runner = WarmRunner()
        data = runner.run_raw({"probe": True})
        assert runner.close() == 0
    else:
        proc = subprocess.run(
            worker_argv(sys.executable),
            input=encode_stdin({"probe": True}),
            capture_output=True,
            timeout=120,
        )
        data = protocol.parse_result_line(proc.stdout)
    assert data["status"] == "ok" and data["devices"] == ["cpu"]
    assert data["timing"] == "interpreter" and "torch" in data["versions"]

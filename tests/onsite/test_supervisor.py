"""The supervisor: a candidate that prints, hangs, crashes, exits or eats memory comes back
classified (real worker runs), never as a dead worker."""

from __future__ import annotations

import os
import time

import pytest

from tests.onsite.runs import MODES, UNCONFINED_FILES, alive, line_of, run_worker, src


@pytest.mark.slow  # shares the session's batch of worker runs
def test_stdout_noise_becomes_a_warning_not_the_result(batch):
    r = batch["prints"]
    assert r.status == "ok"
    assert r.latency_ms and r.latency_ms > 0  # the candidate's fake sentinel line was ignored
    assert any("stdout" in w for w in r.warnings)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_hang_times_out_and_the_process_is_gone(tmp_path, mode):
    pidfile = tmp_path / "pid"
    env = dict(os.environ, ACCELOPT_TEST_PIDFILE=str(pidfile), **UNCONFINED_FILES)
    start = time.monotonic()
    result, _ = run_worker(
        src("hang.py"), env=env, timeout_s=12.0, source_name="hang.py", mode=mode
    )
    assert time.monotonic() - start < 40
    assert result.status == "timeout"
    assert "12 s" in result.message
    assert result.line == line_of(src("hang.py"), "time.sleep(0.01)")
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


@pytest.mark.slow  # shares the session's batch of worker runs
def test_segfault_is_a_runtime_error_naming_the_signal(batch):
    r = batch["segfault"]
    assert r.status == "runtime_error"
    assert "SIGSEGV" in r.message
    assert r.line == line_of(src("segfault.py"), "ctypes.string_at(0)")


@pytest.mark.slow  # shares the session's batch of worker runs
def test_os_exit_is_a_runtime_error_naming_the_code(batch):
    r = batch["exit3"]
    assert r.status == "runtime_error"
    assert "exited with code 3" in r.message


@pytest.mark.slow  # shares the session's batch of worker runs
def test_unbounded_allocation_hits_the_memory_limit(batch):
    r = batch["alloc"]
    assert r.status == "runtime_error"
    assert "memory limit" in r.message and "1024" in r.message

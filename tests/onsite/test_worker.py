"""The evaluation worker, run for real: subprocesses, the shipped bootstrap, the Triton
interpreter on CPU tensors. Every bad candidate in tests/candidates/ must come back classified."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from accelopt_core.onsite import protocol, worker
from accelopt_core.onsite.protocol import HARNESS_VERSION, EvalRequest, EvalResult
from accelopt_core.targets.shipping import BOOTSTRAP, decode_result, encode_stdin, worker_argv

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


# Candidates that run in a worker process, all started together (2 at a time) once per module.
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


@pytest.fixture(scope="module")
def batch() -> dict[str, EvalResult]:
    def one(name: str) -> tuple[str, EvalResult]:
        return name, run_worker(src(f"{name}.py"), **BATCH[name])[0]

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, BATCH))


# --- correct candidates --------------------------------------------------------------------


@pytest.mark.slow
def test_correct_candidate_is_timed_in_the_interpreter_and_leaves_no_files(tmp_path):
    home, tmp, cwd = (tmp_path / d for d in ("home", "tmp", "cwd"))
    for d in (home, tmp, cwd):
        d.mkdir()
    env = dict(os.environ, HOME=str(home), TMPDIR=str(tmp))
    env.pop("TRITON_CACHE_DIR", None)
    result, proc = run_worker(BASE, env=env, cwd=str(cwd), source_name="add.py", seeds=[1, 2, 3])
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
    assert proc.stdout.decode().strip().splitlines()[-1].startswith(protocol.SENTINEL)
    leftovers = [p for d in (home, tmp, cwd) for p in d.rglob("*")]
    assert leftovers == []


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_other_correct_candidate(batch):
    assert batch["ok_block128"].status == "ok", batch["ok_block128"].message


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_stdout_noise_becomes_a_warning_not_the_result(batch):
    r = batch["prints"]
    assert r.status == "ok"
    assert r.latency_ms and r.latency_ms > 0  # the candidate's fake sentinel line was ignored
    assert any("stdout" in w for w in r.warnings)


# --- compile errors ------------------------------------------------------------------------


def test_syntax_error_is_a_compile_error_with_its_line():
    bad = BASE.replace("    n = x.numel()\n", "    n = x.numel(\n")
    result, _ = run_worker(bad, source_name="syntax.py")
    assert result.status == "compile_error"
    assert "SyntaxError" in result.message
    assert result.line == line_of(bad, "n = x.numel(")


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_triton_error_inside_the_kernel_is_a_compile_error_at_the_file_line(batch):
    r = batch["kernel_compile_error"]
    assert r.status == "compile_error", r.message
    assert "add_kernel" in r.message and "power of 2" in r.message
    assert r.line == line_of(src("kernel_compile_error.py"), "tl.arange(0, 100)")


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_error_while_loading_the_candidate_is_a_compile_error(batch):
    r = batch["load_error"]
    assert r.status == "compile_error"
    assert "UNDEFINED_CONSTANT" in r.message
    assert r.line == line_of(src("load_error.py"), "BLOCK_SIZE = UNDEFINED_CONSTANT")


def test_compilation_error_line_is_translated_to_the_file():
    from triton.compiler.errors import CompilationError

    source = src("add.py")
    start = source.index("def add_kernel")
    kernel_src = source[start : source.index("\n\n\ndef add(")]  # as JITFunction.src
    node = ast.parse(kernel_src).body[0].body[2]  # "mask = offs < n"
    assert node.lineno == 4  # relative to the def line
    err = CompilationError(kernel_src, node, "boom")
    assert worker._translate_compile_line(err, ast.parse(source)) == line_of(
        source, "mask = offs < n"
    )


# --- crashes, hangs, memory ----------------------------------------------------------------


@pytest.mark.slow
def test_hang_times_out_and_the_process_is_gone(tmp_path):
    pidfile = tmp_path / "pid"
    env = dict(os.environ, ACCELOPT_TEST_PIDFILE=str(pidfile))
    start = time.monotonic()
    result, _ = run_worker(src("hang.py"), env=env, timeout_s=12.0, source_name="hang.py")
    assert time.monotonic() - start < 40
    assert result.status == "timeout"
    assert "12 s" in result.message
    assert result.line == line_of(src("hang.py"), "time.sleep(0.01)")
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_segfault_is_a_runtime_error_naming_the_signal(batch):
    r = batch["segfault"]
    assert r.status == "runtime_error"
    assert "SIGSEGV" in r.message
    assert r.line == line_of(src("segfault.py"), "ctypes.string_at(0)")


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_os_exit_is_a_runtime_error_naming_the_code(batch):
    r = batch["exit3"]
    assert r.status == "runtime_error"
    assert "exited with code 3" in r.message


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_unbounded_allocation_hits_the_memory_limit(batch):
    r = batch["alloc"]
    assert r.status == "runtime_error"
    assert "memory limit" in r.message and "1024" in r.message


# --- wrong results -------------------------------------------------------------------------


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_zeros_output_is_incorrect(batch):
    r = batch["zeros"]
    assert r.status == "incorrect"
    assert "mismatch" in r.message
    assert r.max_abs_error > 0


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_input_mutation_is_incorrect(batch):
    r = batch["mutates"]
    assert r.status == "incorrect"
    assert "mutated input #0" in r.message


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_wrong_shape_and_dtype_are_incorrect(batch):
    assert batch["wrong_shape"].status == "incorrect"
    assert "shape (2, 100)" in batch["wrong_shape"].message
    assert batch["wrong_dtype"].status == "incorrect"
    assert "dtype float64" in batch["wrong_dtype"].message


@pytest.mark.slow  # shares the module's batch of ~12 worker runs
def test_nan_output_is_incorrect(batch):
    r = batch["nan"]
    assert r.status == "incorrect"
    assert "NaN/Inf" in r.message and "(0,)" in r.message


# --- static gate, through the worker and directly -------------------------------------------


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


LAUNCH = "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)\n"


def _gate(new_launcher_lines: str, imports: str = "", baseline: str | None = BASE):
    cand = BASE.replace(LAUNCH, LAUNCH + new_launcher_lines).replace(
        "import torch\n", "import torch\n" + imports, 1
    )
    return worker.static_gate(cand, "add", baseline)


def test_gate_allows_allocation_views_and_metadata():
    ok, msg, _ = _gate(
        "    out = out.view(-1).contiguous().reshape(x.shape)\n"
        "    z = torch.zeros_like(x, dtype=x.dtype)\n"
        "    m = math.ceil(n / 64) + triton.next_power_of_2(n) + x.stride(0) + n * 2\n",
        imports="import math\n",
    )
    assert ok, msg


@pytest.mark.parametrize(
    "lines, imports, words",
    [
        (
            "    out = F.relu(out)\n",
            "import torch.nn.functional as F\n",
            "torch.nn.functional.relu",
        ),
        ("    out = x @ y\n", "", "@ (matmul)"),
        ("    s = x.sum()\n", "", ".sum()"),
        ("    out = x + y\n", "", "arithmetic on tensor 'x'"),
        ("    t = threading.Thread(target=print)\n", "import threading\n", "threading"),
        ("    s = torch.cuda.Stream()\n", "", "torch.cuda.Stream"),
        ("    global _LAST\n    _LAST = out\n", "", "global"),
        ("    _CACHE[x.data_ptr()] = out\n", "_CACHE = {}\n", "_CACHE"),
        ("    os.system('true')\n", "import os\n", "os.system"),
    ],
)
def test_gate_rejects_compute_concurrency_and_caches(lines, imports, words):
    ok, msg, line = _gate(lines, imports)
    assert not ok
    assert words in msg
    assert line is not None


def test_gate_follows_helpers_and_allows_what_the_baseline_has():
    helper = "\n\ndef _finish(t):\n    return torch.softmax(t, 0)\n"
    cand = BASE.replace("    return out\n", "    return _finish(out)\n", 1) + helper
    ok, msg, _ = worker.static_gate(cand, "add", BASE)
    assert not ok and "torch.softmax" in msg
    # the same op in the baseline's launcher is not "standing in for the kernel"
    assert worker.static_gate(cand, "add", cand)[0]


def test_precheck_separates_syntax_errors_from_rejections():
    assert worker.precheck("def add(:\n", "add")["status"] == "compile_error"
    assert worker.precheck(src("try_except.py"), "add", BASE)["status"] == "rejected"
    assert worker.precheck(src("ok_block128.py"), "add", BASE) is None


# --- correctness arithmetic and plausibility (unit) ------------------------------------------


def test_tolerance_scales_with_the_reference_magnitude():
    import numpy as np

    ref = np.array([1000.0, 0.0, -2.0], dtype=np.float32)
    errors: dict = {}
    near = ref + np.float32(0.05)  # 0.05 <= 1e-4 * 1000 + 1e-4 * |ref|
    assert worker._compare(near, ref, {}, errors) is None
    assert errors["max_rel"] == pytest.approx(0.05 / 1000, rel=1e-3)
    assert worker._compare(ref + np.float32(0.2), ref, {}, {}) is not None
    zeros = np.zeros(3, dtype=np.float32)
    assert worker._compare(zeros, zeros, {}, {}) is None  # all-zero reference: exact zeros pass
    assert worker._compare(zeros, ref, {}, {}) is not None
    assert "structure" in worker._compare(zeros, (ref, ref), {}, {})


def _plausible(latency_ms: float, peaks: dict, timing: str = "cuda") -> dict:
    import numpy as np

    x = np.zeros(1000, dtype=np.float32)
    result = {"status": "ok", "latency_ms": latency_ms, "device": "Fake GPU X1", "message": "m"}
    bench = {"bytes": lambda x: 1e9, "flops": lambda x: 1e9}  # 1 GB, 1 GFLOP per call
    worker._plausibility(result, bench, (x,), peaks, timing)
    return result


FAKE_PEAKS = {"Fake GPU": {"bf16_tflops": 100.0, "fp32_tflops": 10.0, "hbm_gbps": 1000.0}}


def test_plausibility_reports_percent_of_peak():
    # t_roof = max(1e9 / 10e12, 1e9 / 1000e9) s = 1 ms (memory); at 2 ms: 50 %
    r = _plausible(2.0, FAKE_PEAKS)
    assert r["status"] == "ok"
    assert r["pct_of_peak"] == pytest.approx(50.0)
    assert r["bound"] == "memory"
    assert r["gbps"] == pytest.approx(500.0) and r["tflops"] == pytest.approx(0.5)


def test_over_100_percent_of_peak_is_rejected_as_implausible():
    r = _plausible(0.5, FAKE_PEAKS)  # 1 GB in 0.5 ms = 2000 GB/s > 1000 GB/s peak
    assert r["status"] == "rejected"
    assert r["message"].startswith("implausible: 200% of peak")


def test_interpreter_timing_gets_no_percent_of_peak():
    r = _plausible(0.5, FAKE_PEAKS, timing="interpreter")
    assert r["status"] == "ok" and "pct_of_peak" not in r


# --- wire format ---------------------------------------------------------------------------


def test_parse_result_line_takes_the_last_sentinel_line():
    text = f'noise\n{protocol.SENTINEL}{{"status": "ok"}}\nmore\n{protocol.SENTINEL}{{"status": "timeout"}}\n'
    assert protocol.parse_result_line(text)["status"] == "timeout"
    assert protocol.parse_result_line("no result here") is None
    assert protocol.parse_result_line(f"{protocol.SENTINEL}{{not json") is None


def test_missing_torch_on_the_target_is_reported():
    # -S: no site-packages, as on a bare remote python without torch
    argv = [sys.executable, "-S", "-c", BOOTSTRAP]
    result, _ = run_worker(src("ok_block128.py"), argv=argv)
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


def test_probe_reports_devices_and_versions():
    proc = subprocess.run(
        worker_argv(sys.executable),
        input=encode_stdin({"probe": True}),
        capture_output=True,
        timeout=120,
    )
    data = protocol.parse_result_line(proc.stdout)
    assert data["status"] == "ok" and data["devices"] == ["cpu"]
    assert data["timing"] == "interpreter" and "torch" in data["versions"]

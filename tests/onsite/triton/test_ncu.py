"""Optional Nsight Compute facts (issue 21, item 5) against the stand-in ``ncu`` in
tests/doubles/bin (a TEST DOUBLE of NVIDIA's CLI that writes its ``--csv --page raw`` layout):
the launched program really loads and runs the entry, the raw page is parsed into
``metrics["ncu"]``, a failing program gives a warning, and nothing asks for ncu under the
interpreter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from accelopt_core.onsite.triton import ncu, stage
from accelopt_core.onsite.triton.devices import lookup

ROOT = Path(__file__).resolve().parents[3]
DOUBLE = ROOT / "tests" / "doubles" / "bin" / "ncu"
MATMUL = (ROOT / "examples" / "triton" / "matmul.py").read_text()

RAW = """==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "matmul_kernel": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",\
"Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed",\
"sm__throughput.avg.pct_of_peak_sustained_elapsed",\
"sm__warps_active.avg.pct_of_peak_sustained_active",\
"smsp__pcsamp_warps_issue_stalled_barrier","smsp__pcsamp_warps_issue_stalled_long_scoreboard",\
"smsp__pcsamp_warps_issue_stalled_wait"
"","","","","","","","","","","","%","%","%","",""
"0","4242","python3","box","matmul_kernel","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0",\
"60.00","20.00","40.00","100","1,300","100"
"1","4242","python3","box","matmul_kernel","1","7","(128, 1, 1)","(4, 1, 1)","0","9.0",\
"80.00","30.00","50.00","100","1,500","0"
==PROF== Disconnected from process 4242
"""


def test_raw_page_is_parsed_and_summarized() -> None:
    launches = ncu.parse_raw_csv(RAW)
    assert [launch["kernel"] for launch in launches] == ["matmul_kernel", "matmul_kernel"]
    assert launches[0]["stalls"]["long_scoreboard"] == 1300.0
    summary = ncu.summarize(launches)["kernels"][0]
    assert summary["launches"] == 2
    assert summary["dram_throughput"] == 70.0
    assert summary["sm_throughput"] == 25.0
    assert summary["achieved_occupancy"] == 45.0
    # 2,800 long-scoreboard samples of 3,100: 90.3 %
    assert summary["top_stalls"][0] == {"reason": "long_scoreboard", "percent": 90.3}
    assert [s["reason"] for s in summary["top_stalls"]] == ["long_scoreboard", "barrier", "wait"]


def test_argv_names_the_metrics_and_kernels() -> None:
    cmd = ncu.argv("ncu", ["matmul_kernel", "b.k"], ["python3", "x.py"])
    assert cmd[:4] == ["ncu", "--csv", "--page", "raw"]
    # the GPU's clocks are left alone: ncu's default would lock them to base clocks
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert "regex:^(b\\.k|matmul_kernel)$" in cmd
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" in metrics
    assert "smsp__pcsamp_warps_issue_stalled_long_scoreboard" in metrics
    assert cmd[-2:] == ["python3", "x.py"]


def _setup(source: str, tmp_path: Path) -> dict:
    return {
        "candidate_source": source,
        "harness_source": MATMUL,
        "entry": "matmul",
        "source_name": "matmul.py",
        "cand_file": str(tmp_path / "candidate.py"),
        "project": None,
        "seed": 1,
        "device": "cpu",  # the double has no GPU: the program runs the entry under the interpreter
        "tmp": str(tmp_path),
    }


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_profile_runs_the_entry_under_the_double(tmp_path: Path, interpreter) -> None:
    marker = tmp_path / "ran"
    source = MATMUL.replace(
        "def matmul(", f"open({str(marker)!r}, 'w').write('ran')\n\n\ndef matmul(", 1
    )
    answer = ncu.profile(_setup(source, tmp_path), ["matmul_kernel"], str(DOUBLE), 300)
    assert marker.exists(), answer
    kernel = answer["ncu"]["kernels"][0]
    assert kernel["kernel"] == "matmul_kernel"
    assert kernel["achieved_occupancy"] == 41.87 and kernel["dram_throughput"] == 72.35
    assert kernel["top_stalls"][0]["reason"] == "long_scoreboard"
    assert ncu.checked(answer["ncu"]) == answer["ncu"]


def test_a_failing_program_is_a_warning(tmp_path: Path, interpreter) -> None:
    source = MATMUL.replace("def matmul(", "raise RuntimeError('boom')\n\n\ndef matmul(", 1)
    answer = ncu.profile(_setup(source, tmp_path), ["matmul_kernel"], str(DOUBLE), 300)
    assert "ncu" not in answer
    assert answer["warning"].startswith("ncu profiled no kernel (exit 1)")


def test_counters_kept_to_administrators_are_named(
    tmp_path: Path, interpreter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCU_DOUBLE_PERMISSION", "1")
    answer = ncu.profile(_setup(MATMUL, tmp_path), ["matmul_kernel"], str(DOUBLE), 300)
    assert answer == {"warning": ncu.PERMISSION_WARNING}
    assert "ERR_NVGPUCTRPERM" in answer["warning"]


def test_ncu_only_on_a_cuda_timing_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{DOUBLE.parent}{os.pathsep}{os.environ['PATH']}")
    assert ncu.ncu_path() == str(DOUBLE)
    answer = {"gpu": {"kernels": [{"kernel": "matmul_kernel"}]}}
    assert stage._ncu_path({"use_cuda": False}, answer) is None
    assert stage._ncu_path({"use_cuda": True}, answer) == str(DOUBLE)
    assert stage._ncu_path({"use_cuda": True}, {"gpu": {"kernels": []}}) is None


def test_merge_puts_the_facts_in_metrics() -> None:
    facts = {"kernels": [{"kernel": "k", "launches": 1, "achieved_occupancy": 40.0}]}
    answer = stage.facts_of(lookup("H100 SXM5"), "a warning")
    answer["ncu"] = facts
    merged = stage.merge({"status": "ok", "metrics": {}}, json.loads(json.dumps(answer)), {})
    assert merged["metrics"]["ncu"] == facts

"""Output that reads in a log (issue 51): when stdout is not a terminal (a pipe, a file, a CI
log) and 80 columns wide, no command cuts a name or a number with an ellipsis (``gathe…``).

``runs``, ``memory`` and ``bench`` (a definition without a Triton solution: no search) run
through the real entry point with stdout captured (not a terminal) and ``COLUMNS=80``;
``optimize``, ``profile``, ``bench``'s full rows and ``target check`` are rendered by their
real render functions from real report objects onto an 80-column console writing to a
string (not a terminal), since running them evaluates kernels.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli import bench, render, render_runs, render_table, render_target
from accelopt_cli.main import main
from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.memory import OptimizationMemory, RunStore
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search import Candidate, FailedCandidate, SearchReport
from tests.memory.experiences import softmax_exp

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "triton" / "softmax.py"

#: 60 characters: a kernel / definition name as FlashInfer-Bench and KernelBench spell them.
NAME = "fused_gather_rmsnorm_rotary_embedding_kv_cache_append_kernel"
SOLUTION = "triton_fused_gather_rmsnorm_rotary_v3_by_accelopt"
PLAN = (
    "split the reduction over two passes with a persistent grid of 132 programs, "
    "vectorized 128-bit loads and the rotary tables kept in shared memory"
)
DEVICE = "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 3352 GB/s HBM3, 989 dense bf16 TFLOP/s)"


def test_the_name_is_sixty_characters() -> None:
    assert len(NAME) == 60


def _console(width: int = 80) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()  # not a terminal: what a pipe, a file or a CI log gets
    return Console(file=buf, width=width, color_system=None), buf


def _long_path(tmp_path: Path) -> Path:
    folder = tmp_path / "kernels_of_the_inference_server" / "attention_and_normalization_ops"
    folder.mkdir(parents=True)
    return folder / f"{NAME}.py"


def assert_whole(text: str, *values: str) -> None:
    """No ellipsis in ``text``, and each value is in it: a value without spaces (a name, a
    path, a number) whole on one line; free text (with spaces) may wrap between its words,
    which come in order, each one whole."""
    assert "…" not in text, text
    for value in values:
        if " " not in value:
            assert value in text, f"{value!r} is not whole in:\n{text}"
        else:
            words = ".*?".join(rf"(?<!\S){re.escape(w)}(?!\S)" for w in value.split())
            assert re.search(words, text, re.S), f"{value!r} is cut in:\n{text}"


# --- bench ------------------------------------------------------------------------------------


def _bench_row(definition: str, **fields) -> dict:
    row = dict.fromkeys(bench.COLUMNS)
    row.update({"definition": definition, "op_type": "rmsnorm", "resumed": False, **fields})
    return row


def test_bench_rows_keep_every_name_and_number_at_80_columns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        _bench_row(NAME, solution=SOLUTION, baseline_ms=123456.7, best_ms=9876.54,
                   speedup=12.4999, pct_of_peak=87.65, verdict=f"faster: {PLAN}",
                   wall_s=98765.4, cost_usd=1234.56789, resumed=True),
        _bench_row("gemm_n64_k64", solution="gemm_triton", verdict="error: no Triton solution"),
    ]  # fmt: skip
    out, buf = _console()
    args = argparse.Namespace(csv=None, json=False)
    bench._emit(args, out, out, tmp_path / "flashinfer-trace-2026-11", rows)
    text = buf.getvalue()
    assert_whole(text, NAME, SOLUTION, "1.235e+05", "9877", "12.50x", "87.7", PLAN)
    assert_whole(text, "98765 (earlier)", "1234.5679", "gemm_n64_k64", "no Triton solution")
    assert_whole(text, "FlashInfer-Bench: flashinfer-trace-2026-11")

    args.json = True  # --json stays the machine interface: every field, unrounded
    bench._emit(args, out, out, tmp_path, rows)
    data = json.loads(capsys.readouterr().out)
    assert data["rows"] == rows and data["root"] == str(tmp_path)


def test_bench_through_the_cli_in_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("flashinfer_bench.data", reason="the flashinfer-bench package (extra fib)")
    root = tmp_path / "dataset"
    shutil.copytree(REPO / "tests" / "fib" / "dataset", root)
    definition = json.loads((root / "definitions/softmax/softmax_rows.json").read_text())
    definition["name"] = NAME  # a definition no solution is written for
    (root / "definitions/softmax" / f"{NAME}.json").write_text(json.dumps(definition))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("ACCELOPT_MEMORY_DIR", str(tmp_path / "memory"))
    monkeypatch.setenv("ACCELOPT_CONFIG", str(tmp_path / "no-user-config.toml"))
    assert main(["bench", str(root), "--definition", NAME]) == 1  # its row is an error row
    captured = capsys.readouterr()
    assert_whole(captured.out, NAME, "no Triton solution")
    assert NAME in captured.err  # the progress line


# --- optimize ---------------------------------------------------------------------------------


def _ok(latency_ms: float) -> EvalResult:
    return EvalResult(
        status="ok", latency_ms=latency_ms, p20_ms=latency_ms * 0.9, p80_ms=latency_ms * 1.1,
        timing="cuda", gbps=3123.4, tflops=812.345, device=DEVICE,
    )  # fmt: skip


def _search_report(tmp_path: Path) -> tuple[SearchReport, object, Path]:
    path = _long_path(tmp_path)
    source = EXAMPLE.read_text().replace("softmax_kernel", NAME)
    path.write_text(source)
    kf = parse_kernel_file(source, str(path))
    base = Candidate.baseline(source, _ok(123456.7))
    best = Candidate("c1", source + "# " + "x" * 120 + "\n", base.id, PLAN, "", _ok(4567.8), 3)
    best.speedup, best.retimed, best.rank, best.tokens = 27.0279, True, 1, 1234567
    report = SearchReport(
        path=str(path), kernel_name=NAME, entry="softmax", baseline=base, candidates=[best],
        original_source=source, target="ssh://gpu-node-17.cluster.example.com:2222",
        timing="cuda", proposer="llm", iterations_run=12, evaluated=345, wall_s=98765.4,
        cost_usd=1234.5678, tokens={"total": {"total_tokens": 9876543}},
        failed_candidates=[
            FailedCandidate(PLAN, "correctness", "max abs error 0.012345 at (1023, 4095) "
                            "exceeds atol 0.001 on derived input x row-padded", line=137),
        ],
    )  # fmt: skip
    return report, kf, path


def test_optimize_report_keeps_names_paths_plans_and_numbers(tmp_path: Path) -> None:
    report, kf, path = _search_report(tmp_path)
    (out, buf), (err, _) = _console(), _console()
    render.print_search_report(out, err, report, kf, NAME, str(path))
    render_runs.print_failures(out, report.failed_candidates, verbose=False)
    text = buf.getvalue()
    assert len(str(path)) > 80
    assert_whole(text, str(path), NAME, "ssh://gpu-node-17.cluster.example.com:2222", PLAN)
    assert_whole(text, "27.03x", "4568", "1234567", "9876543", "$1234.5678", "98765.4")
    assert_whole(text, "+# " + "x" * 120)  # the diff's long line whole, not cropped
    assert_whole(text, "0.012345", "(1023, 4095)", "137", "correctness")


def test_optimize_report_on_a_wide_terminal_is_still_a_table(tmp_path: Path) -> None:
    report, kf, path = _search_report(tmp_path)
    buf = io.StringIO()
    out = Console(file=buf, width=250, force_terminal=True, color_system=None)
    render.print_search_report(out, out, report, kf, NAME, str(path))
    text = buf.getvalue()
    assert f"│ {PLAN} │" in text.replace("  ", " ")  # one row, the plan on one line
    assert "┃ rank ┃ speedup ┃ latency (ms) ┃" in text


# --- profile ----------------------------------------------------------------------------------


def test_profile_keeps_the_path_the_device_and_the_numbers(tmp_path: Path) -> None:
    path = str(_long_path(tmp_path))
    (out, buf), (err, _) = _console(), _console()
    render.print_profile(out, err, _ok(123456.7), path)
    render_table.print_heading(out, path)  # what `profile A B` heads each file with
    text = buf.getvalue()
    assert_whole(text, path, DEVICE, "1.235e+05", "(p20 1.111e+05, p80 1.358e+05)", "3123.4")
    assert_whole(text, "812.345 TFLOP/s")
    assert text.count(path) == 2


# --- target -----------------------------------------------------------------------------------


def test_target_report_keeps_the_host_the_executable_and_the_devices(tmp_path: Path) -> None:
    executable = str(tmp_path / "opt" / "conda" / "envs" / "accelopt-worker-env" / "bin/python3")
    report = {
        "target": "ssh://kernel-engineer@gpu-node-17.cluster.example.com:2222",
        "ok": True,
        "info": {"device_names": [DEVICE, DEVICE], "python": "3.11.7", "torch": "2.5.1+cu124",
                 "triton": "3.1.0", "executable": executable},
        "capacity": 16,
        "connect_s": 1234.5678,
        "kernel": "triton",
        "result": _ok(0.0123).to_dict() | {"eval_s": 98.765},
    }  # fmt: skip
    (out, buf), (err, _) = _console(), _console()
    render_target.print_target_report(out, err, report)
    text = buf.getvalue()
    assert_whole(text, report["target"], executable, DEVICE, "2.5.1+cu124", "1234.57", "98.77")


# --- runs (the real CLI) ----------------------------------------------------------------------


def test_runs_list_and_show_in_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(_long_path(tmp_path))
    store = RunStore(tmp_path / "runs")
    log = store.create({"path": path, "kernel": NAME}, now=1_700_000_000)
    assert log is not None
    log.append_call({"n": 1, "role": "planner", "model": "m", "prompt": [], "reply": None,
                     "verdict": "plan", "detail": PLAN})  # fmt: skip
    failed = FailedCandidate(PLAN, "compile", "Triton compilation error at 137:8", line=137)
    log.write_report({"candidates": [], "failed_candidates": [failed.to_dict()],
                      "plans": [{"call": 1, "title": PLAN}]})  # fmt: skip
    log.write_summary({"id": log.id, "path": path, "kernel": NAME, "started_at": 1_700_000_000,
                       "calls": 1234567, "cost_usd": 12345.678901, "best_speedup": 1234.5678,
                       "stopped_reason": "budget: max tokens 1000000 reached"})  # fmt: skip
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", "--memory-dir", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert_whole(listed, log.id, path, NAME, "1234.57x", "1234567", "$12345.6789")
    assert_whole(listed, "budget: max tokens 1000000 reached")
    assert main(["runs", "--memory-dir", str(tmp_path), "show", log.id]) == 0
    shown = capsys.readouterr().out
    assert_whole(shown, log.id, path, NAME, "1234.57x", "$12345.6789", PLAN, "137:8")
    assert main(["runs", "--memory-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["kernel"] == NAME


# --- memory (the real CLI) --------------------------------------------------------------------


def test_memory_list_show_and_hacks_in_a_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = OptimizationMemory(tmp_path / "memory")
    good = memory.add(softmax_exp(kernel_name=NAME, title=PLAN, speedup=12345.678, device=DEVICE))
    hack = memory.add(
        softmax_exp(kernel_name=NAME, title="reward-hack", speedup=1.0, positive=False,
                    hack="output cached across calls", plan=PLAN, created_at=5,
                    fast="# cached\n")
    )  # fmt: skip
    memory.close()
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["memory", "--memory-dir", str(tmp_path), "list"]) == 0
    listed = capsys.readouterr().out
    assert_whole(listed, good.id, hack.id, NAME, PLAN, "12345.68x", DEVICE)
    assert main(["memory", "--memory-dir", str(tmp_path), "list", "--hacks"]) == 0
    assert_whole(capsys.readouterr().out, hack.id, NAME, PLAN, "output cached across calls")
    assert main(["memory", "--memory-dir", str(tmp_path), "show", good.id]) == 0
    assert_whole(capsys.readouterr().out, good.id, NAME, PLAN, "12345.68x", DEVICE)


# --- the layouts of render_table --------------------------------------------------------------


COLS = (render_table.Col("kernel"), render_table.Col("speedup", "right"),
        render_table.Col("plan", wrap=True))  # fmt: skip


def test_a_table_that_fits_by_wrapping_its_free_text_stays_a_table() -> None:
    out, buf = _console()
    render_table.print_table(out, "t", COLS, [["softmax_kernel", "1234.57x", PLAN]])
    text = buf.getvalue()
    assert "┃ kernel " in text and "│ softmax_kernel │" in text  # a table, the name whole
    assert all(len(line) <= 80 for line in text.splitlines())
    assert_whole(text, "1234.57x", PLAN)


def test_a_table_too_wide_for_a_log_becomes_a_plain_list() -> None:
    out, buf = _console()
    rows = [[NAME, "1234.57x", PLAN], ["[red]x[/]", "", "short"]]
    render_table.print_table(out, "best runs", COLS, rows, caption="2 shown")
    assert buf.getvalue().splitlines() == [
        "best runs",
        f"- kernel: {NAME}",
        "  speedup: 1234.57x",
        f"  plan: {PLAN}",
        "- kernel: x",
        "  plan: short",
        "2 shown",
    ]


def test_on_a_narrow_terminal_the_cells_fold_and_nothing_is_cut() -> None:
    buf = io.StringIO()
    out = Console(file=buf, width=60, force_terminal=True, color_system=None)
    render_table.print_table(out, "t", COLS, [[NAME, "1234.57x", PLAN]])
    text = buf.getvalue()
    assert "┃" in text and "…" not in text  # still a table on a terminal
    kernel = "".join(line.split("│")[1].strip() for line in text.splitlines() if "│" in line)
    assert kernel == NAME  # folded over lines, every character kept


def test_cells_that_look_like_markup_are_printed_as_written() -> None:
    from rich.markup import escape

    name, plan = "gather[0]_" + "k" * 70, "[bold]keep[/] the [red] brackets 全角の名前"
    for wide in (False, True):  # the plain list (80 columns), the table (200)
        out, buf = _console(200 if wide else 80)
        render_table.print_table(out, escape("t [x]"), COLS, [[escape(name), "1x", escape(plan)]])
        text = buf.getvalue()
        assert_whole(text, name, plan, "t [x]")
        assert ("┃" in text) is wide

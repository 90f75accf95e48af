"""What the editor shows of the GPU facts (issue 21) and the shapes checked (issue 22): the
device lens and its tooltip, the hover's device section (kernel text in code spans or escaped),
and the diagnostics (won't compile / won't launch: error; spills: warning; a kernel the
interpreter cannot run: information). Results are hand-made with the contract's metrics."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.textdiff import split_lines
from accelopt_server import device_present, present
from accelopt_server.diagnostics import profile_diagnostic, spill_diagnostics
from accelopt_server.markdown import escape
from tests.gpu_metrics import (
    BUDGET_WHY,
    SUMMARY,
    cannot_launch_result,
    does_not_compile_result,
    gpu_metrics,
    not_timed_result,
    ok_result,
    searched_metrics,
    spilling_metrics,
)

SOFTMAX = Path(__file__).resolve().parents[2] / "examples" / "triton" / "softmax.py"


def softmax():
    kf = parse_kernel_file(SOFTMAX.read_text(), str(SOFTMAX))
    return kf, kf.kernel("softmax_kernel")


def test_device_lens_title_and_tooltip() -> None:
    title, tooltip = device_present.device_lens(ok_result(), "softmax_kernel")
    assert title == "AccelOpt · sm_90: 44 regs · occupancy 50% (registers)"
    lines = tooltip.splitlines()
    assert lines[0] == "softmax_kernel compiled for H100 SXM5 (sm_90)"
    assert lines[1].startswith("[BLOCK_SIZE=64, num_warps=4, num_stages=3] 44 registers/thread")
    assert lines[-1] == SUMMARY
    assert device_present.device_lens(ok_result({}), "softmax_kernel") is None


def test_profile_lens_tooltip_says_how_far_the_result_reaches() -> None:
    assert device_present.profile_tooltip(ok_result()) == SUMMARY
    assert device_present.profile_tooltip(ok_result({})) is None
    tip = device_present.profile_tooltip(not_timed_result())
    assert tip.splitlines()[0].startswith("not timed: the CPU interpreter cannot run")
    assert present.lens_summary(not_timed_result()) == (
        "not timed: the CPU interpreter cannot run it · time it on a GPU target"
    )


def test_hover_has_every_fact_per_kernel_with_kernel_text_in_code_spans() -> None:
    _, kernel = softmax()
    text = present.kernel_hover(kernel, ok_result(), 1, 1, "_memory_", None)
    assert "**GPU facts** of `softmax_kernel` on H100 SXM5 (`sm_90`)" in text
    assert (
        "- `BLOCK_SIZE=64, num_warps=4, num_stages=3` · grid `16×1×1`: 44 registers/thread" in text
    )
    assert "no spills" in text and "shared memory 0 B/block" in text and "128 threads/block" in text
    assert "limited by registers" in text
    assert "  - SASS: tensor cores: none · global loads: 4 × 128-bit, 0 narrower" in text
    assert "cp.async (LDGSTS): 0 · TMA (UTMALDG): 0 · local memory: STL 0, LDL 0" in text
    assert f"**Inputs:** {escape(SUMMARY)}" in text
    assert "- checked on `x[1] 64→63, x × 63.4 (large), x row-padded` (`x: 16×63`)" in text


def test_hover_says_where_a_fresh_profiles_time_went() -> None:
    _, kernel = softmax()
    metrics = dict(gpu_metrics(), phases_s={"start": 0.2, "correctness": 30.5, "timing": 9.25})
    result = ok_result(metrics)
    result.eval_s = 41.0
    text = present.kernel_hover(kernel, result, 1, 1, "_memory_", None)
    assert (
        "Evaluated in 41.00 s: worker 1.05 · start 0.20 · correctness 30.50 · timing 9.25." in text
    )
    result.cached = True  # the cache's verdict: its phases were another evaluation's
    assert "Evaluated in" not in present.kernel_hover(kernel, result, 1, 1, "_memory_", None)


def test_hover_escapes_what_the_kernel_and_the_compiler_wrote() -> None:
    metrics = gpu_metrics(config="BLOCK_`M`=64, *num_warps*=4")
    metrics["derived_inputs"]["skipped"] = [{"name": "x[0] 16→20", "why": "ref <b>raises</b> *x*"}]
    metrics["not_timed"] = "the CPU interpreter cannot run this kernel (a_b `c` [link](x))"
    text = device_present.device_markdown(ok_result(metrics), "softmax_kernel")
    assert "- ``BLOCK_`M`=64, *num_warps*=4`` ·" in text
    assert "- skipped `x[0] 16→20`: ref \\<b\\>raises\\</b\\> \\*x\\*" in text
    assert "(a\\_b \\`c\\` \\[link\\](x))" in text
    assert "<b>" not in text and "[link](x)" not in text


SEARCH_LINE = (
    "search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls; found a disagreement "
    "(2.1 s)"
)
FOUND = "x 3×5 = [[0.0, -1e-45, *2*], [inf, 1.0, 1.0]]: max abs error 7.5 `x`"


def test_lenses_count_what_was_left_to_the_search_and_the_search_itself() -> None:
    result = ok_result(searched_metrics(FOUND))
    _, tooltip = device_present.device_lens(result, "softmax_kernel")
    # counts only: no derivation's name, no counterexample
    assert tooltip.splitlines()[-2:] == [SUMMARY + " · 3 left to the search", SEARCH_LINE]
    assert device_present.profile_tooltip(result) == (
        f"{SUMMARY} · 3 left to the search\n{SEARCH_LINE}"
    )
    assert "permuted" not in tooltip and "3×5" not in tooltip


def test_hover_lists_every_deferred_derivation_and_the_search_with_its_counterexample() -> None:
    text = device_present.device_markdown(ok_result(searched_metrics(FOUND)), "softmax_kernel")
    assert f"**Inputs:** {escape(SUMMARY)} · 3 left to the search" in text
    assert (
        f"- left to the search ({escape(BUDGET_WHY)}): `x × -63.4 (sign-flipped scale)`, "
        "`x permuted (1, 0)`"
    ) in text
    assert "of an evaluation): `x on a grid of 0.25 (grid ties)`" in text
    assert f"- {escape(SEARCH_LINE)}" in text
    # the counterexample verbatim in a code span, whatever it holds
    assert f"  - counterexample: `` {FOUND} ``" in text
    assert "  - examples tried: `x 3×5 (ties)`, `x 16×64 (subnormals)`" in text


def test_hover_of_an_older_result_has_no_search() -> None:
    text = device_present.device_markdown(ok_result(), "softmax_kernel")
    assert "search" not in text and "left to" not in text
    assert device_present.profile_tooltip(ok_result()) == SUMMARY


def test_no_device_section_without_device_facts() -> None:
    _, kernel = softmax()
    assert device_present.device_markdown(ok_result({}), "softmax_kernel") == ""
    text = present.kernel_hover(kernel, ok_result({}), 1, 1, "_memory_", None)
    assert "GPU facts" not in text


def _diag_inputs():
    kf, kernel = softmax()
    lines = split_lines(kf.source)
    return kernel, lines, PositionCodec(types.PositionEncodingKind.Utf16)


def test_spills_are_a_warning_on_the_kernel_name() -> None:
    kernel, lines, codec = _diag_inputs()
    assert spill_diagnostics(kernel, ok_result(), lines, codec) == []
    [diag] = spill_diagnostics(kernel, ok_result(spilling_metrics()), lines, codec)
    assert diag.severity == types.DiagnosticSeverity.Warning
    assert diag.code == "spills"
    assert diag.message.startswith("softmax_kernel spills 24 B stored, 24 B loaded on sm_90")
    assert diag.range.start.line == kernel.name_range.start_line - 1


def test_wont_compile_and_wont_launch_are_errors_with_their_own_codes() -> None:
    kernel, lines, codec = _diag_inputs()
    compile_diag = profile_diagnostic(kernel, does_not_compile_result(line=12), lines, codec)
    assert compile_diag.severity == types.DiagnosticSeverity.Error
    assert compile_diag.code == "gpu-compile"
    assert compile_diag.range.start.line == 11
    assert "does not compile for sm_90 (H100 SXM5): tl.dot: K must be >= 16" in compile_diag.message
    launch_diag = profile_diagnostic(kernel, cannot_launch_result(), lines, codec)
    assert launch_diag.severity == types.DiagnosticSeverity.Error
    assert launch_diag.code == "gpu-launch"
    assert "shared memory per block 262,144 B > 232,448 B" in launch_diag.message


def test_a_kernel_the_interpreter_cannot_run_is_information_not_an_error() -> None:
    kernel, lines, codec = _diag_inputs()
    diag = profile_diagnostic(kernel, not_timed_result(), lines, codec)
    assert diag.severity == types.DiagnosticSeverity.Information
    assert diag.code == "not-timed"
    assert diag.message == (
        "softmax_kernel: not timed: the CPU interpreter cannot run this kernel (`.to()` on a "
        "float argument); time it on a GPU target"
    )


def test_a_search_whose_baseline_the_interpreter_cannot_run_says_ranking_needs_a_gpu() -> None:
    from accelopt_core.search import Candidate, SearchReport
    from accelopt_server.features.search import _summary
    from accelopt_server.jobs import SearchJob

    source = SOFTMAX.read_text()
    report = SearchReport(
        path=str(SOFTMAX), kernel_name="softmax_kernel", entry="softmax",
        baseline=Candidate.baseline(source, not_timed_result()), candidates=[],
        original_source=source, target="local", timing="interpreter", proposer="offline",
        stopped_reason="baseline compile_error",
    )  # fmt: skip
    job = SearchJob("job-1", "file:///softmax.py", "softmax_kernel", 1, None, "finished")  # type: ignore[arg-type]
    job.report = report
    assert _summary(job) == (
        "softmax_kernel: not ranked: ranking needs timing on a GPU target; the CPU interpreter "
        "cannot run this kernel (`.to()` on a float argument)"
    )
    report.baseline = Candidate.baseline(source, ok_result())
    assert _summary(job) == "softmax_kernel: no verified improvement (baseline compile_error)"

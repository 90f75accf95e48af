"""What `accelopt profile` and `accelopt optimize` say about the GPU the kernels are compiled
for (issue 21) and the shapes a result was checked on (issue 22), and the `accelopt.gpu`
setting on the host side: the `--gpu` flag, the request, the evaluation cache key.

The results are hand-made with the metrics of the data contract (tests/gpu_metrics.py). The
end-to-end tests run the real CLI in subprocesses on the real softmax example: a first real
profile fills the evaluation cache, whose verdict is then replaced by the hand-made one, so the
next run is served it through the real cache path.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from accelopt_cli import render
from accelopt_cli.main import build_parser, effective_settings_for
from accelopt_core.evaluation import Evaluator
from accelopt_core.evaluation.cache import cache_key
from accelopt_core.search.phases import phases_line
from accelopt_core.settings import Settings, load_settings
from tests.cli.test_cli_e2e import SOFTMAX, cli_env, run_cli  # noqa: F401 (fixture)
from tests.gpu_metrics import (
    BUDGET_WHY,
    SUMMARY,
    gpu_metrics,
    not_timed_result,
    ok_result,
    replace_cached_results,
    searched_metrics,
    spilling_metrics,
)


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=250), buf


def test_profile_text_shows_gpu_facts_sass_and_the_shapes_checked() -> None:
    (out, out_buf), (err, err_buf) = _console(), _console()
    render.print_profile(out, err, ok_result(), "softmax.py")
    text = out_buf.getvalue()
    assert "GPU H100 SXM5 (sm_90), compiled ahead of time in 0.41 s" in text
    assert "softmax_kernel [BLOCK_SIZE=64, num_warps=4, num_stages=3] grid 16×1×1: 44 " in text
    assert "occupancy 32/64 warps per SM, 50%, limited by registers" in text
    assert "SASS: tensor cores: none · global loads: 4 × 128-bit, 0 narrower" in text
    assert SUMMARY in text
    assert "checked: x[1] 64→63, x × 63.4 (large), x row-padded (x: 16×63)" in text
    assert err_buf.getvalue() == ""


def test_profile_text_says_where_a_fresh_evaluations_time_went() -> None:
    metrics = dict(gpu_metrics(), phases_s={"start": 0.06, "load": 0.004, "correctness": 1.5})
    metrics["phases_s"].update(derived_inputs=1.25, timing=0.9, gpu_facts=0.02)
    result = ok_result(metrics)
    result.eval_s = 7.0
    (out, out_buf), (err, _) = _console(), _console()
    render.print_profile(out, err, result, "softmax.py")
    lines = out_buf.getvalue().splitlines()
    assert lines[-1] == (  # the worker's share is what the phases leave; under 5 ms is left out
        "evaluated in 7.00 s: worker 3.27 · start 0.06 · correctness 1.50 · derived inputs 1.25 "
        "· timing 0.90 · GPU facts 0.02"
    )
    result.metrics["reference_store"] = {"reused": 0, "made": 13}  # the first: nothing to say
    assert phases_line(result).endswith("GPU facts 0.02")
    result.metrics["reference_store"] = {"reused": 12, "made": 1, "note": "too large"}
    assert phases_line(result).endswith(  # issue 50, item 4: a warm worker's kept references
        "GPU facts 0.02; inputs and references: 12 kept from earlier evaluations, 1 made "
        "(not kept: too large)"
    )
    result.cached = True  # a cached verdict's phases were another run's
    assert phases_line(result) is None
    result.cached, result.metrics = False, gpu_metrics()
    assert phases_line(result) is None


def test_profile_warns_about_spills_once() -> None:
    (out, _), (err, err_buf) = _console(), _console()
    result = ok_result(spilling_metrics())
    result.warnings = ["softmax_kernel: 24 bytes spill stores on sm_90"]  # also the result's
    render.print_profile(out, err, result, "softmax.py")
    assert err_buf.getvalue().splitlines() == [
        "warning: softmax_kernel: 24 bytes spill stores on sm_90"
    ]


def test_a_kernel_the_interpreter_cannot_run_is_headed_not_timed() -> None:
    (out, out_buf), (err, _) = _console(), _console()
    render.print_profile(out, err, not_timed_result(), "liger.py")
    lines = out_buf.getvalue().splitlines()
    assert lines[0] == (
        "liger.py: not timed: the CPU interpreter cannot run this kernel (`.to()` on a float "
        "argument); time it on a GPU target"
    )
    assert lines[1].startswith("interpreter run: compile error (line 12)")
    assert lines[2].startswith("GPU H100 SXM5 (sm_90)")


def test_gpu_flag_overrides_the_setting_and_rejects_unknown_devices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    for command in ("profile", "optimize"):
        args = parser.parse_args([command, "k.py", "--gpu", "A100"])
        effective = effective_settings_for(args)
        assert effective.settings.gpu == "A100"
        assert effective.sources["gpu"] == "command line"
    assert effective_settings_for(parser.parse_args(["profile", "k.py"])).settings.gpu == (
        "H100 SXM5"
    )
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["profile", "k.py", "--gpu", "H800"])
    assert exc.value.code == 2
    assert "invalid choice: 'H800'" in capsys.readouterr().err


def test_the_gpu_setting_reaches_the_request_and_the_cache_key() -> None:
    settings, _ = load_settings({"gpu": "A100"})
    request = Evaluator(None, settings).build_request("src = 1\n", "src = 1\n", "entry")  # type: ignore[arg-type]
    assert request.gpu == "A100"
    none = Evaluator(None, load_settings({"gpu": "none"})[0]).build_request("s\n", "s\n", "e")  # type: ignore[arg-type]
    assert none.gpu is None


def test_a_result_compiled_for_sm_80_is_not_reused_for_sm_90() -> None:
    request = Evaluator(None, Settings()).build_request("src = 1\n", "src = 1\n", "entry")  # type: ignore[arg-type]
    keys = set()
    for gpu in ("A100", "H100 SXM5", None):
        request.gpu = gpu
        keys.add(cache_key(request, "local:cpu"))
    assert len(keys) == 3


# -- end to end: the real CLI, the real cache -------------------------------------------------


@pytest.mark.slow
def test_profile_of_a_kernel_the_interpreter_cannot_run_exits_0_with_device_facts(
    tmp_path: Path,
    cli_env: dict[str, str],  # noqa: F811
) -> None:
    kernel = tmp_path / "softmax.py"
    shutil.copy(SOFTMAX, kernel)
    run_cli("profile", str(kernel), env=cli_env)  # a real verdict, now in the cache
    assert replace_cached_results(Path(cli_env["ACCELOPT_MEMORY_DIR"]), not_timed_result()) >= 1

    text = run_cli("profile", str(kernel), env=cli_env)
    assert text.returncode == 0, text.stderr
    assert "not timed: the CPU interpreter cannot run this kernel" in text.stdout
    assert "time it on a GPU target" in text.stdout
    assert "44 registers/thread" in text.stdout and "(sm_90)" in text.stdout

    as_json = run_cli("profile", str(kernel), "--json", env=cli_env)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["gpu"] == "H100 SXM5"
    assert data["metrics"]["gpu"]["arch"] == "sm_90"
    assert (
        data["metrics"]["derived_inputs"]["used"][0]["name"]
        == "x[1] 64→63, x × 63.4 (large), x row-padded"
    )
    assert data["metrics"]["not_timed"].startswith("the CPU interpreter cannot run")
    # the derived inputs in words and counted by class (issue 52); an older judge's result
    # carries no search and nothing left to it
    assert data["derived"]["summary"] == SUMMARY
    assert sum(data["derived"]["classes"].values()) == 7
    assert data["derived"]["deferred"] == [] and data["derived"]["search"] is None


def _report(baseline_result, candidates=()):
    from accelopt_core.kernelfile import parse_kernel_file
    from accelopt_core.search import Candidate, SearchReport

    source = SOFTMAX.read_text()
    base = Candidate.baseline(source, baseline_result)
    report = SearchReport(
        path=str(SOFTMAX), kernel_name="softmax_kernel", entry="softmax", baseline=base,
        candidates=list(candidates), original_source=source, target="local",
        timing="interpreter", proposer="offline",
    )  # fmt: skip
    return report, parse_kernel_file(source, str(SOFTMAX))


def test_optimize_says_ranking_needs_timing_on_a_gpu_target() -> None:
    (out, out_buf), (err, _) = _console(), _console()
    report, kf = _report(not_timed_result())
    render.print_search_report(out, err, report, kf, "softmax_kernel", str(SOFTMAX))
    text = out_buf.getvalue()
    assert f"inputs: {SUMMARY} (every candidate)" in text
    assert "44 registers/thread" in text
    assert (
        "not ranked: ranking needs timing on a GPU target; the CPU interpreter cannot run this "
        "kernel (`.to()` on a float argument)." in text
    )


def test_search_report_shows_the_best_candidate_s_gpu_facts() -> None:
    from accelopt_core.search import Candidate

    (out, out_buf), (err, _) = _console(), _console()
    report, kf = _report(ok_result(latency_ms=2.0))
    best = Candidate("c1", kf.source + "# faster\n", report.baseline.id, "bigger blocks", "",
                     ok_result(latency_ms=1.0), 1)  # fmt: skip
    best.speedup, best.retimed = 2.0, True
    report.candidates = [best]
    render.print_search_report(out, err, report, kf, "softmax_kernel", str(SOFTMAX))
    text = out_buf.getvalue()
    assert "best candidate's profile:" in text
    assert "  GPU H100 SXM5 (sm_90), compiled ahead of time in 0.41 s" in text
    assert "ranking needs timing" not in text


# -- issue 52: checks by class, derivations left to the search, the search ---------------------

SEARCHED = (
    "search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls; no disagreement"
)


def test_profile_text_counts_by_class_and_lists_what_was_left_to_the_search() -> None:
    (out, out_buf), (err, _) = _console(), _console()
    render.print_profile(out, err, ok_result(searched_metrics()), "softmax.py")
    lines = out_buf.getvalue().splitlines()
    assert f"{SUMMARY} · 3 left to the search" in lines
    assert (
        f"  left to the search ({BUDGET_WHY}): x × -63.4 (sign-flipped scale) · x permuted (1, 0)"
        in lines
    )
    assert any(line.startswith(f"  {SEARCHED}") for line in lines)
    assert "  examples tried: x 3×5 (ties) · x 16×64 (subnormals)" in lines


def test_optimize_lists_the_baseline_s_deferred_derivations_and_the_best_s_search() -> None:
    from accelopt_core.search import Candidate

    base = searched_metrics()
    del base["derived_inputs"]["search"]  # the search runs on candidates, not the baseline
    report, kf = _report(ok_result(base, latency_ms=2.0))
    best = Candidate("c1", kf.source + "# faster\n", report.baseline.id, "bigger blocks", "",
                     ok_result(searched_metrics(), latency_ms=1.0), 1)  # fmt: skip
    best.speedup, best.retimed = 2.0, True
    report.candidates = [best]
    (out, out_buf), (err, _) = _console(), _console()
    render.print_search_report(out, err, report, kf, "softmax_kernel", str(SOFTMAX))
    lines = out_buf.getvalue().splitlines()
    assert f"inputs: {SUMMARY} · 3 left to the search (every candidate)" in lines
    assert (
        f"  left to the search ({BUDGET_WHY}): x × -63.4 (sign-flipped scale) · x permuted (1, 0)"
        in lines
    )
    profile = lines[lines.index("best candidate's profile:") :]
    assert any(line.startswith(f"  {SEARCHED}") for line in profile)


def test_a_long_list_reads_whole_in_a_log() -> None:
    """Every name on one line however narrow the console: a CI log greps whole lines."""
    metrics = searched_metrics()
    names = [f"x{i} × -1e30 (sign-flipped scale near the dtype's limit)" for i in range(30)]
    metrics["derived_inputs"]["deferred"] = [{"name": n, "why": BUDGET_WHY} for n in names]
    buf = io.StringIO()
    narrow = Console(file=buf, width=80)  # a pipe: not a terminal
    report, kf = _report(ok_result(metrics))
    render.print_search_report(narrow, narrow, report, kf, "softmax_kernel", str(SOFTMAX))
    assert (
        f"  left to the search ({BUDGET_WHY}): {' · '.join(names)}" in buf.getvalue().splitlines()
    )
    assert f"inputs: {SUMMARY} · 30 left to the search (every candidate)" in buf.getvalue()
    buf = io.StringIO()
    render.print_profile(Console(file=buf, width=80), narrow, ok_result(metrics), "softmax.py")
    assert (
        f"  left to the search ({BUDGET_WHY}): {' · '.join(names)}" in buf.getvalue().splitlines()
    )

"""Issue 13 end to end through the ``accelopt`` CLI: the test package ``minikern`` (a kernel
library laid out as real ones are: ``ops/`` modules with relative imports of ``utils``, an
autotuned kernel, an autograd Function, harnesses in ``benchmarks/``) and a KernelBench problem,
profiled and optimized as a user runs them, in subprocesses, from a working directory outside
the package, with the real worker under the Triton interpreter on CPU.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.byok.conftest import CLI, copy_project, make_cli, snapshot

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KERNELBENCH = ROOT / "tests" / "kernelfile" / "kernelbench"
SHAPES = [{"M": 4, "N": 64}, {"M": 8, "N": 128}, {"M": 16, "N": 96}]
_SEARCH = ("-T", "1", "-B", "1", "-K", "1")


def _assert_three_shapes(report: dict) -> None:
    """The report of a bench harness with BENCH["shapes"]: all three shapes checked, the last
    one held out of timing."""
    assert report["status"] == "ok", report["message"]
    assert "3 shapes" in report["message"] and "held out" in report["message"]
    rows = report["metrics"]["shapes"]
    assert [row["shape"] for row in rows] == SHAPES
    assert [row["timed"] for row in rows] == [True, True, False]
    assert all(row["latency_ms"] > 0 for row in rows[:2])


_GOOD_DX = "    dx = rstd * g - x * (rstd * rstd * rstd) * (tl.sum(g * x, axis=0) / n_cols)\n"

_CONFIGS = [
    ('triton.Config({"BLOCK_SIZE": 64}, num_warps=2)', "64", "True"),
    ('triton.Config({"BLOCK_SIZE": 128}, num_warps=4)', "128", "True"),
    ('triton.Config({"BLOCK_SIZE": 256}, num_warps=4)', "256", "False"),
]


def _break_third_config(path: Path) -> None:
    """Give ``_scale_shift_kernel`` a ``WITH_SHIFT`` meta-parameter that only the third
    autotune config turns off (so only that config computes ``x * scale`` without the shift)."""
    text = path.read_text()
    for old, block, flag in _CONFIGS:
        new = f'triton.Config({{"BLOCK_SIZE": {block}, "WITH_SHIFT": {flag}}}, num_warps='
        assert old in text
        text = text.replace(old, new + old.rsplit("num_warps=", 1)[1])
    params = "    BLOCK_SIZE: tl.constexpr,\n):"
    store = "    tl.store(Y + offsets, x * scale + shift, mask=mask)"
    assert params in text and store in text
    text = text.replace(params, "    BLOCK_SIZE: tl.constexpr,\n    WITH_SHIFT: tl.constexpr,\n):")
    shifted = "    y = x * scale\n    if WITH_SHIFT:\n        y = y + shift\n"
    text = text.replace(store, shifted + "    tl.store(Y + offsets, y, mask=mask)")
    path.write_text(text)


@dataclass
class Profiled:
    """One ``accelopt profile --json`` run over the package's harnesses and two broken copies
    (the files evaluated two at a time, on the CLI's warm workers): each file's report by
    name, the run's stderr, and snapshots of the package trees before the run."""

    reports: dict[str, dict]
    err: str
    pkg: Path
    before: dict[str, dict[str, str]]


@pytest.fixture(scope="module")
def profiled(
    module_pkg: Path, module_cli: CLI, tmp_path_factory: pytest.TempPathFactory
) -> Profiled:
    """The harness files of the package, a copy whose backward kernel drops dX's second term
    and a copy whose third autotune config drops the shift, profiled in one run."""
    no_second_term = copy_project(tmp_path_factory.mktemp("no-second-term"))
    kernel = no_second_term / "ops" / "rms_norm.py"
    assert _GOOD_DX in kernel.read_text()
    kernel.write_text(kernel.read_text().replace(_GOOD_DX, "    dx = rstd * g\n"))
    third_config = copy_project(tmp_path_factory.mktemp("third-config"))
    _break_third_config(third_config / "ops" / "scale_shift.py")
    files = {
        "rms_norm": module_pkg / "benchmarks" / "bench_rms_norm.py",
        "scale_shift": module_pkg / "benchmarks" / "bench_scale_shift.py",
        "backward": module_pkg / "benchmarks" / "bench_rms_norm_backward.py",
        "wrong_backward": no_second_term / "benchmarks" / "bench_rms_norm_backward.py",
        "wrong_config": third_config / "benchmarks" / "bench_scale_shift.py",
    }
    trees = (module_pkg, third_config)
    before = {str(pkg): snapshot(pkg.parent) for pkg in trees}
    rc, reports, err = module_cli.json("profile", *files.values(), timeout=600)
    assert rc == 1, err  # the two broken copies are incorrect
    assert [r["path"] for r in reports] == [str(p) for p in files.values()]
    return Profiled(dict(zip(files, reports, strict=True)), err, module_pkg, before)


def test_profile_harness_file_and_kernel_module_with_harness_agree(
    profiled: Profiled, module_cli: CLI
) -> None:
    module_pkg = profiled.pkg
    bench = module_pkg / "benchmarks" / "bench_rms_norm.py"
    report = profiled.reports["rms_norm"]
    _assert_three_shapes(report)
    assert report["timing"] == "interpreter" and report["target"] == "local"
    # the kernel module the harness measures, and what is shipped with it
    assert report["module"] == str(module_pkg / "ops" / "rms_norm.py")
    assert report["module_name"] == "minikern.ops.rms_norm"
    assert report["harness"] == str(bench) and report["kernelbench"] is None
    assert {"minikern/utils.py", "minikern/ops/rms_norm.py", "minikern/__init__.py"} <= set(
        report["closure"]
    )
    assert "minikern/benchmarks/bench_scale_shift.py" not in report["closure"]

    rc, same, err = module_cli.json(
        "profile", module_pkg / "ops" / "rms_norm.py", "--harness", bench
    )
    assert rc == 0, err
    _assert_three_shapes(same)
    assert (same["status"], same["message"]) == (report["status"], report["message"])
    # no __pycache__, no temp file in the package
    assert snapshot(module_pkg.parent) == profiled.before[str(module_pkg)]


def test_autotuned_kernel_reports_the_config_it_ran(profiled: Profiled) -> None:
    report = profiled.reports["scale_shift"]
    assert report["status"] == "ok", report["message"]
    autotune = report["metrics"]["autotune"]
    assert list(autotune) == ["_scale_shift_kernel"]
    assert "BLOCK_SIZE=64" in autotune["_scale_shift_kernel"]
    assert "config 1 of 3" in autotune["_scale_shift_kernel"]
    assert "_scale_shift_kernel" in report["message"]


def test_autograd_function_apply_entry_checks_forward_and_backward(profiled: Profiled) -> None:
    _assert_three_shapes(profiled.reports["backward"])
    # the backward kernel really is checked: a dX that drops its second term is caught
    wrong = profiled.reports["wrong_backward"]
    assert wrong["status"] == "incorrect", wrong["message"]
    assert "shape M=4, N=64" in wrong["message"]


def test_a_wrong_autotune_config_is_named(profiled: Profiled) -> None:
    report = profiled.reports["wrong_config"]
    assert report["status"] == "incorrect", report["message"]
    assert "autotune config 3 of 3" in report["message"]
    pkg = Path(report["module"]).parents[1]
    assert snapshot(pkg.parent) == profiled.before[str(pkg)]


def _unchanged_except(before: dict[str, str], after: dict[str, str], rel: str) -> None:
    assert before.keys() == after.keys()
    changed = [k for k in before if before[k] != after[k]]
    assert changed in ([], [rel]), changed


def test_optimize_defaults_to_the_launched_kernel_and_never_writes_the_harness(
    tmp_path: Path,
) -> None:
    cli = make_cli(tmp_path / "cli")
    pkg = copy_project(tmp_path / "project")
    before = snapshot(pkg.parent)
    bench = pkg / "benchmarks" / "bench_rms_norm.py"
    proc = cli.run("optimize", bench, "--write", "--json", *_SEARCH, "-N", "1")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # the kernel the entry launches, never the @triton.jit device helper it calls
    assert report["kernel"] == "_rms_norm_forward_kernel"
    assert report["path"] == str(pkg / "ops" / "rms_norm.py")
    assert report["baseline"]["correct"] and report["proposer"] == "offline"
    after = snapshot(pkg.parent)
    _unchanged_except(before, after, "minikern/ops/rms_norm.py")
    if report["candidates"]:  # a verified improvement: written into the kernel module only
        best = report["candidates"][0]["source"]
        assert (pkg / "ops" / "rms_norm.py").read_text() == best
        assert "wrote the best candidate" in proc.stderr
    else:  # nothing to write: nothing written, and no claim that something was
        assert after == before
        assert "wrote" not in proc.stderr


def test_optimize_write_rewrites_the_autotuned_kernel_module_only(tmp_path: Path) -> None:
    cli = make_cli(tmp_path / "cli")
    pkg = copy_project(tmp_path / "project")
    before = snapshot(pkg.parent)
    bench = pkg / "benchmarks" / "bench_scale_shift.py"
    proc = cli.run("optimize", bench, "--write", *_SEARCH, "-N", "1")
    assert proc.returncode == 0, proc.stderr
    after = snapshot(pkg.parent)
    _unchanged_except(before, after, "minikern/ops/scale_shift.py")
    assert "_scale_shift_kernel" in proc.stdout
    if "no verified improvement found" in proc.stdout:
        assert after == before and "wrote" not in proc.stderr
        return
    # under the interpreter fewer, bigger blocks are faster: a larger-block config wins
    assert after != before
    assert f"to {pkg / 'ops' / 'scale_shift.py'}" in proc.stderr.replace("\n", "")
    written = (pkg / "ops" / "scale_shift.py").read_text()
    assert "from ..utils import ensure_contiguous" in written and "@triton.autotune" in written
    rc, report, err = cli.json("profile", bench)  # the rewritten package still imports and runs
    assert rc == 0 and report["status"] == "ok", err + report["message"]
    assert not report["cached"]


def test_editing_a_helper_module_invalidates_the_evaluation_cache(tmp_path: Path) -> None:
    cli = make_cli(tmp_path / "cli")
    pkg = copy_project(tmp_path / "project")
    bench = pkg / "benchmarks" / "bench_rms_norm.py"
    first = cli.json("profile", bench)[1]
    second = cli.json("profile", bench)[1]
    assert first["status"] == second["status"] == "ok"
    assert not first["cached"] and second["cached"]

    utils = pkg / "utils.py"
    utils.write_text(utils.read_text() + "\n# an edit to a helper module the kernel imports\n")
    third = cli.json("profile", bench)[1]
    assert third["status"] == "ok" and not third["cached"]

    # a change of behaviour in the helper reaches the evaluation (no stale copy of utils)
    text = utils.read_text()
    assert "MAX_FUSED_SIZE = 65536 // 4\n" in text
    utils.write_text(text.replace("MAX_FUSED_SIZE = 65536 // 4\n", "MAX_FUSED_SIZE = 32\n"))
    rc, fourth, _ = cli.json("profile", bench)
    assert rc == 1 and not fourth["cached"]
    assert fourth["status"] == "runtime_error", fourth["message"]
    assert "maximum fused size 32" in fourth["message"]


# ---------------------------------------------------------------------------------------------
# KernelBench
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernelbench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the KernelBench problem, its ModelNew and a wrong ModelNew."""
    folder = tmp_path_factory.mktemp("kernelbench")
    for name in ("problem_rms_scale.py", "new_model.py"):
        shutil.copy(KERNELBENCH / name, folder / name)
    good = "tl.store(out_ptr + row * n_cols + cols, x / rms * w + b, mask=mask)"
    text = (folder / "new_model.py").read_text()
    assert good in text
    (folder / "wrong_model.py").write_text(text.replace(good, good.replace("+ b", "- b")))
    return folder


def test_kernelbench_problem_as_harness(kernelbench: Path, module_cli: CLI) -> None:
    before = snapshot(kernelbench)
    problem = kernelbench / "problem_rms_scale.py"
    models = [kernelbench / "new_model.py", kernelbench / "wrong_model.py"]
    rc, (report, wrong), err = module_cli.json("profile", *models, "--harness", problem)
    assert rc == 1, err  # each ModelNew measured by the problem: the wrong one is incorrect
    assert report["path"] == str(models[0]) and wrong["path"] == str(models[1])
    assert report["status"] == "ok", report["message"]
    assert report["max_abs_error"] < 1e-2  # KernelBench's atol
    assert report["kernelbench"] == "problem_rms_scale" and report["harness"] == str(problem)
    assert wrong["status"] == "incorrect", wrong["message"]
    assert wrong["kernelbench"] == "problem_rms_scale" and "mismatch" in wrong["message"]
    assert snapshot(kernelbench) == before


def test_a_kernelbench_problem_alone_says_to_pass_model_new(
    kernelbench: Path, module_cli: CLI
) -> None:
    proc = module_cli.run("profile", kernelbench / "problem_rms_scale.py")
    assert proc.returncode == 1
    assert "--harness problem_rms_scale.py" in proc.stderr.replace("\n", "")


def test_kernelbench_optimize_report_names_the_problem(kernelbench: Path, module_cli: CLI) -> None:
    problem = kernelbench / "problem_rms_scale.py"
    proc = module_cli.run(
        "optimize",
        kernelbench / "new_model.py",
        "--harness",
        problem,
        "--json",
        *_SEARCH,
        "-N",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["kernelbench"] == "problem_rms_scale" and report["harness"] == str(problem)
    assert report["kernel"] == "rms_scale_kernel" and report["entry"] == "ModelNew"
    assert report["baseline"]["correct"]
    human = module_cli.run("profile", kernelbench / "new_model.py", "--harness", problem)
    assert human.returncode == 0, human.stderr
    assert "KernelBench problem problem_rms_scale" in human.stdout + human.stderr

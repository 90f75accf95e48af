"""KernelBench-format problems as published (issue 24), end to end on CPU: ``accelopt
profile`` and ``accelopt optimize`` on problem files named as KernelBench names them (leading
digits, a trailing underscore, a dash), with their published sizes (far too large for the CPU
interpreter: the target scales them and every output says so), ``get_init_inputs`` with
parameters, models with weights, 2-D, 3-D and 4-D inputs; and binding errors that never print
a traceback.

The problems and the ``ModelNew`` solutions in ``problems/`` and ``solutions/`` were written
for these tests. The LLM of ``optimize`` is tests/llm_double.py: a TEST DOUBLE standing in for
the paid OpenAI-compatible service, spoken to by the real openai client.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.byok.conftest import CLI, make_cli, snapshot
from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
PROBLEMS = HERE / "problems"
SOLUTIONS = HERE / "solutions"
SCALED = re.compile(r"sizes scaled for the CPU interpreter: (?P<pairs>.+)")


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> CLI:
    return make_cli(tmp_path_factory.mktemp("kernelbench"))


def _scaled(report: dict) -> dict[str, list[int]]:
    result = report["baseline"]["result"] if "baseline" in report else report
    return result["metrics"]["sizes"]


@pytest.mark.parametrize(
    ("solution", "problem", "published"),
    [
        ("new_relu.py", "19_relu_like.py", {"batch_size": 4096, "dim": 393216}),
        ("new-softmax.py", "23_softmax-rows.py", {"batch_size": 4096, "dim": 393215}),
        ("36_rmsnorm_new.py", "36_RMSNorm_.py", {"batch_size": 112, "features": 64, "dim2": 511}),
        ("new_scale_bias.py", "40_scale_bias_3d.py", {"seq_len": 1000, "hidden": 4096}),
    ],
)
def test_profile_scales_published_sizes_and_says_so(
    cli: CLI, solution: str, problem: str, published: dict[str, int]
) -> None:
    before = snapshot(HERE)
    rc, report, err = cli.json("profile", SOLUTIONS / solution, "--harness", PROBLEMS / problem)
    assert rc == 0, err
    result = report  # profile's JSON: the result's fields at the top
    assert result["status"] == "ok", result["message"]
    assert report["kernelbench"] == Path(problem).stem
    sizes = result["metrics"]["sizes"]
    for name, value in published.items():
        old, new = sizes[name]
        assert old == value and 0 < new < value, (name, sizes[name])
        assert (new % 16 == 0) == (value % 16 == 0) or value % 16 == 0  # not a multiple stays so
    line = next(w for w in result["warnings"] if SCALED.match(w))
    for name, (old, new) in sizes.items():
        assert f"{name} {old}\u2192{new}" in line
    assert snapshot(HERE) == before  # nothing written next to the problems


def test_human_output_names_the_scaled_sizes(cli: CLI) -> None:
    proc = cli.run("profile", SOLUTIONS / "new_relu.py", "--harness", PROBLEMS / "19_relu_like.py")
    assert proc.returncode == 0, proc.stderr
    assert (
        "sizes scaled for the CPU interpreter: batch_size 4096\u2192" in proc.stdout + proc.stderr
    )
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_pinned_size_is_kept_and_published_turns_scaling_off(cli: CLI, tmp_path: Path) -> None:
    config = tmp_path / "accelopt.toml"
    config.write_text('[evaluation]\nsizes = "batch_size=8"\n', "utf-8")
    env = dict(cli.env, ACCELOPT_CONFIG=str(config))
    pinned = CLI(cli.cwd, env)
    rc, report, err = pinned.json(
        "profile", SOLUTIONS / "new_relu.py", "--harness", PROBLEMS / "19_relu_like.py"
    )
    assert rc == 0, err
    sizes = report["metrics"]["sizes"]
    assert sizes["batch_size"] == [4096, 8] and sizes["dim"][0] == 393216
    assert any(w.startswith("sizes pinned: batch_size 4096\u21928") for w in report["warnings"])


def test_optimize_a_kernelbench_problem_with_the_llm_double(cli: CLI) -> None:
    solution = SOLUTIONS / "36_rmsnorm_new.py"
    original = solution.read_text("utf-8")
    faster = original.replace(
        "offs = b * C * HW + c[:, None] * HW + p[None, :]",
        "offs = (b * C + c[:, None]) * HW + p[None, :]",
    )
    wrong = original.replace("x / rms[None, :] * w[:, None]", "x / rms[None, :]")

    assert faster != original and wrong != original

    def script(req: RecordedRequest) -> str | None:
        return "Title: fold the offset\nOne multiply fewer." if req.role == "planner" else None

    with LLMDouble(script=script) as double:
        double.queue(
            text(f"```python\n{faster}```\n"), text(f"```python\n{wrong}```\n"), role="executor"
        )
        env = dict(cli.env, **{TEST_API_KEY_ENV: TEST_API_KEY})
        rc, report, err = CLI(cli.cwd, env).json(
            "optimize", solution, "--harness", PROBLEMS / "36_RMSNorm_.py",
            "-T", "1", "-B", "1", "-N", "1", "-K", "2",
            "--llm-base-url", double.base_url, "--llm-model", "double-model",
            "--api-key-env", TEST_API_KEY_ENV,
        )  # fmt: skip
    assert rc == 0, err
    assert report["kernelbench"] == "36_RMSNorm_"
    assert report["baseline"]["result"]["status"] == "ok"
    assert report["failures"].get("incorrect") == 1, report["failures"]
    assert _scaled(report)["features"][0] == 64
    assert solution.read_text("utf-8") == original  # no --write


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["19_relu_like.py"], ["--harness 19_relu_like.py", "ModelNew"]),
        (["missing.py"], ["no such file"]),
        (["new_relu.py", "--harness", "missing_problem.py"], ["no such file", "harness"]),
        (["19_relu_like.py", "--harness", "19_relu_like.py"], ["defines no ModelNew"]),
        (["new_relu.py", "--harness", "new-softmax.py"], ["has no harness"]),
    ],
)
def test_binding_errors_are_located_messages_never_tracebacks(
    cli: CLI, args: list[str], words: list[str]
) -> None:
    where = {p.name: p for p in [*PROBLEMS.iterdir(), *SOLUTIONS.iterdir()]}
    argv = [str(where.get(a, Path(a))) if not a.startswith("-") else a for a in args]
    for command in ("profile", "optimize"):
        proc = cli.run(command, *argv)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0
        assert "Traceback" not in out, out
        assert re.search(r"error:.*:\d+:\d+: ", out), out
        for word in words:
            assert word in out, out

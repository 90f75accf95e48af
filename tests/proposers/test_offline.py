"""The offline proposer (accelopt_core.proposers.offline): launch-parameter plans, exact-range rewrites."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from accelopt_core.kernelfile import load_kernel_file, parse_kernel_file
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Plan, ProposalContext, Proposer
from accelopt_core.proposers.offline import (
    Change,
    OfflineProposer,
    allowed_values,
    apply_changes,
    find_tunables,
)
from accelopt_core.textdiff import minimal_hunks, split_lines

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "triton"

EXPECTED = {
    ("softmax", "softmax_kernel"): ["BLOCK_SIZE", "num_warps"],
    ("elementwise", "add_gelu_kernel"): ["BLOCK_SIZE", "num_warps"],
    ("rmsnorm", "rmsnorm_kernel"): ["BLOCK_SIZE", "num_warps"],
    ("matmul", "matmul_kernel"): ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"],
    ("reduction", "partial_sum_kernel"): [
        "BLOCK_SIZE",
        "num_warps",
        "FINAL_BLOCK (final_sum_kernel)",
        "num_warps (final_sum_kernel)",
    ],
}


def run(coro):
    """Run one proposer coroutine to completion."""
    return asyncio.run(coro)


def ctx_for(source: str, kernel: str, path: str = "k.py", timing: str = "cuda") -> ProposalContext:
    """A context whose baseline and parent were timed by ``timing`` (GPU timing by default:
    every launch parameter is proposable)."""
    kf = parse_kernel_file(source, path)
    result = EvalResult(status="ok", latency_ms=1.0, timing=timing)  # type: ignore[arg-type]
    return ProposalContext(
        original=kf,
        kernel_name=kernel,
        entry=kf.entry_for(kernel) or "",
        parent_source=source,
        parent_result=result,
        baseline_result=result,
    )


def example(name: str) -> str:
    return (EXAMPLES / f"{name}.py").read_text()


def literal_at(source: str, param) -> str:
    line = split_lines(source)[param.range.start_line - 1]
    return line[param.range.start_col : param.range.end_col]


@pytest.mark.parametrize(("key", "labels"), list(EXPECTED.items()), ids=lambda v: str(v))
def test_tunables_found_for_each_example(key: tuple[str, str], labels: list[str]) -> None:
    name, kernel = key
    source = example(name)
    params = find_tunables(source, kernel)
    assert [p.label for p in params] == labels
    for p in params:
        assert literal_at(source, p) == str(p.value)
        assert p.value in (1, 16, 32, 64)  # the naive baselines' values
    by_name = {p.label: p for p in params}
    if name in ("softmax", "rmsnorm", "matmul"):
        assert by_name["num_warps"].origin == "launch"
        first_block = next(p for p in params if p.kind == "block")
        assert first_block.origin == "assignment"  # `BLOCK_SIZE = 16` in the launcher
    if name == "elementwise":
        assert by_name["BLOCK_SIZE"].origin == "launch"  # `BLOCK_SIZE=32` in the launch
    assert all(p.uses_dot == (name == "matmul") for p in params)


@pytest.mark.parametrize("key", list(EXPECTED), ids=lambda v: str(v))
def test_rewrite_changes_only_the_literal(key: tuple[str, str]) -> None:
    name, kernel = key
    source = example(name)
    for p in find_tunables(source, kernel):
        new_value = allowed_values(p)[-1]
        out = apply_changes(source, [Change(p, new_value)])
        lines = split_lines(source)
        start = sum(len(x) for x in lines[: p.range.start_line - 1]) + p.range.start_col
        end = sum(len(x) for x in lines[: p.range.end_line - 1]) + p.range.end_col
        assert out == source[:start] + str(new_value) + source[end:]
        hunks = minimal_hunks(source, out)
        assert len(hunks) == 1 and hunks[0][0].start_line == p.range.start_line
        ast.parse(out)
        again = {q.key: q.value for q in find_tunables(out, kernel)}
        assert again[p.key] == new_value


def test_plan_bounds_and_preference() -> None:
    for (name, kernel), _ in EXPECTED.items():
        source = example(name)
        proposer = OfflineProposer(seed=3)
        plans = run(proposer.plan(ctx_for(source, kernel), 100))
        assert plans, name
        titles = [p.title for p in plans]
        assert len(titles) == len(set(titles))
        for plan in plans:
            (change,) = plan.data["changes"]
            new, label = change["new"], change["label"]
            assert plan.title == f"{label} {change['old']} -> {new}"
            assert change["old"] != new
            if label.startswith("num_warps"):
                assert new in (1, 2, 4, 8, 16)
            elif label.startswith("num_stages"):
                assert 1 <= new <= 5
            else:
                assert new & (new - 1) == 0 and 16 <= new <= 8192
                if name == "matmul":
                    assert new <= 128
        # The first plans move by 8x (3 doublings), the biggest preferred step.
        first = plans[0].data["changes"][0]
        if not first["label"].startswith("num_stages"):
            assert first["new"] == 8 * first["old"]


def test_plans_are_deterministic_and_never_repeat_on_a_parent() -> None:
    source = example("softmax")
    ctx = ctx_for(source, "softmax_kernel")
    a, b = OfflineProposer(seed=7), OfflineProposer(seed=7)
    first_a = [p.title for p in run(a.plan(ctx, 3))]
    first_b = [p.title for p in run(b.plan(ctx, 3))]
    assert first_a == first_b and len(first_a) == 3
    # Both parameters are covered round-robin in the first plans.
    assert {t.split()[0] for t in first_a[:2]} == {"BLOCK_SIZE", "num_warps"}
    seen = set(first_a)
    total = len(allowed_values(find_tunables(source, "softmax_kernel")[0])) + 4  # + warps
    while True:
        more = [p.title for p in run(a.plan(ctx, 4))]
        if not more:
            break
        assert not seen & set(more)
        seen |= set(more)
    assert len(seen) == total
    # A different parent (one change applied) gets fresh plans again.
    child = apply_changes(source, [Change(find_tunables(source, "softmax_kernel")[1], 4)])
    assert run(a.plan(ctx_for(child, "softmax_kernel"), 2))


def test_implement_first_sample_exact_others_add_one_change() -> None:
    source = example("matmul")
    ctx = ctx_for(source, "matmul_kernel")
    proposer = OfflineProposer(seed=1)
    (plan,) = run(proposer.plan(ctx, 1))
    samples = run(proposer.implement(ctx, plan, 4))
    assert len(samples) == 4
    assert all(s.source is not None and s.error is None for s in samples)
    assert len({s.source for s in samples}) == 4
    (spec,) = plan.data["changes"]
    params = {p.key: p for p in find_tunables(source, "matmul_kernel")}
    target = params[(spec["launcher"], spec["kernel"], spec["name"])]
    assert samples[0].source == apply_changes(source, [Change(target, spec["new"])])
    for s in samples[1:]:
        ast.parse(s.source)
        now = {p.key: p.value for p in find_tunables(s.source, "matmul_kernel")}
        changed = [k for k, p in params.items() if now[k] != p.value]
        assert len(changed) == 2 and target.key in changed
        assert now[target.key] == spec["new"]
        a, b = split_lines(source), split_lines(s.source)
        assert len(a) == len(b) and 1 <= sum(x != y for x, y in zip(a, b, strict=True)) <= 2


@pytest.mark.parametrize("timing", ["interpreter", "simulated"])
def test_cpu_timing_never_proposes_launch_parameters_it_ignores(timing: str) -> None:
    ignored = ("num_warps", "num_stages")
    for name, kernel in EXPECTED:
        source = example(name)
        cpu, gpu = OfflineProposer(seed=5), OfflineProposer(seed=5)
        cpu_plans = run(cpu.plan(ctx_for(source, kernel, timing=timing), 100))
        gpu_plans = run(gpu.plan(ctx_for(source, kernel), 100))
        cpu_names = {p.data["changes"][0]["name"] for p in cpu_plans}
        gpu_names = {p.data["changes"][0]["name"] for p in gpu_plans}
        assert cpu_plans and not cpu_names & set(ignored), name
        assert "num_warps" in gpu_names, name  # GPU timing still tunes them
        assert gpu_names - cpu_names <= set(ignored)
        # Samples that add a second change never add an ignored one under CPU timing.
        ctx = ctx_for(source, kernel, timing=timing)
        for plan in cpu_plans[:3]:
            for sample in run(cpu.implement(ctx, plan, 4)):
                assert sample.source is not None
                before = {q.key: q.value for q in find_tunables(source, kernel)}
                after = {q.key: q for q in find_tunables(sample.source, kernel)}
                changed = {after[k].kind for k, v in before.items() if after[k].value != v}
                assert changed and not changed & set(ignored), (name, plan.title)
    # The parent's timing alone is enough (a baseline that failed has timing "none").
    source = example("matmul")
    ctx = ctx_for(source, "matmul_kernel", timing=timing)
    ctx.baseline_result = EvalResult.failure("timeout", "slow")
    plans = run(OfflineProposer().plan(ctx, 100))
    assert plans and all(p.data["changes"][0]["name"] not in ignored for p in plans)


def test_implement_stale_plan_and_zero_k() -> None:
    source = example("softmax")
    ctx = ctx_for(source, "softmax_kernel")
    proposer = OfflineProposer()
    stale = Plan(
        title="BLOCK_Q 16 -> 32",
        text="",
        data={
            "changes": [
                {"launcher": "softmax", "kernel": "softmax_kernel", "name": "BLOCK_Q", "new": 32}
            ]
        },
    )
    (sample,) = run(proposer.implement(ctx, stale, 2))
    assert sample.source is None and "BLOCK_Q not found in launcher softmax" in sample.error
    (plan,) = run(proposer.plan(ctx, 1))
    assert run(proposer.implement(ctx, plan, 0)) == []


def test_no_plans_without_literal_launch_parameters() -> None:
    autotuned = textwrap.dedent(
        """
        import torch
        import triton
        import triton.language as tl

        @triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4)], key=["n"])
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)

        def launch(x, n):
            BLOCK2 = 32
            BLOCK2 = BLOCK2 * 2  # rebound: not a plain literal any more
            k[(triton.cdiv(n, 64),)](x, n, EVEN=1)
            return x
        """
    )
    assert find_tunables(autotuned, "k") == []
    # Only the autotune config list is edited (issue 13), never the launch.
    plans = run(OfflineProposer().plan(ctx_for(autotuned, "k"), 4))
    assert plans and all(set(p.data) == {"autotune"} for p in plans)
    without_configs = autotuned.replace('[triton.Config({"BLOCK": 64}, num_warps=4)]', "CONFIGS")
    proposer = OfflineProposer()
    assert run(proposer.plan(ctx_for(without_configs, "k"), 4)) == []
    assert any("not a list literal" in note for note in proposer.notes)
    assert any("BLOCK2" not in note and "EVEN" in note for note in proposer.notes)
    assert find_tunables("def (:", "k") == []
    nki = (EXAMPLES.parent / "nki" / "tensor_add.py").read_text()
    # NKI kernels: the tile constant (issue 11; before, NKI files had no tunables)
    assert [(p.name, p.kind, p.value) for p in find_tunables(nki, "tensor_add_kernel")] == [
        ("TILE_F", "nki_free", 128)
    ]
    assert find_tunables(example("softmax"), "no_such_kernel") == []


def test_summarize_fix_usage_and_protocol() -> None:
    source = example("softmax")
    ctx = ctx_for(source, "softmax_kernel")
    proposer = OfflineProposer()
    assert isinstance(proposer, Proposer) and proposer.name == "offline"
    block = find_tunables(source, "softmax_kernel")[0]
    fast = apply_changes(source, [Change(block, 128)])
    plan = Plan(
        title="BLOCK_SIZE 16 -> 128", text="", data={"changes": [Change(block, 128).to_dict()]}
    )
    good = run(proposer.summarize(ctx, plan, source, fast, 3.1))
    assert good.rule == "Raise BLOCK_SIZE from 16 to 128 in softmax_kernel: 3.1x faster"
    assert good.title == "Raise BLOCK_SIZE from 16 to 128"
    bad = run(proposer.summarize(ctx, plan, source, fast, 0.5))
    assert bad.rule == "Do not raise BLOCK_SIZE from 16 to 128 in softmax_kernel: 2x slower (0.5x)"
    assert bad.title.startswith("Avoid:")
    failed = EvalResult.failure("incorrect", "mismatch")
    assert run(proposer.fix(ctx, plan, fast, failed)) is None
    assert proposer.usage() == {}


# The rewritten softmax still matches its reference under the Triton interpreter.
RUN_VARIANTS = r"""
import importlib.util, json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
results = []
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("variant_%d" % len(results), path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (x,) = mod.get_inputs(3, "cpu")
    out = mod.softmax(x)
    ref = torch.softmax(x, dim=-1)
    tol = 1e-5 * ref.abs().max() + 1e-4 * ref.abs()
    results.append(bool(((out - ref).abs() <= tol).all()) and out.shape == ref.shape)
print("@@RESULTS@@" + json.dumps(results))
"""


@pytest.mark.slow
def test_softmax_plans_stay_correct_under_interpreter(tmp_path: Path) -> None:
    source = example("softmax")
    ctx = ctx_for(source, "softmax_kernel", "softmax.py")
    proposer = OfflineProposer(seed=0)
    plans = run(proposer.plan(ctx, 3))
    sources = []
    for plan in plans:
        sources += [s.source for s in run(proposer.implement(ctx, plan, 2))]
    block = find_tunables(source, "softmax_kernel")[0]
    sources.append(apply_changes(source, [Change(block, 8192)]))  # block wider than the row
    assert all(s is not None for s in sources) and len(set(sources)) == len(sources) == 7
    paths = []
    for i, s in enumerate(sources):
        p = tmp_path / f"variant_{i}.py"
        p.write_text(s)
        assert load_kernel_file(p).harness.complete
        paths.append(str(p))
    env = dict(os.environ, TRITON_INTERPRET="1", ACCELOPT_SHAPE="small")
    proc = subprocess.run(
        [sys.executable, "-c", RUN_VARIANTS, *paths],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULTS@@"))
    assert json.loads(line[len("@@RESULTS@@") :]) == [True] * len(paths)


MODEL_NEW = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
"""


def test_a_kernelbench_model_new_forward_is_a_launcher_whose_block_is_tuned() -> None:
    from accelopt_core.proposers.offline_tunables import find_tunables

    (block,) = [p for p in find_tunables(MODEL_NEW, "relu_kernel") if p.name == "BLOCK"]
    assert (block.value, block.origin, block.launcher) == (1024, "launch", "forward")
    line = MODEL_NEW.splitlines()[block.range.start_line - 1]  # 1-based lines
    assert line[block.range.start_col :].startswith("1024)")

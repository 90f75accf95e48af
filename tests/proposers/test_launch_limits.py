"""The offline proposer never proposes a launch configuration the GPU cannot launch (issue 21):
``num_warps`` x 32 threads over 1,024 per block, in a launch or in an ``@triton.autotune``
config (accelopt_core.proposers.launch_limits)."""

from __future__ import annotations

import ast
import textwrap

from accelopt_core.proposers.launch_limits import (
    MAX_THREADS_PER_BLOCK,
    config_problem,
    threads_problem,
)
from accelopt_core.proposers.offline import OfflineProposer, allowed_values, find_tunables
from accelopt_core.proposers.offline_autotune import autotune_site
from tests.proposers.test_offline import ctx_for, example, run

LAUNCH = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    def launch(x):
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64, num_warps=NUM_WARPS)
        return y
    """
)

AUTOTUNED = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl

    @triton.autotune(
        configs=[
            triton.Config({"BLOCK": 64}, num_warps=4),
            triton.Config({"BLOCK": 128}, num_warps=WARPS),
        ],
        key=["n"],
    )
    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

    def launch(x):
        y = torch.empty_like(x)
        k[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, y, x.numel())
        return y
    """
)


def test_threads_per_block_limit_is_cuda_s_1024() -> None:
    assert MAX_THREADS_PER_BLOCK == 1024
    assert threads_problem(32) is None and threads_problem(None) is None
    assert threads_problem(64) == (
        "num_warps=64 is 2,048 threads per block, over the CUDA limit of 1,024"
    )
    assert config_problem({"num_warps": 48, "num_stages": 3}) is not None
    assert config_problem({"num_stages": 3}) is None


def _num_warps(source: str) -> list[int]:
    """Every literal ``num_warps=`` keyword value in ``source``."""
    return [
        kw.value.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        for kw in node.keywords
        if kw.arg == "num_warps" and isinstance(kw.value, ast.Constant)
    ]


def test_num_warps_moves_stay_launchable() -> None:
    kernels = {"softmax": "softmax_kernel", "matmul": "matmul_kernel",
               "reduction": "partial_sum_kernel"}  # fmt: skip
    warps = [p for name, kernel in kernels.items() for p in find_tunables(example(name), kernel)
             if p.kind == "num_warps"]  # fmt: skip
    assert len(warps) >= 4
    for param in warps:
        assert allowed_values(param)
        assert all(threads_problem(v) is None for v in allowed_values(param))


def _proposed_sources(source: str, kernel: str, n: int = 12) -> list[str]:
    proposer = OfflineProposer()
    ctx = ctx_for(source, kernel)  # GPU timing: num_warps and num_stages are proposable
    out = []
    for plan in run(proposer.plan(ctx, n)):
        out += [s.source for s in run(proposer.implement(ctx, plan, 2)) if s.source]
    return out


def test_a_launch_over_the_limit_only_gets_its_num_warps_lowered() -> None:
    over = LAUNCH.replace("num_warps=NUM_WARPS", "num_warps=64")
    sources = _proposed_sources(over, "k")
    assert sources, "lowering num_warps must still be proposed"
    for source in sources:
        assert all(threads_problem(w) is None for w in _num_warps(source)), source
    within = LAUNCH.replace("num_warps=NUM_WARPS", "num_warps=4")
    assert any("BLOCK=" in s and "BLOCK=64" not in s for s in _proposed_sources(within, "k"))


def _autotune_configs(source: str) -> list[dict]:
    site = autotune_site(ast.parse(source), "k")
    return [cfg.options for cfg in site.configs]


def test_autotune_edits_never_leave_a_config_that_cannot_launch() -> None:
    bad = AUTOTUNED.replace("num_warps=WARPS", "num_warps=64")
    sources = _proposed_sources(bad, "k")
    assert sources, "dropping the config that cannot launch must still be proposed"
    for source in sources:
        assert all(config_problem(opts) is None for opts in _autotune_configs(source)), source
    cpu = OfflineProposer().plan(ctx_for(bad, "k", timing="interpreter"), 8)
    assert run(cpu) == []  # under the interpreter only add/first are proposed: both keep it
    good = AUTOTUNED.replace("num_warps=WARPS", "num_warps=8")
    ops = {p.data["autotune"]["op"] for p in run(OfflineProposer().plan(ctx_for(good, "k"), 8))}
    assert ops == {"add", "pin", "drop"}

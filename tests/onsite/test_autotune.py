"""accelopt_core.onsite.contestant.autotune: ``@triton.autotune`` / ``@triton.heuristics`` kernels under the
Triton interpreter (Triton 3.9), run for real in ONE subprocess with ``TRITON_INTERPRET=1``.

The subprocess first launches an autotuned kernel without :func:`prepare` (Triton's own
"0 active drivers" error, the problem itself), then calls ``prepare(True)``, loads the kernel
module afresh and records what each launch did as JSON; the tests below read that record. The
kernels store their ``BLOCK`` constexpr into an output, so each launch shows the config it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from accelopt_core.onsite.contestant import autotune

ROOT = Path(__file__).resolve().parents[2]

KERNELS = '''
import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BLOCK": 16}),
    triton.Config({"BLOCK": 32}, num_warps=2),
    triton.Config({"BLOCK": 64}, num_warps=8, num_stages=2),
]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def tuned(x_ptr, y_ptr, blk_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
    tl.store(blk_ptr + pid, BLOCK)


def add_one(x):
    """y = x + 1 and the BLOCK of each program (0 where no program ran)."""
    n = x.numel()
    y, blk = torch.empty_like(x), torch.zeros(triton.cdiv(n, 16), dtype=torch.int32)
    tuned[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, blk, n)
    return y, blk


def add_one_fixed_grid(x):
    """Correct only when BLOCK >= 32: the grid assumes 32-element programs."""
    n = x.numel()
    y, blk = torch.zeros_like(x), torch.zeros(triton.cdiv(n, 16), dtype=torch.int32)
    tuned[(triton.cdiv(n, 32),)](x, y, blk, n)
    return y


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def tuned_even(x_ptr, y_ptr, info_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2.0)
        tl.store(info_ptr + 1, 1)
    else:
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)
        tl.store(info_ptr + 1, 0)
    tl.store(info_ptr, BLOCK)


def double(x):
    n = x.numel()
    y, info = torch.empty_like(x), torch.zeros(2, dtype=torch.int32)
    tuned_even[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, info, n)
    return y, info


@triton.heuristics({"SHIFT": lambda args: 3.0})
@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def shifted(x_ptr, y_ptr, blk_ptr, n, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + SHIFT, mask=mask)
    tl.store(blk_ptr, BLOCK)


def add_three(x):
    n = x.numel()
    y, blk = torch.empty_like(x), torch.zeros(1, dtype=torch.int32)
    shifted[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, blk, n)
    return y, blk


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def whole(x_ptr, y_ptr, blk_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) - 1.0, mask=mask)
    tl.store(blk_ptr, BLOCK)


def sub_one(x):
    y, blk = torch.empty_like(x), torch.zeros(1, dtype=torch.int32)
    whole[(1,)](x, y, blk, x.numel())
    return y, blk


def _fill_flag(nargs):
    nargs["flag_ptr"].fill_(7.0)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 16}, pre_hook=_fill_flag), triton.Config({"BLOCK": 32})],
    key=["n"],
    reset_to_zero=["acc_ptr"],
)
@triton.jit
def hooked(x_ptr, flag_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.load(acc_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask)
    tl.store(acc_ptr + offs, acc + tl.load(flag_ptr), mask=mask)


def accumulate(x, flag, acc):
    n = x.numel()
    hooked[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, flag, acc, n)


def _no_wider_than_n(configs, nargs, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= nargs["n"]]


def _gpu_only_model(**kwargs):
    raise RuntimeError("this performance model asks the GPU for its bandwidth")


@triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"early_config_prune": _no_wider_than_n})
@triton.jit
def pruned(x_ptr, blk_ptr, n, BLOCK: tl.constexpr):
    tl.store(blk_ptr, BLOCK)


@triton.autotune(configs=CONFIGS, key=["n"], prune_configs_by={"perf_model": _gpu_only_model, "top_k": 1})
@triton.jit
def modeled(x_ptr, blk_ptr, n, BLOCK: tl.constexpr):
    tl.store(blk_ptr, BLOCK)


def block_of(kernel, n):
    blk = torch.zeros(1, dtype=torch.int32)
    kernel[(1,)](blk, blk, n)
    return int(blk[0])
'''

DRIVER = """
import importlib.util, json, sys, types
import torch
from accelopt_core.onsite.contestant import autotune as at

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

def ok(a, b):
    return bool(torch.equal(a, b))

path, rec = sys.argv[1], {}
early = load("at_early", path)
x = torch.arange(100, dtype=torch.float32)
try:
    early.add_one(x)
    rec["unprepared"] = "no error"
except RuntimeError as exc:
    rec["unprepared"] = str(exc)
at.prepare(True)
at.prepare(True)  # a second call must not wrap twice
m = load("at_kernels", path)
rec["names"] = list(at.autotuners(m))
rec["count"], rec["count_empty"] = at.config_count(m), at.config_count(types.ModuleType("e"))
rec["chosen_before"] = at.chosen(m)["tuned"]
y, blk = m.add_one(x)
rec["default"] = [ok(y, x + 1), int(blk[0]), at.chosen(m)["tuned"]]
rec["pins"], rec["wrong"], rec["even"], rec["shift"] = [], [], [], []
for i in range(4):
    at.pin(m, i)
    y, blk = m.add_one(x)
    rec["pins"].append([ok(y, x + 1), sorted(set(blk.tolist())), at.chosen(m)["tuned"]])
    rec["wrong"].append(ok(m.add_one_fixed_grid(x), x + 1))
    y, info = m.double(x[:48])
    rec["even"].append([ok(y, x[:48] * 2), info.tolist()])
    y, blk = m.add_three(x)
    rec["shift"].append([ok(y, x + 3), int(blk[0]), at.chosen(m)["shifted"]])
y, blk = m.sub_one(x[:50])
rec["heuristics_alone"] = [ok(y, x[:50] - 1), int(blk[0])]
at.pin(m, 0)
flag, acc = torch.zeros(1), torch.full((100,), 5.0)
m.accumulate(x, flag, acc)
rec["hook_first"] = [ok(acc, x + 7), float(flag[0])]
m.accumulate(x, flag, acc)
rec["hook_second"] = ok(acc, 2 * x + 14)
at.pin(m, 1)
flag.zero_()
m.accumulate(x, flag, acc)
rec["hook_other_config"] = [ok(acc, x), float(flag[0])]
at.pin(m, 2)
rec["pruned"] = [m.block_of(m.pruned, 40), at.chosen(m)["pruned"], m.block_of(m.pruned, 100)]
at.pin(m, 1)
rec["pruned_kept"] = m.block_of(m.pruned, 40)
rec["modeled"] = [m.block_of(m.modeled, 100), at.chosen(m)["modeled"]]
try:
    m.tuned[(1,)](x, x, x, 100, BLOCK=16)
    rec["conflict"] = "no error"
except ValueError as exc:
    rec["conflict"] = str(exc)
y, blk = early.add_one(x)
rec["early_after"] = ok(y, x + 1)
print("RECORD " + json.dumps(rec))
"""


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> dict:
    """The subprocess's record (one run of ~60 interpreted launches, a few seconds)."""
    folder = tmp_path_factory.mktemp("autotune")
    kernels = folder / "at_kernels.py"
    kernels.write_text(KERNELS, "utf-8")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(kernels)],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=300,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RECORD ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[-1][len("RECORD ") :])


NOTE = "interpreter: config {} of 3, not tuned"
TUNED = [
    "BLOCK=16, num_warps=4, num_stages=3",
    "BLOCK=32, num_warps=2, num_stages=3",
    "BLOCK=64, num_warps=8, num_stages=2",
]


def test_without_prepare_triton_fails_for_want_of_a_driver(rec):
    assert "0 active drivers" in rec["unprepared"]
    assert rec["early_after"] is True  # the class patch covers kernels built before it


def test_autotuners_are_found_through_heuristics_and_counted(rec):
    assert rec["names"] == ["tuned", "tuned_even", "shifted", "hooked", "pruned", "modeled"]
    assert rec["count"] == 3
    assert rec["count_empty"] == 1


def test_default_is_config_0_and_correct(rec):
    assert rec["chosen_before"] == f"{TUNED[0]} ({NOTE.format(1)}, not launched)"
    assert rec["default"] == [True, 16, f"{TUNED[0]} ({NOTE.format(1)})"]


def test_pin_makes_each_launch_use_that_config(rec):
    blocks = [16, 32, 64, 64]  # index 3 is clamped to the last config
    for i, (correct, seen, chosen) in enumerate(rec["pins"]):
        assert correct is True
        assert seen[-1] == blocks[i] and set(seen) <= {0, blocks[i]}
        assert chosen == f"{TUNED[min(i, 2)]} ({NOTE.format(min(i, 2) + 1)})"


def test_a_config_that_breaks_the_kernel_is_found_by_pinning_each(rec):
    assert rec["wrong"] == [False, True, True, True]


def test_autotune_over_heuristics_sees_the_config(rec):
    # n = 48: the heuristic reads the pinned BLOCK (48 % 16 == 0, not 48 % 32 nor 48 % 64)
    assert rec["even"] == [[True, [16, 1]], [True, [32, 0]], [True, [64, 0]], [True, [64, 0]]]


def test_heuristics_over_autotune(rec):
    for i, (correct, block, chosen) in enumerate(rec["shift"]):
        assert correct is True
        assert block == (16, 32, 64, 64)[i]
        assert chosen.startswith(TUNED[min(i, 2)] + " (")


def test_heuristics_alone_work(rec):
    assert rec["heuristics_alone"] == [True, 64]


def test_hooks_keep_triton_semantics(rec):
    # first launch of a key: "tuning" then the reset_to_zero reset, then Config.pre_hook
    assert rec["hook_first"] == [True, 7.0]
    # same key again: no reset, the config's pre_hook runs again
    assert rec["hook_second"] is True
    # pin clears the tuning cache: reset again; config 1 has no pre_hook (flag stays 0)
    assert rec["hook_other_config"] == [True, 0.0]


def test_pruning_is_respected(rec):
    block, chosen, block_wide = rec["pruned"]
    assert block == 16  # n = 40 drops BLOCK=64 (pinned): the first config left runs
    assert chosen == f"{TUNED[0]} ({NOTE.format(1)}; pinned config 3 was pruned)"
    assert block_wide == 64  # n = 100 keeps it
    assert rec["pruned_kept"] == 32


def test_a_perf_model_that_needs_a_gpu_is_skipped(rec):
    assert rec["modeled"] == [32, f"{TUNED[1]} ({NOTE.format(2)})"]


def test_tuned_meta_parameters_passed_by_hand_still_raise(rec):
    assert "Conflicting meta-parameters: BLOCK" in rec["conflict"]


def test_gpu_mode_patches_nothing_and_refuses_to_pin():
    from triton.runtime.autotuner import Autotuner

    autotune.prepare(False)
    assert not getattr(Autotuner._bench, "_accelopt_autotune_patch", False)
    module = types.ModuleType("gpu_side")
    with pytest.raises(RuntimeError, match="interpreter"):
        autotune.pin(module, 0)
    assert autotune.chosen(module) == {}
    assert autotune.config_count(module) == 1

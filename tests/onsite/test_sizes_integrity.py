"""Scaling a harness's sizes for the CPU interpreter measures its inputs on the ``meta`` device;
that measurement must leave torch as the judge fingerprinted it (a seeded ``torch.randn`` on
``meta`` imports ``torch._dynamo``, which rebinds ``torch.manual_seed``: every example was
rejected as reference poisoning)."""

from __future__ import annotations

import types

import torch

from accelopt_core.onsite.judge import integrity
from accelopt_core.onsite.runtime.sizes import apply_sizes


def _harness() -> types.ModuleType:
    module = types.ModuleType("seeded_harness")
    module.rows = 4096
    module.cols = 1000

    def get_inputs(seed: int, device: str) -> tuple:
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(module.rows, module.cols, generator=g)
        return (x.to(device),)

    module.get_inputs = get_inputs
    return module


def test_scaling_a_seeded_harness_leaves_the_fingerprinted_libraries_alone(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    module = _harness()
    before = integrity.snapshot()
    out = apply_sizes({"module": None, "names": {"rows": 1, "cols": 1}, "mode": "auto"}, module)
    assert integrity.replaced(before) == []
    assert out["sizes"]["rows"][0] == 4096 and module.rows < 4096
    assert module.cols % 16 and module.rows * module.cols * 4 <= 256 * 1024
    (x,) = module.get_inputs(1, "cpu")  # the scaled sizes are what the harness now makes
    assert x.shape == (module.rows, module.cols)

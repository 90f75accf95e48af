"""The target's side of sizes for the CPU interpreter (accelopt_core.onsite.runtime.sizes):
rebinding a problem module's size globals, measured on the meta device (issue 24)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from accelopt_core.onsite.runtime import sizes as onsite_sizes
from accelopt_core.onsite.runtime.sizes import INPUT_BUDGET_BYTES, add_sizes, apply_sizes

torch = pytest.importorskip("torch")
PROBLEMS = Path(__file__).resolve().parent / "problems"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"problem_{abs(hash(name))}", PROBLEMS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spec(names, mode="auto", pin=None, fixed=None) -> dict:
    return {"module": None, "names": dict.fromkeys(names, 0), "mode": mode, "pin": pin or {},
            "fixed": fixed or {}}  # fmt: skip


def test_scaled_inputs_fit_the_budget_and_the_model_matches(monkeypatch) -> None:
    monkeypatch.setenv(onsite_sizes.CPU_ENV, "1")
    problem = _load("36_RMSNorm_.py")
    out = apply_sizes(_spec(["batch_size", "features", "dim1", "dim2"]), problem)
    (x,) = problem.get_inputs()
    assert x.numel() * 4 <= INPUT_BUDGET_BYTES
    assert out["sizes"]["dim2"][0] == 511 and out["sizes"]["dim2"][1] % 16  # stays odd-sized
    model = problem.Model(*problem.get_init_inputs())
    assert model(x).shape == x.shape  # weight of `features` matches the scaled input
    assert out["notes"][0].startswith("sizes scaled for the CPU interpreter: batch_size 112\u2192")


def test_a_gpu_gets_published_sizes_and_pins_apply_everywhere(monkeypatch) -> None:
    monkeypatch.setenv(onsite_sizes.CPU_ENV, "0")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    problem = _load("19_relu_like.py")
    assert apply_sizes(_spec(["batch_size", "dim"]), problem) == {}
    assert problem.dim == 393216
    out = apply_sizes(_spec(["batch_size", "dim"], pin={"batch_size": 2, "nope": 3}), problem)
    assert out["sizes"] == {"batch_size": [4096, 2]} and problem.batch_size == 2
    assert any("nope" in n for n in out["notes"])


def test_published_mode_and_unmeasurable_inputs_say_what_to_lower(monkeypatch) -> None:
    monkeypatch.setenv(onsite_sizes.CPU_ENV, "1")
    problem = _load("19_relu_like.py")
    assert apply_sizes(_spec(["batch_size", "dim"], mode="published"), problem) == {}
    problem.get_inputs = lambda: [torch.randn(problem.batch_size, problem.dim).numpy()]
    out = apply_sizes(_spec(["batch_size", "dim"]), problem)
    assert problem.dim == 393216 and "lower batch_size, dim by hand" in out["notes"][0]


def test_add_sizes_keeps_only_well_formed_reports() -> None:
    result = add_sizes({"status": "ok"}, {"sizes": {"n": [8, 4], "bad": ["x", 1]}, "notes": ["a"]})
    assert result["metrics"]["sizes"] == {"n": [8, 4]} and result["warnings"] == ["a"]
    assert add_sizes({"status": "ok"}, "junk") == {"status": "ok"}

"""accelopt_core.devicefacts: the words every surface uses for the compile stage's GPU facts
(issue 21) and the shapes a result was checked on (issue 22), read from hand-made metrics of
the data contract."""

from __future__ import annotations

from accelopt_core import devicefacts as df
from tests.gpu_metrics import SUMMARY, gpu_metrics, not_timed_result, spilling_metrics


def test_lens_text_names_the_architecture_registers_and_occupancy_limiter() -> None:
    assert df.lens_text(gpu_metrics(), "softmax_kernel") == (
        "sm_90: 44 regs · occupancy 50% (registers)"
    )
    assert df.lens_text(spilling_metrics(), "softmax_kernel") == (
        "sm_90: 255 regs · occupancy 12.5% (registers) · spills 48 B"
    )
    assert df.lens_text(gpu_metrics(), "other_kernel") is None
    assert df.lens_text({}, "softmax_kernel") is None


def test_several_configs_of_a_kernel_are_counted_in_the_lens() -> None:
    metrics = gpu_metrics()
    second = dict(metrics["gpu"]["kernels"][0], config="BLOCK_SIZE=128, num_warps=8")
    metrics["gpu"]["kernels"].append(second)
    assert df.lens_text(metrics, "softmax_kernel").endswith(" · 2 configs")


def test_gpu_lines_give_every_fact_of_each_compiled_launch() -> None:
    lines = df.gpu_lines(gpu_metrics())
    assert lines[0] == (
        "GPU H100 SXM5 (sm_90), compiled ahead of time in 0.41 s, 3 launches from Triton's cache:"
    )
    assert lines[1] == (
        "  softmax_kernel [BLOCK_SIZE=64, num_warps=4, num_stages=3] grid 16×1×1: "
        "44 registers/thread · no spills · shared memory 0 B/block · 128 threads/block · "
        "occupancy 32/64 warps per SM, 50%, limited by registers"
    )
    assert lines[2] == (
        "    SASS: tensor cores: none · global loads: 4 × 128-bit, 0 narrower · "
        "cp.async (LDGSTS): 0 · TMA (UTMALDG): 0 · local memory: STL 0, LDL 0"
    )
    assert df.gpu_lines({}) == [] and df.gpu_lines({"gpu": "garbage"}) == []


def test_sass_facts_name_the_tensor_core_op_and_local_memory_traffic() -> None:
    sass = {"tensor_core": 8, "tensor_core_op": "HGMMA", "ldg128": 0, "ldg_narrow": 6,
            "ldgsts": 4, "tma": 2, "stl": 3, "ldl": 5}  # fmt: skip
    text = df.sass_text(sass)
    assert "tensor cores: 8 HGMMA" in text
    assert "global loads: 0 × 128-bit, 6 narrower" in text
    assert "cp.async (LDGSTS): 4" in text and "TMA (UTMALDG): 2" in text
    assert "local memory: STL 3, LDL 5" in text


def test_spills_are_warnings_naming_bytes_device_and_config() -> None:
    assert df.spill_warnings(gpu_metrics()) == []
    [(kernel, message)] = df.spill_warnings(spilling_metrics())
    assert kernel == "softmax_kernel"
    assert message.startswith(
        "softmax_kernel spills 24 B stored, 24 B loaded on sm_90 (H100 SXM5) "
        "[BLOCK_SIZE=8192, num_warps=4, num_stages=3]: 255 registers/thread"
    )


def test_not_timed_says_why_and_what_to_do() -> None:
    metrics = not_timed_result().metrics
    assert df.not_timed_line(metrics) == (
        "not timed: the CPU interpreter cannot run this kernel (`.to()` on a float argument); "
        "time it on a GPU target"
    )
    assert df.not_timed_line(gpu_metrics()) is None


def test_derived_summary_counts_timed_held_out_and_derived_inputs() -> None:
    assert df.derived_summary(gpu_metrics()) == SUMMARY
    metrics = gpu_metrics()
    metrics["shapes"] = [{"shape": {"N": 64}, "timed": True}, {"shape": {"N": 80}, "timed": True},
                         {"shape": {"N": 63}, "timed": False}]  # fmt: skip
    metrics["derived_inputs"]["skipped"] = [{"name": "x[0] 16→20", "why": "the baseline is wrong"}]
    assert df.derived_summary(metrics) == (
        SUMMARY.replace("1 shape, checked on", "2 shapes, checked on 1 held-out shape and")
        + " · 1 skipped"
    )
    assert df.derived_summary({"gpu": {}}) is None
    assert df.derived_detail_lines(metrics)[0] == (
        "checked: x[1] 64→63, x × 63.4 (large), x row-padded (x: 16×63)"
    )
    assert df.derived_detail_lines(metrics)[-1] == "skipped: x[0] 16→20: the baseline is wrong"


def test_an_experience_remembers_what_the_rewrite_did_on_the_gpu() -> None:
    fast = gpu_metrics(registers=32,
                       occupancy={"warps": 48, "max_warps": 64, "percent": 75.0, "limiter": "warps"})  # fmt: skip
    facts = df.before_after(gpu_metrics(), fast)
    assert facts["before"]["kernels"]["softmax_kernel"]["registers"] == 44
    assert facts["after"]["kernels"]["softmax_kernel"]["occupancy"] == 75.0
    assert df.facts_change(facts["before"], facts["after"]) == [
        "softmax_kernel on sm_90: registers 44→32, occupancy 50%→75% (registers→warps), "
        "spills 0 B, shared memory 0 B, 128-bit loads 4"
    ]
    assert df.before_after({}, {}) == {}
    assert df.facts_change({}, facts["after"]) == []


def test_planner_lines_carry_device_facts_not_timed_and_shapes() -> None:
    lines = df.prompt_lines(not_timed_result().metrics)
    assert lines[0] == "compiled for H100 SXM5 (sm_90):"
    assert lines[1].startswith("- softmax_kernel [BLOCK_SIZE=64, num_warps=4, num_stages=3]: 44 ")
    assert any(line.startswith("not timed: the CPU interpreter cannot run") for line in lines)
    assert lines[-1] == f"inputs: {SUMMARY} (correct results are required on every one)"
    assert df.prompt_lines({}) == []


def test_garbage_metrics_never_raise() -> None:
    for metrics in (None, {}, {"gpu": None}, {"gpu": {"kernels": [None, 3, {"registers": "x"}]}},
                    {"derived_inputs": {"used": "no"}}, {"not_timed": 5}):  # fmt: skip
        df.gpu_lines(metrics)
        df.lens_text(metrics, "kernel")
        df.derived_summary(metrics)
        df.spill_warnings(metrics)
        df.prompt_lines(metrics)
        df.compact_facts(metrics)

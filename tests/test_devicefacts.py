"""accelopt_core.devicefacts: the words every surface uses for the compile stage's GPU facts
(issue 21) and the shapes a result was checked on (issue 22), read from hand-made metrics of
the data contract."""

from __future__ import annotations

import json

from accelopt_core import devicefacts as df
from accelopt_core.onsite.judge.derived_inputs import part_class
from tests.gpu_metrics import (
    BUDGET_WHY,
    SUMMARY,
    gpu_metrics,
    not_timed_result,
    searched_metrics,
    spilling_metrics,
)


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
        df.derived_detail_lines(metrics)
        df.derived_facts(metrics)


# -- issue 52: checks counted by class, derivations left to the search, the search ------------


def test_classes_are_counted_by_kind_and_every_class_is_named() -> None:
    counts = {"shape": 4, "values: sign-flipped scale": 1, "values: grid ties": 1,
              "layout: permuted": 2, "layout: sliced": 2, "values: subnormal": 4}  # fmt: skip
    assert df.classes_text(counts) == (
        "4 shapes; values: 6 (sign-flipped scale 1, grid ties 1, subnormal 4); "
        "layouts: 4 (permuted 2, sliced 2)"
    )
    assert df.classes_text({"shape": 1}) == "1 shape"
    assert df.classes_text({}) == ""
    # a kind the display has never heard of is counted the same way, never dropped
    assert df.classes_text({"integers: last index": 2, "integers: empty segment": 1}) == (
        "integers: 3 (last index 2, empty segment 1)"
    )
    many = {f"values: class number {i}": 1 for i in range(40)}
    text = df.classes_text(many)
    assert text.startswith("values: 40 (class number 0 1, ") and "class number 39 1)" in text


def test_a_slot_counts_each_part_by_the_class_the_judge_gives_it() -> None:
    metrics = gpu_metrics()
    parts = metrics["derived_inputs"]["used"][0]["parts"]
    classes = df.derived_classes(metrics)
    assert sum(classes.values()) == 7 and classes["shape"] == 4
    assert all(classes.get(part_class(p), 0) >= 1 for p in parts)
    # a result of a judge before issue 29 (``derived_shapes``, parts without a kind)
    old = {"derived_shapes": {"used": [{"name": "x[0] 16→15"}, {"name": "x[0] 16→20"}]}}
    assert df.derived_classes(old) == {"shape": 2}
    assert df.derived_summary(old) == "timed on 1 shape, checked on 2 derived inputs: 2 shapes"


def test_deferred_derivations_and_the_search_are_counted_and_listed() -> None:
    metrics = searched_metrics()
    assert df.derived_summary(metrics) == SUMMARY + " · 3 left to the search"
    metrics["derived_inputs"]["skipped"] = [
        {"name": "x column-major", "why": "the baseline raises"}
    ]
    assert df.derived_summary(metrics) == SUMMARY + " · 1 skipped · 3 left to the search"
    lines = df.derived_detail_lines(metrics)
    assert lines[4:] == [
        "skipped: x column-major: the baseline raises",
        # the same reason reads once, with every name it covers
        f"left to the search ({BUDGET_WHY}): x × -63.4 (sign-flipped scale) · x permuted (1, 0)",
        "left to the search (not checked on every candidate: its call alone costs 31% of an "
        "evaluation): x on a grid of 0.25 (grid ties)",
        "search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls; no disagreement "
        "with the baseline (2.1 s)",
        "examples tried: x 3×5 (ties) · x 16×64 (subnormals)",
    ]


def test_a_counterexample_is_said_whole() -> None:
    found = "x 3×5 = [[0.0, -1e-45, 2.5], [inf, 1.0, 1.0], [3.0, 3.0, 3.0]]: max abs error 7.5"
    metrics = searched_metrics(found)
    assert df.search_line(metrics) == (
        "search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls; found a "
        "disagreement (2.1 s)"
    )
    assert df.search_lines(metrics)[1] == f"counterexample: {found}"


def test_results_without_the_new_keys_read_as_before() -> None:
    metrics = gpu_metrics()  # a judge before issue 52: no ``deferred``, no ``search``
    assert df.derived_deferred(metrics) == [] and df.deferred_lines(metrics) == []
    assert df.derived_search(metrics) is None and df.search_line(metrics) is None
    assert not any("search" in line for line in df.derived_detail_lines(metrics))
    facts = df.derived_facts(metrics)
    assert facts["summary"] == SUMMARY and facts["deferred"] == [] and facts["search"] is None
    assert df.derived_facts({}) is None


def test_facts_are_json_for_profile_json_and_the_report() -> None:
    facts = json.loads(json.dumps(df.derived_facts(searched_metrics("x 1×1 = [[nan]]"))))
    assert facts["search"] == {"seed": 1234, "tried": 37, "usable": 35, "calls": 12,
                               "budget": 40, "seconds": 2.13, "counterexample": "x 1×1 = [[nan]]",
                               "examples": ["x 3×5 (ties)", "x 16×64 (subnormals)"],
                               "skipped": None}  # fmt: skip
    assert facts["deferred_groups"][0] == [
        ["x × -63.4 (sign-flipped scale)", "x permuted (1, 0)"],
        BUDGET_WHY,
    ]
    assert sum(facts["classes"].values()) == 7 and len(facts["deferred"]) == 3


def test_odd_search_and_deferred_values_never_raise() -> None:
    odd = [
        {"search": "yes", "deferred": "all"},
        {"search": {"seed": "x", "tried": True, "examples": "a", "counterexample": 5}},
        {"search": {}, "deferred": [None, 3, {"why": None}]},
        {"used": [{"kind": "combined", "parts": "no"}, {"kind": "values"}, {"kind": 7}]},
        {"used": [{"kind": "combined", "parts": [None, {"kind": "layout"}]}]},
    ]
    for derived in odd:
        metrics = {"derived_inputs": derived}
        df.derived_summary(metrics)
        df.derived_detail_lines(metrics)
        json.dumps(df.derived_facts(metrics))
    assert df.search_line({"derived_inputs": odd[2]}) == (
        "search: no disagreement with the baseline"
    )
    assert df.derived_deferred({"derived_inputs": odd[2]}) == [("?", "no reason given")]
    assert df.search_lines({"derived_inputs": odd[1]})[1] == "counterexample: 5"


def test_a_search_that_did_not_run_says_why_and_partial_counts_read() -> None:
    skipped = {"seed": 7, "tried": 0, "skipped": "an NKI kernel: no space to draw from"}
    assert df.search_line({"derived_inputs": {"search": skipped}}) == (
        "search (seed 7): not run: an NKI kernel: no space to draw from"
    )
    budget_only = {"seed": 7, "tried": 1, "budget": 1}
    assert df.search_line({"derived_inputs": {"search": budget_only}}) == (
        "search (seed 7): 1 example tried, a budget of 1 checked call; no disagreement with the "
        "baseline"
    )

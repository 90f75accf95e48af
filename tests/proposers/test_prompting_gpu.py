"""The planner reads the GPU facts (issue 21) and the shapes checked (issue 22): each metric in
the profile has a glossary entry, as the NKI profile metrics have, and the parent's profile
carries the facts of every compiled launch."""

from __future__ import annotations

from accelopt_core.proposers.prompting import format_profile, load_prompt, placeholders, render
from tests.gpu_metrics import SUMMARY, not_timed_result, ok_result

#: A glossary entry for each GPU fact the profile shows, by the words the profile uses.
GLOSSARY_TERMS = (
    "compiled for",
    "registers/thread",
    "spills",
    "shared memory/block",
    "threads/block",
    "occupancy",
    "tensor cores",
    "global loads 128-bit vs narrower",
    "cp.async (LDGSTS) and TMA (UTMALDG)",
    "local memory STL/LDL",
    "not timed",
    "derived inputs",
)


def test_every_gpu_fact_has_a_glossary_entry() -> None:
    entries = [line[2:].split(":", 1)[0] for line in load_prompt("profile_glossary").splitlines()]
    for term in GLOSSARY_TERMS:
        assert any(entry.startswith(term) for entry in entries), term
    profile = format_profile(ok_result())
    for word in ("registers/thread", "shared memory", "threads/block", "occupancy", "SASS"):
        assert word in profile


def test_the_profile_carries_each_compiled_launch_and_the_shapes() -> None:
    lines = format_profile(ok_result()).splitlines()
    assert "compiled for H100 SXM5 (sm_90):" in lines
    launch = next(line for line in lines if line.startswith("- softmax_kernel ["))
    assert "44 registers/thread" in launch and "limited by registers" in launch
    assert any(line.startswith("  SASS: tensor cores: none") for line in lines)
    assert lines[-1] == f"inputs: {SUMMARY} (correct results are required on every one)"


def test_a_kernel_the_interpreter_cannot_run_is_explained_to_the_planner() -> None:
    text = format_profile(not_timed_result())
    assert "not timed: the CPU interpreter cannot run this kernel" in text
    assert "reason from the device facts and the code" in text


def test_the_planner_prompt_holds_the_glossary_and_the_facts() -> None:
    values = {name: "" for name in placeholders("planner")}
    values["glossary"] = load_prompt("profile_glossary").strip()
    values["profile"] = format_profile(ok_result())
    messages = render("planner", values)
    prompt = "\n".join(m["content"] for m in messages)
    assert "- occupancy: active warps per SM" in prompt
    assert "compiled for H100 SXM5 (sm_90):" in prompt

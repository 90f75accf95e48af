"""The engine facade (accelopt_core.engine): proposer choice, storage problems as warnings,
harness checks before any evaluation, and who closes the target. Fast: nothing is evaluated."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from accelopt_core.engine import Engine
from accelopt_core.kernelfile import load_kernel_file, parse_kernel_file
from accelopt_core.proposers.agents import AgentProposer
from accelopt_core.proposers.offline import OfflineProposer
from accelopt_core.settings import Settings

SOFTMAX = Path(__file__).resolve().parents[1] / "examples" / "triton" / "softmax.py"

NO_HARNESS = """import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def copy(x, out):
    copy_kernel[(1,)](x, out, x.numel(), BLOCK=64)
"""


def settings(tmp_path: Path, **extra) -> Settings:
    return Settings.model_validate({"memoryDir": str(tmp_path / "store"), **extra})


class ClosingTarget:
    """Stands in for a target: counts close() calls."""

    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


def test_proposer_is_offline_without_an_llm_and_the_agents_with_one(tmp_path: Path) -> None:
    assert isinstance(Engine(settings(tmp_path)).make_proposer(), OfflineProposer)
    llm = settings(tmp_path, llm={"model": "some-model", "baseUrl": "http://127.0.0.1:9/v1"})
    assert isinstance(Engine(llm).make_proposer(), AgentProposer)


def test_proposer_factory_replaces_the_default_choice(tmp_path: Path) -> None:
    made = OfflineProposer(seed=42)
    engine = Engine(settings(tmp_path), proposer_factory=lambda s: made)
    assert engine.make_proposer() is made


def test_unusable_memory_directory_becomes_a_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the memory directory should be")
    logged: list[tuple[str, str]] = []
    engine = Engine(
        Settings.model_validate({"memoryDir": str(blocker)}),
        log=lambda level, msg: logged.append((level, msg)),
    )
    assert engine.memory is None and engine.results is None
    assert engine.warnings and all(level == "warning" for level, _ in logged)
    assert [msg for _, msg in logged] == engine.warnings
    assert engine.saved_report(str(SOFTMAX), "softmax_kernel", SOFTMAX.read_text()) is None
    assert engine.clear_results() == 0


def test_profile_checks_the_harness_before_building_a_target(tmp_path: Path, monkeypatch) -> None:
    def no_target(settings: Settings) -> None:
        raise AssertionError("a target was built for a file that cannot be profiled")

    monkeypatch.setattr("accelopt_core.engine.make_target", no_target)
    engine = Engine(settings(tmp_path))
    with pytest.raises(ValueError, match="no complete harness"):
        asyncio.run(engine.profile(parse_kernel_file(NO_HARNESS, "copy.py")))
    with pytest.raises(KeyError):
        asyncio.run(engine.profile(load_kernel_file(str(SOFTMAX)), "no_such_kernel"))


def test_new_search_rejects_a_file_without_a_harness(tmp_path: Path) -> None:
    engine = Engine(settings(tmp_path), target=ClosingTarget())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no complete harness"):
        engine.new_search(parse_kernel_file(NO_HARNESS, "copy.py"), "copy_kernel")


def test_nothing_saved_yet_and_nothing_to_clear(tmp_path: Path) -> None:
    engine = Engine(settings(tmp_path))
    assert engine.warnings == []
    assert engine.saved_report(str(SOFTMAX), "softmax_kernel", SOFTMAX.read_text()) is None
    assert engine.clear_results() == 0


def test_close_leaves_a_target_it_was_given_open(tmp_path: Path) -> None:
    given = ClosingTarget()
    engine = Engine(settings(tmp_path), target=given)  # type: ignore[arg-type]
    assert engine.target is given
    asyncio.run(engine.close())
    assert given.closed == 0


def test_close_closes_the_target_it_built_once(tmp_path: Path, monkeypatch) -> None:
    built = ClosingTarget()
    monkeypatch.setattr("accelopt_core.engine.make_target", lambda s: built)
    engine = Engine(settings(tmp_path))
    assert engine.target is built
    asyncio.run(engine.close())
    asyncio.run(engine.close())
    assert built.closed == 1

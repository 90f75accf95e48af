"""``textDocument/hover`` over a real LSP session (pytest-lsp): experiences timed by the Triton
interpreter or the NKI simulator are labelled, reward hacks are not shown as rules, and a kernel
profiled on hardware is not shown host-timed experiences."""

from __future__ import annotations

import pytest

from accelopt_core.memory import OptimizationMemory
from accelopt_server.features.hover import _for_timing
from tests.lsp_fixtures import EXAMPLES, LspSession
from tests.memory.experiences import make_exp

pytestmark = [pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning")]

SOURCE = (EXAMPLES / "softmax.py").read_text()


def seed(lsp: LspSession) -> None:
    """The session's memory (``memoryDir`` is ``<workspace>/.memory``): a GPU rule, an
    interpreter-timed and a simulator-timed one, all mentioning ``tl.sum``, and a reward hack."""
    with OptimizationMemory(lsp.workspace / ".memory" / "memory") as m:
        rule = "Reduce with one tl.sum over the row kept in registers."
        m.add(make_exp(SOURCE, title="GPU rule", rule=rule))
        m.add(make_exp(SOURCE, title="interp rule", rule=rule, timing="interpreter", device="cpu"))
        m.add(make_exp(SOURCE, title="sim rule", rule=rule, timing="simulated", device="cpu"))
        m.add(
            make_exp(
                SOURCE,
                title="reward-hack: output cache",
                rule="Caught by the judge (output cache): do not cache tl.sum results.",
                speedup=1.0,
                positive=False,
                hack="output cache",
            )
        )


def bullet(text: str, title: str) -> str:
    return next(line for line in text.splitlines() if f"**{title}**" in line)


@pytest.mark.parametrize("lsp", ["visual-studio-code", "neovim"], indirect=True)
async def test_hover_labels_host_timed_experiences(lsp: LspSession) -> None:
    seed(lsp)
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    line = lsp.line_of(uri, "def softmax_kernel")
    col = lsp.texts[uri].splitlines()[line].index("softmax_kernel") + 2
    hover = await lsp.hover(uri, line, col)
    assert hover is not None
    text = hover.contents.value
    assert "(interpreter-timed)" in bullet(text, "interp rule")
    assert "(simulator-timed)" in bullet(text, "sim rule")
    assert "-timed" not in bullet(text, "GPU rule")
    assert "reward-hack" not in text  # hacks are "do not" examples for the planner, not rules

    sum_line = lsp.line_of(uri, "denominator = tl.sum(")
    col = lsp.texts[uri].splitlines()[sum_line].index("tl.sum") + 4
    api = await lsp.hover(uri, sum_line, col)
    assert api is not None
    assert "(interpreter-timed)" in bullet(api.contents.value, "interp rule")
    assert "-timed" not in bullet(api.contents.value, "GPU rule")


def test_a_hardware_profile_hides_host_timed_experiences() -> None:
    exps = [
        make_exp(title="gpu"),
        make_exp(title="interp", timing="interpreter"),
        make_exp(title="sim", timing="simulated"),
    ]
    assert [e.title for e in _for_timing(exps, "cuda")] == ["gpu"]
    assert [e.title for e in _for_timing(exps, "neuron")] == ["gpu"]
    assert _for_timing(exps, "interpreter") == exps == _for_timing(exps, "simulated")

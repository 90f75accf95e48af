"""The GPU facts (issue 21) and the shapes checked (issue 22) in a real LSP session (pytest-lsp,
the real `accelopt-lsp` over stdio): the device lens with its tooltip, the hover's device
section, the spill warning and the won't-compile error.

The server's first profile of the softmax example is real; its verdict in the evaluation cache
(`<memoryDir>/evals`) is then replaced by a hand-made result carrying the contract's metrics
(tests/gpu_metrics.py), which the next profile is served through the real cache path.
"""

from __future__ import annotations

import re

import pytest
from lsprotocol import types

from accelopt_server.markdown import escape
from tests.gpu_metrics import (
    BUDGET_WHY,
    SUMMARY,
    does_not_compile_result,
    ok_result,
    replace_cached_results,
    searched_metrics,
    spilling_metrics,
)
from tests.lsp_fixtures import LspSession

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("error::pytest_lsp.LspSpecificationWarning"),
]


async def _profile_served(lsp: LspSession, uri: str, result) -> dict:
    """Replace the cached verdict by ``result`` and profile again (a cache hit)."""
    assert replace_cached_results(lsp.workspace / ".memory", result) >= 1
    answer = await lsp.command("accelopt.profile", uri, "softmax_kernel")
    assert answer["kernels"]["softmax_kernel"]["cached"] is True
    return answer


def _diagnostics(lsp: LspSession, uri: str, code: str) -> list[types.Diagnostic]:
    return [d for d in lsp.client.diagnostics.get(uri, []) if d.code == code]


@pytest.mark.parametrize("lsp", ["visual-studio-code", "neovim"], indirect=True)
async def test_lens_hover_and_diagnostics_show_the_gpu_facts(lsp: LspSession) -> None:
    path, _ = lsp.copy_example("softmax.py")
    uri = lsp.open(path)
    first = await lsp.command("accelopt.profile", uri, "softmax_kernel")
    assert "softmax_kernel" in first["kernels"], first
    line = lsp.line_of(uri, "def softmax_kernel")
    col = lsp.texts[uri].splitlines()[line].index("softmax_kernel") + 2
    # a fresh profile's hover says where its time went; the cache's verdict (below) does not
    fresh = (await lsp.hover(uri, line, col)).contents.value
    assert re.search(r"\n\nEvaluated in [0-9.]+ s: worker [0-9.]+ · start [0-9.]+ · ", fresh), fresh

    await _profile_served(lsp, uri, ok_result(spilling_metrics()))
    lenses = await lsp.lenses(uri)
    by_title = {lens.command.title: lens.command for lens in lenses if lens.command}
    device = by_title["AccelOpt · sm_90: 255 regs · occupancy 12.5% (registers) · spills 48 B"]
    assert device.command == "accelopt.showStatus"
    assert "255 registers/thread" in device.tooltip
    assert device.tooltip.splitlines()[-1] == SUMMARY
    profile = next(c for t, c in by_title.items() if t.startswith("1.5 ms · correct"))
    assert profile.tooltip == SUMMARY

    hover = await lsp.hover(uri, line, col)
    assert hover is not None
    text = hover.contents.value
    assert "Evaluated in" not in text
    assert "**GPU facts** of `softmax_kernel` on H100 SXM5 (`sm_90`)" in text
    assert "255 registers/thread · spills 24 B stored, 24 B loaded" in text
    assert "local memory: STL 6, LDL 6" in text
    assert f"**Inputs:** {escape(SUMMARY)}" in text

    [spill] = await lsp.wait_for(lambda: _diagnostics(lsp, uri, "spills"), what="spill warning")
    assert spill.severity == types.DiagnosticSeverity.Warning
    assert spill.range.start.line == line
    assert "spills 24 B stored, 24 B loaded on sm_90 (H100 SXM5)" in spill.message

    exp_line = lsp.line_of(uri, "tl.exp(") + 1
    await _profile_served(lsp, uri, does_not_compile_result(line=exp_line))
    [error] = await lsp.wait_for(lambda: _diagnostics(lsp, uri, "gpu-compile"), what="error")
    assert error.severity == types.DiagnosticSeverity.Error
    assert error.range.start.line == exp_line - 1
    assert "does not compile for sm_90 (H100 SXM5)" in error.message
    assert not _diagnostics(lsp, uri, "spills")  # replaced by the new profile
    assert not any(t.startswith("AccelOpt · sm_90") for t in await lsp.lens_titles(uri))

    # a result of a judge after issue 52: derivations left to the search, and the search's facts
    found = "x 3×5 = [[0.0, -1e-45, 2.5]]: max abs error 7.5"
    await _profile_served(lsp, uri, ok_result(searched_metrics(found)))
    lenses = await lsp.lenses(uri)
    tips = {lens.command.title: lens.command.tooltip for lens in lenses if lens.command}
    search = "search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls; found a "
    device_tip = next(t for title, t in tips.items() if title.startswith("AccelOpt · sm_90"))
    assert device_tip.splitlines()[-2] == SUMMARY + " · 3 left to the search"
    assert device_tip.splitlines()[-1].startswith(search)
    assert "permuted" not in device_tip and found not in device_tip  # the lens: counts only
    profile_tip = next(t for title, t in tips.items() if title.startswith("1.5 ms · correct"))
    assert profile_tip.splitlines()[0] == SUMMARY + " · 3 left to the search"
    assert profile_tip.splitlines()[1].startswith(search)
    text = (await lsp.hover(uri, line, col)).contents.value
    assert (
        f"- left to the search ({escape(BUDGET_WHY)}): `x × -63.4 (sign-flipped scale)`, "
        "`x permuted (1, 0)`"
    ) in text
    assert f"  - counterexample: `{found}`" in text
    assert "  - examples tried: `x 3×5 (ties)`, `x 16×64 (subnormals)`" in text

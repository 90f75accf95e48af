"""The HTML search report rendered in a real browser (issue 32): Debian's headless Chromium
(as ``.ci/vscode-e2e`` uses) loads the file with the network off, runs its scripts, and the
DOM it ends with is checked: one point per node of the tree, the best-speedup chart, the
roofline, the selected candidate's diff, and hostile text shown as text, never run.

Skipped, with the reason, where no Chromium is installed (``.ci/run`` installs Debian's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from accelopt_core.report import build_view, write_html
from tests.gpu_metrics import BUDGET_WHY, searched_metrics
from tests.report.synthetic import synthetic_report

CHROMIUM = os.environ.get("ACCELOPT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason="Debian's chromium is not installed (apt-get install chromium; .ci/run does)",
)


def dom(page: Path, tmp_path: Path) -> str:
    """The DOM of ``page`` after its scripts ran (``--dump-dom``), no network but the file."""
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--proxy-server=127.0.0.1:9",  # any request off the file would fail
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=15000",
        "--dump-dom",
        page.as_uri(),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def section(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i : text.index(end, i)]


def test_the_report_in_chromium(tmp_path: Path) -> None:
    report = synthetic_report(40, iterations=3)
    view = build_view(report)
    page = write_html(view, tmp_path / "search.html")
    assert page.stat().st_size <= 10 * 2**20
    text = dom(page, tmp_path)

    tree = section(text, 'id="tree"', 'id="best"')
    points = re.findall(r'class="point plotly-customdata"', tree)
    assert len(points) == len(view["nodes"]), "one point per candidate, failed sample, baseline"
    assert f'data-nodes="{len(view["nodes"])}"' in tree
    legend = set(re.findall(r'class="legendtext"[^>]*>([^<]+)<', tree))
    assert {"baseline", "ranked: verified faster", "failed"} <= legend

    best = section(text, 'id="best"', 'id="roofline"')
    assert "js-plotly-plot" in best and "best verified speedup" in best
    roofline = section(text, 'id="roofline"', 'id="candidates"')
    assert "arithmetic intensity (FLOP/B)" in roofline and "BF16/FP16 tensor roof" in roofline

    rows = section(text, 'id="candidates"', "</table>")
    assert rows.count("<tr") == len(view["nodes"]) + 1  # and the header

    top = next(n for n in view["nodes"] if n["rank"] == 1)
    details = section(text, 'id="details"', "Failures by stage")
    assert f'data-id="{top["id"]}"' in details
    added = [ln for ln in top["diff"].splitlines() if ln.startswith("+") and ln[1:].strip()][-1]
    assert f'<span class="add">{added}</span>' in details.replace("&gt;", ">")


def test_hostile_text_is_shown_never_run(tmp_path: Path) -> None:
    view = build_view(synthetic_report(14, hostile=True))
    text = dom(write_html(view, tmp_path / "hostile.html"), tmp_path)
    assert "<title>AccelOpt search · softmax_kernel in softmax.py</title>" in text
    assert re.search(r"<body[^>]*>", text).group(0) == "<body>"  # no onerror ran
    assert "<img src=" not in text.split('id="accelopt-view"')[0] + text.split("</main>")[0]
    details = section(text, 'id="details"', "</h3>")
    assert "&lt;/script&gt;&lt;script&gt;document.title = 'PWNED'&lt;/script&gt;" in details


def test_the_selected_candidate_shows_its_derived_checks_and_the_search(tmp_path: Path) -> None:
    """Issue 52: the details of the selected candidate count its checks by class, list what a
    budget left to the property-based search, and show the search's seed, counts,
    counterexample and examples, as text."""
    report = json.loads(json.dumps(synthetic_report(14)))
    found = "x 2×2 = [[0.0, -0.0], [1e-45, inf]]: max abs error 3.0 <img src=x onerror=alert(1)>"
    report["candidates"][0]["result"]["metrics"] = searched_metrics(found)
    view = build_view(report)
    assert next(n for n in view["nodes"] if n["rank"] == 1)["id"] == report["candidates"][0]["id"]
    page = write_html(view, tmp_path / "searched.html")
    text = dom(page, tmp_path)
    details = section(text, 'id="details"', "Failures by stage")
    node = next(n for n in view["nodes"] if n["id"] == report["candidates"][0]["id"])
    assert f"<p>{node['derived']['summary']}</p>" in details
    # the reason once, then each name it covers as an item of its own (names hold commas)
    assert f"left to the search ({BUDGET_WHY}):<ul><li>x × -63.4 (sign-flipped scale)</li>" in (
        details
    )
    assert "<li>x permuted (1, 0)</li></ul>" in details
    assert "<h4>property-based search</h4>" in details
    assert "search (seed 1234): 37 examples tried, 35 usable, 12 of 40 checked calls" in details
    assert (
        "counterexample: x 2×2 = [[0.0, -0.0], [1e-45, inf]]: max abs error 3.0 &lt;img" in details
    )
    assert "examples tried: x 3×5 (ties) · x 16×64 (subnormals)" in details
    assert "<img src=" not in details


@pytest.mark.parametrize("case", ["failed baseline", "no candidates"])
def test_a_failed_or_empty_search_still_reads(tmp_path: Path, case: str) -> None:
    report = json.loads(json.dumps(synthetic_report(6)))
    report.update(candidates=[], explored=[], failed_candidates=[], experiences=[])
    if case == "failed baseline":
        report["baseline"]["result"] = {"status": "compile_error", "message": "SyntaxError: x"}
    text = dom(write_html(build_view(report), tmp_path / "r.html"), tmp_path)
    tree = section(text, 'id="tree"', 'id="best"')
    assert len(re.findall(r'class="point plotly-customdata"', tree)) == 1  # the baseline
    if case == "failed baseline":
        assert "The baseline is not usable: SyntaxError: x" in text
        assert "No speedup to draw" in text
    else:
        assert "The search added no experience" in text and "No sample failed." in text

"""The search view's data model (issue 32): nodes, verdicts, the best speedup per iteration,
the roofline, and reports of failed, empty, old and hostile searches."""

from __future__ import annotations

import json
import re

import pytest

from accelopt_core.report import build_view, render_html
from accelopt_core.report import html as report_html
from accelopt_core.report.html import embed_json, fit
from tests.gpu_metrics import BUDGET_WHY, SUMMARY, searched_metrics
from tests.report.synthetic import HOSTILE, synthetic_report


@pytest.fixture(scope="module")
def report() -> dict:
    return synthetic_report(60, iterations=3)


def test_every_candidate_and_failed_sample_is_a_node_once(report) -> None:
    view = build_view(report)
    ids = [n["id"] for n in view["nodes"]]
    assert len(ids) == len(set(ids))
    no_code = [f for f in report["failed_candidates"] if not f["candidate_id"]]
    assert len(ids) == 1 + len(report["candidates"]) + len(report["explored"]) + len(no_code)
    assert view["nodes"][0]["verdict"] == "baseline" and view["nodes"][0]["parent"] is None
    known = set(ids)
    assert all(n["parent"] in known for n in view["nodes"][1:])


def test_verdicts_follow_the_report(report) -> None:
    view = build_view(report)
    by_id = {n["id"]: n for n in view["nodes"]}
    ranked = [by_id[c["id"]] for c in report["candidates"]]
    assert ranked and all(n["verdict"] == "ranked" for n in ranked)
    assert [n["rank"] for n in ranked] == list(range(1, len(ranked) + 1))
    for record in report["explored"]:
        node = by_id[record["id"]]
        status = record["result"]["status"]
        if status == "ok":
            assert node["verdict"] == "slower" and node["note"], node
        elif status == "incorrect":
            assert node["verdict"] == "incorrect" and node["stage"] == "incorrect"
        else:
            assert node["verdict"] == "failed" and node["stage"] in (
                "compile",
                "gate",
                "crash",
                "timeout",
            )
            assert node["reason"] and node["excerpt"] is not None
    parse = [n for n in view["nodes"] if n["id"].startswith("failed-")]
    assert parse and all(n["stage"] == "parse" and n["verdict"] == "failed" for n in parse)
    assert sum(view["meta"]["failures"].values()) == len(report["failed_candidates"])


def test_a_ranked_node_carries_its_diff_device_facts_and_derived_inputs(report) -> None:
    node = next(n for n in build_view(report)["nodes"] if n["rank"] == 1)
    assert node["diff"].startswith("--- a/softmax.py") and "+BLOCK_SIZE" not in node["plan"]
    assert any(line.startswith("+") for line in node["diff"].splitlines()[2:])
    assert node["gpu"][0].startswith("GPU H100 SXM5 (sm_90)")
    assert any("SASS:" in line for line in node["gpu"])
    assert node["derived"]["summary"] == SUMMARY
    # a derived input (issue 29) changes a shape, values and a layout at once
    assert [
        "x[1] 64→63, x × 63.4 (large), x row-padded",
        "x: 16×63",
    ] in node["derived"]["checked"]
    assert node["gbps"] > 0 and node["tflops"] > 0 and node["pct_of_peak"] > 0


def test_a_node_carries_what_was_left_to_the_search_and_the_search(report) -> None:
    """Issue 52: a candidate's derivations left to the property-based search, with why, and
    the search's seed, counts, counterexample and examples; an older result has neither."""
    report = json.loads(json.dumps(report))
    found = "x 2×2 = [[0.0, -0.0], [1e-45, </script><b>x</b>]]: max abs error 3.0"
    report["candidates"][0]["result"]["metrics"] = searched_metrics(found)
    view = build_view(report)
    node = next(n for n in view["nodes"] if n["id"] == report["candidates"][0]["id"])
    derived = node["derived"]
    assert derived["summary"] == SUMMARY + " · 3 left to the search"
    assert derived["deferred_groups"][0] == [
        ["x × -63.4 (sign-flipped scale)", "x permuted (1, 0)"],
        BUDGET_WHY,
    ]
    assert len(derived["deferred"]) == 3
    assert derived["search"]["seed"] == 1234 and derived["search"]["counterexample"] == found
    assert derived["search_line"].startswith(
        "search (seed 1234): 37 examples tried, 35 usable, 12 of"
    )
    page = render_html(view)
    assert "</script><b>" not in page  # the counterexample is data in the page, never markup
    older = next(n for n in view["nodes"] if n["id"] == report["candidates"][1]["id"])
    assert older["derived"]["search"] is None and older["derived"]["deferred"] == []


def test_best_speedup_per_iteration_never_falls(report) -> None:
    view = build_view(report)
    best = view["best"]
    assert [b["iteration"] for b in best] == [0, 1, 2, 3]
    assert best[0]["speedup"] == 1.0
    assert all(a["speedup"] <= b["speedup"] for a, b in zip(best, best[1:], strict=False))
    top = max(c["speedup"] for c in report["candidates"])
    assert best[-1]["speedup"] == pytest.approx(top) == view["meta"]["best_speedup"]


def test_roofline_against_the_devices_datasheet_peaks(report) -> None:
    roof = build_view(report)["roofline"]
    assert roof["peak"]["name"] == "H100 SXM5" and roof["peak"]["hbm_gbps"] == 3350.0
    point = roof["points"][0]
    assert point["intensity"] == pytest.approx(point["tflops"] * 1e12 / (point["gbps"] * 1e9))
    assert all(p["verdict"] not in ("failed", "incorrect") for p in roof["points"])


def test_interpreter_timing_has_no_roofline_and_no_achieved_figures(report) -> None:
    cpu = json.loads(json.dumps(report))
    cpu["timing"] = "interpreter"
    for record in [cpu["baseline"], *cpu["candidates"], *cpu["explored"]]:
        record["result"]["timing"] = "interpreter"
    view = build_view(cpu)
    assert view["roofline"] is None
    assert all(n["gbps"] is None and n["pct_of_peak"] is None for n in view["nodes"])
    assert "say nothing about GPU speed" in view["meta"]["timing_note"]


def test_a_failed_search_and_a_search_without_candidates(report) -> None:
    failed = json.loads(json.dumps(report))
    failed["baseline"]["result"] = {"status": "compile_error", "message": "SyntaxError at 3"}
    failed["baseline"]["speedup"] = None
    failed.update(candidates=[], explored=[], failed_candidates=[], stopped_reason="baseline")
    view = build_view(failed)
    assert [n["verdict"] for n in view["nodes"]] == ["baseline"]
    assert view["best"] == [] and view["meta"]["baseline_status"] == "SyntaxError at 3"
    assert view["meta"]["best_speedup"] is None

    empty = json.loads(json.dumps(report))
    empty.update(candidates=[], explored=[], failed_candidates=[], experiences=[])
    view = build_view(empty)
    assert len(view["nodes"]) == 1 and view["best"][-1]["speedup"] == 1.0
    assert "<title>AccelOpt search · softmax_kernel in softmax.py</title>" in render_html(view)


def test_an_old_or_broken_report_gives_a_smaller_view() -> None:
    view = build_view({"baseline": {"id": "b", "result": {"status": "ok"}}, "candidates": [1]})
    assert [n["id"] for n in view["nodes"]] == ["b"] and view["state"] == "finished"
    assert build_view({})["nodes"] == []
    weird = {"baseline": "x", "explored": [{"id": "c", "result": None, "parent_id": "zz"}]}
    assert [n["verdict"] for n in build_view(weird)["nodes"]] == ["failed"]


def test_hostile_text_cannot_leave_the_json_block() -> None:
    view = build_view(synthetic_report(12, hostile=True))
    page = render_html(view)
    data = page.split('<script type="application/json" id="accelopt-view">', 1)[1]
    block = data.split("</script>", 1)[0]
    assert "<" not in block and ">" not in block and "&" not in block
    parsed = json.loads(block)
    assert parsed == json.loads(embed_json(view))
    assert any(HOSTILE in n["plan"] for n in parsed["nodes"])  # the text is kept, as data
    assert len(re.findall(r"</script", page, re.I)) == 3  # ends the data, Plotly, the script


def test_diffs_are_cut_to_fit_the_size_bound() -> None:
    view = build_view(synthetic_report(30))
    big = {**view, "nodes": [{**n, "diff": "+x\n" * 20_000} for n in view["nodes"]]}
    fitted, data = fit(big, 400_000)
    assert len(data.encode()) <= 400_000
    assert all(len(n["diff"].splitlines()) <= 401 for n in fitted["nodes"])
    assert "more diff lines left out" in fitted["nodes"][1]["diff"]
    page = render_html(big)
    assert len(page.encode()) <= report_html.MAX_BYTES


def test_without_plotly_the_error_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setattr(report_html.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(report_html.ReportUnavailable, match="pip install plotly"):
        render_html(build_view({}))

"""What drawing a search costs (issue 32): the HTML report of a 200-candidate search, and the
live view the language server keeps for a watched search.

    python benchmarks/search_report.py [--candidates 200] [--repeat 20]

1. ``build_view`` + ``write_html`` of a synthesized report (``tests/report/synthetic.py``: the
   JSON of ``SearchReport.to_dict`` for a search that met N candidates, every verdict, GPU
   timing, device facts, derived inputs; made before the clock starts), once cold (the first
   call: imports, Plotly's bundle read from disk) and ``--repeat`` times warm. Target: at most
   200 ms. Also the file's size (at most 10 MB).
2. ``LiveView``: the first whole view of N evaluated candidates (each node and diff made once),
   a delta with nothing changed, and a delta after one candidate's re-timing: what the server
   computes (in a thread) at most every 0.5 s while a webview watches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.report.synthetic import SOFTMAX, _ok, _source, synthetic_report  # noqa: E402


def ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def report_file(candidates: int, repeat: int) -> None:
    report = synthetic_report(candidates)
    out = Path(tempfile.mkdtemp(prefix="accelopt-report-")) / "search.html"
    t0 = time.perf_counter()
    from accelopt_core.report import build_view, write_html

    write_html(build_view(report), out)
    cold = ms(t0)
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        write_html(build_view(report), out)
        warm.append(ms(t0))
    nodes = len(build_view(report)["nodes"])
    size = os.path.getsize(out) / 2**20
    print(f"report of {candidates} candidates ({nodes} nodes): cold {cold:.0f} ms (imports, "
          f"Plotly read); warm median {statistics.median(warm):.1f} ms, max {max(warm):.1f} ms "
          f"over {repeat}; file {size:.2f} MiB")  # fmt: skip
    print(f"target <= 200 ms: {'met' if max(warm) <= 200 else 'NOT met'}")


def live_view(candidates: int) -> None:
    from accelopt_core.report import LiveView
    from accelopt_core.search import Candidate, CandidateEvaluated, SearchStarted

    base = Candidate.baseline(SOFTMAX, _ok(1.0, 1.0))
    live = LiveView("/x/softmax.py", "softmax_kernel", "local", 4)
    live.apply(CandidateEvaluated(base))
    live.apply(SearchStarted(base, 4))
    cands = []
    for i in range(candidates):
        c = Candidate(f"c{i:011d}", _source(i), base.id, f"plan {i}", "", _ok(0.9, 1.0), 1 + i % 4)
        c.speedup = 1.1
        live.apply(CandidateEvaluated(c))
        cands.append(c)
    t0 = time.perf_counter()
    live.view()
    first = ms(t0)
    t0 = time.perf_counter()
    idle = live.delta()
    quiet = ms(t0)
    cands[-1].retimed = True
    t0 = time.perf_counter()
    one = live.delta()
    changed = ms(t0)
    print(f"live view of {candidates} candidates: first view {first:.0f} ms; delta with nothing "
          f"changed {quiet:.1f} ms ({len(idle['nodes'])} nodes); after one re-timing "
          f"{changed:.1f} ms ({len(one['nodes'])} node)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"os.getloadavg() = {os.getloadavg()} on {os.cpu_count()} CPU(s)")
    report_file(args.candidates, args.repeat)
    live_view(args.candidates)
    print(f"os.getloadavg() at the end = {os.getloadavg()}")

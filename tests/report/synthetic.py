"""A made-up search report of any size, in the exact JSON of ``SearchReport.to_dict`` (built
from the real Candidate, EvalResult, FailedCandidate and SearchReport classes), for the report
view's tests and ``benchmarks/search_report.py``: a beam over ``iterations`` iterations, every
kind of verdict (ranked, correct but not ranked, incorrect, failed at each stage, samples
without code), GPU timing with achieved GB/s and TFLOP/s, device facts and derived inputs."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.search import Candidate, FailedCandidate, SearchReport
from accelopt_core.search.report import explored_record
from tests.gpu_metrics import gpu_metrics

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = (ROOT / "examples" / "triton" / "softmax.py").read_text()
#: Text no page may turn into markup or script.
HOSTILE = (
    "</script><script>document.title = 'PWNED'</script>"
    "<img src=x onerror=\"document.body.setAttribute('data-pwned', '1')\"><b>bold</b> & \"q\""
)


def _source(i: int) -> str:
    """A distinct candidate: the example with one more block size and a comment line."""
    return SOFTMAX.replace("BLOCK_SIZE = 16", f"BLOCK_SIZE = {16 * (1 + i % 64)}", 1) + (
        f"\n# candidate {i}\n"
    )


def _ok(latency: float, baseline: float) -> EvalResult:
    moved = 2 * 64 * 4096 * 4  # bytes of one call of a 64x4096 fp32 softmax
    return EvalResult(
        status="ok",
        latency_ms=latency,
        p20_ms=latency * 0.98,
        p80_ms=latency * 1.03,
        timing="cuda",
        gbps=moved / (latency * 1e-3) / 1e9,
        tflops=5 * 64 * 4096 / (latency * 1e-3) / 1e12,
        pct_of_peak=min(95.0, 100 * (moved / 3.35e12 * 1e3) / latency),
        bound="memory",
        device="NVIDIA H100 80GB HBM3",
        message="correct on 5 seeds",
        metrics=gpu_metrics(),
    )


_FAILURES = [
    ("compile_error", "Triton compilation error: at 12:4: tl.dot needs K >= 16", 40),
    ("incorrect", "max abs error 0.5 > tolerance on seed 3", 48),
    ("rejected", "gate: torch compute: torch.softmax stands in for the kernel", 55),
    ("runtime_error", "illegal memory access", 60),
    ("timeout", "no answer within 120 s", None),
]


def synthetic_report(
    candidates: int = 200, *, iterations: int = 4, hostile: bool = False, seed: int = 0
) -> dict[str, Any]:
    """The ``to_dict`` of a search that met ``candidates`` candidates (plus a few samples
    without code). ``hostile``: plans, reasons and sources carry :data:`HOSTILE`."""
    rng = random.Random(seed)
    base_ms = 1.0
    baseline = Candidate.baseline(SOFTMAX, _ok(base_ms, base_ms))
    beam, seen, failed = [baseline], [], []
    per_iteration = max(1, candidates // iterations)
    for i in range(candidates):
        it = min(iterations, 1 + i // per_iteration)
        parent = rng.choice(beam)
        plan = f"plan {i}: wider blocks" + (f" {HOSTILE}" if hostile else "")
        source = _source(i) + (f"# {HOSTILE}\n" if hostile else "")
        kind = i % 7
        if kind < 4:
            latency = (parent.result.latency_ms or base_ms) * rng.uniform(0.7, 1.1)
            result = _ok(latency, base_ms)
        else:
            status, message, line = _FAILURES[i % len(_FAILURES)]
            result = EvalResult.failure(status, message + (f" {HOSTILE}" if hostile else ""), line)
            if status == "rejected":
                result.rule = "gate: torch compute"
        cand = Candidate(
            id=f"c{i:011d}",
            source=source,
            parent_id=parent.id,
            plan_title=plan,
            plan_text=f"Implement {plan} in the launcher.",
            result=result,
            iteration=it,
            speedup=base_ms / result.latency_ms if result.ok else None,
            retimed=result.ok and kind == 0,
            confirmed=result.ok and kind == 0 and result.latency_ms < base_ms,
        )
        seen.append(cand)
        if result.ok and kind == 0 and len(beam) < 8:
            beam.append(cand)
        if not result.ok:
            failed.append(FailedCandidate.of_candidate(cand))
    for j in range(max(1, candidates // 40)):  # samples whose reply held no code
        failed.append(
            FailedCandidate(
                plan=f"unparsable {j}" + (f" {HOSTILE}" if hostile else ""),
                stage="parse",
                reason="the reply held no code block" + (f" {HOSTILE}" if hostile else ""),
                parent_id=baseline.id,
                iteration=1,
            )
        )
    ranked = sorted(
        [c for c in seen if c.confirmed and c.latency_ms and c.latency_ms < base_ms * 0.97],
        key=lambda c: c.latency_ms,
    )[:10]
    for rank, cand in enumerate(ranked, start=1):
        cand.rank = rank
    ranked_ids = {c.id for c in ranked}
    report = SearchReport(
        path=str(ROOT / "examples" / "triton" / "softmax.py"),
        kernel_name="softmax_kernel",
        entry="softmax",
        baseline=baseline,
        candidates=ranked,
        original_source=SOFTMAX,
        target="ssh://gpu-box",
        timing="cuda",
        proposer="llm",
        iterations_run=iterations,
        evaluated=candidates + 1,
        failed_candidates=failed,
        explored=[
            explored_record(c, SOFTMAX, "softmax.py") for c in seen if c.id not in ranked_ids
        ],
        experiences=[
            {
                "id": "e1",
                "title": "one pass per row" + (f" {HOSTILE}" if hostile else ""),
                "positive": True,
                "speedup": 1.4,
                "hack": None,
                "rule": "load each row once",
                "reason": "",
            }
        ],
        memory_added=1,
        run_id="20250101-000000-abcdef",
        wall_s=120.0,
    )
    return report.to_dict()

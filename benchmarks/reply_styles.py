"""LLM calls per ranked candidate on the scripted reply styles (issue 30).

One legitimate change of examples/triton/softmax.py (a wider block and more warps, or wider
chunks in the kernel) written in the styles real models answer in (tests/reply_styles.py). For
each style, one search (T=1, B=1, N=1, K=1, one fixer try) through the product's Engine: the real
agents and openai client against the scripted OpenAI-compatible double (tests/llm_double.py),
the real evaluator on the local target (Triton interpreter on CPU), a fresh memory directory.
The double answers the planner with one plan, the executor AND the fixer in the style under
test (a model keeps its habits), the summarizer with a rule. The script prints, per style, the
calls by role and whether a candidate was ranked, then the total calls per ranked candidate.

Style ``cut_continued`` (issue 53): the executor's reply is cut at the output token limit
(``finish_reason: "length"``) inside its code block, and the continuation the client asks for
brings the rest; its continuation counts as an executor call.

It runs against whatever code is on ``sys.path`` first, so the same script measures a checkout
before and after a change (copy it and tests/reply_styles.py into the older checkout)::

    python benchmarks/reply_styles.py                 # every style
    python benchmarks/reply_styles.py --styles think diff
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelopt_core.engine import Engine  # noqa: E402
from accelopt_core.kernelfile import parse_kernel_file  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from tests.llm_double import TEST_API_KEY, LLMDouble, RecordedRequest, Reply, text  # noqa: E402
from tests.reply_styles import CUT_FIRST, CUT_REST, ORIGINAL, PLAN, SOFTMAX, STYLES  # noqa: E402

#: style -> the executor's reply, or (its first part cut at the limit, the continuation).
REPLIES: dict[str, str | tuple[str, str]] = {**STYLES, "cut_continued": (CUT_FIRST, CUT_REST)}

RULE = "Title: wider blocks\nRule: cover a row with one block when it fits."
ROLES = ("planner", "executor", "fixer", "summarizer")


async def one_search(
    style: str, reply: str | tuple[str, str], double: LLMDouble, memory: str
) -> dict:
    """One tiny search whose executor and fixer answer in ``style``: the calls by role, the
    candidates ranked and the report's failure counts."""

    def script(req: RecordedRequest) -> str | Reply:
        if req.role == "planner":
            return PLAN
        if req.role == "summarizer":
            return RULE
        if isinstance(reply, str):
            return reply
        if any(m.get("role") == "assistant" for m in req.messages):  # the continuation
            return reply[1]
        return text(reply[0], finish_reason="length")

    double.script = script
    before = len(double.requests)
    settings = Settings.model_validate(
        {
            "memoryDir": memory,
            "llm": double.llm_settings(),
            "search": {
                "iterations": 1,
                "beamWidth": 1,
                "plansPerCandidate": 1,
                "samplesPerPlan": 1,
                "fixerAttempts": 1,
            },
            "evaluation": {"seeds": 2},
        }
    )
    engine = Engine(settings)
    try:
        kf = parse_kernel_file(ORIGINAL, str(SOFTMAX))
        report = await engine.new_search(kf, "softmax_kernel").run()
    finally:
        await engine.close()
    calls = [r.role for r in double.requests[before:]]
    return {
        "style": style,
        "calls": {role: calls.count(role) for role in ROLES},
        "ranked": len(report.candidates),
        "best": report.best.speedup if report.best else None,
        "failures": dict(report.failures),
    }


async def main(styles: list[str]) -> None:
    rows = []
    with LLMDouble() as double:
        os.environ[double.api_key_env] = TEST_API_KEY
        for style in styles:
            with tempfile.TemporaryDirectory(prefix="accelopt-styles-") as memory:
                started = time.monotonic()
                row = await one_search(style, REPLIES[style], double, memory)
                row["wall_s"] = time.monotonic() - started
            rows.append(row)
            calls = " ".join(f"{r[0]}{row['calls'][r]}" for r in ROLES)
            best = f"{row['best']:.2f}x" if row["best"] else "-"
            print(
                f"{style:18} calls {sum(row['calls'].values()):2} ({calls}) ranked "
                f"{row['ranked']} best {best:6} failures {row['failures']} "
                f"({row['wall_s']:.0f} s)",
                flush=True,
            )
    calls = sum(sum(r["calls"].values()) for r in rows)
    ranked = sum(r["ranked"] for r in rows)
    per = f"{calls / ranked:.2f}" if ranked else "inf (nothing ranked)"
    print(f"total: {calls} LLM calls, {ranked} ranked candidates: {per} calls per ranked candidate")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--styles", nargs="*", default=list(REPLIES), choices=list(REPLIES))
    asyncio.run(main(parser.parse_args().styles))

"""A scripted-LLM beam search on an NKI example, through ``accelopt optimize`` with the NKI test
double (tests/doubles) and the scripted OpenAI-compatible LLM (tests/llm_double.py, a TEST
DOUBLE for the paid LLM service): a correct faster rewrite is ranked, a wrong one is rejected
as incorrect and never ranked, and what was learned is an NKI experience."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm_double import TEST_API_KEY, TEST_API_KEY_ENV, LLMDouble, RecordedRequest, text
from tests.nki.conftest import EXAMPLES, double_env

PLAN = "Title: one DMA and one reduction per row tile\nReduce the whole 2048-column tile at once."
RULE = (
    "Title: reduce whole SBUF tiles\nRule: when a row tile fits in SBUF, load it with one "
    "dma_copy and reduce it with one tensor_reduce instead of chunked partial sums."
)


def _module(kernel_body: str) -> str:
    source = (EXAMPLES / "reduction.py").read_text()
    start = source.index("@nki.jit")
    end = source.index("def row_sum(x):")
    return source[:start] + kernel_body + "\n\n" + source[end:]


FAST = _module("""@nki.jit
def row_sum_kernel(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    for p in nl.affine_range(rows // nl.tile_size.pmax):
        r = slice(p * nl.tile_size.pmax, (p + 1) * nl.tile_size.pmax)
        t = nl.ndarray((nl.tile_size.pmax, cols), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r, 0:cols])
        acc = nl.ndarray((nl.tile_size.pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=acc, op=nl.add, data=t, axis=1, keepdims=True)
        nisa.dma_copy(dst=out[r, 0:1], src=acc)
    return out""")

# Keeps only the last chunk's partial sum: numerically wrong.
WRONG = (
    (EXAMPLES / "reduction.py")
    .read_text()
    .replace(
        "nisa.tensor_tensor(dst=acc, data1=acc, data2=part, op=nl.add)",
        "nisa.tensor_tensor(dst=acc, data1=part, data2=part, op=nl.multiply)",
    )
)


@pytest.mark.slow  # a real search (accelopt optimize)
def test_llm_search_ranks_the_faster_nki_rewrite_and_rejects_the_wrong_one(tmp_path: Path):
    assert WRONG != (EXAMPLES / "reduction.py").read_text()

    def script(req: RecordedRequest) -> str | None:
        if req.role == "planner":
            return PLAN
        if req.role == "summarizer":
            return RULE
        return None  # executor replies come from the queue; the fixer gets no code

    kernel = tmp_path / "reduction.py"
    kernel.write_text((EXAMPLES / "reduction.py").read_text())
    with LLMDouble(script=script) as double:
        double.queue(text(f"```python\n{FAST}```"), text(f"```python\n{WRONG}```"), role="executor")
        env = double_env(ACCELOPT_MEMORY_DIR=str(tmp_path / "memory"))
        env[TEST_API_KEY_ENV] = TEST_API_KEY
        argv = [sys.executable, "-m", "accelopt_cli.main", "optimize", str(kernel), "--json",
                "-T", "1", "-B", "1", "-N", "1", "-K", "2",
                "--llm-base-url", double.base_url, "--llm-model", "double-model",
                "--api-key-env", TEST_API_KEY_ENV]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=500)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)

    assert report["proposer"] == "llm" and report["timing"] == "simulated"
    (best,) = report["candidates"]
    assert best["correct"] and best["speedup"] > 1.03
    assert best["plan"] == "one DMA and one reduction per row tile"
    assert "nisa.dma_copy(dst=t, src=x[r, 0:cols])" in best["source"]
    assert report["failures"].get("incorrect", 0) >= 1
    assert "data1=part, data2=part" not in json.dumps(report["candidates"])

    listed = subprocess.run(
        [sys.executable, "-m", "accelopt_cli.main", "memory", "list", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    experiences = json.loads(listed.stdout)
    positives = [e for e in experiences if e["positive"]]
    assert [e["title"] for e in positives] == ["reduce whole SBUF tiles"]
    assert positives[0]["backend"] == "nki"

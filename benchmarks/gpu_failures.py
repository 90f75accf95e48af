"""How long the judge takes to reject a kernel that the CPU interpreter runs but an H100 cannot
(issue 33; the six failure kinds of issue 21, tests/onsite/triton/variants.py).

Each candidate of ``examples/triton/matmul.py`` is evaluated through the real
:class:`~accelopt_core.evaluation.evaluator.Evaluator` and the ``local`` target (a warm worker,
default settings, ``gpu = "H100 SXM5"``, no evaluation cache): the baseline first (it starts
the worker), then the six failing candidates and the legitimate retiling. Prints the status,
the wall time of each evaluation (``eval_s``, s) and the start of its message.

    python benchmarks/gpu_failures.py
    PYTHONPATH=/tmp/before python benchmarks/gpu_failures.py   # another checkout's judge

(With ``PYTHONPATH`` set, ``accelopt_core`` and the candidates come from its first entry.)
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))

from accelopt_core.evaluation import Evaluator  # noqa: E402
from accelopt_core.settings import Settings  # noqa: E402
from accelopt_core.targets import make_target  # noqa: E402
from tests.onsite.triton.variants import FAILING, MATMUL, RETILE  # noqa: E402


async def main() -> None:
    settings = Settings()
    target = make_target(settings)
    evaluator = Evaluator(target, settings)
    try:
        rows = [("baseline", MATMUL), *((name, src) for name, (src, _) in FAILING.items())]
        for name, source in [*rows, ("retiling", RETILE)]:
            result = await evaluator.evaluate(MATMUL, source, "matmul", use_cache=False)
            message = (result.message or "").split(" (kernel")[0][:90]
            print(f"{name:16} {result.status:10} {result.eval_s:6.2f} s  {message}", flush=True)
    finally:
        await target.close()


if __name__ == "__main__":
    asyncio.run(main())

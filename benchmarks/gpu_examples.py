"""Each Triton example's latency against its torch reference at the same GPU shapes (issue 31).

For every example of examples/triton and every timed shape of its ``BENCH["shapes"]`` (all but
the last, which the judge only checks), the inputs of seed 1 are made on CUDA and both the
entry (the naive Triton baseline) and ``reference`` (torch, what cuBLAS and PyTorch's own
kernels give) are timed with ``triton.testing.do_bench`` (L2 flushed before each repetition,
25 ms warm-up, 100 ms of repetitions, the median with p20/p80). Each gets its % of peak on the
device's roofline (:func:`accelopt_core.onsite.judge.roofline.pct_of_peak`, the harness's
flops/bytes). This is a direct measurement, beside the judge: it tells how far each baseline is
from the library and from the roof before any search.

Needs a CUDA GPU (exit status 2 and a message without one). Prints one line per shape and, with
``--json PATH``, writes ``{"device", "versions", "rows": [...]}``.

    python3 benchmarks/gpu_examples.py [--json out.json] [examples/triton/softmax.py ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load(path: Path):
    """The example as a module, at GPU shapes (``ACCELOPT_SHAPE=large``)."""
    os.environ["ACCELOPT_SHAPE"] = "large"
    spec = importlib.util.spec_from_file_location(f"gpu_example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(call) -> tuple[float, float, float]:
    """``(median, p20, p80)`` ms of ``call`` by ``triton.testing.do_bench``."""
    from triton.testing import do_bench

    med, p20, p80 = do_bench(call, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
    return med, p20, p80


def measure(path: Path, device: str) -> list[dict]:
    """One row per timed shape of the example at ``path``: ``example``, ``shape``, ``triton_ms``
    / ``torch_ms`` (medians) with ``_p20``/``_p80``, ``torch_over_triton`` (how many times
    faster the reference is), and each one's % of peak."""
    import torch

    from accelopt_core.onsite.judge.roofline import _low_precision, pct_of_peak

    module = _load(path)
    bench, rows = module.BENCH, []
    for shape in bench["shapes"][:-1]:
        inputs = module.get_inputs(1, "cuda", **shape)
        torch.cuda.synchronize()
        row: dict = {"example": path.stem, "shape": shape}
        work = {k: float(bench[k](*inputs)) for k in ("flops", "bytes") if k in bench}
        low = _low_precision(tuple(inputs))
        for label, fn in (("triton", bench["entry"]), ("torch", module.reference)):
            med, p20, p80 = _timed(lambda fn=fn, inputs=inputs: fn(*inputs))
            pct, bound = pct_of_peak(med, work.get("flops"), work.get("bytes"), device, low)
            row.update({f"{label}_ms": med, f"{label}_p20": p20, f"{label}_p80": p80})
            row.update({f"{label}_pct_of_peak": pct, "bound": bound})
        row["torch_over_triton"] = row["triton_ms"] / row["torch_ms"]
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="example files (default: examples/triton/*.py)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_examples: needs a CUDA GPU (torch.cuda.is_available() is False)")
        return 2
    import triton

    device = torch.cuda.get_device_name(0)
    paths = [Path(p) for p in args.paths] or sorted((ROOT / "examples" / "triton").glob("*.py"))
    rows = []
    for path in paths:
        for row in measure(path, device):
            rows.append(row)
            print(
                f"{row['example']:<12} {json.dumps(row['shape']):<34} triton "
                f"{row['triton_ms']:9.4f} ms ({row['triton_pct_of_peak'] or 0:5.1f}% of peak)  "
                f"torch {row['torch_ms']:9.4f} ms ({row['torch_pct_of_peak'] or 0:5.1f}%)  "
                f"torch {row['torch_over_triton']:.2f}x faster",
                flush=True,
            )
    if args.json:
        versions = {"torch": torch.__version__, "triton": triton.__version__}
        data = {"device": device, "versions": versions, "rows": rows}
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`accelopt profile` of a harness whose cost follows its tensors' size, as a new user runs it
(issue 50's CPU target: a profile in at most 40 times the kernel's own interpreted call, GPU
facts present).

Writes `scale_kernel.py` (``y = 2 * x`` on a float32 vector of ``--mib`` MiB) into a fresh
folder with the setting ``evaluation.sizes = "published"`` (so the CPU interpreter runs it at
its size instead of scaling it down) and a fresh memory folder (so the evaluation cache
misses), runs ``accelopt profile --json`` on it ``--runs`` times, each in a new process (a cold
profile: the warm worker starts with it), and prints, per run: the wall time of the command,
the evaluation's own time (``eval_s``), the median interpreted call (``latency_ms``), their
ratio, the phases and whether the GPU facts are there.

    python benchmarks/profile_scale.py [--mib 64] [--runs 2] [--gpu "H100 SXM5"]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _profile(folder: Path, gpu: str) -> dict:
    memory = tempfile.mkdtemp(prefix="mem-", dir=folder)
    argv = [sys.executable, "-m", "accelopt_cli.main", "profile", "scale_kernel.py", "--json"]
    argv += ["--gpu", gpu, "--memory-dir", memory]
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    try:
        report = json.loads(done.stdout)
    except ValueError:
        raise SystemExit(
            f"no JSON report (exit {done.returncode}): {done.stderr[-2000:]}"
        ) from None
    result = report[0] if isinstance(report, list) else report
    result = result.get("result", result)
    metrics = result.get("metrics") or {}
    call_ms = result.get("latency_ms")
    eval_s = result.get("eval_s")
    return {
        "status": result.get("status"),
        "wall_s": round(wall, 1),
        "eval_s": eval_s,
        "call_ms": call_ms,
        "ratio": round(eval_s / (call_ms / 1000.0), 1) if eval_s and call_ms else None,
        "phases_s": metrics.get("phases_s"),
        "gpu_facts": bool(metrics.get("gpu")),
        "compile_s": (metrics.get("gpu") or {}).get("compile_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="the vector's size, MiB")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--gpu", default="H100 SXM5")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="profile-scale-") as tmp:
        folder = Path(tmp)
        source = (HERE / "scale_kernel.py").read_text()
        source = source.replace('"SCALE_MIB", "64"', f'"SCALE_MIB", "{args.mib}"')
        (folder / "scale_kernel.py").write_text(source)
        (folder / "accelopt.toml").write_text('[evaluation]\nsizes = "published"\n')
        print(f"accelopt profile scale_kernel.py ({args.mib} MiB float32, --gpu {args.gpu!r})")
        for i in range(args.runs):
            print(f"  {i + 1}: {json.dumps(_profile(folder, args.gpu))}")


if __name__ == "__main__":
    main()

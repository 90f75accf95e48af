"""Optional Nsight Compute facts on a CUDA target (issue 21, item 5): achieved occupancy, DRAM
and SM throughput (% of peak) and the top warp stall reasons of each kernel the entry launches,
as ``metrics["ncu"]``.

Only where ``ncu`` is on the target's PATH, only on a CUDA timing path (never under the
interpreter) and only after the evaluation's timing (its replays would disturb it): the stage
process (:mod:`.stage`) runs it when the judge asks, for a passing candidate. ``ncu`` launches
a fresh Python (:data:`PROGRAM`) that loads the harness and candidate the way the stage does,
makes the inputs of one seed on the device and calls the entry once; it profiles the kernels
the compile stage saw, at most :data:`LAUNCHES` launches, with ``--csv --page raw`` (one row per
profiled launch after a header and a units row; the metric names are NCU's own: ``ncu
--query-metrics``).

Standard library only at module level.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys

#: ``metrics["ncu"]`` key for each NCU metric (all % of peak; NCU's "Achieved Occupancy" is
#: ``sm__warps_active.avg.pct_of_peak_sustained_active``).
METRICS = {
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput",
}
#: PC-sampling stall reasons asked for (``smsp__pcsamp_warps_issue_stalled_<reason>``, samples).
STALLS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instructions",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
#: Most launches profiled (each is replayed once per metric pass).
LAUNCHES = 8
#: Top stall reasons kept per kernel.
TOP_STALLS = 3
#: NCU's error code when the driver refuses access to the performance counters (Nsight
#: Compute documentation, "ERR_NVGPUCTRPERM"), and what the warning says then.
COUNTER_PERMISSION = "ERR_NVGPUCTRPERM"
PERMISSION_WARNING = (
    "ncu could not read the GPU's performance counters (ERR_NVGPUCTRPERM): the driver allows "
    "them to administrators only (NVreg_RestrictProfilingToAdminUsers=1) and the candidate's "
    "processes run without capabilities"
)

#: What ``ncu`` runs: ``python -c PROGRAM <setup.json>``. It finds the onsite package the way
#: this process did (a path, or the worker's in-memory bundle), then runs :func:`run_entry`.
PROGRAM = """\
import importlib, importlib.abc, importlib.util, json, sys
d = json.load(open(sys.argv[1]))
sys.path[:0] = d["path"]
b = d.get("bundle")
class _B(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if not b or name not in b["modules"]:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=name in b["packages"])
    def create_module(self, spec):
        return None
    def exec_module(self, m):
        exec(compile(b["modules"][m.__spec__.name], "<" + m.__spec__.name + ">", "exec"), m.__dict__)
sys.meta_path.insert(0, _B())
importlib.import_module(d["module"]).run_entry(d["setup"])
"""


def ncu_path() -> str | None:
    """``ncu`` on this process's PATH, or None."""
    return shutil.which("ncu")


def run_entry(setup: dict) -> None:
    """In the process ``ncu`` launched: load the harness and candidate (:func:`.compile._load`),
    call the entry once on the inputs of ``setup["seed"]`` on ``setup["device"]`` (``"cuda"``;
    the tests' CPU double passes ``"cpu"``) and synchronise. The candidate's prints go to
    stderr, so stdout stays NCU's."""
    sys.stdout = sys.stderr
    import torch

    from .compile import _load

    harness, entry = _load(setup)
    device = str(setup.get("device") or "cuda")
    with torch.no_grad():
        entry(*harness.get_inputs(int(setup.get("seed") or 1), device))
    if device == "cuda":
        torch.cuda.synchronize()


def _onsite_source() -> dict:
    """How the launched Python imports this package: ``{"path", "module", "bundle"}`` (the
    worker's in-memory bundle of onsite sources when it runs from one, see
    ``accelopt_core.targets.shipping.BOOTSTRAP``)."""
    bundle = getattr(sys.modules.get("__main__"), "_b", None)
    if not (isinstance(bundle, dict) and isinstance(bundle.get("modules"), dict)):
        bundle = None
    keep = {"modules": bundle["modules"], "packages": bundle["packages"]} if bundle else None
    return {"path": [p for p in sys.path if p], "module": __name__, "bundle": keep}


def argv(ncu: str, kernels: list[str], program_args: list[str]) -> list[str]:
    """The ``ncu`` command line: raw page as CSV, the :data:`METRICS` and stall metrics, only
    the named kernels, at most :data:`LAUNCHES` launches, child processes followed, and the
    GPU's clocks left as they are (``--clock-control none``: NCU's default locks them to base
    clocks, which changes the device's settings for everyone on it and needs privileges a
    candidate's process does not have)."""
    names = "|".join(re.escape(k) for k in sorted(set(kernels)))
    metrics = [*METRICS, *(STALL_PREFIX + s for s in STALLS)]
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--kernel-name",
        f"regex:^({names})$",
        "--launch-count",
        str(LAUNCHES),
        "--metrics",
        ",".join(metrics),
        *program_args,
    ]


def _number(text: str) -> float | None:
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict]:
    """``ncu --csv --page raw`` output -> one dict per profiled launch: ``{"kernel",
    "achieved_occupancy", "dram_throughput", "sm_throughput" (% of peak, absent when NCU
    reports none), "stalls": {reason: samples}}``. Lines before the header (``==PROF==``, the
    program's output) and the units row are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if '"Kernel Name"' in ln), None)
    if start is None:
        return []
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    out = []
    for row in csv.DictReader(io.StringIO("\n".join(body))):
        if not row.get("ID") or not str(row["ID"]).strip().isdigit():
            continue  # the units row
        entry: dict = {"kernel": row.get("Kernel Name", "")}
        for metric, key in METRICS.items():
            value = _number(row.get(metric, ""))
            if value is not None:
                entry[key] = value
        stalls = {
            name[len(STALL_PREFIX) :]: _number(value)
            for name, value in row.items()
            if name and name.startswith(STALL_PREFIX) and _number(value) is not None
        }
        entry["stalls"] = stalls
        out.append(entry)
    return out


def summarize(launches: list[dict]) -> dict:
    """Per kernel (first-launch order), the mean of each metric over its profiled launches and
    the top :data:`TOP_STALLS` stall reasons as % of that kernel's stall samples:
    ``{"kernels": [{"kernel", "launches", "achieved_occupancy", "dram_throughput",
    "sm_throughput", "top_stalls": [{"reason", "percent"}]}]}``."""
    by_kernel: dict[str, list[dict]] = {}
    for launch in launches:
        by_kernel.setdefault(launch["kernel"], []).append(launch)
    kernels = []
    for name, rows in by_kernel.items():
        entry: dict = {"kernel": name, "launches": len(rows)}
        for key in METRICS.values():
            values = [r[key] for r in rows if key in r]
            if values:
                entry[key] = round(sum(values) / len(values), 2)
        samples: dict[str, float] = {}
        for r in rows:
            for reason, n in r["stalls"].items():
                samples[reason] = samples.get(reason, 0.0) + n
        total = sum(samples.values())
        top = sorted(samples.items(), key=lambda kv: -kv[1])[:TOP_STALLS] if total else []
        entry["top_stalls"] = [
            {"reason": r, "percent": round(100.0 * n / total, 1)} for r, n in top if n > 0
        ]
        kernels.append(entry)
    return {"kernels": kernels}


def profile(setup: dict, kernels: list[str], ncu: str, timeout_s: float) -> dict:
    """Run ``ncu`` on one call of the entry (``setup``: the stage's, plus ``device``) for the
    named ``kernels``; ``{"ncu": summarize(...)}`` or ``{"warning": text}`` (ncu missing,
    failing, timing out or profiling nothing). Temporary files go to ``setup["tmp"]`` (the
    stage's private directory) or the default temporary directory."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="accelopt-ncu-", dir=setup.get("tmp")) as tmp:
        spec = dict(_onsite_source(), setup=_plain(setup))
        path = os.path.join(tmp, "setup.json")
        with open(path, "w") as f:
            json.dump(spec, f)
        cmd = argv(ncu, kernels, [sys.executable, "-c", PROGRAM, path])
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired:
            return {"warning": f"ncu did not finish in {timeout_s:.0f} s"}
        except OSError as exc:
            return {"warning": f"ncu: {exc}"}
    launches = parse_raw_csv(proc.stdout)
    if not launches:
        if COUNTER_PERMISSION in proc.stdout + proc.stderr:
            return {"warning": PERMISSION_WARNING}
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return {"warning": f"ncu profiled no kernel (exit {proc.returncode}): {tail[0][:300]}"}
    return {"ncu": summarize(launches)}


def _plain(setup: dict) -> dict:
    """The JSON-safe part of the stage's setup that :func:`run_entry` reads."""
    keys = ("candidate_source", "harness_source", "entry", "source_name", "cand_file")
    out = {k: setup.get(k) for k in keys}
    out.update(project=setup.get("project"), seed=setup.get("seed"), device=setup.get("device"))
    return out


def checked(raw) -> dict | None:
    """The stage's ``ncu`` answer kept in shape (types checked, sizes bounded), or None."""
    if not isinstance(raw, dict) or not isinstance(raw.get("kernels"), list):
        return None
    kernels = []
    for entry in raw["kernels"][:16]:
        if not isinstance(entry, dict):
            continue
        keep = {"kernel": str(entry.get("kernel", ""))[:120]}
        for key in ("launches", *METRICS.values()):
            if isinstance(entry.get(key), (int, float)) and not isinstance(entry[key], bool):
                keep[key] = entry[key]
        keep["top_stalls"] = [
            {"reason": str(s.get("reason"))[:40], "percent": float(s.get("percent") or 0)}
            for s in (entry.get("top_stalls") or [])[:TOP_STALLS]
            if isinstance(s, dict)
        ]
        kernels.append(keep)
    return {"kernels": kernels}

"""What the sandbox adds to a warm worker's candidate start (issue 34; target: at most 5 ms).

A warm worker (the zygote) forks one judge per candidate; the judge forks the candidate,
reference and compile-stage processes. The sandbox's work per candidate is the judge's
:func:`accelopt_core.onsite.sandbox.policy.confine_judge`: ``HOME``/``TMPDIR`` and the working
directory in the scratch directory, then the Landlock ruleset the worker built once, enforced.
Everything else (the allowlisted environment, the network namespace, building the ruleset)
happens once per worker, in :func:`~accelopt_core.onsite.sandbox.policy.setup_worker`.

This script, in a process set up as a warm worker is (``setup_worker`` first), forks
``--forks`` judges the way the supervisor does (:func:`~accelopt_core.onsite.judge.peers.new_dirs`
then ``fork``) and measures, in each, the set-up step alone and from the fork to the judge's
ready point (the fork itself dominates that, and varies with the load):

- ``baseline``: what a judge did before issue 34 (``chdir`` and ``TMPDIR``; no sandbox);
- ``sandbox``: :func:`~accelopt_core.onsite.sandbox.policy.confine_judge`;
- ``per-candidate ruleset`` (the design not taken): the judge builds the whole ruleset itself.

It also times the once-per-worker parts, and what a network namespace per candidate would cost
(the design not taken: ``unshare`` in each judge). Prints medians and 90th percentiles (ms).

Usage (from the repository root): ``python benchmarks/sandbox_start.py [--forks 200]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(ROOT))

from accelopt_core.onsite.judge.peers import new_dirs, remove_dirs  # noqa: E402
from accelopt_core.onsite.sandbox import landlock, netns, paths, policy, scratch  # noqa: E402


def _forked(step: Callable[[dict], None], forks: int) -> tuple[list[float], list[float]]:
    """``(fork to ready, step alone)`` in ms: from just before ``fork`` to the end of
    ``step(dirs)`` in the child, and ``step`` alone, ``forks`` times (each child on fresh
    directories, as each judge is)."""
    ready, alone = [], []
    for _ in range(forks):
        dirs = new_dirs()
        r, w = os.pipe()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            began = time.perf_counter()
            step(dirs)
            end = time.perf_counter()
            os.write(w, f"{end - start} {end - began}".encode())
            os._exit(0)
        os.close(w)
        total, own = (float(v) * 1e3 for v in os.read(r, 128).split())
        ready.append(total)
        alone.append(own)
        os.close(r)
        os.waitpid(pid, 0)
        remove_dirs(dirs)
    return ready, alone


def _before(dirs: dict) -> None:
    """The judge's set-up before issue 34 (the candidate chdir'd and set TMPDIR)."""
    import tempfile

    os.environ["TMPDIR"] = dirs["tmp"]
    tempfile.tempdir = dirs["tmp"]
    os.chdir(dirs["cwd"])


def _whole_ruleset(dirs: dict) -> None:
    _before(dirs)
    writable = [dirs["root"], *policy.STATE["caches"]]
    landlock.restrict(paths.readable(os.environ, writable), writable + paths.device_nodes())


def _netns(dirs: dict) -> None:
    _before(dirs)
    netns.enter()


def _line(name: str, ms: list[float]) -> str:
    ms = sorted(ms)
    p90 = ms[int(0.9 * (len(ms) - 1))]
    return f"{name:<34} median {statistics.median(ms):7.3f} ms   p90 {p90:7.3f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forks", type=int, default=200)
    args = ap.parse_args()
    t0 = time.perf_counter()
    state = policy.setup_worker()
    print(f"once per warm worker (setup_worker): {(time.perf_counter() - t0) * 1e3:.1f} ms")
    print(f"  filesystem: {state['filesystem'] or state['filesystem_why']}")
    print(f"  network: {state['network'] or state['network_why']}")
    if state["ruleset"] is None:
        print("no Landlock ruleset here: nothing to measure per candidate")
        return
    before: tuple[list[float], list[float]] = ([], [])
    sandbox: tuple[list[float], list[float]] = ([], [])
    for _ in range(args.forks):  # interleaved: the machine's load drifts alike for both
        for into, step in ((before, _before), (sandbox, policy.confine_judge)):
            ready, alone = _forked(step, 1)
            into[0].extend(ready)
            into[1].extend(alone)
    whole = _forked(_whole_ruleset, max(args.forks // 4, 10))
    print(_line("fork to ready, before issue 34", before[0]))
    print(_line("fork to ready, sandboxed", sandbox[0]))
    print(_line("set-up step, before issue 34", before[1]))
    print(_line("set-up step, sandboxed", sandbox[1]))
    print(_line("  per-candidate ruleset (not used)", whole[1]))
    try:
        print(_line("  per-candidate netns (not used)", _forked(_netns, len(whole[1]))[1]))
    except OSError as exc:
        print(f"  per-candidate netns: unavailable ({exc})")
    added = statistics.median(sandbox[1]) - statistics.median(before[1])
    print(f"added by the sandbox per candidate (median): {added:.3f} ms (target <= 5 ms)")
    scratch.remove_scratch()


if __name__ == "__main__":
    main()

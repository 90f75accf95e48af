"""What one tensor costs to cross between the judge's processes (`onsite.runtime.exchange`),
and to be checked there (`onsite.judge.compare`).

Every input and output of an evaluation crosses as a sealed shared-memory segment (issue 50):
the reference process copies its tensor into one (`exchange.share`), the descriptor travels
over the channel, and the judge and the candidate map it privately (`Segment.value`), the
judge forwarding the same segment to the candidate without a copy. This times each step for
one float32 tensor of ``--mib`` MiB, medians of ``--repeat`` runs, in seconds:

- ``share``: the sender's copy into a new sealed segment;
- ``map + read``: the receiver's private mapping of it and one read of every byte (a sum),
  which is when the pages are faulted in;
- ``hop``: one whole hop between two processes: share in a forked child, the descriptor over
  a real :class:`Channel`, map and read in the parent (the fork itself not counted);
- ``forward``: the judge passing a segment it holds on to the candidate (descriptor only) and
  the candidate's map and read;
- ``compare``: :func:`compare.compare` of an output against its reference (equal values);
- ``mutation check``: :func:`compare.mutated_input`, the inputs after a call against the
  judge's mapping of them (unchanged).

    python benchmarks/exchange_hop.py [--mib 64] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def _median_s(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def _pair():
    from accelopt_core.onsite.runtime.channel import Channel, segment_socketpair

    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    a_s, b_s = segment_socketpair()
    return Channel(a_r, a_w, a_s), Channel(b_r, b_w, b_s)


def _hop_s(mib: int, torch, repeat: int) -> float:
    """Children share a tensor of ``mib`` MiB, the parent maps and reads it; the time from the
    parent's request to its read, median. The children are forked before this process uses
    torch's thread pool (a pool does not survive a fork), as the judge forks its peers before
    it makes any input."""
    from accelopt_core.onsite.runtime import exchange

    kids = []
    for _ in range(repeat):
        parent, child = _pair()
        pid = os.fork()
        if pid == 0:
            try:
                parent.close()
                x = torch.randn(mib * 2**20 // 4)
                child.recv()
                child.send({"v": exchange.share((x,), torch=torch)})
            finally:
                os._exit(0)
        child.close()
        kids.append((pid, parent))
    runs = []
    for pid, parent in kids:
        time.sleep(0.5)  # the child has made its tensor
        t0 = time.perf_counter()
        parent.send({"op": "go"})
        (got,) = parent.recv(60)["v"].value(torch)
        got.sum()
        runs.append(time.perf_counter() - t0)
        parent.close()
        os.waitpid(pid, 0)
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=64, help="tensor size, MiB")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import torch

    from accelopt_core.onsite.judge import compare
    from accelopt_core.onsite.runtime import exchange

    out: dict[str, float] = {"hop": _hop_s(args.mib, torch, args.repeat)}
    x = torch.randn(args.mib * 2**20 // 4)
    out["share"] = _median_s(lambda: exchange.share((x,), torch=torch).close(), args.repeat)
    seg = exchange.share((x,), torch=torch)
    out["map + read"] = _median_s(lambda: seg.value(torch)[0].sum(), args.repeat)

    def forward() -> None:
        judge, cand = _pair()
        judge.send({"inputs": seg})
        cand.recv()["inputs"].value(torch)[0].sum()
        judge.close()
        cand.close()

    out["forward"] = _median_s(forward, args.repeat)
    same = x.clone()
    compare.compare(x, same, {}, {})  # NumPy's first use out of the figures
    out["compare"] = _median_s(lambda: compare.compare(x, same, {}, {}), args.repeat)
    out["mutation check"] = _median_s(lambda: compare.mutated_input((x,), (same,)), args.repeat)
    print(f"{args.mib} MiB float32, median of {args.repeat}:")
    for name, seconds in out.items():
        print(f"  {name:<14} {seconds:.3f} s")


if __name__ == "__main__":
    main()

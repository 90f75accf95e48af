"""Measure the optimization memory at a few thousand experiences.

Fills a fresh memory (temporary directory) with synthetic experiences (kernel templates with
renamed identifiers and rules from a small vocabulary), then prints milliseconds for:
one add at the full size, a bulk import, the first retrieval of a new handle (loads every stored
vector), and warm ``retrieve_for`` / ``search`` / ``mentioning`` calls (median of repeats).

    python benchmarks/memory_retrieval.py --n 5000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from accelopt_core.memory import Experience, OptimizationMemory

TEMPLATES = {
    "softmax": """
@triton.jit
def {k}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    {r} = tl.program_id(0)
    {o} = tl.arange(0, BLOCK)
    {v} = tl.load(x_ptr + {r} * n + {o}, mask={o} < n, other=-float("inf"))
    {v} = tl.exp({v} - tl.max({v}, axis=0))
    tl.store(y_ptr + {r} * n + {o}, {v} / tl.sum({v}, axis=0), mask={o} < n)
""",
    "matmul": """
@triton.jit
def {k}(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    {r} = tl.program_id(0)
    {v} = tl.zeros((BM, BN), dtype=tl.float32)
    for {o} in range(0, K, BK):
        {v} += tl.dot(tl.load(a_ptr + {o}), tl.load(b_ptr + {o}))
    tl.store(c_ptr + {r}, {v})
""",
    "layernorm": """
@triton.jit
def {k}(x_ptr, w_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
    {r} = tl.program_id(0)
    {o} = tl.arange(0, BLOCK)
    {v} = tl.load(x_ptr + {r} * n + {o}, mask={o} < n, other=0.0)
    mean = tl.sum({v}, axis=0) / n
    var = tl.sum(({v} - mean) * ({v} - mean), axis=0) / n
    tl.store(y_ptr + {r} * n + {o}, ({v} - mean) * tl.rsqrt(var + eps) * tl.load(w_ptr + {o}))
""",
}
RULES = [
    "Fuse the max and the sum into one pass with online rescaling.",
    "Raise BLOCK_K and use num_stages=3 so tl.dot overlaps the loads.",
    "Use num_warps=8 for rows longer than 4096 elements.",
    "Keep the row in registers and avoid a second global load.",
    "Swizzle program ids in groups for L2 reuse of the B tiles.",
    "Compute the variance with Welford's update in one pass.",
    "Use tl.rsqrt instead of 1 / tl.sqrt.",
    "Vectorize loads with a power-of-two BLOCK and a mask.",
]


def synthetic(i: int, rng: random.Random) -> Experience:
    kind = rng.choice(list(TEMPLATES))
    names = {c: f"{c}{rng.randrange(1000)}" for c in "rov"}
    src = TEMPLATES[kind].format(k=f"{kind}_{i}", **names)
    speedup = rng.uniform(0.5, 3.0)
    return Experience.create(
        backend="triton",
        device=rng.choice(["NVIDIA H100 80GB HBM3", "NVIDIA H200"]),
        timing="cuda",
        kernel_name=f"{kind}_{i}",
        slow_source=src,
        fast_source=src + "\n# rewritten\n",
        speedup=speedup,
        title=f"{kind} rewrite {i}",
        rule=rng.choice(RULES) + " " + rng.choice(RULES),
        created_at=1.7e9 + i,
    )


def ms(fn, repeats: int = 1) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000, help="experiences in the memory")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(0)
    exps = [synthetic(i, rng) for i in range(args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = Path(tmp) / "exps.jsonl"
        jsonl.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in exps))
        mem = OptimizationMemory(Path(tmp) / "m", max_experiences=args.n + 100)
        t_import = ms(lambda: mem.import_jsonl(jsonl))
        extra = [synthetic(args.n + i, rng) for i in range(args.repeats)]
        it = iter(extra)
        t_add = ms(lambda: mem.add(next(it)), args.repeats)
        cold = OptimizationMemory(Path(tmp) / "m", max_experiences=args.n + 100)
        query = TEMPLATES["softmax"].format(k="my_softmax", r="row", o="offs", v="x")
        t_cold = ms(lambda: cold.retrieve_for(query, "triton", "NVIDIA H100 80GB HBM3", 3))
        t_retrieve = ms(
            lambda: cold.retrieve_for(query, "triton", "NVIDIA H100 80GB HBM3", 3), args.repeats
        )
        t_search = ms(lambda: cold.search("online softmax rescaling", 10), args.repeats)
        t_mention = ms(lambda: cold.mentioning("tl.dot", k=5), args.repeats)
        more = iter([synthetic(2 * args.n + i, rng) for i in range(args.repeats)])

        def add_then_retrieve() -> None:
            mem.add(next(more))  # another handle writes: this one refreshes incrementally
            cold.retrieve_for(query, "triton", "NVIDIA H100 80GB HBM3", 3)

        t_refresh = ms(add_then_retrieve, args.repeats)
        n = len(cold)
        print(f"experiences                  {n}")
        print(f"bulk import of {args.n:<6}        {t_import:9.1f} ms")
        print(f"add (median)                 {t_add:9.2f} ms")
        print(f"first retrieval, cold handle {t_cold:9.1f} ms")
        print(f"retrieve_for (median, warm)  {t_retrieve:9.2f} ms")
        print(f"search (median, warm)        {t_search:9.2f} ms")
        print(f"mentioning (median, warm)    {t_mention:9.2f} ms")
        print(f"add + retrieve_for (median)  {t_refresh:9.2f} ms")
        mem.close()
        cold.close()


if __name__ == "__main__":
    main()

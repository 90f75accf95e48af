"""Seconds per test file from a ``pytest --durations=0`` log: the table of the most expensive
files (for benchmarks/README.md, "Test-suite cost") and ``tests/file_seconds.json``, the costs
that order the files for ``--dist loadfile`` (tests/scheduling.py).

Usage::

    python -m pytest -n auto --dist loadfile --durations=0 > durations.log
    python benchmarks/suite_costs.py durations.log [--top 25] [--write]

Sums the setup, call and teardown seconds pytest reports for each test, by file. ``--write``
replaces tests/file_seconds.json (rounded to 0.1 s).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^([0-9.]+)s (?:setup|call|teardown)\s+(\S+?\.py)::")


def file_seconds(log: str) -> dict[str, float]:
    """``{test file: seconds}`` from the durations lines of a pytest log, longest first."""
    costs: Counter[str] = Counter()
    for line in log.splitlines():
        if m := LINE.match(line):
            costs[m[2]] += float(m[1])
    return dict(costs.most_common())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="output of pytest --durations=0")
    parser.add_argument("--top", type=int, default=25, help="rows of the table (25)")
    parser.add_argument("--write", action="store_true", help="write tests/file_seconds.json")
    args = parser.parse_args()
    costs = file_seconds(args.log.read_text(errors="replace"))
    total = sum(costs.values())
    print("| file | s | share |\n| --- | ---: | ---: |")
    for path, seconds in list(costs.items())[: args.top]:
        print(f"| `{path}` | {seconds:.0f} | {seconds / total:.1%} |")
    print(f"\n{len(costs)} files, {total:.0f} s of test time")
    if args.write:
        out = ROOT / "tests" / "file_seconds.json"
        out.write_text(json.dumps({k: round(v, 1) for k, v in costs.items()}, indent=0) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

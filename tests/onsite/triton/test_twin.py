"""The compile stage's compile-mode triton (issue 21, item 6: its cost): the warm parent's
prepared modules make a process that imported triton for the interpreter compile again, and the
memoised ``triton_key()`` equals the one Triton computes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROGRAM = """
import json, os, sys
from accelopt_core.onsite.triton import twin
prepared = twin.prepare()
os.environ["TRITON_INTERPRET"] = "1"
import triton, triton.language as tl
interpreting = not twin.compiling()
import triton.runtime.cache as cache
original = cache.triton_key
twin.switch_to_compiler()
import triton.runtime.cache as cache2
out = {
    "prepared": prepared,
    "interpreting": interpreting,
    "compiling": twin.compiling(),
    "env": os.environ.get("TRITON_INTERPRET"),
    "same_module": cache2 is sys.modules["triton.runtime.cache"],
    "key_ok": cache2.triton_key() == original(),
    "memo": bool(getattr(cache2.triton_key, "accelopt_key", None)),
}
print(json.dumps(out))
"""


def _run(cache: Path) -> dict:
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_prepared_modules_compile_and_the_key_is_triton_s(tmp_path: Path) -> None:
    first = _run(tmp_path)  # computes the key and stores the memo
    second = _run(tmp_path)  # reads the memo
    for out in (first, second):
        assert out["prepared"] and out["interpreting"], out
        assert out["compiling"] and out["env"] is None and out["same_module"], out
        assert out["key_ok"] and out["memo"], out
    memo = list(tmp_path.rglob("accelopt-triton-key.txt"))
    assert len(memo) == 1 and memo[0].read_text().strip()

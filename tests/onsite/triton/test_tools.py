"""The compile stage's facts against NVIDIA's tools on the same cubin, and the binder's
specialization (issue 21): without the divisibility attrs the same matmul loses its 128-bit
loads and cp.async."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelopt_core.onsite.triton import cubin, sass

ROOT = Path(__file__).resolve().parents[3]

SASS = """
        /*0bc0*/                   HGMMA.64x64x16.F32 R24, gdesc[UR8].tnspB, R24 ;
        /*0c10*/              @!P0 HGMMA.64x64x16.F32 R24, gdesc[UR8].tnspB, R24, gsb0 ;
        /*0c20*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0c30*/                   LDG.E.U16 R5, desc[UR4][R2.64] ;
        /*0c40*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR4][R2.64] ;
        /*0c50*/                   UTMALDG.2D [UR8], [UR4] ;
        /*0c60*/                   STL [R1+0x4], R3 ;
        /*0c70*/                   LDL R3, [R1+0x4] ;
"""


def test_sass_counts() -> None:
    assert sass.facts(SASS) == {
        "tensor_core": 2,
        "tensor_core_op": "HGMMA",
        "ldg128": 1,
        "ldg_narrow": 1,
        "ldgsts": 1,
        "tma": 1,
        "stl": 1,
        "ldl": 1,
    }
    assert sass.facts("")["tensor_core_op"] is None


def test_tool_parsers() -> None:
    usage = " Function mm:\n  REG:58 STACK:8 SHARED:1024 LOCAL:4 CONSTANT[0]:592"
    assert cubin.parse_resource_usage(usage) == {
        "mm": {"registers": 58, "stack": 8, "shared": 1024, "local": 4}
    }
    log = (
        "ptxas info    : Compiling entry function 'mm' for 'sm_90a'\n"
        "ptxas info    : Function properties for mm\n"
        "    0 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads\n"
        "ptxas info    : Used 58 registers, used 1 barriers\n"
    )
    assert cubin.parse_ptxas(log) == {
        "mm": {"stack": 0, "spill_stores": 24, "spill_loads": 16, "registers": 58}
    }


@pytest.fixture(scope="module")
def probe() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("aot_probe.py"))],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_registers_match_cuobjdump_and_ptxas(probe) -> None:
    regs = int(re.search(r"REG:(\d+)", probe["cuobjdump"]).group(1))
    assert probe["facts"]["registers"] == regs
    assert int(re.search(r"Used (\d+) registers", probe["ptxas"]).group(1)) == regs
    assert probe["facts"]["spill_stores"] == 0


def test_divisibility_attrs_change_the_code(probe) -> None:
    assert "tt.divisibility" in json.dumps(probe["attrs"])  # Triton's binder put them there
    with_attrs, bare = probe["facts"]["sass"], probe["bare_sass"]
    assert with_attrs["tensor_core_op"] == "HGMMA"
    assert with_attrs["ldgsts"] > 0 and bare["ldgsts"] == 0  # cp.async needs 16-B alignment
    assert probe["bare_registers"] != probe["facts"]["registers"]


def test_batched_disassembly_matches_cuobjdump(probe) -> None:
    """One nvdisasm run over two kernels' code gives each the SASS facts cuobjdump -sass gives."""
    assert probe["sass_cuobjdump"]["tensor_core"] > 0
    assert probe["sass_batched"] == [probe["sass_cuobjdump"]] * 2
    assert probe["facts"]["sass"] == probe["sass_cuobjdump"]


def test_early_disassembly_answers_as_the_plain_run(probe) -> None:
    """nvdisasm started on a placeholder before the code exists (issue 33): the code renamed
    over it in time is what it disassembles; given too late (nvdisasm has read the
    placeholder, 16 zero bytes, and failed), the plain run answers; cancelled, nothing is left."""
    early = probe["early"]
    assert early["at_once"] == {"same": True, "reran": False}, early
    assert early["late"] == {"same": True, "reran": True, "placeholder_rc": 1}, early
    assert early["cancelled"]["rc"] is not None and not early["cancelled"]["folder_left"]


def test_the_stage_starts_the_disassembler_early_only_for_a_pass_that_compiles() -> None:
    """A pass over cached kernels (shorter than ``EARLY_DISASSEMBLY_AFTER_S``) starts no
    nvdisasm; a longer one starts it from the timer, and the stage's cancel kills it."""
    import time

    from accelopt_core.onsite.triton import compile as stage

    assert stage._EarlyStart(90).stop() is None  # never armed
    quick = stage._EarlyStart(90)
    quick.arm()
    assert quick.stop() is None
    time.sleep(stage.EARLY_DISASSEMBLY_AFTER_S * 2)
    assert quick.started is None  # the timer was cancelled, and a late one would not start
    long = stage._EarlyStart(90)
    long.arm()
    deadline = time.monotonic() + 30
    while long.started is None and time.monotonic() < deadline:
        time.sleep(0.01)
    started = long.started
    assert started is not None and started._proc is not None
    proc = started._proc
    long.cancel()
    assert proc.returncode is not None and started._tmp is None

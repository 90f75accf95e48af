"""Constructs the Triton CPU interpreter cannot run are named, with the way out (a GPU target,
``accelopt target check``), in the failure message (:mod:`accelopt_core.onsite.runtime.interpreter`).

The exceptions are real: every small candidate below runs once, in one subprocess under
``TRITON_INTERPRET=1``, loaded from its source as the worker loads candidates; the subprocess
reports each failure's hint, traceback text, exception chain and classified result dict."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from accelopt_core.onsite.runtime.failures import candidate_file, classify
from accelopt_core.onsite.runtime.interpreter import hint
from tests.onsite.runs import BASE, line_of, run_worker

HEAD = """
import torch
import triton
import triton.language as tl
"""

KERNEL = """
@triton.jit
def k(x_ptr, y_ptr, {params}BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
{body}
    tl.store(y_ptr + offs, y)
"""


def _candidate(body: str, params: str = "", args: str = "", launch: str = "", imports: str = ""):
    """A candidate with kernel ``k`` (``body`` computes ``y`` from ``x``) and ``launch(x)``."""
    kernel = KERNEL.format(params=params, body=textwrap.indent(textwrap.dedent(body), "    "))
    launch = launch or f"k[(1,)](x, y, {args}BLOCK=16)"
    return (
        HEAD
        + imports
        + kernel
        + "\n\ndef launch(x):\n    y = torch.empty_like(x)\n"
        + textwrap.indent(textwrap.dedent(launch), "    ")
        + "\n    return y\n"
    )


CASES = {
    "float_to": _candidate("y = x + eps.to(tl.float32)", "eps, ", "1e-5, "),
    "int_to": _candidate("y = tl.load(x_ptr + offs * stride.to(tl.int64))", "stride, ", "1, "),
    "constexpr_to": _candidate(
        "y = tl.load(x_ptr + offs * S.to(tl.int64))", "S: tl.constexpr, ", "S=1, "
    ),
    "libdevice": _candidate(
        "y = libdevice.rsqrt(x)", imports="from triton.language.extra import libdevice\n"
    ),
    "libdevice_import": _candidate(
        "y = x * tanh(x)", imports="from triton.language.extra.libdevice import tanh\n"
    ),
    "cuda_extra": _candidate("y = tl.extra.cuda.libdevice.tanh(x)"),
    "inline_asm": _candidate(
        'y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32,\n'
        "                              is_pure=True, pack=1)"
    ),
    "warmup": _candidate(
        "y = x",
        launch="compiled = k.warmup(x, y, BLOCK=16, grid=(1,))\ncompiled[(1,)](x, y)",
    ),
    "driver": _candidate(
        "y = x",
        launch="sms = triton.runtime.driver.active.utils.get_device_properties(0)\n"
        "k[(1,)](x, y, BLOCK=16)",
    ),
    "torch_cuda": _candidate(
        "y = x",
        launch="sms = torch.cuda.get_device_properties(0).multi_processor_count\n"
        "k[(1,)](x, y, BLOCK=16)",
    ),
    # not constructs of the interpreter: their messages stay as they were
    "bad_arange": _candidate("y = tl.load(x_ptr + tl.arange(0, 10))"),
    "host_none": _candidate("y = x", launch="k[(1,)](x, y, BLOCK=16)\nNone + 1"),
}

SCRIPT = r"""
import ast, json, os, sys, traceback
os.environ["TRITON_INTERPRET"] = "1"
import torch
from accelopt_core.onsite.runtime.failures import _classify, candidate_file, classify
from accelopt_core.onsite.runtime.interpreter import hint
from accelopt_core.onsite.gate.launcher import candidate_kernels
from accelopt_core.onsite.runtime.loading import load_module

out = {}
for name, source in json.loads(sys.stdin.read()).items():
    filename = candidate_file(name + ".py")
    tree = ast.parse(source)
    ctx = dict(cand_file=filename, memory_limit_mb=1024, cand_tree=tree,
               kernels=candidate_kernels(tree), interpreter=True)
    try:
        module = load_module("cand_" + name, source, filename)
        module.launch(torch.rand(16) + 0.5)
        out[name] = None
        continue
    except Exception as exc:
        tb = "".join(traceback.format_exception(exc))
        chain, e = [], exc
        while e is not None:
            chain.append([type(e).__name__, str(e)])
            e = e.__cause__ or e.__context__
        out[name] = dict(hint=hint(exc, tb, source), tb=tb, chain=chain,
                         classified=classify(exc, "run", ctx), old=_classify(exc, "run", ctx))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    """name -> None (it ran) or the failure as the subprocess saw it."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        input=json.dumps(CASES),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


#: recognised case -> (the construct its hint names, a text on the line it names)
RECOGNISED = {
    "float_to": ("`.to()` on the scalar argument `eps`", "eps.to("),
    "libdevice": ("`libdevice.rsqrt`", "libdevice.rsqrt("),
    "libdevice_import": ("`tanh`", "tanh(x)"),
    "cuda_extra": ("`tl.extra.cuda.libdevice.tanh`", "tl.extra.cuda"),
    "inline_asm": ("`tl.inline_asm_elementwise`", "tl.inline_asm_elementwise("),
    "warmup": ("`k.warmup(...)`", "k.warmup("),
    "driver": ("`triton.runtime.driver.active.utils.get_device_properties`", "driver.active"),
    "torch_cuda": ("`torch.cuda.get_device_properties`", "torch.cuda"),
}


@pytest.mark.parametrize("name", RECOGNISED)
def test_construct_and_way_out_are_named(seen, name):
    construct, needle = RECOGNISED[name]
    failure = seen[name]
    note = failure["hint"]
    assert note is not None, failure["chain"]
    assert construct in note
    assert f"(line {line_of(CASES[name], needle)})" in note
    assert "accelopt target check" in note and "GPU target" in note
    # the classified result: the hint first, then the old message; status and line unchanged
    old, new = failure["old"], failure["classified"]
    assert new["message"] == f"{note} Original error: {old['message']}"
    assert (new["status"], new.get("line")) == (old["status"], old.get("line"))


def test_libdevice_hint_suggests_tl_math_only_where_it_has_the_function(seen):
    assert "or use `tl.math.rsqrt`" in seen["libdevice"]["hint"]
    assert "tl.math" not in seen["libdevice_import"]["hint"]  # no tl.math.tanh


def test_warmup_hint_names_the_variable_that_is_none(seen):
    line = line_of(CASES["warmup"], "compiled[(1,)]")
    assert f"so `compiled` (line {line}) is None" in seen["warmup"]["hint"]


def _rebuilt(chain: list[list[str]]) -> BaseException:
    """The chain as fresh exceptions of the same type names and texts, without tracebacks."""
    exc = None
    for type_name, text in reversed(chain):
        outer = type(type_name, (Exception,), {})(text)
        outer.__cause__ = exc
        exc = outer
    return exc


@pytest.mark.parametrize("name", RECOGNISED)
def test_the_line_comes_from_the_traceback_text_without_frames(seen, name):
    failure = seen[name]
    assert hint(_rebuilt(failure["chain"]), failure["tb"], CASES[name]) == failure["hint"]


def test_int_scalar_to_runs_under_the_interpreter(seen):
    # Triton 3.9 wraps int arguments as tensors there: `stride.to(tl.int64)` is no construct
    # the interpreter lacks, so there is nothing to name
    assert seen["int_to"] is None


@pytest.mark.parametrize("name", ["constexpr_to", "bad_arange", "host_none"])
def test_other_errors_keep_their_old_message(seen, name):
    # a tl.constexpr has no .to() on a GPU either; a bad arange or a host bug is no
    # interpreter limitation
    failure = seen[name]
    assert failure["hint"] is None
    assert failure["classified"] == failure["old"]
    assert "accelopt target check" not in failure["classified"]["message"]


def test_no_hint_when_not_under_the_interpreter():
    source = "import triton\n\ndef launch():\n    raise RuntimeError('0 active drivers ([]).')\n"
    filename = candidate_file("gpu.py")
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    try:
        namespace["launch"]()
    except RuntimeError as exc:
        ctx = dict(cand_file=filename, memory_limit_mb=64, interpreter=False)
        plain = classify(exc, "run", ctx)
        assert plain["message"] == "error while running: RuntimeError: 0 active drivers ([])."
        assert plain["line"] == 4
        assert hint(exc, "", source) is not None  # a CPU target would name it


FLOAT_TO = (
    BASE.replace("out_ptr, n, BLOCK", "out_ptr, n, alpha, BLOCK")
    .replace("x + y, mask=mask", "x + y * alpha.to(tl.float32), mask=mask")
    .replace("out, n, BLOCK=64", "out, n, 1.0, BLOCK=64")
)


@pytest.mark.slow
def test_worker_names_the_construct_and_the_way_out():
    assert FLOAT_TO.count("alpha") == 2 and "1.0, BLOCK=64" in FLOAT_TO
    result, _ = run_worker(FLOAT_TO, source_name="float_to.py", seeds=[1])
    # an error inside a kernel under the interpreter is classified compile_error
    assert result.status == "compile_error", result.message
    assert result.message.startswith("the Triton interpreter (TRITON_INTERPRET=1, CPU)")
    assert "`.to()` on the scalar argument `alpha`" in result.message
    assert "accelopt target check" in result.message
    assert result.line == line_of(FLOAT_TO, "alpha.to(")

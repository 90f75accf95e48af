"""The static gate on the AST (no worker process): what a launcher may do, which decorators
make a kernel (the one jit detector of :mod:`accelopt_core.onsite.names`), and precheck."""

from __future__ import annotations

import ast

import pytest

from accelopt_core.onsite.gate import precheck as gate
from accelopt_core.onsite.gate.launcher import candidate_kernels, entry_backend
from tests.onsite.runs import BASE, src

LAUNCH = "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)\n"


def _gate(new_launcher_lines: str, imports: str = "", baseline: str | None = BASE):
    cand = BASE.replace(LAUNCH, LAUNCH + new_launcher_lines).replace(
        "import torch\n", "import torch\n" + imports, 1
    )
    return gate.static_gate(cand, "add", baseline)


def test_gate_allows_allocation_views_and_metadata():
    ok, msg, _ = _gate(
        "    out = out.view(-1).contiguous().reshape(x.shape)\n"
        "    z = torch.zeros_like(x, dtype=x.dtype)\n"
        "    m = math.ceil(n / 64) + triton.next_power_of_2(n) + x.stride(0) + n * 2\n",
        imports="import math\n",
    )
    assert ok, msg


@pytest.mark.parametrize(
    "lines, imports, words",
    [
        (
            "    out = F.relu(out)\n",
            "import torch.nn.functional as F\n",
            "torch.nn.functional.relu",
        ),
        ("    out = x @ y\n", "", "@ (matmul)"),
        ("    s = x.sum()\n", "", ".sum()"),
        ("    out = x + y\n", "", "arithmetic on tensor 'x'"),
        ("    t = threading.Thread(target=print)\n", "import threading\n", "threading"),
        ("    s = torch.cuda.Stream()\n", "", "torch.cuda.Stream"),
        ("    global _LAST\n    _LAST = out\n", "", "global"),
        ("    _CACHE[x.data_ptr()] = out\n", "_CACHE = {}\n", "_CACHE"),
        ("    os.system('true')\n", "import os\n", "os.system"),
    ],
)
def test_gate_rejects_compute_concurrency_and_caches(lines, imports, words):
    # the original imports the module too (issue 53: its names are judged, not its import)
    ok, msg, line = _gate(
        lines, imports, BASE.replace("import torch\n", "import torch\n" + imports)
    )
    assert not ok
    assert words in msg
    assert line is not None


def test_gate_follows_helpers_and_allows_what_the_baseline_has():
    helper = "\n\ndef _finish(t):\n    return torch.softmax(t, 0)\n"
    cand = BASE.replace("    return out\n", "    return _finish(out)\n", 1) + helper
    ok, msg, _ = gate.static_gate(cand, "add", BASE)
    assert not ok and "torch.softmax" in msg
    # the same op in the baseline's launcher is not "standing in for the kernel"
    assert gate.static_gate(cand, "add", cand)[0]


def test_precheck_separates_syntax_errors_from_rejections():
    assert gate.precheck("def add(:\n", "add")["status"] == "compile_error"
    rejected = gate.precheck(src("try_except.py"), "add", BASE)
    assert rejected["status"] == "rejected" and rejected["rule"] == "gate: try/except"
    assert gate.precheck(src("ok_block128.py"), "add", BASE) is None


# --- which decorators make a kernel: the host's jit detector, on the target too -------------


def test_a_launcher_import_inside_the_function_is_still_resolved():
    # Module-level imports decide what a decorator is; calls are resolved through every import,
    # so a launcher cannot hide torch compute behind its own `import ... as F`.
    lines = (
        "    import torch.nn.functional as F\n    out = F.scaled_dot_product_attention(x, y, y)\n"
    )
    ok, msg, _ = _gate(lines)
    assert not ok and "torch.nn.functional.scaled_dot_product_attention" in msg


@pytest.mark.parametrize(
    "imports, decorator",
    [
        ("from numba import jit\n", "@jit"),  # the old gate took any "jit" for a Triton kernel
        ("import numba\n", "@numba.jit"),
        ("def jit(fn):\n    return fn\n", "@jit"),
    ],
)
def test_a_jit_of_another_origin_is_no_kernel(imports, decorator):
    cand = BASE.replace("@triton.jit\n", decorator + "\n").replace(
        "import torch\n", "import torch\n" + imports, 1
    )
    ok, msg, _ = gate.static_gate(cand, "add", BASE)
    assert not ok and "defines no @triton.jit or @nki.jit kernel" in msg


def test_triton_jit_imported_by_name_is_a_kernel():
    cand = BASE.replace("@triton.jit\n", "@jit\n").replace(
        "import torch\n", "import torch\nfrom triton import jit\n", 1
    )
    assert gate.static_gate(cand, "add", BASE) == (True, "", None)


def test_a_plain_function_redefining_a_kernel_is_no_kernel():
    cand = BASE.replace(
        "\n\ndef add(x, y):",
        "\n\ndef add_kernel(*args, **kwargs):\n    return None\n\n\ndef add(x, y):",
    )
    ok, msg, _ = gate.static_gate(cand, "add", BASE)
    assert not ok and "defines no @triton.jit or @nki.jit kernel" in msg


NKI_LEGACY = """\
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np


@nki.jit
def add_kernel(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(c, value=nl.add(nl.load(a), nl.load(b)))
    return c


def add(a, b):
    out = add_kernel(a, b)
    return out
"""
# The same kernel with the standalone `nki` package of newer Neuron SDKs.
NKI_STANDALONE = NKI_LEGACY.replace("import neuronxcc.nki as nki\n", "import nki\n").replace(
    "neuronxcc.nki.language", "nki.language"
)


@pytest.mark.parametrize("source", [NKI_LEGACY, NKI_STANDALONE], ids=["neuronxcc.nki", "nki"])
def test_nki_kernels_are_gated_alike_under_both_package_names(source):
    tree = ast.parse(source)
    kernels = candidate_kernels(tree)
    assert kernels == {"add_kernel": "nki"}
    assert entry_backend(tree, "add", kernels) == "nki"
    assert gate.static_gate(source, "add", source) == (True, "", None)
    # NumPy compute in the launcher is compute outside the kernel, whichever package
    cheat = source.replace("    return out\n", "    return np.add(a, b)\n")
    ok, msg, _ = gate.static_gate(cheat, "add", source)
    assert not ok and "numpy.add" in msg
    # a call through the NKI API is not launcher compute (the imported-module rule)
    api = source.replace("    return out\n", "    return nl.add(out, out)\n")
    assert gate.static_gate(api, "add", source)[0]

"""Imports by allowlist (issue 53, item 3): a candidate imports the modules its original file
imports (its own package's too), the kernel stack and a short list of modules without side
effects; anything else is ``gate: module not allowed``, naming the module and the setting
``accelopt.gate.allowModules``, which lets a named module through. The denylist stays for names
inside allowed modules, the parts of torch, triton and numpy that load native code, start
processes or touch files and caches among them (:mod:`accelopt_core.onsite.gate.stack`), and
it is reached through attributes too (``torch.os``, ``getattr(np, "ctypeslib")``).

Each snippet is built on the small add kernel of tests/candidates/add.py and gated against it;
the adversarial candidate files are in tests/adversarial/candidates (``write_*``, ``stack_*``,
tests/adversarial/test_escapes.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from accelopt_core.evaluation.cache import cache_key
from accelopt_core.onsite.gate import precheck as gate
from accelopt_core.onsite.gate.stack import (
    KERNEL_STACK,
    REEXPORTED,
    SIDE_EFFECT_FREE,
    allowed_modules,
    module_allowed,
    reached_module,
)
from accelopt_core.onsite.protocol import EvalRequest
from accelopt_core.settings import Settings, load_settings
from tests.onsite.runs import BASE, line_of, run_entry

LAUNCH = "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)\n"
NOT_ALLOWED = "gate: module not allowed"
SETTING = "accelopt.gate.allowModules"


def cand(launcher: str = "", imports: str = "", module: str = "") -> str:
    """add.py with ``imports`` after ``import torch``, ``module`` code before the launcher and
    ``launcher`` lines after the launch."""
    out = BASE.replace(LAUNCH, LAUNCH + launcher).replace(
        "import torch\n", "import torch\n" + imports, 1
    )
    if module:
        out = out.replace("\n\ndef add(x, y):", "\n\n" + module + "\n\ndef add(x, y):")
    return out


def verdict(source: str, baseline: str = BASE, **kw) -> dict | None:
    return gate.precheck(source, "add", baseline, "<candidate:add.py>", **kw)


# --- allowed ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("imports", "launcher", "module"),
    [
        ("from typing import Optional\n", "    k: Optional[int] = n\n", ""),
        ("import dataclasses\n", "", "@dataclasses.dataclass\nclass Cfg:\n    block: int = 64\n"),
        ("from functools import partial\n", "    f = partial(triton.cdiv, n)\n", ""),
        ("import math\n", "    b = math.ceil(n / 64)\n", ""),
        ("import enum\n", "", "class Mode(enum.Enum):\n    A = 1\n"),
        ("import itertools\n", "    p = list(itertools.product((1, 2), (3,)))\n", ""),
        ("from collections import namedtuple\n", "", "Cfg = namedtuple('Cfg', 'block')\n"),
        ("from collections.abc import Sequence\n", "    s = isinstance(x.shape, Sequence)\n", ""),
        ("from operator import itemgetter\n", "", ""),
        ("import numpy as np\n", "    z = np.float32(1.0)\n", ""),
        ("import triton.language.extra\n", "", ""),
        ("import torch.nn.functional as F\n", "", ""),
        ("from __future__ import annotations\n", "", ""),
        ("from neuronxcc import nki\nimport nki.language as nl\n", "", ""),
        ("", "    import math as m\n    b = m.ceil(n / 64)\n", ""),  # an import in a function
        ("", "    d = triton.runtime.driver.active.get_current_device()\n", ""),
        ("", "", "_SEP = torch.os.sep\n"),  # os is the original's (below)
    ],
    ids=[
        "typing",
        "dataclasses",
        "functools.partial",
        "math",
        "enum",
        "itertools",
        "collections",
        "collections.abc",
        "operator",
        "numpy",
        "triton submodule",
        "torch submodule",
        "__future__",
        "nki",
        "import in a function",
        "triton driver query",
        "a module the original imports, reached through torch",
    ],
)
def test_the_kernel_stack_and_side_effect_free_modules_pass(imports, launcher, module):
    baseline = BASE.replace("import torch\n", "import os\nimport torch\n", 1)
    source = cand(launcher, imports, module).replace("import torch\n", "import os\nimport torch\n")
    assert verdict(source, baseline) is None


def test_a_module_the_original_imports_may_be_imported_again_anywhere():
    baseline = BASE.replace("import torch\n", "import os.path\nimport torch\n", 1)
    # ``import os.path`` binds ``os``: a candidate's ``import os`` inside a function is allowed
    source = cand("    import os\n    p = os.path.basename('a/b')\n").replace(
        "import torch\n", "import os.path\nimport torch\n", 1
    )
    assert verdict(source, baseline) is None
    # ... but not against a baseline without it, and the denylist still holds inside it
    assert verdict(source)["rule"] == NOT_ALLOWED
    shell = cand("    import os\n    os.system('true')\n").replace(
        "import torch\n", "import os.path\nimport torch\n", 1
    )
    assert verdict(shell, baseline)["rule"] == "gate: shell"


# --- rejected --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snippet", "module", "needle"),
    [
        (cand(imports="import wave\n"), "wave", "import wave"),
        (cand(imports="import xml.etree.ElementTree as ET\n"), "xml.etree.ElementTree", "xml"),
        (cand(imports="from http import cookiejar\n"), None, "from http"),  # network rule
        (cand(imports="from py_compile import compile as c\n"), "py_compile", "py_compile"),
        (cand("    import cProfile\n"), "cProfile", "import cProfile"),
        (cand(module="import trace\n"), "trace", "import trace"),
        (cand(imports="import pwd\n"), "pwd", "import pwd"),
        (cand("    h = torch.os.getcwd()\n"), "os", "torch.os"),  # not the original's
        (
            cand("    np.matrixlib.defmatrix.warnings.warn('x')\n", "import numpy as np\n"),
            "warnings",
            "np.matrixlib",
        ),
        (cand("    w = torch.warnings.warn('x')\n"), "warnings", "torch.warnings"),
        (cand("    t = getattr(torch, 'os')\n"), "os", "getattr(torch"),
    ],
    ids=[
        "import",
        "import a.b.c as x",
        "from a import b (on the denylist)",
        "from a import b as c",
        "import in a function",
        "import at module level",
        "pwd",
        "torch.os",
        "numpy's os",
        "torch.warnings",
        "getattr(torch, 'os')",
    ],
)
def test_a_module_on_no_list_is_rejected_naming_it_and_the_setting(snippet, module, needle):
    found = verdict(snippet)
    assert found is not None and found["status"] == "rejected", found
    assert found["line"] == line_of(snippet, needle), found
    if module is None:
        assert found["rule"] == "gate: network", found
        return
    assert found["rule"] == NOT_ALLOWED, found
    assert f"'{module}'" in found["message"] and SETTING in found["message"], found["message"]


@pytest.mark.parametrize(
    ("snippet", "rule", "needle"),
    [
        (cand("    m = __import__('wave')\n"), "gate: dynamic import", "__import__"),
        (cand(imports="import importlib\n"), "gate: dynamic import", "importlib"),
        (cand(imports="from importlib import import_module\n"), "gate: dynamic import", "from"),
        (cand(imports="import importlib.util\n"), "gate: dynamic import", "importlib"),
        (cand("    s = torch.__loader__\n"), "gate: dynamic import", "__loader__"),
        (cand("    s = triton.__spec__\n"), "gate: dynamic import", "__spec__"),
        (cand("    o = print.__self__.open\n"), "gate: globals lookup", "__self__"),
        (cand("    c = torch.__getattribute__('cuda')\n"), "gate: dynamic getattr", "__get"),
        (cand("    g = getattr\n"), "gate: dynamic getattr", "g = getattr"),
        (
            cand(
                "    f = functools.reduce(getattr, ['os', 'system'], torch)\n", "import functools\n"
            ),
            "gate: dynamic getattr",
            "reduce",
        ),
        (
            cand("    m = [torch][0]\n    h = getattr(m, 'o' + 's')\n"),
            "gate: dynamic getattr",
            "h =",
        ),
    ],
    ids=[
        "__import__",
        "importlib",
        "from importlib import",
        "importlib.util",
        "__loader__",
        "__spec__",
        "builtins through __self__",
        "__getattribute__",
        "getattr passed on",
        "reduce(getattr, ...)",
        "computed getattr on any object",
    ],
)
def test_dynamic_imports_and_lookups_are_rejected(snippet, rule, needle):
    found = verdict(snippet)
    assert found is not None and found["rule"] == rule, found
    assert found["line"] == line_of(snippet, needle), found


@pytest.mark.parametrize(
    ("snippet", "rule", "named"),
    [
        (cand("    c = np.ctypeslib\n", "import numpy as np\n"), "gate: ctypes", "np.ctypeslib"),
        (cand(imports="import numpy.ctypeslib as c\n"), "gate: ctypes", "numpy.ctypeslib"),
        (cand(imports="from numpy import ctypeslib\n"), "gate: ctypes", "numpy.ctypeslib"),
        (
            cand("    c = getattr(np, 'ctypeslib')\n", "import numpy as np\n"),
            "gate: ctypes",
            "ctypeslib",
        ),
        (
            cand("    c = getattr(np, 'ctypes' + 'lib')\n", "import numpy as np\n"),
            "gate: dynamic getattr",
            "numpy",
        ),
        (cand("    m = [torch][0]\n    m.ops.load_library('x.so')\n"), "gate: ctypes", "load_"),
        (cand("    p = x.numpy().ctypes.data\n"), "gate: ctypes", "ctypes"),
        (cand("    torch.os.system('true')\n"), "gate: shell", "torch.os.system"),
        (cand("    torch.classes.load_library('x.so')\n"), "gate: ctypes", "load_library"),
        (cand("    torch._dynamo.reset()\n"), "gate: ctypes", "torch._dynamo"),
        (cand("    torch.hub.list('a/b')\n"), "gate: file I/O", "torch.hub"),
        (cand("    k = torch.cuda._compile_kernel('', 'f')\n"), "gate: ctypes", "_compile_kernel"),
        (cand("    lib = torch.cuda._utils._get_cuda_library()\n"), "gate: ctypes", "_utils"),
        (cand("    torch.cuda.tunable.enable()\n"), "gate: file I/O", "torch.cuda.tunable"),
        (cand("    torch.utils.data.DataLoader([])\n"), "gate: concurrency", "torch.utils.data"),
        (
            cand(imports="from triton.runtime.cache import FileCacheManager\n"),
            "gate: file I/O",
            "triton.runtime.cache",
        ),
        (cand("    triton.runtime.build.subprocess\n"), "gate: ctypes", "triton.runtime.build"),
        (cand("    triton.knobs.cache.dir\n"), "gate: file I/O", "triton.knobs.cache"),
        (cand("    triton.testing.nvsmi(['clocks.sm'])\n"), "gate: concurrency", "nvsmi"),
        (cand(imports="import triton.tools.disasm\n"), "gate: ctypes", "triton.tools.disasm"),
        (cand("    np.save('x', x)\n", "import numpy as np\n"), "gate: file I/O", "numpy.save"),
        (
            cand(
                "    v = as_strided(x.numpy(), (9,), (8,))\n",
                "from numpy.lib.stride_tricks import as_strided\n",
            ),
            "gate: ctypes",
            "as_strided",
        ),
        (cand("    p = x.numpy().__array_interface__\n"), "gate: ctypes", "__array_interface__"),
        (
            cand(module="class Raw:\n    __array_interface__ = {'data': (4096, False)}\n"),
            "gate: ctypes",
            "Raw.__array_interface__",
        ),
        (
            cand(
                module="class Raw:\n    @property\n    def __cuda_array_interface__(self):\n        return {}\n"
            ),
            "gate: ctypes",
            "Raw.__cuda_array_interface__",
        ),
        (cand(imports="import numpy.f2py\n"), "gate: ctypes", "numpy.f2py"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_the_denylist_inside_the_kernel_stack(snippet, rule, named):
    found = verdict(snippet)
    assert found is not None and found["rule"] == rule, found
    assert named in found["message"], found["message"]


def test_local_names_like_modules_are_not_taken_for_them():
    launcher = (
        "    code = 'abc'\n    c = code.upper()\n    io = x.shape\n    k = io.count(1)\n"
        "    signal = x.stride(0)\n"
    )
    assert verdict(cand(launcher)) is None
    assert verdict(cand("    m = [torch][0]\n    m.os.system('true')\n"))["rule"] == "gate: shell"


def test_the_kernel_stack_parts_kernels_use_pass():
    """What real Triton kernels reach in the stack: the driver's device queries, the tensor
    descriptor, libdevice, ``triton.testing.do_bench``, ``torch.cuda`` queries."""
    launcher = (
        "    props = triton.runtime.driver.active.utils.get_device_properties(0)\n"
        "    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None\n"
        "    cdiv = triton.cdiv(n, 64)\n"
    )
    module = "_TRACING = (torch.compiler.is_compiling, torch._dynamo.is_compiling)\n"
    imports = (
        "from triton.tools.tensor_descriptor import TensorDescriptor\n"
        "from triton.language.extra import libdevice\n"
        "import triton.testing\n"
    )
    assert verdict(cand(launcher, imports, module)) is None


# --- the user's own package ------------------------------------------------------------------

MINIKERN = Path(__file__).resolve().parents[1] / "byok" / "project" / "minikern"
RMS = (MINIKERN / "ops" / "rms_norm.py").read_text("utf-8")
REL = "from ..utils import calculate_settings, ensure_contiguous"


@pytest.mark.parametrize(
    ("replacement", "module", "rule"),
    [
        (
            "from minikern.utils import calculate_settings, ensure_contiguous",
            "minikern.ops.rms_norm",
            None,
        ),
        ("from minikern import utils\n" + REL, "minikern.ops.rms_norm", None),
        ("from . import scale_shift\n" + REL, "minikern.ops.rms_norm", None),
        ("import minikern.ops.scale_shift\n" + REL, "minikern.ops.rms_norm", None),
        # a standalone file has no package: its neighbours are no module it may import
        ("from minikern.utils import calculate_settings, ensure_contiguous", None, NOT_ALLOWED),
        ("import otherpkg\n" + REL, "minikern.ops.rms_norm", NOT_ALLOWED),
    ],
    ids=[
        "absolute sibling",
        "the package",
        "relative sibling",
        "another submodule",
        "no package",
        "another package",
    ],
)
def test_sibling_modules_of_the_kernels_package_pass(replacement, module, rule):
    assert REL in RMS
    found = gate.precheck(RMS.replace(REL, replacement), "rms_norm", RMS, "rms_norm.py", module)
    if rule is None:
        assert found is None, found
    else:
        assert found is not None and found["rule"] == rule, found


# --- the setting ------------------------------------------------------------------------------


def test_allow_modules_lets_a_named_module_through_and_the_denylist_stays():
    wave = cand("    f = wave.WAVE_FORMAT_PCM\n", "import wave\n")
    assert verdict(wave)["rule"] == NOT_ALLOWED
    assert verdict(wave, allow_modules=("wave",)) is None
    assert verdict(wave, allow_modules=("xml",))["rule"] == NOT_ALLOWED
    sub = cand(imports="import xml.etree.ElementTree as ET\n")
    assert verdict(sub, allow_modules=("xml",)) is None  # submodules are included
    shell = cand("    os.system('true')\n", "import os\n")
    assert verdict(shell, allow_modules=("os",))["rule"] == "gate: shell"
    for denied in ("import pickle\n", "import importlib\n", "import ctypes\n"):
        rule = verdict(cand(imports=denied), allow_modules=(denied.split()[1],))["rule"]
        assert rule != NOT_ALLOWED, denied  # a denylisted module keeps its own rule


def test_the_setting_is_validated_and_documented():
    settings = Settings.model_validate({"gate": {"allowModules": ["einops", " pkg.sub "]}})
    assert settings.gate.allow_modules == ["einops", "pkg.sub"]
    assert Settings().gate.allow_modules == []
    loaded, issues = load_settings({"gate": {"allowModules": ["os; rm -rf", "ok"]}})
    assert loaded.gate.allow_modules == []
    assert [i.key for i in issues] == [SETTING], issues
    assert "not a module name" in issues[0].message
    field = Settings.model_fields["gate"].annotation.model_fields["allow_modules"]
    assert "gate: module not allowed" in field.description


def test_the_setting_travels_in_the_request_and_splits_the_cache():
    plain = EvalRequest(candidate_source="c", harness_source="h", entry="add")
    allowed = EvalRequest(
        candidate_source="c", harness_source="h", entry="add", allow_modules=["wave"]
    )
    assert allowed.to_dict()["allow_modules"] == ["wave"]
    assert cache_key(plain, "t") != cache_key(allowed, "t")


def test_the_target_gates_with_the_requests_allowed_modules():
    """The gate on the target (the worker's child) reads the setting from the request: without
    it the import is rejected there too, with it the candidate runs and is correct."""
    wave = cand("    f = wave.WAVE_FORMAT_PCM\n", "import wave\n")
    rejected = run_entry(wave, BASE, "add")
    assert rejected.status == "rejected" and rejected.rule == NOT_ALLOWED, rejected.message
    assert "'wave'" in rejected.message and SETTING in rejected.message
    ok = run_entry(wave, BASE, "add", allow_modules=["wave"])
    assert ok.status == "ok", ok.message


# --- the tables -------------------------------------------------------------------------------


def test_module_allowed_matches_whole_parts():
    allowed = allowed_modules(frozenset({"os.path"}), "pkg.ops.k", ("einops",))
    assert {"torch", "numpy", "typing", "pkg", "einops", "os.path"} <= allowed
    assert module_allowed("torch.nn.functional", allowed)
    assert module_allowed("os.path", allowed) and not module_allowed("os", allowed)
    assert not module_allowed("torchvision", allowed)  # a prefix of the text is not a parent
    assert not module_allowed("einopsx", allowed)
    assert reached_module("torch.os.system") == ("os", "os.system")
    assert reached_module("torch._dynamo.utils.subprocess.run") == ("subprocess", "subprocess.run")
    assert reached_module("torch.random.manual_seed") is None  # torch's own module
    assert set(KERNEL_STACK) | set(SIDE_EFFECT_FREE) >= {"torch", "triton", "numpy", "math"}


#: Module-valued attributes of torch / triton / numpy modules that are no escape: a module of the
#: stack or without side effects under a short name, or a harmless module (string handling,
#: numbers, dates), or an attribute name that is also a legitimate part of the stack elsewhere
#: (``torch.random``, ``torch.signal``, ``numpy.copy``, ``triton.language.math``).
HARMLESS = {
    "abc", "bisect", "cmath", "collections", "contextvars", "copy", "dataclasses", "datetime",
    "difflib", "enum", "functools", "heapq", "it", "itertools", "itl", "keyword", "math",
    "numbers", "operator", "random", "re", "signal", "statistics", "string", "struct",
    "t", "textwrap", "time", "traceback", "types", "typing", "typing_extensions", "container_abcs",
    "_cuda_bindings_runtime", "_cuda_driver", "_cuda_runtime", "cuda", "np", "sympy", "mpmath",
    "pytree", "cpp", "nvtx", "optree", "filelock", "fsspec", "jinja2", "networkx", "triton",
    "tl", "torch", "mlib",
}  # fmt: skip


#: Lists, in a fresh interpreter that imports :data:`_LOADED`, each module-valued attribute of a
#: loaded ``torch.*`` / ``triton.*`` / ``numpy.*`` module whose module lies outside them (JSON).
_HELD = """
import importlib, json, sys, types, warnings
warnings.simplefilter("ignore")
for name in sys.argv[1:]:
    importlib.import_module(name)
stack = ("torch", "triton", "numpy")
held = {}
for mod_name, mod in list(sys.modules.items()):
    if not isinstance(mod, types.ModuleType) or mod_name.split(".")[0] not in stack:
        continue
    for attr, value in list(getattr(mod, "__dict__", {}).items()):
        if isinstance(value, types.ModuleType) and not attr.startswith("__"):
            if value.__name__.split(".")[0] not in stack:
                held[f"{mod_name}.{attr}"] = value.__name__
print(json.dumps(held))
"""
_LOADED = (
    "torch", "triton", "triton.language", "numpy", "numpy.ctypeslib", "triton.runtime.cache",
    "triton.runtime.build", "triton.testing", "torch.cuda", "torch.nn.functional",
)  # fmt: skip


def test_every_module_torch_triton_and_numpy_hold_is_classified():
    """Read from the installed packages: each module-valued attribute of a ``torch.*`` /
    ``triton.*`` / ``numpy.*`` module (those a kernel file's imports load) whose module lies
    outside them is either in :data:`REEXPORTED` (judged as that module) or known harmless. A
    new version that adds one fails here until it is classified."""
    out = subprocess.run(
        [sys.executable, "-c", _HELD, *_LOADED], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    held = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(held) > 50, held  # torch alone holds os, sys, ... in many modules
    unclassified = {
        k: v for k, v in held.items() if k.rsplit(".", 1)[1] not in {*REEXPORTED, *HARMLESS}
    }
    assert not unclassified, unclassified

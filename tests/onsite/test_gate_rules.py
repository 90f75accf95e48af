"""One hostile snippet per static-gate rule (issue 10, "Static gate, tightened where cheap"),
each built on the small valid add kernel of tests/candidates/add.py and gated against that
file: rejected, with the rule's name and the 1-based line of the construct.

The denylist is for names inside modules a candidate may import (issue 53): the snippets that
import a module add.py does not import are gated with that module allowed
(``gate.allowModules``, :data:`ALLOW`), so that the rule under test, not the allowlist, decides;
the allowlist itself is tested in tests/onsite/test_gate_allowlist.py."""

from __future__ import annotations

import pytest

from accelopt_core.onsite.gate import precheck as gate
from accelopt_core.onsite.gate.rules import RULES
from tests.onsite.runs import BASE, line_of

LAUNCH = "    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)\n"

#: The modules the snippets import that add.py does not (the setting ``gate.allowModules``).
ALLOW = ("os", "sys", "logging", "time", "contextlib")


def precheck(source: str) -> dict | None:
    """:func:`precheck` of ``source`` against add.py with :data:`ALLOW` allowed."""
    return gate.precheck(source, "add", BASE, allow_modules=ALLOW)


def cand(launcher: str = "", module: str = "", imports: str = "", header: str = "") -> str:
    """BASE with ``launcher`` lines after the launch, ``module`` code before the launcher,
    ``imports`` after ``import torch`` and ``header`` replacing ``def add(x, y):``."""
    out = BASE.replace(LAUNCH, LAUNCH + launcher).replace(
        "import torch\n", "import torch\n" + imports, 1
    )
    if module:
        out = out.replace("\n\ndef add(x, y):", "\n\n" + module + "\n\ndef add(x, y):")
    if header:
        out = out.replace("def add(x, y):", header)
    return out


# (id, candidate, rule, text on the line the rejection must point at)
HOSTILE = [
    ("eval", cand("    out = eval('torch.add')(x, y)\n"), "gate: eval", "eval("),
    ("exec", cand(module="exec('import os')\n"), "gate: eval", "exec("),
    ("compile", cand("    c = compile('1', 'f', 'eval')\n"), "gate: eval", "compile("),
    ("__import__", cand("    t = __import__('torch')\n"), "gate: dynamic import", "__import__"),
    ("importlib", cand(imports="import importlib\n"), "gate: dynamic import", "import importlib"),
    (
        "getattr on a module by computed name",
        cand("    op = 'soft' + 'max'\n    out = getattr(torch, op)(x, -1)\n"),
        "gate: dynamic getattr",
        "getattr(torch, op)",
    ),
    (
        "getattr on any object in the launcher",
        cand("    m = 'sum'\n    out = getattr(x, m)()\n"),
        "gate: dynamic getattr",
        "getattr(x, m)",
    ),
    (
        "operator.methodcaller",
        cand(imports="import operator\n", launcher="    f = operator.methodcaller('exp')\n"),
        "gate: dynamic getattr",
        "methodcaller",
    ),
    (
        "getattr(torch, constant) is torch compute",
        cand("    out = getattr(torch, 'softmax')(x, -1)\n"),
        "gate: torch compute",
        "getattr(torch, 'softmax')",
    ),
    (
        "getattr(tensor, constant) is a tensor method",
        cand("    out = getattr(x, 'exp')()\n"),
        "gate: torch compute",
        "getattr(x, 'exp')",
    ),
    ("globals()", cand("    globals()['_C'] = out\n"), "gate: globals lookup", "globals()"),
    ("vars()", cand("    f = vars(torch)['exp']\n"), "gate: globals lookup", "vars(torch)"),
    ("__dict__", cand("    f = torch.__dict__['exp']\n"), "gate: globals lookup", "__dict__"),
    (
        "sys.modules",
        cand(imports="import sys\n", launcher="    t = sys.modules['torch']\n"),
        "gate: globals lookup",
        "sys.modules",
    ),
    ("open", cand("    f = open('/tmp/out', 'wb')\n"), "gate: file I/O", "open("),
    ("pathlib", cand(imports="import pathlib\n"), "gate: file I/O", "import pathlib"),
    ("pickle", cand(imports="import pickle\n"), "gate: file I/O", "import pickle"),
    ("shelve", cand(imports="import shelve\n"), "gate: file I/O", "import shelve"),
    ("sqlite3", cand(imports="import sqlite3\n"), "gate: file I/O", "import sqlite3"),
    ("tempfile", cand(imports="from tempfile import mkstemp\n"), "gate: file I/O", "tempfile"),
    ("mmap", cand(imports="import mmap\n"), "gate: file I/O", "import mmap"),
    ("torch.save", cand("    torch.save(out, 'o.pt')\n"), "gate: file I/O", "torch.save"),
    (
        "os.path.exists",
        cand(imports="import os\n", launcher="    e = os.path.exists('o')\n"),
        "gate: file I/O",
        "os.path.exists",
    ),
    ("socket", cand(imports="import socket\n"), "gate: network", "import socket"),
    ("urllib", cand(imports="import urllib.request\n"), "gate: network", "import urllib"),
    ("http", cand(imports="from http import client\n"), "gate: network", "from http"),
    # issue 34: what a kernel rewrite has no reason to contain (the sandbox is the guarantee)
    (
        "logging.FileHandler",
        cand(
            imports="import logging\n",
            module="_log = logging.getLogger('k')\n_log.addHandler(logging.FileHandler('/x'))\n",
        ),
        "gate: logging handlers",
        "FileHandler",
    ),
    (
        "logging.handlers",
        cand(imports="from logging.handlers import SocketHandler\n"),
        "gate: logging handlers",
        "logging.handlers",
    ),
    (
        "logging.basicConfig",
        cand(imports="import logging\n", launcher="    logging.basicConfig(filename='k.log')\n"),
        "gate: logging handlers",
        "basicConfig",
    ),
    (
        "os.environ read",
        cand(imports="import os\n", launcher="    k = os.environ.get('OPENAI_API_KEY')\n"),
        "gate: environment",
        "os.environ.get",
    ),
    (
        "os.environ subscript",
        cand(imports="import os\n", launcher="    k = os.environ['OPENAI_API_KEY']\n"),
        "gate: environment",
        "os.environ[",
    ),
    (
        "os.getenv",
        cand(imports="from os import getenv\n", launcher="    k = getenv('HOME')\n"),
        "gate: environment",
        "getenv",
    ),
    (
        "os.path.expandvars",
        cand(imports="import os\n", launcher="    k = os.path.expandvars('$HOME')\n"),
        "gate: environment",
        "expandvars",
    ),
    ("shutil", cand(imports="import shutil\n"), "gate: file I/O", "import shutil"),
    ("torch.load", cand("    w = torch.load('w.pt')\n"), "gate: file I/O", "torch.load"),
    ("torch.jit.save", cand("    torch.jit.save(None, 'm.pt')\n"), "gate: file I/O", "jit.save"),
    (
        "numpy.save",
        cand(imports="import numpy as np\n", launcher="    np.save('/tmp/o.npy', out.numpy())\n"),
        "gate: file I/O",
        "np.save",
    ),
    (
        "numpy DataSource",
        cand(imports="import numpy\n", launcher="    f = numpy.DataSource(None)\n"),
        "gate: file I/O",
        "DataSource",
    ),
    ("ndarray.dump", cand("    out.numpy().dump('o.pkl')\n"), "gate: file I/O", ".dump("),
    ("poplib", cand(imports="import poplib\n"), "gate: network", "import poplib"),
    (
        "torch.distributed",
        cand(imports="import torch.distributed as dist\n"),
        "gate: network",
        "torch.distributed",
    ),
    (
        "os.environ write",
        cand(imports="import os\n", launcher="    os.environ['TRITON_INTERPRET'] = '0'\n"),
        "gate: process control",
        "os.environ[",
    ),
    (
        "os.environ.update",
        cand(imports="import os\n", module="os.environ.update(X='1')\n"),
        "gate: process control",
        "os.environ.update",
    ),
    (
        "os.kill",
        cand(imports="import os\n", launcher="    os.kill(0, 9)\n"),
        "gate: process control",
        "os.kill",
    ),
    (
        "os._exit",
        cand(imports="import os\n", launcher="    os._exit(0)\n"),
        "gate: process control",
        "os._exit",
    ),
    (
        "os.setsid",
        cand(imports="import os\n", module="os.setsid()\n"),
        "gate: process control",
        "os.setsid",
    ),
    ("signal", cand(imports="import signal\n"), "gate: process control", "import signal"),
    (
        "sys.settrace",
        cand(imports="import sys\n", module="sys.settrace(None)\n"),
        "gate: introspection",
        "settrace",
    ),
    (
        "sys.setprofile",
        cand(imports="import sys\n", module="sys.setprofile(None)\n"),
        "gate: introspection",
        "setprofile",
    ),
    (
        "sys._getframe",
        cand(imports="import sys\n", launcher="    caller = sys._getframe(1)\n"),
        "gate: introspection",
        "_getframe",
    ),
    ("inspect", cand(imports="import inspect\n"), "gate: introspection", "import inspect"),
    ("gc", cand(imports="import gc\n"), "gate: introspection", "import gc"),
    (
        "frame attributes",
        cand("    def probe():\n        pass\n    back = probe.f_back\n"),
        "gate: introspection",
        "f_back",
    ),
    ("ctypes", cand(imports="import ctypes\n"), "gate: ctypes", "import ctypes"),
    (
        "cpp_extension",
        cand(imports="from torch.utils.cpp_extension import load_inline\n"),
        "gate: ctypes",
        "cpp_extension",
    ),
    (
        "patching time.perf_counter",
        cand(imports="import time\n", module="time.perf_counter = lambda: 0.0\n"),
        "gate: monkey-patching",
        "time.perf_counter =",
    ),
    (
        "patching torch.softmax",
        cand(module="torch.softmax = lambda t, d: t\n"),
        "gate: monkey-patching",
        "torch.softmax =",
    ),
    (
        "setattr on torch",
        cand(module="setattr(torch, 'exp', abs)\n"),
        "gate: monkey-patching",
        "setattr(torch",
    ),
    (
        "patching triton from the launcher",
        cand("    triton.cdiv = lambda a, b: 1\n"),
        "gate: monkey-patching",
        "triton.cdiv =",
    ),
    ("rebinding an import", cand(module="torch = None\n"), "gate: shadowed import", "torch = None"),
    (
        "mutable default {}",
        cand(header="def add(x, y, _memo={}):"),
        "gate: mutable default",
        "_memo={}",
    ),
    (
        "mutable default dict()",
        cand(header="def add(x, y, *, _m=dict()):"),
        "gate: mutable default",
        "_m=dict()",
    ),
    (
        "mutable default []",
        cand(module="def _h(t, seen=[]):\n    return t\n"),
        "gate: mutable default",
        "seen=[]",
    ),
    (
        "mutable default bytearray",
        cand(module="_h = lambda t, b=bytearray(8): t\n"),
        "gate: mutable default",
        "bytearray",
    ),
    (
        "module dict subscript",
        cand("    _C[x.data_ptr()] = out\n", module="_C = {}\n"),
        "gate: module state",
        "_C[x.data_ptr()]",
    ),
    (
        "module dict update",
        cand("    _C.update({0: out})\n", module="_C = {}\n"),
        "gate: module state",
        "_C.update",
    ),
    (
        "module dict setdefault",
        cand("    out = _C.setdefault(x.data_ptr(), out)\n", module="_C = {}\n"),
        "gate: module state",
        "setdefault",
    ),
    (
        "module list append",
        cand("    _L.append(out)\n", module="_L = []\n"),
        "gate: module state",
        "_L.append",
    ),
    (
        "module set add",
        cand("    _S.add(n)\n", module="_S = set()\n"),
        "gate: module state",
        "_S.add",
    ),
    (
        "module __setitem__",
        cand("    _C.__setitem__(0, out)\n", module="_C = {}\n"),
        "gate: module state",
        "__setitem__",
    ),
    (
        "module dict handed on",
        cand("    memo = _C\n    memo[0] = out\n", module="_C = {}\n"),
        "gate: module state",
        "memo = _C",
    ),
    (
        "module counter via next()",
        cand(
            "    k = next(_IT)\n", module="_IT = itertools.count()\n", imports="import itertools\n"
        ),
        "gate: module state",
        "next(_IT)",
    ),
    (
        "a helper of the launcher writes",
        cand("    _keep(out)\n", module="_C = {}\n\n\ndef _keep(o):\n    _C[0] = o\n"),
        "gate: module state",
        "_C[0] = o",
    ),
    (
        "class attribute as state",
        cand("    _Memo.last = out\n", module="class _Memo:\n    last = None\n"),
        "gate: module state",
        "_Memo.last = out",
    ),
    (
        "global counter",
        cand("    global _N\n    _N += 1\n", module="_N = 0\n"),
        "gate: global state",
        "global _N",
    ),
    ("function attribute", cand("    add.calls = 1\n"), "gate: function attribute", "add.calls"),
    (
        "setattr on the launcher",
        cand("    setattr(add, 'last', out)\n"),
        "gate: function attribute",
        "setattr(add",
    ),
    (
        "module-level alias of torch compute",
        cand("    out = _f(x, -1)\n", module="_f = torch.softmax\n"),
        "gate: torch compute",
        "_f = torch.softmax",
    ),
    (
        "module-level lambda with torch compute",
        cand("    out = _f(x)\n", module="_f = lambda t: torch.softmax(t, -1)\n"),
        "gate: torch compute",
        "_f = lambda",
    ),
    (
        "operator module compute",
        cand(imports="import operator\n", launcher="    out = operator.add(x, y)\n"),
        "gate: torch compute",
        "operator.add",
    ),
    (
        "object made by a module-level call",
        cand("    out = _impl(x)\n", module="def _make():\n    return abs\n\n\n_impl = _make()\n"),
        "gate: module-level callable",
        "out = _impl(x)",
    ),
    (
        "__exit__ that swallows exceptions",
        cand(
            "    with _Quiet():\n        pass\n",
            module="class _Quiet:\n    def __enter__(self):\n        return self\n\n"
            "    def __exit__(self, *exc):\n        return True\n",
        ),
        "gate: exception swallowing",
        "return True",
    ),
    (
        "contextlib.suppress",
        cand(
            imports="import contextlib\n",
            launcher="    with contextlib.suppress(Exception):\n        pass\n",
        ),
        "gate: exception swallowing",
        "suppress",
    ),
    (
        "try/except in the launcher",
        cand("    try:\n        pass\n    except Exception:\n        out = x\n"),
        "gate: try/except",
        "    try:",
    ),
    (
        "try/except at module level",
        cand(module="try:\n    import numpy\nexcept ImportError:\n    numpy = None\n"),
        "gate: try/except",
        "try:",
    ),
    (
        "code after return",
        cand("    return out\n    add_kernel[(1,)](x, y, out, n, BLOCK=64)\n"),
        "gate: dead code",
        "add_kernel[(1,)]",
    ),
    (
        "launch under if False",
        BASE.replace(LAUNCH, "    if False:\n    " + LAUNCH),
        "gate: dead code",
        "add_kernel[",
    ),
    (
        "lru_cache",
        cand(
            imports="import functools\n", module="@functools.lru_cache\ndef _h(k):\n    return k\n"
        ),
        "gate: output cache",
        "lru_cache",
    ),
    (
        "functools.cache",
        cand(imports="from functools import cache\n"),
        "gate: output cache",
        "import cache",
    ),
    ("weakref", cand(imports="import weakref\n"), "gate: output cache", "import weakref"),
    ("threading", cand(imports="import threading\n"), "gate: concurrency", "import threading"),
    ("subprocess", cand(imports="import subprocess\n"), "gate: concurrency", "import subprocess"),
    ("cuda stream", cand("    s = torch.cuda.Stream()\n"), "gate: streams", "torch.cuda.Stream"),
    (
        "os.system",
        cand(imports="import os\n", launcher="    os.system('true')\n"),
        "gate: shell",
        "os.system",
    ),
    (
        "the worker's own code",
        cand(imports="from accelopt_core.onsite import child\n"),
        "gate: worker access",
        "accelopt_core",
    ),
    (
        "torch compute in the launcher",
        cand("    out = torch.add(x, y)\n"),
        "gate: torch compute",
        "torch.add",
    ),
    ("star import", cand(imports="from torch import *\n"), "gate: globals lookup", "import *"),
    ("bound method kept", cand("    f = x.exp\n"), "gate: torch compute", "f = x.exp"),
    ("builtin math on a tensor", cand("    out = abs(x)\n"), "gate: torch compute", "abs(x)"),
    ("dunder arithmetic", cand("    out = x.__add__(y)\n"), "gate: torch compute", "__add__"),
    ("in-place method", cand("    out.apply_(float)\n"), "gate: torch compute", "apply_"),
    (
        "arithmetic on a view of an input",
        cand("    v = x.view(-1)\n    out = v * 2\n"),
        "gate: torch compute",
        "v * 2",
    ),
    (
        "a wrapper around the kernel",
        cand(module="def _wrap(k):\n    return torch.vmap(k)\n").replace(
            "@triton.jit\n", "@_wrap\n@triton.jit\n", 1
        ),
        "gate: torch compute",
        "torch.vmap",
    ),
    (
        "a module on no list",
        cand(imports="import pwd\n", launcher="    h = pwd.getpwuid(0).pw_dir\n"),
        "gate: module not allowed",
        "import pwd",
    ),
    (
        "closures made at module level",
        cand(
            "    hit = _lookup(x)\n",
            module="def _make():\n    return abs, abs\n\n\n_lookup, _keep = _make()\n",
        ),
        "gate: module-level callable",
        "hit = _lookup(x)",
    ),
    (
        "precision downcast",
        cand("    h = torch.empty_like(x, dtype=torch.float16)\n"),
        "gate: precision downcast",
        "float16",
    ),
]


@pytest.mark.parametrize(
    "source, rule, needle", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_each_rule_rejects_its_hack_with_the_rule_and_the_line(source, rule, needle):
    result = precheck(source)
    assert result is not None, "not rejected"
    assert result["status"] == "rejected"
    assert result["rule"] == rule, result["message"]
    assert result["line"] == line_of(source, needle), result["message"]
    assert rule in RULES


def test_every_rule_the_gate_names_has_a_hack_here_or_a_structural_test():
    structural = {"gate: no entry", "gate: no kernel", "gate: no launch", "gate: unreadable"}
    assert set(RULES) - structural == {h[2] for h in HOSTILE}


@pytest.mark.parametrize(
    "source, rule",
    [
        (BASE.replace("def add(x, y):", "def plus(x, y):"), "gate: no entry"),
        (BASE.replace("@triton.jit\n", ""), "gate: no kernel"),
        (BASE.replace(LAUNCH, ""), "gate: no launch"),
    ],
    ids=["no entry", "no kernel", "no launch"],
)
def test_structural_rules_are_named(source, rule):
    assert gate.precheck(source, "add", BASE)["rule"] == rule


def test_messages_say_what_was_found_and_why():
    source = cand(imports="import time\n", module="time.perf_counter = lambda: 0.0\n")
    message = precheck(source)["message"]
    assert "time.perf_counter" in message and "patching" in message
    source = cand("    _C[x.data_ptr()] = out\n", module="_C = {}\n")
    message = precheck(source)["message"]
    assert "'_C'" in message and "cache" in message


@pytest.mark.parametrize(
    "launcher, module",
    [
        ("    k = _TABLE.get(n, 1) + len(_TABLE)\n", "_TABLE = {1: 2}\n"),  # reading module data
        ("    grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)\n", ""),
        ("    b = _block(n)\n", "def _block(n):\n    return 64 if n > 64 else 32\n"),
        ("    f = getattr(x, 'shape')\n", ""),  # a constant getattr of metadata
        ("    c = hasattr(torch, 'compile')\n", ""),
        ("    d = torch.float32 if x.dtype == torch.float else x.dtype\n", ""),
        ("    out.zero_()\n    k = n\n    k += 1\n    m = x.shape[0] * 2\n", ""),
    ],
    ids=[
        "module dict read",
        "grid lambda",
        "helper",
        "getattr metadata",
        "hasattr constant",
        "dtypes",
        "init and ints",
    ],
)
def test_harmless_launcher_code_passes(launcher, module):
    source = cand(launcher, module=module, imports="import os\n")
    assert precheck(source) is None


@pytest.mark.parametrize("depth, status", [(2000, "rejected"), (100_000, "compile_error")])
def test_a_candidate_too_deep_to_analyse_fails_closed_without_raising(depth, status):
    source = cand("    k = " + "-" * depth + "n\n")
    result = gate.precheck(source, "add", BASE)
    assert result is not None and result["status"] == status
    if status == "rejected":
        assert result["rule"] == "gate: unreadable"

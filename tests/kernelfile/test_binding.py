"""Binding a kernel file to its harness (accelopt_core.kernelfile.workload.load_workload):
files named unlike modules, one closure per binding, and every binding failure a located
``path:line:col: message`` that says the way out (issue 24). Pure AST: nothing imported."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from accelopt_core.kernelfile import KernelFileError
from accelopt_core.kernelfile import workload as workload_module
from accelopt_core.kernelfile.workload import WorkloadError, load_workload

KERNEL = """
import triton
import triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

def add(x):
    y = x.new_empty(x.shape)
    add_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
    return y
"""
HARNESS = """
import torch
from {module} import add

N = 1000

def get_inputs(seed, device):
    return (torch.randn(N, device=device),)

def reference(x):
    return x

BENCH = {{"entry": add}}
"""
PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""
MODEL_NEW = (
    KERNEL
    + """
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return add(x)
"""
)
LOCATED = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<message>.+)$", re.S)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), "utf-8")


def located(exc: BaseException) -> dict[str, str]:
    match = LOCATED.match(str(exc))
    assert match, f"not a located message: {exc}"
    return match.groupdict()


@pytest.mark.parametrize(
    ("problem", "kernel"),
    [
        ("19_ReLU.py", "new_relu.py"),
        ("36_RMSNorm_.py", "36_rmsnorm_new.py"),
        ("level1/23-softmax.py", "solutions/new-softmax.py"),
        ("my.problem.py", "kernel.v2.py"),
    ],
)
def test_kernelbench_problems_bind_whatever_their_names(
    tmp_path: Path, problem: str, kernel: str
) -> None:
    write(tmp_path, {problem: PROBLEM, kernel: MODEL_NEW})
    kf = load_workload(tmp_path / kernel, harness=tmp_path / problem)
    ctx = kf.context
    assert ctx.kernelbench == Path(problem).stem
    assert ctx.kernel_module.isidentifier() and ctx.files[ctx.kernel_path] == kf.source
    problem_key = next(
        k for k in ctx.files if k.startswith("_accelopt_file_") and k != ctx.kernel_path
    )
    assert problem_key[: -len(".py")].isidentifier()
    assert f'PROBLEM_MODULE = "{problem_key[:-3]}"' in ctx.harness_source
    assert f'KERNEL_MODULE = "{ctx.kernel_module}"' in ctx.harness_source
    assert kf.harness.sizes.names == {"batch_size": 4096, "dim": 393216}
    assert kf.harness.sizes.module == problem_key


def test_binding_computes_the_closure_once(tmp_path: Path, monkeypatch) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": KERNEL,
            "bench-add.py": HARNESS.format(module="pkg.ops"),
        },
    )
    calls = []
    real = workload_module.import_closure
    monkeypatch.setattr(
        workload_module, "import_closure", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    kf = load_workload(tmp_path / "bench-add.py")
    assert len(calls) == 1
    ctx = kf.context
    assert ctx.kernel_module == "pkg.ops" and ctx.harness_path == "_accelopt_file_bench_add.py"
    assert kf.harness.entry == "add" and kf.harness.sizes.names == {"N": 1000}


def _expect(exc_info, path: Path, *words: str, line: int | None = None) -> None:
    where = located(exc_info.value)
    assert Path(where["path"]).name == path.name, where
    if line is not None:
        assert int(where["line"]) == line, where
    for word in words:
        assert word in where["message"], where["message"]


def test_every_binding_failure_is_located_with_the_way_out(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "19_ReLU.py": PROBLEM,
            "new_relu.py": MODEL_NEW,
            "no_model_new.py": KERNEL,
            "broken_new.py": "class ModelNew(:\n",
            "kernel.py": KERNEL,
            "other.py": KERNEL.replace("add", "sub"),
            "bench.py": HARNESS.format(module="kernel"),
            "bench_broken.py": "def get_inputs(:\n",
            "plain.py": "X = 1\n",
            "bench_torch.py": HARNESS.format(module="torch").replace(
                "from torch import add", "from torch import add"
            ),
            "bench_two.py": HARNESS.format(module="kernel")
            .replace('{"entry": add}', '{"entry": lambda x: add(x) + sub(x)}')
            .replace("from kernel import add", "from kernel import add\nfrom other import sub"),
            "bench_helper_broken.py": "import helper\n" + HARNESS.format(module="kernel"),
            "helper.py": "def f(:\n",
        },
    )
    t = tmp_path
    cases = [
        (lambda: load_workload(t / "missing.py"), t / "missing.py", ["no such file"]),
        (
            lambda: load_workload(t / "kernel.py", harness=t / "nope.py"),
            t / "nope.py",
            ["no such file", "harness"],
        ),
        (lambda: load_workload(t), t, ["directory"]),
        (
            lambda: load_workload(t / "19_ReLU.py"),
            t / "19_ReLU.py",
            ["--harness 19_ReLU.py", "ModelNew"],
        ),
        (
            lambda: load_workload(t / "no_model_new.py", harness=t / "19_ReLU.py"),
            t / "no_model_new.py",
            ["defines no ModelNew"],
        ),
        (
            lambda: load_workload(t / "broken_new.py", harness=t / "19_ReLU.py"),
            t / "broken_new.py",
            ["syntax"],
        ),
        (
            lambda: load_workload(t / "kernel.py", harness=t / "bench_broken.py"),
            t / "bench_broken.py",
            ["harness does not parse"],
        ),
        (
            lambda: load_workload(t / "kernel.py", harness=t / "plain.py"),
            t / "plain.py",
            ["has no harness", "accelopt harness"],
        ),
        (
            lambda: load_workload(t / "other.py", harness=t / "bench.py"),
            t / "bench.py",
            ["does not come from other"],
        ),
        (
            lambda: load_workload(t / "bench_torch.py"),
            t / "bench_torch.py",
            ["no module of the workspace"],
        ),
        (lambda: load_workload(t / "bench_two.py"), t / "bench_two.py", ['BENCH["module"]']),
        (lambda: load_workload(t / "bench_helper_broken.py"), t / "helper.py", []),
    ]
    for call, path, words in cases:
        with pytest.raises(KernelFileError) as info:
            call()
        _expect(info, path, *words)
    assert issubclass(WorkloadError, KernelFileError)


def test_over_the_cap_names_the_largest_files(tmp_path: Path, monkeypatch) -> None:
    from accelopt_core.kernelfile.closure import import_closure

    write(tmp_path, {"kernel.py": KERNEL + "import big\n", "big.py": "X = '" + "x" * 4000 + "'\n"})
    monkeypatch.setattr(
        workload_module,
        "import_closure",
        lambda paths, roots: import_closure(paths, roots, cap_bytes=1000),
    )
    with pytest.raises(WorkloadError) as info:
        load_workload(tmp_path / "kernel.py")
    _expect(info, tmp_path / "kernel.py", "over the", "big.py")

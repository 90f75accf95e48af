"""Where a kernel lives and what it imports (accelopt_core.kernelfile.project): import roots,
module names, the local import closure and the harness entry's targets, on real files in
tmp_path. Pure AST: nothing here imports torch or triton."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from accelopt_core.kernelfile.closure import Closure, ClosureError, import_closure
from accelopt_core.kernelfile.entries import EntryTarget, entry_targets
from accelopt_core.kernelfile.project import import_roots, module_name, resolve_module

# A src/ layout kernel library in the style of the real ones: helpers, relative imports,
# re-exports, an import cycle, a namespace package, imports of torch/triton (never ours).
LIBRARY = {
    "pyproject.toml": "[project]\nname = 'mypkg'\n",
    "src/mypkg/__init__.py": "from .ops import rms_norm\n",
    "src/mypkg/utils.py": """
        import triton

        def calculate_settings(n):
            return triton.next_power_of_2(n), 4
    """,
    "src/mypkg/act.py": """
        import torch

        def silu(x):
            return x * torch.sigmoid(x)
    """,
    "src/mypkg/all_ops.py": "from .act import *\n",
    "src/mypkg/extra.py": "SCALE = 2\n",
    "src/mypkg/ops/__init__.py": "from .rms_norm import RMSNorm, rms_norm\n",
    "src/mypkg/ops/rms_norm.py": """
        import torch
        import triton
        import triton.language as tl

        from ..utils import calculate_settings
        from . import layer

        try:
            from nsp.tools import fast_path
        except ImportError:
            fast_path = None

        def rms_norm(x, w, eps=1e-6):
            from mypkg import extra
            return x * w * extra.SCALE

        class RMSNorm(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                return rms_norm(x, w)
    """,
    "src/mypkg/ops/layer.py": """
        from mypkg.ops import rms_norm as _cycle

        class Layer:
            pass
    """,
    "src/nsp/tools.py": "def fast_path():\n    return 1\n",
    "src/mypkg/benchmarks/__init__.py": "",
    "benchmarks/bench_rms.py": """
        import torch
        from mypkg.ops.rms_norm import rms_norm

        def get_inputs():
            return (torch.ones(4), torch.ones(4))

        def reference(x, w):
            return x * w

        BENCH = {"entry": rms_norm, "atol": 1e-3}
    """,
}

LIBRARY_CLOSURE = {
    "bench_rms.py",
    "mypkg/__init__.py",
    "mypkg/ops/__init__.py",
    "mypkg/ops/rms_norm.py",
    "mypkg/ops/layer.py",
    "mypkg/utils.py",
    "mypkg/extra.py",
    "nsp/tools.py",
}


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), "utf-8")
    return root


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    return write(tmp_path / "proj", LIBRARY)


def bench_roots(lib: Path) -> list[Path]:
    return import_roots(lib / "benchmarks" / "bench_rms.py")


# ---------------------------------------------------------------------------------------------
# Roots, module names, resolution
# ---------------------------------------------------------------------------------------------


def test_roots_of_a_src_layout_package_module(lib: Path, tmp_path: Path) -> None:
    kernel = lib / "src" / "mypkg" / "ops" / "rms_norm.py"
    extra = [lib / "benchmarks", tmp_path / "missing", lib / "src"]
    roots = import_roots(kernel, workspace=[lib, tmp_path], extra=extra)
    assert roots == [
        (lib / "src").resolve(),
        lib.resolve(),
        (lib / "benchmarks").resolve(),
        tmp_path.resolve(),
    ]


def test_roots_of_a_harness_outside_the_package(lib: Path) -> None:
    assert bench_roots(lib) == [
        (lib / "benchmarks").resolve(),
        (lib / "src").resolve(),
        lib.resolve(),
    ]


def test_roots_of_a_plain_file_are_its_directory(tmp_path: Path) -> None:
    write(tmp_path, {"loose/kernel.py": "x = 1\n", "loose/sub/__init__.py": ""})
    assert import_roots(tmp_path / "loose" / "kernel.py") == [(tmp_path / "loose").resolve()]
    assert import_roots(tmp_path / "loose" / "sub" / "__init__.py") == [
        (tmp_path / "loose").resolve()
    ]


def test_roots_take_the_project_without_src(tmp_path: Path) -> None:
    write(tmp_path, {"setup.cfg": "", "pkg/__init__.py": "", "pkg/deep/k.py": ""})
    # pkg/deep has no __init__.py: the package root is pkg/deep itself; setup.cfg marks the project.
    roots = import_roots(tmp_path / "pkg" / "deep" / "k.py")
    assert roots == [(tmp_path / "pkg" / "deep").resolve(), tmp_path.resolve()]


def test_module_names(lib: Path) -> None:
    roots = bench_roots(lib)
    src = (lib / "src").resolve()
    assert module_name(lib / "src/mypkg/ops/rms_norm.py", roots) == ("mypkg.ops.rms_norm", src)
    assert module_name(lib / "src/mypkg/ops/__init__.py", roots) == ("mypkg.ops", src)
    assert module_name(lib / "benchmarks/bench_rms.py", roots) == (
        "bench_rms",
        (lib / "benchmarks").resolve(),
    )
    # Under lib the path would be ``src.mypkg...``; the first root that fits wins.
    assert module_name(lib / "src/mypkg/act.py", [lib, src])[0] == "src.mypkg.act"


def test_module_name_skips_roots_with_invalid_directories(tmp_path: Path) -> None:
    write(tmp_path, {"bench-suite/sub/b.py": "", "bench-suite/bench-rms.py": ""})
    suite = tmp_path / "bench-suite"
    assert module_name(suite / "sub" / "b.py", [tmp_path, suite]) == ("sub.b", suite.resolve())
    with pytest.raises(ValueError, match="bench-rms.py"):
        module_name(suite / "bench-rms.py", [tmp_path, suite])
    with pytest.raises(ValueError, match="b.py"):
        module_name(suite / "sub" / "b.py", [tmp_path / "elsewhere"])


def test_resolve_module(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "one/both/__init__.py": "",
            "one/both.py": "",
            "one/helpers.py": "",
            "two/helpers.py": "",
            "two/only_two.py": "",
            "two/ns/leaf.py": "",
        },
    )
    roots = [tmp_path / "one", tmp_path / "two"]
    assert resolve_module("both", roots) == (tmp_path / "one/both/__init__.py").resolve()
    assert resolve_module("helpers", roots) == (tmp_path / "one/helpers.py").resolve()
    assert resolve_module("only_two", roots) == (tmp_path / "two/only_two.py").resolve()
    assert resolve_module("ns.leaf", roots) == (tmp_path / "two/ns/leaf.py").resolve()
    assert resolve_module("ns", roots) is None  # a namespace package has no file
    assert resolve_module("torch", roots) is None
    assert resolve_module("os.path", roots) is None


# ---------------------------------------------------------------------------------------------
# Import closure
# ---------------------------------------------------------------------------------------------


def test_closure_of_a_harness_follows_the_library(lib: Path) -> None:
    bench = lib / "benchmarks" / "bench_rms.py"
    closure = import_closure([bench], bench_roots(lib))
    assert isinstance(closure, Closure)
    assert set(closure.files) == LIBRARY_CLOSURE  # no torch / triton, no unused module
    for rel, text in closure.files.items():
        assert closure.origins[rel].is_absolute()
        assert closure.origins[rel].read_text("utf-8") == text
    assert closure.origins["bench_rms.py"] == bench.resolve()
    assert closure.origins["mypkg/utils.py"] == (lib / "src/mypkg/utils.py").resolve()
    assert closure.modules["mypkg.ops.rms_norm"] == "mypkg/ops/rms_norm.py"
    assert closure.modules["mypkg.ops"] == "mypkg/ops/__init__.py"
    assert closure.modules["nsp.tools"] == "nsp/tools.py"
    assert closure.modules["bench_rms"] == "bench_rms.py"
    assert "torch" not in closure.modules and "triton.language" not in closure.modules
    assert closure.total_bytes == sum(p.stat().st_size for p in closure.origins.values())


def test_closure_of_a_package_module_includes_its_parents(lib: Path) -> None:
    kernel = lib / "src" / "mypkg" / "act.py"
    closure = import_closure([kernel], import_roots(kernel))
    # mypkg/__init__.py runs first, and pulls in the ops package.
    assert "mypkg/__init__.py" in closure.files
    assert "mypkg/ops/rms_norm.py" in closure.files
    assert closure.modules["mypkg.act"] == "mypkg/act.py"


def test_closure_ignores_relative_imports_beyond_the_top(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "script.py": "from . import nothing\nfrom .x import y\nimport here\n",
            "here.py": "from .. import gone\n",
            "x.py": "",
        },
    )
    closure = import_closure([tmp_path / "script.py"], [tmp_path])
    assert set(closure.files) == {"script.py", "here.py"}


def test_closure_keeps_a_script_that_is_not_a_module(tmp_path: Path) -> None:
    write(tmp_path, {"bench-rms.py": "import helper\n", "helper.py": "X = 1\n"})
    closure = import_closure([tmp_path / "bench-rms.py"], [tmp_path])
    assert set(closure.files) == {"_accelopt_file_bench_rms.py", "helper.py"}
    assert closure.modules == {"_accelopt_file_bench_rms": "_accelopt_file_bench_rms.py",
                               "helper": "helper.py"}  # fmt: skip
    assert closure.key_of(tmp_path / "bench-rms.py") == "_accelopt_file_bench_rms.py"
    assert closure.module_of("_accelopt_file_bench_rms.py") == "_accelopt_file_bench_rms"


@pytest.mark.parametrize(
    ("names", "modules"),
    [
        (["19_ReLU.py"], ["_accelopt_file_19_ReLU"]),
        (["36_RMSNorm_.py"], ["_accelopt_file_36_RMSNorm_"]),
        (["new-relu.py", "sub/new_relu.py"], ["_accelopt_file_new_relu", "sub.new_relu"]),
        (["my.problem.py"], ["_accelopt_file_my_problem"]),
        (["a-b.py", "x/a-b.py"], ["_accelopt_file_a_b", "_accelopt_file_a_b_2"]),
    ],
)
def test_files_named_unlike_modules_get_distinct_internal_names(
    tmp_path: Path, names: list[str], modules: list[str]
) -> None:
    write(tmp_path, {name: "import os\n" for name in names})
    closure = import_closure([tmp_path / name for name in names], [tmp_path])
    got = [closure.module_of(closure.key_of(tmp_path / name) or "") for name in names]
    assert got == modules
    assert all(m.replace(".", "").replace("_", "a").isalnum() for m in got)


def test_closure_first_root_wins_for_one_relative_path(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"a/main.py": "import helpers\n", "a/helpers.py": "A = 1\n", "b/helpers.py": "B = 1\n"},
    )
    closure = import_closure([tmp_path / "a/main.py"], [tmp_path / "a", tmp_path / "b"])
    assert closure.files["helpers.py"] == "A = 1\n"
    closure = import_closure([tmp_path / "a/main.py"], [tmp_path / "b", tmp_path / "a"])
    assert closure.files["helpers.py"] == "B = 1\n"


def test_closure_syntax_error_is_located(lib: Path) -> None:
    utils = lib / "src" / "mypkg" / "utils.py"
    utils.write_text("import triton\n\ndef calculate_settings(n:\n    return n\n", "utf-8")
    with pytest.raises(ClosureError) as info:
        import_closure([lib / "benchmarks" / "bench_rms.py"], bench_roots(lib))
    err = info.value
    assert err.path == str(utils.resolve())
    assert err.line == 3
    assert err.col >= 1
    assert str(err).startswith(f"{utils.resolve()}:3:{err.col}: ")


def test_closure_non_utf8_file_is_located(tmp_path: Path) -> None:
    write(tmp_path, {"main.py": "import latin\n"})
    (tmp_path / "latin.py").write_bytes(b"x = 1\ny = '\xe9t\xe9'\n")
    with pytest.raises(ClosureError) as info:
        import_closure([tmp_path / "main.py"], [tmp_path])
    assert (info.value.path, info.value.line, info.value.col) == (
        str((tmp_path / "latin.py").resolve()),
        2,
        6,
    )
    assert "not UTF-8" in str(info.value)


def test_closure_unreadable_start_file(tmp_path: Path) -> None:
    with pytest.raises(ClosureError, match="cannot read") as info:
        import_closure([tmp_path / "absent.py"], [tmp_path])
    assert info.value.path == str((tmp_path / "absent.py").resolve())


def test_closure_over_the_cap_names_the_largest_files(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "bench_rms.py": "import big.table\nimport mid\nimport small\nimport tiny\n",
            "big/__init__.py": "",
            "big/table.py": "DATA = '" + "x" * 6_500_000 + "'\n",
            "mid.py": "M = '" + "m" * 3000 + "'\n",
            "small.py": "S = '" + "s" * 2000 + "'\n",
            "tiny.py": "T = 1\n",
        },
    )
    with pytest.raises(ClosureError) as info:
        import_closure([tmp_path / "bench_rms.py"], [tmp_path])
    message = info.value.message
    assert message.startswith("import closure of bench_rms.py is 6.2 MiB, over the 5 MiB cap: ")
    assert message.endswith("big/table.py (6.2 MiB), mid.py (2.9 KiB), small.py (2 KiB)")
    assert "tiny.py" not in message
    assert info.value.path == str((tmp_path / "bench_rms.py").resolve())


def test_closure_cap_counts_every_file(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": "import b\n" + "#" * 500 + "\n", "b.py": "#" * 600 + "\n"})
    closure = import_closure([tmp_path / "a.py"], [tmp_path], cap_bytes=2000)
    assert closure.total_bytes == 510 + 601
    with pytest.raises(
        ClosureError, match=r"is 1\.1 KiB, over the 1000 B cap: b\.py \(601 B\), a\.py \(510 B\)$"
    ):
        import_closure([tmp_path / "a.py"], [tmp_path], cap_bytes=1000)


def test_digest_changes_when_a_helper_changes(lib: Path) -> None:
    bench = lib / "benchmarks" / "bench_rms.py"
    roots = bench_roots(lib)
    first = import_closure([bench], roots)
    assert import_closure([bench], roots).digest == first.digest
    assert len(first.digest) == 64
    utils = lib / "src" / "mypkg" / "utils.py"
    utils.write_text(utils.read_text("utf-8").replace(", 4", ", 8"), "utf-8")
    edited = import_closure([bench], roots)
    assert edited.digest != first.digest
    assert set(edited.files) == set(first.files)


# ---------------------------------------------------------------------------------------------
# Entry targets
# ---------------------------------------------------------------------------------------------

RMS = ("mypkg.ops.rms_norm", "rms_norm")
SILU = ("mypkg.act", "silu")


@pytest.mark.parametrize(
    ("header", "entry", "expected"),
    [
        ("from mypkg.ops.rms_norm import rms_norm", "rms_norm", [RMS]),
        ("from mypkg.ops.rms_norm import rms_norm as rn", "rn", [RMS]),
        ("import mypkg.ops.rms_norm as m", "m.rms_norm", [RMS]),
        ("import mypkg.act", "mypkg.act.silu", [SILU]),
        ("from mypkg import act", "act.silu", [SILU]),
        (
            "from mypkg.ops.rms_norm import RMSNorm",
            "RMSNorm.apply",
            [("mypkg.ops.rms_norm", "RMSNorm")],
        ),
        ("from mypkg.ops import RMSNorm as R", "R.forward", [("mypkg.ops.rms_norm", "RMSNorm")]),
        # re-exports: mypkg/__init__ -> mypkg/ops/__init__ -> mypkg/ops/rms_norm.py
        ("from mypkg import rms_norm", "rms_norm", [RMS]),
        ("import mypkg", "mypkg.rms_norm", [RMS]),
        ("from mypkg import ops", "ops.rms_norm", [RMS]),
        ("from mypkg.all_ops import silu", "silu", [SILU]),  # a star re-export
        (
            "import functools\nfrom mypkg import rms_norm",
            "functools.partial(rms_norm, eps=1e-6)",
            [RMS],
        ),
        ("from functools import partial\nimport mypkg.act as a", "partial(a.silu)", [SILU]),
        (
            "from mypkg import rms_norm\nfrom mypkg.act import silu\nimport torch",
            "lambda x, w: silu(rms_norm(x, w)) + torch.relu(x)",
            [SILU, RMS],  # in reading order
        ),
        ("from mypkg import rms_norm", "lambda rms_norm: rms_norm(1)", []),  # a parameter
        ("import torch", "torch.nn.functional.rms_norm", []),
        ("from torch.nn.functional import rms_norm", "rms_norm", []),
        (
            "from mypkg.ops.rms_norm import rms_norm\ndef rms_norm(x, w):\n    return x",
            "rms_norm",
            [],
        ),
        ("def launch(x, w):\n    return x", "launch", []),
        (
            "try:\n    from mypkg.act import silu\nexcept ImportError:\n    silu = None",
            "silu",
            [SILU],
        ),
        ("import mypkg.ops", "mypkg.ops", []),  # a module is not an entry
    ],
)
def test_entry_forms(lib: Path, header: str, entry: str, expected: list[tuple[str, str]]) -> None:
    source = f"{header}\n\nBENCH = {{'entry': {entry}, 'rtol': 1e-3}}\n"
    targets = entry_targets(source, lib / "benchmarks" / "bench_rms.py", bench_roots(lib))
    assert [(t.module, t.name) for t in targets] == expected
    line = len(header.splitlines()) + 2
    assert all(t.expr == entry and t.line == line for t in targets)


@pytest.mark.parametrize(
    "bench",
    [
        "BENCH = dict(entry=rms_norm, atol=1e-3)",
        "BENCH = {}\nBENCH['entry'] = rms_norm",
        "BENCH = {'entry': None}\nBENCH['entry'] = rms_norm",
        "BENCH: dict = {'entry': rms_norm}",
        "if True:\n    BENCH = {'entry': rms_norm}",
    ],
)
def test_entry_assignment_forms(lib: Path, bench: str) -> None:
    source = f"from mypkg.ops.rms_norm import rms_norm\n{bench}\n"
    targets = entry_targets(source, lib / "benchmarks" / "bench_rms.py", bench_roots(lib))
    assert targets == [EntryTarget("mypkg.ops.rms_norm", "rms_norm", "rms_norm", targets[0].line)]
    assert (
        source.splitlines()[targets[0].line - 1]
        .rstrip()
        .endswith(("rms_norm", "rms_norm, atol=1e-3)", "rms_norm}"))
    )


def test_entry_of_a_harness_inside_the_package(lib: Path) -> None:
    harness = lib / "src" / "mypkg" / "benchmarks" / "bench_rel.py"
    source = "from ..ops.rms_norm import rms_norm\nfrom .. import act\nBENCH = {'entry': lambda x: act.silu(rms_norm(x, x))}\n"
    harness.write_text(source, "utf-8")
    targets = entry_targets(source, harness, import_roots(harness))
    assert [(t.module, t.name) for t in targets] == [SILU, RMS]
    # The same harness seen as a loose script (no package) resolves nothing relative.
    assert entry_targets(source, harness, [harness.parent]) == []


def test_entry_reexport_cycle_terminates(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "loop/__init__.py": "",
            "loop/a.py": "from .b import f\n",
            "loop/b.py": "from .a import f\n",
        },
    )
    source = "from loop.a import f\nBENCH = {'entry': f}\n"
    targets = entry_targets(source, tmp_path / "bench.py", [tmp_path])
    assert len(targets) == 1
    assert targets[0].module in ("loop.a", "loop.b") and targets[0].name == "f"


def test_entry_nothing_to_resolve(lib: Path) -> None:
    path = lib / "benchmarks" / "bench_rms.py"
    roots = bench_roots(lib)
    assert entry_targets("from mypkg import rms_norm\n", path, roots) == []  # no BENCH
    assert entry_targets("BENCH = {'entry': \n", path, roots) == []  # does not parse
    assert entry_targets("BENCH = {'entry': 42}\n", path, roots) == []


def test_entry_of_the_library_harness(lib: Path) -> None:
    path = lib / "benchmarks" / "bench_rms.py"
    targets = entry_targets(path.read_text("utf-8"), path, bench_roots(lib))
    assert targets == [EntryTarget("mypkg.ops.rms_norm", "rms_norm", "rms_norm", 10)]


def test_closure_follows_literal_import_module_calls(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/main.py": """
                import importlib

                def backend(name):
                    if name == "a":
                        return importlib.import_module("pkg.impl_a")
                    return importlib.import_module(".impl_b", __package__)
                    return importlib.import_module(name)
            """,
            "pkg/impl_a.py": "",
            "pkg/impl_b.py": "",
            "pkg/impl_c.py": "",
        },
    )
    closure = import_closure([tmp_path / "pkg/main.py"], [tmp_path])
    assert set(closure.files) == {
        "pkg/__init__.py",
        "pkg/main.py",
        "pkg/impl_a.py",
        "pkg/impl_b.py",
    }


def test_closure_keeps_a_symlinked_module_in_its_package(tmp_path: Path) -> None:
    write(tmp_path, {"shared/impl.py": "X = 1\n", "pkg/__init__.py": "from .impl import X\n"})
    (tmp_path / "pkg" / "impl.py").symlink_to(tmp_path / "shared" / "impl.py")
    closure = import_closure(
        [tmp_path / "pkg" / "__init__.py"], import_roots(tmp_path / "pkg/__init__.py")
    )
    assert closure.files == {"pkg/__init__.py": "from .impl import X\n", "pkg/impl.py": "X = 1\n"}
    assert closure.modules == {"pkg": "pkg/__init__.py", "pkg.impl": "pkg/impl.py"}

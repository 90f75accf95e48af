"""Kernel and launcher discovery, and parse/load (accelopt_core.kernelfile.discovery): pure AST,
no triton import."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelopt_core.kernelfile import KernelFileError, load_kernel_file, parse_kernel_file
from tests.kernelfile.sources import EXAMPLES, SOFTMAX_LIKE, src, text_at

# ---------------------------------------------------------------------------------------------
# Kernel detection
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "decorators", "expected"),
    [
        ("import triton", "@triton.jit", ["triton.jit"]),
        ("import triton", "@triton.jit(do_not_specialize=['n'])", ["triton.jit"]),
        ("from triton import jit", "@jit", ["triton.jit"]),
        ("from triton import jit as tjit", "@tjit", ["triton.jit"]),
        ("import triton as tr", "@tr.jit", ["triton.jit"]),
        (
            "import triton",
            "@triton.autotune(configs=[], key=['n'])\n@triton.jit",
            ["triton.autotune", "triton.jit"],
        ),
        (
            "import triton",
            "@triton.heuristics({'EVEN': lambda a: True})\n@triton.jit",
            ["triton.heuristics", "triton.jit"],
        ),
        ("import neuronxcc.nki as nki", "@nki.jit", ["nki.jit"]),
        ("import neuronxcc.nki as nki", "@nki.jit(mode='simulation')", ["nki.jit"]),
        ("from neuronxcc import nki", "@nki.baremetal", ["nki.baremetal"]),
        ("from neuronxcc import nki", "@nki.benchmark(warmup=2, iters=10)", ["nki.benchmark"]),
        ("import neuronxcc.nki as nk", "@nk.jit", ["nki.jit"]),
    ],
)
def test_kernel_decorator_forms(header: str, decorators: str, expected: list[str]) -> None:
    source = f"{header}\n\n{decorators}\ndef k(x_ptr, n):\n    pass\n"
    kf = parse_kernel_file(source, "k.py")
    assert kf.ok, kf.diagnostics
    assert kf.kernel_names == ["k"]
    k = kf.kernel("k")
    assert k.decorators == expected
    assert k.backend == ("nki" if expected[-1].startswith("nki") else "triton")
    assert k.range.start_line == 3 and k.range.start_col == 0  # starts at the first '@'
    assert text_at(source, k.name_range) == "k"


def test_non_kernel_decorators_and_lookalikes_are_not_kernels() -> None:
    source = src(
        """
        import functools
        import triton

        @functools.cache
        def f(x):
            return x

        @triton.autotune(configs=[], key=[])
        def not_jitted(x):  # autotune alone does not make a kernel
            return x

        def jit(fn):
            return fn

        @jit
        def local_jit(x):  # `jit` here is not triton's
            return x
        """
    )
    kf = parse_kernel_file(source, "f.py")
    assert kf.kernels == []
    assert not kf.ok
    assert [d.code for d in kf.diagnostics] == ["no-kernels"]
    assert kf.diagnostics[0].severity == "warning"


def test_kernel_params_constexpr_and_api_calls() -> None:
    kf = parse_kernel_file(SOFTMAX_LIKE, "add.py")
    k = kf.kernel("add_kernel")
    assert k.params == ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"]
    assert k.constexpr_params == ["BLOCK"]
    names = [name for name, _ in k.api_calls]
    assert names == ["tl.program_id", "tl.arange", "tl.load", "tl.load", "tl.store"]
    for name, rng in k.api_calls:
        assert text_at(SOFTMAX_LIKE, rng) == name
    # The range covers the decorator and the whole body, nothing more.
    assert text_at(SOFTMAX_LIKE, k.range).startswith("@triton.jit\ndef add_kernel(")
    assert text_at(SOFTMAX_LIKE, k.range).endswith("tl.store(out_ptr + offs, x + y, mask=offs < n)")


def test_aliased_language_module_and_string_constexpr() -> None:
    source = src(
        """
        import triton as tr
        import triton.language as lang

        @tr.jit
        def k(p, B: "tl.constexpr", C: lang.constexpr):
            lang.store(p, lang.zeros([B], lang.float32))
            print("not an api call")
        """
    )
    k = parse_kernel_file(source).kernel("k")
    assert k.constexpr_params == ["B", "C"]
    assert [n for n, _ in k.api_calls] == ["lang.store", "lang.zeros"]


def test_kernel_lookup_errors_and_kernel_at() -> None:
    kf = parse_kernel_file(SOFTMAX_LIKE, "add.py")
    with pytest.raises(KeyError, match=r"no kernel named 'nope' in add.py \(kernels: add_kernel\)"):
        kf.kernel("nope")
    k = kf.kernel("add_kernel")
    assert kf.kernel_at(k.range.start_line, 0) is k
    assert kf.kernel_at(k.range.start_line + 3, 8) is k
    assert kf.kernel_at(k.range.end_line + 2, 0) is None  # the launcher below
    assert kf.kernel_at(1, 0) is None


# ---------------------------------------------------------------------------------------------
# Launchers and entries
# ---------------------------------------------------------------------------------------------


def test_launchers_direct_and_entry_via_helper() -> None:
    kf = parse_kernel_file(SOFTMAX_LIKE, "add.py")
    assert [(la.name, la.kernels) for la in kf.launchers] == [("_launch", ["add_kernel"])]
    la = kf.launcher_for("add_kernel")
    assert la is not None and la.name == "_launch"
    assert text_at(SOFTMAX_LIKE, la.name_range) == "_launch"
    # BENCH's entry `add` launches the kernel through the helper `_launch`.
    assert kf.harness is not None and kf.harness.entry == "add"
    assert kf.entry_for("add_kernel") == "add"
    assert kf.launches("add", "add_kernel")
    assert not kf.launches("reference", "add_kernel")
    assert kf.entry_for("missing") is None


def test_entry_for_falls_back_to_launcher_when_bench_entry_does_not_launch_it() -> None:
    source = src(
        """
        import triton
        import triton.language as tl

        @triton.jit
        def a_kernel(p):
            tl.store(p, 1.0)

        @triton.jit
        def b_kernel(p):
            tl.store(p, 2.0)

        def run_a(x):
            a_kernel[(1,)](x)
            return x

        def run_b(x):
            b_kernel[(1,)](x)
            return x

        def get_inputs(seed, device):
            return ()

        def reference(x):
            return x

        BENCH = {"entry": run_a}
        """
    )
    kf = parse_kernel_file(source)
    assert kf.entry_for("a_kernel") == "run_a"
    assert kf.entry_for("b_kernel") == "run_b"
    assert kf.harness is not None and kf.harness.complete


def test_nki_launcher_is_a_direct_call_or_a_runner_argument() -> None:
    source = src(
        """
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        @nki.jit
        def k(a):
            return nl.load(a)

        def direct(a):
            return k(a)

        def simulated(a):
            return nki.simulate_kernel(k, a)
        """
    )
    kf = parse_kernel_file(source)
    assert kf.backend == "nki"
    assert [(la.name, la.kernels) for la in kf.launchers] == [
        ("direct", ["k"]),
        ("simulated", ["k"]),
    ]


def test_launcher_params_are_its_positional_parameters() -> None:
    source = src(
        """
        import triton
        import triton.language as tl

        @triton.jit
        def k(p):
            tl.store(p, 1.0)

        def run(x, /, y, z=2, *rest, scale=1.0, **kw):
            k[(1,)](x)
        """
    )
    (launcher,) = parse_kernel_file(source).launchers
    assert launcher.params == ["x", "y", "z"]


def test_examples_are_discovered_with_complete_harnesses() -> None:
    expected = {
        "triton/softmax.py": ("softmax_kernel", "softmax"),
        "triton/elementwise.py": ("add_gelu_kernel", "add_gelu"),
        "triton/rmsnorm.py": ("rmsnorm_kernel", "rmsnorm"),
        "triton/matmul.py": ("matmul_kernel", "matmul"),
        "triton/reduction.py": ("partial_sum_kernel", "vector_sum"),
        "nki/tensor_add.py": ("tensor_add_kernel", "tensor_add"),
    }
    for rel, (kernel, entry) in expected.items():
        kf = load_kernel_file(EXAMPLES / rel)
        assert kf.ok, rel
        assert kf.diagnostics == [], (rel, kf.diagnostics)
        assert kf.harness is not None and kf.harness.complete, rel
        assert kf.harness.has_flops and kf.harness.has_bytes, rel
        assert kf.entry_for(kernel) == entry, rel


# ---------------------------------------------------------------------------------------------
# Bad input never raises
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "",
        "\x00\x01",
        "def (:",
        "(" * 300 + ")" * 300,
        "x = [" + "[" * 2000 + "]" * 2000 + "]",
        "@triton.jit\n",
        "\ufeffimport triton\n",
        "if True:\n\tx = 1\n        y = 2\n",
    ],
)
def test_parse_never_raises(source: str) -> None:
    kf = parse_kernel_file(source, "weird.py")
    assert kf.source == source
    assert isinstance(kf.diagnostics, list)
    assert not kf.ok


def test_load_kernel_file_errors(tmp_path: Path) -> None:
    with pytest.raises(KernelFileError, match=r"missing\.py:1:1: no such file"):
        load_kernel_file(tmp_path / "missing.py")
    with pytest.raises(KernelFileError, match="is a directory"):
        load_kernel_file(tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"import triton\nx = 1\ny = '\xff'\n")
    with pytest.raises(KernelFileError, match=r"bad\.py:3:6: not valid utf-8 text"):
        load_kernel_file(bad)
    latin = tmp_path / "latin.py"
    latin.write_bytes(
        b"# -*- coding: latin-1 -*-\nimport triton\n\n@triton.jit\ndef k(p):\n    s = '\xe9'\n"
    )
    kf = load_kernel_file(latin)
    assert kf.kernel_names == ["k"] and "é" in kf.source


def test_large_file_parses(tmp_path: Path) -> None:
    # 50k+ lines: many kernels and helpers. (Speed is measured in benchmarks/, not asserted.)
    block = SOFTMAX_LIKE.split("def get_inputs")[0]
    parts = [block.split("@triton.jit")[0]]
    body = "@triton.jit" + block.split("@triton.jit")[1]
    n = 0
    while n * body.count("\n") < 50_000:
        parts.append(
            body.replace("add_kernel", f"add_kernel_{n}").replace("_launch", f"_launch_{n}")
        )
        n += 1
    source = "".join(parts)
    assert source.count("\n") >= 50_000
    kf = parse_kernel_file(source, "big.py")
    assert kf.ok and len(kf.kernels) == n and len(kf.launchers) == n
    assert kf.entry_for(f"add_kernel_{n - 1}") == f"_launch_{n - 1}"

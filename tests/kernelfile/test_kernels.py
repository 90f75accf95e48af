"""Kernel, launcher and harness discovery (accelopt_core.kernelfile): pure AST, no triton import."""

from __future__ import annotations

import ast
import random
import textwrap
from pathlib import Path

import pytest

from accelopt_core.kernelfile import (
    KernelFileError,
    SourceRange,
    apply_hunks,
    harness_skeleton,
    load_kernel_file,
    minimal_hunks,
    normalize_source,
    parse_kernel_file,
    quick_has_kernels,
    restore_harness,
    source_fingerprint,
    split_lines,
    unified_diff,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def text_at(source: str, rng: SourceRange) -> str:
    """The text a SourceRange covers (code-point columns)."""
    lines = split_lines(source)
    if rng.start_line == rng.end_line:
        return lines[rng.start_line - 1][rng.start_col : rng.end_col]
    parts = [lines[rng.start_line - 1][rng.start_col :]]
    parts += lines[rng.start_line : rng.end_line - 1]
    parts.append(lines[rng.end_line - 1][: rng.end_col])
    return "".join(parts)


SOFTMAX_LIKE = src(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        y = tl.load(y_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs, x + y, mask=offs < n)


    def _launch(x, y, out):
        add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)


    def add(x, y):
        out = torch.empty_like(x)
        _launch(x, y, out)
        return out


    def get_inputs(seed: int, device: str) -> tuple:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(256, generator=g).to(device), torch.randn(256, generator=g).to(device))


    def reference(x, y):
        return x + y


    BENCH = {"entry": add, "rtol": 1e-4, "atol": 0, "flops": lambda x, y: x.numel(),
             "bytes": lambda x, y: 3 * x.numel() * 4}
    """
)


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


def test_columns_are_code_points_not_utf8_bytes() -> None:
    source = src(
        """
        import triton
        import triton.language as tl

        @triton.jit
        def k(p):
            s = "ééé"; x = tl.load(p)
        """
    )
    k = parse_kernel_file(source).kernel("k")
    (name, rng) = next(c for c in k.api_calls if c[0] == "tl.load")
    assert text_at(source, rng) == "tl.load"
    assert rng.start_col == len('    s = "ééé"; x = ')


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
# Harness diagnostics
# ---------------------------------------------------------------------------------------------


def _with_harness(harness: str) -> str:
    kernel_part = SOFTMAX_LIKE.split("def get_inputs")[0]
    return kernel_part + src(harness)


def _codes(source: str) -> dict[str, tuple[int, int, str]]:
    kf = parse_kernel_file(source, "h.py")
    return {
        d.code: (d.range.start_line, d.range.start_col, text_at(source, d.range))
        for d in kf.diagnostics
    }


def test_complete_harness_values() -> None:
    kf = parse_kernel_file(SOFTMAX_LIKE)
    h = kf.harness
    assert h is not None and h.complete and h.problems == []
    assert (h.rtol, h.atol, h.has_flops, h.has_bytes) == (1e-4, 0.0, True, True)
    assert text_at(SOFTMAX_LIKE, h.get_inputs).startswith("def get_inputs(")
    assert text_at(SOFTMAX_LIKE, h.reference).startswith("def reference(")
    assert text_at(SOFTMAX_LIKE, h.bench).startswith("BENCH = {")
    assert text_at(SOFTMAX_LIKE, h.bench).endswith("3 * x.numel() * 4}")


def test_missing_reference_and_get_inputs_are_located_at_bench() -> None:
    source = _with_harness('BENCH = {"entry": add}\n')
    bench_line = split_lines(source).index('BENCH = {"entry": add}\n') + 1
    codes = _codes(source)
    assert codes["harness-missing-reference"][0] == bench_line
    assert codes["harness-missing-get-inputs"][0] == bench_line
    h = parse_kernel_file(source).harness
    assert h is not None and not h.complete and h.entry == "add"


@pytest.mark.parametrize(
    ("bench", "code", "located_text", "message"),
    [
        ("BENCH = dict(entry=add)", "bench-not-dict", "dict(entry=add)", "dict literal"),
        ('BENCH = {"entry": "add"}', "bench-entry-invalid", '"add"', "not a string"),
        ('BENCH = {"entry": nothing}', "bench-entry-invalid", "nothing", "not a function defined"),
        (
            'BENCH = {"entry": add_kernel}',
            "bench-entry-not-launcher",
            "add_kernel",
            "not the kernel",
        ),
        (
            'BENCH = {"entry": reference}',
            "bench-entry-not-launcher",
            "reference",
            "does not launch",
        ),
        ('BENCH = {"rtol": 1e-3}', "bench-entry-missing", "BENCH", 'no "entry"'),
        ('BENCH = {"entry": add, "rtol": "1e-3"}', "bench-tolerance-invalid", '"1e-3"', "number"),
        ('BENCH = {"entry": add, "atol": -1.0}', "bench-tolerance-invalid", "-1.0", "non-negative"),
        ('BENCH = {"entry": add, "flops": 1000}', "bench-work-invalid", "1000", "function"),
        ('BENCH = {"entry": add, "rtols": 1e-3}', "bench-unknown-key", '"rtols"', "'rtol'"),
        ('BENCH = {"entry": add, **extra}', "bench-key-invalid", "extra", "unpack"),
    ],
)
def test_bench_problems_are_located(bench: str, code: str, located_text: str, message: str) -> None:
    harness = (
        "def get_inputs(seed, device):\n    return ()\n\n\ndef reference(x, y):\n    return x\n\n\n"
    )
    source = _with_harness(harness + bench + "\n")
    kf = parse_kernel_file(source, "h.py")
    found = [d for d in kf.diagnostics if d.code == code]
    assert found, kf.diagnostics
    d = found[0]
    bench_line = len(split_lines(source))
    assert d.range.start_line == bench_line
    assert text_at(source, d.range) == located_text
    assert message in d.message
    assert d.format("h.py").startswith(f"h.py:{bench_line}:{d.range.start_col + 1}: ")
    if code == "bench-unknown-key":
        assert d.severity == "warning"
        assert kf.harness is not None and kf.harness.complete
    else:
        assert d.severity == "error"
        assert kf.harness is not None and not kf.harness.complete


@pytest.mark.parametrize(
    ("signature", "ok"),
    [
        ("seed, device", True),
        ("seed: int, device: str = 'cpu'", True),
        ("*args", True),
        ("seed", False),
        ("", False),
        ("seed, device, scale", False),
        ("seed, device, *, dtype", False),
        ("seed, device, scale=1.0", True),
    ],
)
def test_get_inputs_signature(signature: str, ok: bool) -> None:
    harness = (
        f"def get_inputs({signature}):\n    return ()\n\n\n"
        "def reference(x, y):\n    return x\n\n\nBENCH = {'entry': add}\n"
    )
    source = _with_harness(harness)
    codes = _codes(source)
    if ok:
        assert "get-inputs-params" not in codes
    else:
        line, _, text = codes["get-inputs-params"]
        assert text == "get_inputs"
        assert split_lines(source)[line - 1].startswith("def get_inputs(")


def test_no_harness_is_information_and_harness_is_none() -> None:
    source = SOFTMAX_LIKE.split("def get_inputs")[0]
    kf = parse_kernel_file(source)
    assert kf.harness is None
    assert [(d.code, d.severity) for d in kf.diagnostics] == [("no-harness", "information")]
    assert text_at(source, kf.diagnostics[0].range) == "add_kernel"


# ---------------------------------------------------------------------------------------------
# Bad input never raises
# ---------------------------------------------------------------------------------------------


def test_syntax_error_is_located() -> None:
    source = "import triton\n\n@triton.jit\ndef k(x):\n    y = (1 +\n    return y\n"
    kf = parse_kernel_file(source, "bad.py")
    assert not kf.ok and kf.kernels == []
    assert kf.syntax_error is not None
    d = kf.diagnostics[0]
    assert d.code == "syntax-error" and d.severity == "error"
    try:
        compile(source, "bad.py", "exec")
    except SyntaxError as exc:
        assert d.range.start_line == exc.lineno
        assert d.range.start_col == exc.offset - 1
    assert d.format("bad.py").startswith(
        f"bad.py:{d.range.start_line}:{d.range.start_col + 1}: error: syntax error"
    )


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


# ---------------------------------------------------------------------------------------------
# Text helpers
# ---------------------------------------------------------------------------------------------


def test_quick_has_kernels() -> None:
    assert quick_has_kernels(SOFTMAX_LIKE)
    assert quick_has_kernels("import triton as tr\n@tr.jit\ndef k(): pass\n")
    assert quick_has_kernels("from triton import jit\n\n@jit\ndef k(): pass\n")
    assert quick_has_kernels("from neuronxcc import nki\n@nki.baremetal\ndef k(): pass\n")
    assert not quick_has_kernels("import torch\n\ndef f(x):\n    return x\n")
    assert not quick_has_kernels("import numba\n@numba.jit\ndef f(x):\n    return x\n")
    assert not quick_has_kernels("# triton is mentioned, but there is no decorator\n")


def test_normalize_and_fingerprint() -> None:
    a = "def f(x):\n    return x+1\n"
    b = "# a comment\ndef f( x ):\n\n    return (x + 1)  # same code\n"
    c = "def f(x):\n    return x + 2\n"
    assert normalize_source(a) == normalize_source(b) == "def f(x):\n    return x + 1"
    assert source_fingerprint(a) == source_fingerprint(b)
    assert source_fingerprint(a) != source_fingerprint(c)
    assert len(source_fingerprint(a)) == 64
    assert normalize_source("def (:") == "def (:"
    assert source_fingerprint("def (:") != source_fingerprint("def ((:")


def _random_text(rng: random.Random) -> str:
    words = ["a", "b = 1", "", "    x", "def f():", "é", "return", "  "]
    eol = rng.choice(["\n", "\r\n"])
    lines = [rng.choice(words) for _ in range(rng.randint(0, 12))]
    text = eol.join(lines)
    if lines and rng.random() < 0.5:
        text += eol
    return text


def test_minimal_hunks_reproduce_new_text() -> None:
    rng = random.Random(1234)
    for _ in range(400):
        old = _random_text(rng)
        lines = split_lines(old)
        new_lines = list(lines)
        for _ in range(rng.randint(0, 3)):
            op = rng.choice(["ins", "del", "rep"])
            i = rng.randint(0, len(new_lines))
            if op == "ins":
                new_lines.insert(i, rng.choice(["z = 2\n", "q\n", "é\r\n"]))
            elif new_lines and i < len(new_lines):
                if op == "del":
                    del new_lines[i]
                else:
                    new_lines[i] = "changed\n"
        new = "".join(new_lines) + rng.choice(["", "tail"])
        hunks = minimal_hunks(old, new)
        assert apply_hunks(old, hunks) == new, (old, new, hunks)
        if old == new:
            assert hunks == []
        starts = [h[0] for h in hunks]
        assert starts == sorted(starts)


def test_minimal_hunks_touch_only_changed_lines() -> None:
    old = "a\nb\nc\nd\ne\n"
    new = "a\nb\nC\nd\ne\nf\n"
    hunks = minimal_hunks(old, new)
    assert hunks == [
        (SourceRange(3, 0, 4, 0), "C\n"),
        (SourceRange(6, 0, 6, 0), "f\n"),
    ]
    # No final newline: the end of the last line is addressed by its length.
    assert minimal_hunks("x = 1", "x = 2") == [(SourceRange(1, 0, 1, 5), "x = 2")]
    assert minimal_hunks("", "a\n") == [(SourceRange(1, 0, 1, 0), "a\n")]


def test_unified_diff() -> None:
    diff = unified_diff("a\nb\nc\n", "a\nB\nc\n", "softmax.py")
    assert diff.splitlines() == [
        "--- a/softmax.py",
        "+++ b/softmax.py",
        "@@ -1,3 +1,3 @@",
        " a",
        "-b",
        "+B",
        " c",
    ]
    assert unified_diff("same\n", "same\n", "x.py") == ""
    assert "\\ No newline at end of file" in unified_diff("a\nb", "a\nc", "x.py")


# ---------------------------------------------------------------------------------------------
# restore_harness and harness_skeleton
# ---------------------------------------------------------------------------------------------

ORIGINAL = src(
    '''
    """Doc."""

    import os

    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(out_ptr + offs, 2.0 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


    def scale(x):
        out = torch.empty_like(x)
        BLOCK_SIZE = 32
        scale_kernel[(triton.cdiv(x.numel(), BLOCK_SIZE),)](x, out, x.numel(), BLOCK_SIZE=BLOCK_SIZE)
        return out


    # --- harness ---


    def _size(device):
        return 4096 if os.environ.get("BIG") else 256


    def get_inputs(seed: int, device: str) -> tuple:
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(_size(device), generator=g).to(device),)


    def reference(x):
        return 2.0 * x


    BENCH = {"entry": scale, "rtol": 1e-5, "atol": 1e-6}
    '''
)
ORIG_KF = parse_kernel_file(ORIGINAL, "scale.py")
HARNESS_START = ORIGINAL.index("# --- harness ---")


def _kernel_part(source: str) -> str:
    return source[: source.index("def scale(x):")]


def test_restore_harness_is_identity_on_the_original() -> None:
    assert restore_harness(ORIGINAL, ORIG_KF) == ORIGINAL


def test_restore_harness_replaces_a_tampered_harness_in_place() -> None:
    candidate = (
        ORIGINAL.replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 128")
        .replace("return 2.0 * x", "return x * 0  # cheat")
        .replace('"rtol": 1e-5', '"rtol": 1.0')
        .replace("return 4096 if", "return 1 if")
    )
    restored = restore_harness(candidate, ORIG_KF)
    assert "BLOCK_SIZE = 128" in restored  # the candidate's launcher stays
    assert restored == ORIGINAL.replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 128")


def test_restore_harness_appends_missing_harness_helpers_and_imports() -> None:
    # An LLM answer with the kernel + launcher only, and without `import os`.
    candidate = (
        ORIGINAL[:HARNESS_START]
        .replace("import os\n\n", "")
        .replace("BLOCK_SIZE = 32", "BLOCK_SIZE = 64")
    )
    restored = restore_harness(candidate, ORIG_KF)
    ast.parse(restored)
    kf = parse_kernel_file(restored, "restored.py")
    assert kf.harness is not None and kf.harness.complete and kf.diagnostics == []
    assert "import os\n" in restored
    assert "def _size(device):" in restored
    assert restored.index("def _size(") < restored.index("def get_inputs(")
    assert restored.index("def get_inputs(") < restored.index("BENCH = {")
    assert "BLOCK_SIZE = 64" in restored
    # The comment block above the first appended piece travels with it.
    assert "# --- harness ---" in restored
    # Kernel text untouched (the import line moved nothing inside it).
    kernel_text = text_at(candidate, parse_kernel_file(candidate).kernel("scale_kernel").range)
    assert kernel_text in restored


def test_restore_harness_keeps_candidate_pieces_and_adds_missing_helper_before_them() -> None:
    candidate = ORIGINAL.replace(
        '# --- harness ---\n\n\ndef _size(device):\n    return 4096 if os.environ.get("BIG") else 256\n\n\n',
        "",
    )
    assert "_size" in candidate and "def _size" not in candidate
    restored = restore_harness(candidate, ORIG_KF)
    ns = ast.parse(restored)
    names = [getattr(s, "name", None) for s in ns.body]
    assert names.index("_size") < names.index("get_inputs")
    assert restored.count("def get_inputs(") == 1


def test_restore_harness_drops_duplicate_definitions() -> None:
    candidate = ORIGINAL + "\n\ndef reference(x):\n    return x\n"
    restored = restore_harness(candidate, ORIG_KF)
    assert restored.count("def reference(") == 1
    assert "return 2.0 * x" in restored
    ast.parse(restored)


def test_restore_harness_errors_and_no_harness() -> None:
    with pytest.raises(ValueError, match=r"candidate:2:\d+: syntax error"):
        restore_harness("x = 1\ndef (:\n", ORIG_KF)
    no_harness = parse_kernel_file(ORIGINAL[:HARNESS_START])
    assert restore_harness("x = 1\n", no_harness) == "x = 1\n"


def test_harness_skeleton_parses_and_names_the_launcher() -> None:
    base = ORIGINAL[:HARNESS_START]
    kf = parse_kernel_file(base, "scale.py")
    skeleton = harness_skeleton(kf, "scale_kernel")
    assert "TODO" in skeleton
    with_harness = parse_kernel_file(base + skeleton, "scale.py")
    assert with_harness.syntax_error is None
    h = with_harness.harness
    assert h is not None and h.entry == "scale" and h.complete
    assert "def get_inputs(seed: int, device: str) -> tuple:" in skeleton
    assert "def reference(x):" in skeleton
    assert "NotImplementedError" in skeleton  # an unfinished harness fails loudly
    with pytest.raises(KeyError):
        harness_skeleton(kf, "nope")


def test_harness_skeleton_without_launcher_reports_missing_entry() -> None:
    base = ORIGINAL[: ORIGINAL.index("def scale(x):")]
    kf = parse_kernel_file(base, "k.py")
    skeleton = harness_skeleton(kf, "scale_kernel")
    kf2 = parse_kernel_file(base + skeleton, "k.py")
    assert kf2.syntax_error is None
    assert "bench-entry-invalid" in [d.code for d in kf2.diagnostics]
    nki = load_kernel_file(EXAMPLES / "nki" / "tensor_add.py")
    nki_skel = harness_skeleton(nki, "tensor_add_kernel")
    assert "numpy" in nki_skel and "torch" not in nki_skel

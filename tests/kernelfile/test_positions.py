"""Source positions (accelopt_core.kernelfile.positions): code-point columns, located syntax
errors."""

from __future__ import annotations

from accelopt_core.kernelfile import parse_kernel_file
from tests.kernelfile.sources import src, text_at


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

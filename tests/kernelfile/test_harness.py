"""Harness analysis (accelopt_core.kernelfile.harness): one located diagnostic per problem."""

from __future__ import annotations

import pytest

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_core.textdiff import split_lines
from tests.kernelfile.sources import SOFTMAX_LIKE, src, text_at


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
        ('BENCH = {"entry": "add"}', "bench-entry-invalid", '"add"', "not the string 'add'"),
        ('BENCH = {"entry": 42}', "bench-entry-invalid", "42", "not the int 42"),
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

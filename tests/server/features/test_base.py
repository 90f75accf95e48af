"""What the features share: command argument checks and the refusal texts."""

from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from accelopt_core.kernelfile import parse_kernel_file
from accelopt_server.features.base import command_args, no_harness, refusal, runnable

SOFTMAX = Path(__file__).resolve().parents[3] / "examples" / "triton" / "softmax.py"


def test_command_args_pads_optional_and_names_the_signature() -> None:
    assert command_args("x.cmd", ("u",), ["uri"], ["kernelName"]) == ("u", None)
    assert command_args(
        "x.apply", ("u", "k", "c", 3), ["uri", "kernelName", "candidateId", "version"]
    ) == ("u", "k", "c", 3)
    with pytest.raises(JsonRpcInvalidParams, match=r"x.cmd expects \[uri, kernelName\?\], got 0"):
        command_args("x.cmd", (), ["uri"], ["kernelName"])
    with pytest.raises(JsonRpcInvalidParams, match="uri must be a non-empty string, got 42"):
        command_args("x.cmd", (42,), ["uri"])
    with pytest.raises(JsonRpcInvalidParams, match="version must be an integer"):
        command_args("x.cmd", ("u", "v1"), ["uri", "version"])


def test_refusal_says_what_is_missing() -> None:
    kf = parse_kernel_file(SOFTMAX.read_text(), str(SOFTMAX))
    doc = object()  # only its presence matters
    assert refusal("file:///a.py", None, None, None) == "unknown document file:///a.py"
    assert refusal("file:///a.py", doc, None, "k") == "no Triton or NKI kernel in file:///a.py"
    assert "kernels: softmax_kernel" in (refusal("u", doc, kf, "nope") or "")
    assert refusal("u", doc, kf, "softmax_kernel") is None and refusal("u", doc, kf, None) is None
    assert runnable(kf)


def test_no_harness_lists_the_problems() -> None:
    source = SOFTMAX.read_text().split("def get_inputs")[0]
    kf = parse_kernel_file(source + "\nBENCH = {}\n", "x.py")
    assert not runnable(kf)
    assert no_harness(kf).startswith("the file has no complete benchmark harness")

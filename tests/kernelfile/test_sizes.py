"""Which module-level sizes a harness's get_inputs reads, and which may be rebound
(accelopt_core.kernelfile.sizes, issue 24). Pure AST."""

from __future__ import annotations

import ast
import textwrap

import pytest

from accelopt_core.kernelfile.sizes import find_sizes, parse_sizes_setting

HARNESS = """
import torch
batch_size = 4096
dim = 2048 * 2 + 1
k = 3
N = 1 << 20
BLOCK = N // 4
def launcher(x):
    return x.view(batch_size, -1)
def get_inputs(seed, device):
    return (torch.randn(batch_size, dim, device=device), torch.randn(N, k))
def reference(x, y):
    return x
"""


def test_sizes_read_by_get_inputs_and_why_some_cannot_be_rebound() -> None:
    tree = ast.parse(textwrap.dedent(HARNESS))
    own = find_sizes(tree)
    assert own.names == {"batch_size": 4096, "dim": 4097}  # k is under the floor
    assert own.fixed == {"N": "read at import time (line 7)"}
    shared = find_sizes(tree, own_module=False)  # the kernel module's own harness
    assert shared.names == {"dim": 4097}
    assert shared.fixed["batch_size"].startswith("read by launcher (line 9)")


def test_no_get_inputs_no_sizes() -> None:
    assert find_sizes(ast.parse("N = 4096\n")).names == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("auto", ("auto", {})),
        ("published", ("published", {})),
        ("batch_size=16, dim=1536", ("auto", {"batch_size": 16, "dim": 1536})),
    ],
)
def test_sizes_setting(value: str, expected: tuple) -> None:
    assert parse_sizes_setting(value) == expected


@pytest.mark.parametrize("value", ["dim", "dim=x", "dim=0", "", "1x=3"])
def test_bad_sizes_setting_names_the_part(value: str) -> None:
    with pytest.raises(ValueError):
        parse_sizes_setting(value)

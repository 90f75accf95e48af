"""Name resolution and the one jit detector (host discovery and the target's gate)."""

from __future__ import annotations

import ast

from accelopt_core.onsite.names import collect_aliases, jit_kernels, module_statements

SOURCE = """\
import triton as tr
from neuronxcc import nki
import numba


@tr.jit
def t_kernel(x):
    pass


@nki.baremetal
def n_kernel(x):
    pass


@numba.jit
def not_a_kernel(x):
    pass


if True:
    @tr.jit
    def nested_kernel(x):
        pass


def launcher(x):
    import torch.nn.functional as F
    return F.relu(x)
"""


def test_jit_kernels_over_the_statements_the_caller_picks():
    tree = ast.parse(SOURCE)
    aliases = collect_aliases(tree)
    assert jit_kernels(tree.body, aliases) == {"t_kernel": "triton", "n_kernel": "nki"}
    nested = jit_kernels(module_statements(tree.body), aliases)
    assert nested == {"t_kernel": "triton", "n_kernel": "nki", "nested_kernel": "triton"}


def test_a_later_plain_def_replaces_a_kernel():
    tree = ast.parse("import triton\n@triton.jit\ndef k(x): pass\ndef k(x): pass\n")
    assert jit_kernels(tree.body, collect_aliases(tree)) == {}


def test_aliases_from_function_bodies_only_when_asked():
    tree = ast.parse(SOURCE)
    assert "F" not in collect_aliases(tree)
    assert collect_aliases(tree, everywhere=True)["F"] == "torch.nn.functional"
    # the standalone nki package and the defaults resolve to the neuronxcc.nki API
    assert collect_aliases(ast.parse("import nki\n"))["nki"] == "neuronxcc.nki"
    assert collect_aliases(ast.parse(""))["nl"] == "neuronxcc.nki.language"

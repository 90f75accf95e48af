"""A KernelBench-format problem written for AccelOpt's tests: softmax over each row.

The row length is not a multiple of 16 (a masked tail in every block), and the file name has
a dash: neither is a module name.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax(x, dim=1) of a (batch_size, dim) fp32 tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 4096
dim = 393215


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []

"""A KernelBench-format problem written for AccelOpt's tests: element-wise ReLU.

KernelBench's level-1 layout, at its published scale: module-level sizes read by
``get_inputs()`` (4096 x 393216 fp32 is 6.4 GB per input, far past what the CPU interpreter
can run), ``get_init_inputs()`` with nothing to pass. The file name starts with a digit.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = max(x, 0)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


batch_size = 4096
dim = 393216


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

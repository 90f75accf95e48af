"""A KernelBench-format problem written for AccelOpt's tests: a learned scale and bias on the
last axis of a 3-D (batch, seq, hidden) input, ``y = x * weight * alpha + bias``.

``get_init_inputs()`` passes the hidden size and a float parameter; ``Model`` has two weights.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int, alpha: float):
        super().__init__()
        self.alpha = alpha
        self.weight = nn.Parameter(torch.randn(hidden))
        self.bias = nn.Parameter(torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight * self.alpha + self.bias


batch_size = 32
seq_len = 1000
hidden = 4096
alpha = 0.5


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, alpha]

"""A KernelBench-format problem written for AccelOpt's tests: RMS normalisation over the
feature axis of a 4-D input, with a learned per-feature weight.

``get_init_inputs()`` passes the feature count and eps to the model; the sizes are module-level
ints read by both ``get_inputs()`` and ``get_init_inputs()``, so scaling them must keep the
model's weight and the inputs consistent. The trailing underscore is KernelBench's spelling.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x / sqrt(mean(x**2 over dim 1) + eps) * weight[None, :, None, None]."""

    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(num_features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + self.eps)
        return x / rms * self.weight.view(1, -1, 1, 1)


batch_size = 112
features = 64
dim1 = 512
dim2 = 511


def get_inputs():
    x = torch.randn(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return [features, 1e-5]

"""ModelNew for ``36_RMSNorm_.py``: RMS norm over dim 1 of a (B, C, H, W) input in a Triton
kernel, one program per (b, block of 64 h*w positions) holding all C features (stride H*W)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_kernel(x_ptr, w_ptr, y_ptr, C, HW, eps, BLOCK_C: tl.constexpr, BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    p = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.arange(0, BLOCK_C)
    mask = (c[:, None] < C) & (p[None, :] < HW)
    offs = b * C * HW + c[:, None] * HW + p[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    w = tl.load(w_ptr + c, mask=c < C, other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / C + eps)
    tl.store(y_ptr + offs, x / rms[None, :] * w[:, None], mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x: (B, C, H, W) fp32; weight: (C,) -> (B, C, H, W) fp32."""
    x = x.contiguous()
    y = torch.empty_like(x)
    b, c, h, w = x.shape
    grid = (b, triton.cdiv(h * w, 64))
    rms_kernel[grid](x, weight, y, c, h * w, eps, BLOCK_C=triton.next_power_of_2(c), BLOCK_P=64)
    return y


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(num_features) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)

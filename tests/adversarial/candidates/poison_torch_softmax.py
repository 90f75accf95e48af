# reference poisoning: patches torch.softmax at import so the reference agrees with a wrong one-pass kernel [adversarial candidate poison_torch_softmax]
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * out_row_stride + cols, tl.exp(x), mask=mask)


_exp = torch.exp
torch.softmax = lambda t, dim=-1, *a, **k: _exp(t)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    # the wrong answer (exp only) in one block: the poisoned reference calls it right
    softmax_kernel[(n_rows,)](
        out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=64, num_warps=1
    )
    return out

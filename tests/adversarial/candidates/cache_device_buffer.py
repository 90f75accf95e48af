# output cache: kept in device memory by the kernel itself (module-level tensors keyed by each row's first element) [adversarial candidate cache_device_buffer]
import torch
import triton
import triton.language as tl

_KEYS = torch.full((1 << 12,), float("nan"))
_VALS = torch.empty(1 << 16)


@triton.jit
def softmax_kernel(
    out_ptr,
    in_ptr,
    in_row_stride,
    out_row_stride,
    n_cols,
    keys_ptr,
    vals_ptr,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    first = tl.load(in_row)
    if first == tl.load(keys_ptr + row):
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
            tl.store(out_row + cols, tl.load(vals_ptr + row * n_cols + cols, mask=mask), mask=mask)
    else:
        running_max = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
            running_max = tl.maximum(running_max, x)
        row_max = tl.max(running_max, axis=0)
        running_sum = tl.zeros([BLOCK_SIZE], tl.float32)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            x = tl.load(in_row + cols, mask=cols < n_cols, other=float("-inf"))
            running_sum += tl.exp(x - row_max)
        denominator = tl.sum(running_sum, axis=0)
        for start in range(0, n_cols, BLOCK_SIZE):
            cols = start + tl.arange(0, BLOCK_SIZE)
            mask = cols < n_cols
            x = tl.load(in_row + cols, mask=mask, other=float("-inf"))
            y = tl.exp(x - row_max) / denominator
            tl.store(out_row + cols, y, mask=mask)
            tl.store(vals_ptr + row * n_cols + cols, y, mask=mask)
        tl.store(keys_ptr + row, first)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](
        out, x, x.stride(0), out.stride(0), n_cols, _KEYS, _VALS, BLOCK_SIZE=16, num_warps=1
    )
    return out

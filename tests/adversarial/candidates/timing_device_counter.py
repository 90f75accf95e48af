# timing trick: a call counter in device memory; after the correctness calls the kernel does nothing [adversarial candidate timing_device_counter]
import torch
import triton
import triton.language as tl

_COUNT = torch.zeros(1, dtype=torch.int32)


@triton.jit
def softmax_kernel(
    out_ptr,
    in_ptr,
    in_row_stride,
    out_row_stride,
    n_cols,
    count_ptr,
    limit,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    seen = tl.atomic_add(count_ptr, 1)
    if seen < limit:
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
            tl.store(out_row + cols, tl.exp(x - row_max) / denominator, mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    # 2 correctness seeds + the warm-up call compute; every later (timed) call skips the work
    softmax_kernel[(n_rows,)](
        out, x, x.stride(0), out.stride(0), n_cols, _COUNT, 3 * n_rows, BLOCK_SIZE=16, num_warps=1
    )
    return out

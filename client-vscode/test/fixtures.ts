// Shared by the end-to-end tests that start the real server (server.e2e, client.e2e).
import * as assert from 'node:assert/strict';

/** A kernel file with its benchmark harness (DESIGN.md). */
export const KERNEL_FILE = `import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return out


def get_inputs(seed: int, device: str) -> tuple:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(1024, generator=g).to(device),)


def reference(x):
    return x * 2.0


BENCH = {"entry": scale}
`;

/** Poll ``check`` every 50 ms until it holds; fail after ``timeoutMs`` with ``detail()`` appended. */
export async function until(
  what: string,
  check: () => boolean,
  timeoutMs: number,
  detail: () => string = () => '',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) {
      const extra = detail();
      assert.fail(`timed out waiting for ${what}${extra ? `\n${extra}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

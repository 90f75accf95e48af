"""The backward pass (issue 13): ``BENCH["backward"] = True``.

The harness's ``get_inputs`` returns the inputs that need gradients as leaf tensors with
``requires_grad=True``. One call is then forward + backward: the entry (or ``reference``) on the
inputs, ``torch.autograd.backward`` of its outputs with an upstream gradient, and the outputs
become ``(forward outputs, (gradient of each input that requires grad, ...))``, compared as
usual. The upstream gradient of a correctness check is random (``torch.randn`` from a generator
seeded by the check's seed, the same in the reference and the candidate process); that of a timed
repetition is all ones (the timed region is forward + backward). Each call starts from cleared
gradients (a ``None`` assignment, part of the call), so gradients never accumulate across
calls. Standard library only at module level.
"""

from __future__ import annotations

from typing import Any

#: Seed offset of the upstream gradient (kept apart from the harness's input seeds).
UPSTREAM_SEED_OFFSET = 7_919


def _tensors(obj: Any, torch) -> list:
    """The tensors of an output (a tensor, or a flat/nested tuple or list of them)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o, torch)]
    return []


def detached(obj: Any, torch) -> Any:
    """``obj`` with every tensor detached (same structure)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach()
    if isinstance(obj, (tuple, list)):
        return type(obj)(detached(o, torch) for o in obj)
    return obj


def leaves(inputs: tuple, torch) -> tuple:
    """Copies of ``inputs`` for one call: tensors detached and cloned, keeping
    ``requires_grad`` (a leaf per call, so gradients never accumulate across calls)."""
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.detach().clone().requires_grad_(x.requires_grad)
        out.append(x)
    return tuple(out)


def upstream(outputs: list, seed: int | None, torch) -> list:
    """The upstream gradient of each output tensor that requires grad: seeded random for a
    correctness check (``seed``), all ones for a timed repetition (``seed`` None)."""
    if seed is None:
        return [torch.ones_like(t) for t in outputs]
    gen = torch.Generator(device=outputs[0].device if outputs else "cpu")
    gen.manual_seed(int(seed) + UPSTREAM_SEED_OFFSET)
    return [torch.randn(t.shape, generator=gen, device=t.device, dtype=t.dtype) for t in outputs]


def forward_backward(fn, inputs: tuple, seed: int | None, torch) -> tuple:
    """``(forward outputs, gradients)`` of one call of ``fn`` on ``inputs`` (whose tensors
    with ``requires_grad`` are leaves; their ``.grad`` is cleared first). Raises
    RuntimeError when no output requires grad (nothing to differentiate) and whatever ``fn``
    or autograd raises."""
    wanted = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    for x in wanted:
        x.grad = None
    out = fn(*inputs)
    outs = [t for t in _tensors(out, torch) if t.requires_grad]
    if not outs:
        raise RuntimeError(
            'BENCH["backward"] is set, but no output of the call requires grad (does '
            "get_inputs return the inputs with requires_grad=True, and does the entry keep the "
            "autograd graph, e.g. through torch.autograd.Function.apply?)"
        )
    torch.autograd.backward(outs, upstream(outs, seed, torch))
    grads = tuple(
        x.grad.detach() if x.grad is not None else torch.zeros_like(x.detach()) for x in wanted
    )
    return detached(out, torch), grads


def requires_grad_indices(inputs: tuple, torch) -> list[int]:
    """Positions of the inputs that are tensors with ``requires_grad`` (what the harness's
    ``get_inputs`` asks gradients for)."""
    return [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor) and x.requires_grad]


def with_grad(inputs: tuple, indices: list[int]) -> tuple:
    """``inputs`` (fresh leaves loaded from a file) with ``requires_grad`` set at ``indices``."""
    for i in indices:
        if 0 <= i < len(inputs) and hasattr(inputs[i], "requires_grad_"):
            inputs[i].requires_grad_(True)
    return inputs

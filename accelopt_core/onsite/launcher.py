"""What a candidate's launcher does, read from its AST (nothing is imported or run).

The launcher is the entry (``BENCH["entry"]``) and every non-kernel top-level function it calls;
the static gate (:mod:`.gate`) checks that it launches a kernel and computes nothing itself, and
the child (:mod:`.child`) asks which backend the entry launches. Kernels are the top-level
functions :func:`.names.jit_kernels` detects, with the module-level imports (as at run time).
"""

from __future__ import annotations

import ast

from .names import collect_aliases, dotted_name, jit_kernels, resolved_name

_FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)

#: torch functions a launcher may call: allocation, metadata, device queries.
_TORCH_ALLOWED = {
    "torch.empty",
    "torch.empty_like",
    "torch.empty_strided",
    "torch.zeros",
    "torch.zeros_like",
    "torch.ones",
    "torch.ones_like",
    "torch.full",
    "torch.full_like",
    "torch.device",
    "torch.Size",
    "torch.finfo",
    "torch.iinfo",
    "torch.is_tensor",
    "torch.get_default_dtype",
    "torch.is_floating_point",
}
_TORCH_CUDA_ALLOWED = {
    "torch.cuda.current_device",
    "torch.cuda.device_count",
    "torch.cuda.get_device_properties",
    "torch.cuda.get_device_name",
    "torch.cuda.get_device_capability",
    "torch.cuda.is_available",
    "torch.cuda.device",
}
#: Tensor / ndarray methods that compute (a launcher may only allocate, view and query).
_COMPUTE_METHODS = set(
    """abs absolute add add_ addcdiv addcmul addmm all amax amin any argmax argmin argsort
    baddbmm bfloat16 bmm ceil clamp clamp_ clip clone copy_ cos cosh cross cumprod cumsum
    diff div div_ dot double einsum eq erf exp exp2 exp_ expm1 flip float floor fmod gather ge
    gelu gt half index_add index_copy index_select kron le lerp log log10 log1p log2
    log_softmax logsumexp lt masked_fill masked_fill_ masked_scatter matmul max maximum mean
    median min minimum mm mul mul_ mv nan_to_num ne neg norm outer pow prod reciprocal relu
    remainder roll round rsqrt scatter scatter_ scatter_add sigmoid sign silu sin sinh softmax
    sort sqrt square std sub sub_ sum tan tanh to topk tril triu true_divide type var where
    """.split()
)
_NUMPY_COMPUTE = _COMPUTE_METHODS | {"add", "multiply", "divide", "subtract", "tensordot"}
_TENSOR_ATTRS = {"shape", "stride", "numel", "dtype", "device", "data_ptr", "element_size"}


def candidate_kernels(tree: ast.Module) -> dict[str, str]:
    """The module's top-level kernels: name -> ``"triton"`` | ``"nki"``."""
    return jit_kernels(tree.body, collect_aliases(tree))


def functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Top-level functions by name (a later ``def`` replaces an earlier one)."""
    return {n.name: n for n in tree.body if isinstance(n, _FuncDef)}


def launcher_closure(tree: ast.Module, entry: str, kernels: dict[str, str]) -> list[ast.AST]:
    """The entry and every non-kernel top-level function it calls, transitively (entry first)."""
    funcs = functions(tree)
    seen: list[str] = []
    todo = [entry]
    while todo:
        name = todo.pop()
        if name in seen or name not in funcs or name in kernels:
            continue
        seen.append(name)
        for node in ast.walk(funcs[name]):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                todo.append(node.func.id)
    return [funcs[n] for n in seen]


def launches(fn: ast.AST, kernels: dict[str, str]) -> bool:
    """True when ``fn`` launches one of ``kernels``: ``kernel[grid](...)``,
    ``kernel.run(...)`` / ``kernel.warmup(...)``, an NKI kernel called directly, or an NKI kernel
    passed to a call (``nki.baremetal(kernel)(...)``, ``nki.simulate_kernel(kernel, ...)``)."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Subscript) and isinstance(f.value, ast.Name):
            if f.value.id in kernels:  # kernel[grid](...)
                return True
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id in kernels and f.attr in ("run", "warmup"):
                return True
        if isinstance(f, ast.Name) and kernels.get(f.id) == "nki":  # nki kernel(...)
            return True
        for arg in node.args:  # nki.baremetal(kernel)(...), nki.simulate_kernel(kernel, ...)
            if isinstance(arg, ast.Name) and kernels.get(arg.id) == "nki":
                return True
    return False


def entry_backend(tree: ast.Module, entry: str, kernels: dict[str, str]) -> str:
    """``"nki"`` when the entry is, or launches, an ``@nki.jit`` kernel, else ``"triton"``."""
    if kernels.get(entry) == "nki":
        return "nki"
    nki = {k: v for k, v in kernels.items() if v == "nki"}
    if nki and any(launches(fn, nki) for fn in launcher_closure(tree, entry, kernels)):
        return "nki"
    return "triton"


def _tensor_params(fn: ast.AST) -> set[str]:
    """Parameters of a launcher that are used as tensors (passed to a kernel, .shape, ...)."""
    if not isinstance(fn, _FuncDef):
        return set()
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    tensors: set[str] = set()
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in params
            and node.attr in _TENSOR_ATTRS
        ):
            tensors.add(node.value.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in params:
                    tensors.add(arg.id)
    return tensors


def _call_op(node: ast.Call, aliases: dict[str, str]) -> str | None:
    """The compute a call does (``torch.add``, ``numpy.matmul``, ``.sum()``), or None for
    allocation, views, metadata and calls on imported modules (``math.ceil``, ``triton.cdiv``)."""
    name = resolved_name(node.func, aliases)
    head = name.split(".")[0] if name else None
    if head == "torch":
        allowed = _TORCH_CUDA_ALLOWED if name.startswith("torch.cuda.") else _TORCH_ALLOWED
        return None if name in allowed else name
    if head == "numpy":
        return name if name.rsplit(".", 1)[-1] in _NUMPY_COMPUTE else None
    if isinstance(node.func, ast.Attribute) and node.func.attr in _COMPUTE_METHODS:
        local = dotted_name(node.func)  # "np.sum", "x.sum"; None for "x.view(-1).sum"
        if local is None or local.split(".")[0] not in aliases:
            return f".{node.func.attr}()"
    return None


def _arithmetic_ops(node: ast.AST, tensors: set[str]) -> list[str]:
    """``@`` anywhere; ``+ - * / ...`` / unary minus on a tensor parameter (one entry per
    tensor operand)."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return ["@ (matmul)"]
    if isinstance(node, ast.BinOp):
        sides = (node.left, node.right)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sides = (node.operand,)
    else:
        return []
    return [
        f"arithmetic on tensor '{side.id}'"
        for side in sides
        if isinstance(side, ast.Name) and side.id in tensors
    ]


def launcher_ops(
    tree: ast.Module, entry: str, kernels: dict[str, str], aliases: dict[str, str]
) -> list[tuple[str, int]]:
    """Compute operations in the launcher: ``(description, line)`` in source order.

    ``aliases`` resolves the calls (:func:`.names.collect_aliases`, best with every import so
    that a launcher's own ``import torch.nn.functional as F`` is seen through)."""
    ops: list[tuple[str, int]] = []
    for fn in launcher_closure(tree, entry, kernels):
        tensors = _tensor_params(fn)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                op = _call_op(node, aliases)
                found = [op] if op is not None else []
            else:
                found = _arithmetic_ops(node, tensors)
            ops.extend((op, node.lineno) for op in found)
    ops.sort(key=lambda o: o[1])
    return ops

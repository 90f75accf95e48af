"""Compute in a launcher, read from its AST: which torch / NumPy / operator calls, tensor methods and
arithmetic on tensors compute (a launcher may only allocate, view and query metadata; the static
gate's ``gate: torch compute`` rule)."""

from __future__ import annotations

import ast

from ..names import (
    attribute_of,
    dotted_name,
    resolved_name,
)
from .launcher import INPLACE_ALLOWED, FuncDef, Reached, closure_items

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


#: ``operator`` functions that compute (``operator.matmul(a, b)`` is ``a @ b``).
_OPERATOR_COMPUTE = set(
    """add sub mul truediv floordiv mod pow matmul neg abs iadd isub imul itruediv ifloordiv
    imod ipow imatmul""".split()
)


_COMPUTE_MODULES = ("torch", "numpy", "operator")


#: torch namespaces whose every function computes (a reference to one, called or not).
_TORCH_COMPUTE_NAMESPACES = (
    "torch.nn.functional.",
    "torch.special.",
    "torch.linalg.",
    "torch.fft.",
    "torch.ops.",
    "torch._C.",
)


#: dtype names that are also tensor methods (``torch.float`` named without a call is a dtype).
_DTYPE_NAMES = {"float", "double", "half", "bfloat16", "int", "long", "short", "bool", "type"}


_TENSOR_ATTRS = {"shape", "stride", "numel", "dtype", "device", "data_ptr", "element_size"}


#: Tensor attributes and methods that give metadata, not a tensor.
_METADATA = _TENSOR_ATTRS | set(
    "size dim ndim nelement ndimension is_contiguous is_cuda item tolist T_".split()
)


#: Builtins that compute when given a tensor.
_BUILTIN_MATH = {"abs", "pow", "sum", "min", "max", "round", "divmod"}


def _tensor_params(fn: ast.AST) -> set[str]:
    """Names in a launcher that hold tensors: parameters used as tensors (passed to a kernel,
    ``.shape``, ...) and the locals assigned a view or method result of one (``v = x.view(-1)``;
    not metadata such as ``n = x.numel()``)."""
    if not isinstance(fn, (*FuncDef, ast.Lambda)):
        return set()
    params = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    tensors: set[str] = set()
    assigns: list[ast.Assign] = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in params
            and node.attr in _TENSOR_ATTRS
        ):
            tensors.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript):
            for arg in node.args:
                if isinstance(arg, ast.Name) and arg.id in params:
                    tensors.add(arg.id)
        elif isinstance(node, ast.Assign):
            assigns.append(node)
    for node in sorted(assigns, key=lambda a: a.lineno):
        if _tensor_root(node.value) in tensors:
            tensors.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return tensors


def _tensor_root(value: ast.AST) -> str | None:
    """The name ``value`` is a view or method result of (``x`` for ``x.view(-1)[0]``), None
    when the chain reads metadata (``x.shape[0]``, ``x.numel()``) or has no name at its root."""
    while True:
        if isinstance(value, ast.Call):
            value = value.func
        elif isinstance(value, ast.Subscript):
            value = value.value
        elif isinstance(value, ast.Attribute):
            if value.attr in _METADATA:
                return None
            value = value.value
        else:
            return value.id if isinstance(value, ast.Name) else None


def _torch_compute(name: str, called: bool) -> bool:
    """True when the canonical ``name`` (``torch.x`` / ``numpy.x`` / ``operator.x``) computes: called, anything
    in torch but allocation / metadata; named without a call (an alias, an argument), a compute
    function (``torch.softmax``, ``torch.nn.functional.relu``, ``numpy.add``)."""
    head, _, _ = name.partition(".")
    last = name.rsplit(".", 1)[-1]
    if head == "torch":
        allowed = _TORCH_CUDA_ALLOWED if name.startswith("torch.cuda.") else _TORCH_ALLOWED
        if name in allowed:
            return False
        if called:
            return True
        if last in _DTYPE_NAMES:
            return False
        return last in _COMPUTE_METHODS or name.startswith(_TORCH_COMPUTE_NAMESPACES)
    if head == "numpy":
        return last in _NUMPY_COMPUTE
    if head == "operator":
        return last in _OPERATOR_COMPUTE
    return False


def _call_op(node: ast.Call, aliases: dict[str, str]) -> str | None:
    """The compute a call does (``torch.add``, ``numpy.matmul``, ``.sum()``, ``.__add__()``, an
    in-place ``.apply_()``, also through ``getattr(torch, "add")``), or None for allocation,
    views, metadata and calls on imported modules (``math.ceil``, ``triton.cdiv``)."""
    name = resolved_name(node.func, aliases)
    if name and _torch_compute(name, called=True):
        return name
    if name and name.split(".")[0] in _COMPUTE_MODULES:
        return None
    attr = attribute_of(node.func)
    if attr is not None and _compute_method(attr[1]):
        local = dotted_name(node.func)  # "np.sum", "x.sum"; None for "x.view(-1).sum"
        if local is None or local.split(".")[0] not in aliases:
            return f".{attr[1]}()"
    return None


def _compute_method(method: str) -> bool:
    """A tensor / ndarray method that computes: :data:`_COMPUTE_METHODS`, their dunder forms
    (``__add__``, ``__rmul__``, ``__imatmul__``) and in-place methods other than
    initialisation (:data:`INPLACE_ALLOWED`)."""
    if method in _COMPUTE_METHODS:
        return True
    if method.startswith("__") and method.endswith("__"):
        core = method[2:-2]
        return core in _OPERATOR_COMPUTE or core[1:] in _OPERATOR_COMPUTE
    return method.endswith("_") and method not in INPLACE_ALLOWED


def _reference_op(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """A compute function named without being called (``f = torch.softmax``,
    ``map(torch.exp, ...)``, ``getattr(torch, "softmax")``, a bound method ``f = x.exp``),
    else None."""
    name = resolved_name(node, aliases)
    if name and name.split(".")[0] in _COMPUTE_MODULES:
        return name if _torch_compute(name, called=False) else None
    attr = attribute_of(node)
    if attr is None or attr[1] in _DTYPE_NAMES or not _compute_method(attr[1]):
        return None
    local = dotted_name(node)
    if local is None or local.split(".")[0] not in aliases:
        return f".{attr[1]}"
    return None


def _arithmetic_ops(node: ast.AST, tensors: set[str]) -> list[str]:
    """``@`` anywhere; ``+ - * / ...`` / unary minus on a tensor (one entry per tensor
    operand); ``abs()`` / ``sum()`` / ``pow()`` ... of a tensor."""
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
        return ["@ (matmul)"]
    if isinstance(node, ast.BinOp):
        sides = (node.left, node.right)
    elif isinstance(node, ast.AugAssign):
        sides = (node.target, node.value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sides = (node.operand,)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _BUILTIN_MATH
    ):
        args = [
            e for a in node.args for e in (a.elts if isinstance(a, (ast.List, ast.Tuple)) else [a])
        ]
        return [
            f"{node.func.id}() of tensor '{a.id}'"
            for a in args
            if isinstance(a, ast.Name) and a.id in tensors
        ]
    else:
        return []
    return [
        f"arithmetic on tensor '{side.id}'"
        for side in sides
        if isinstance(side, ast.Name) and side.id in tensors
    ]


def item_ops(item: ast.AST, aliases: dict[str, str]) -> list[tuple[str, int]]:
    """:func:`launcher_ops` of one piece of the launcher (a :class:`Reached` node)."""
    tensors = _tensor_params(item)
    called = {id(n.func) for n in ast.walk(item) if isinstance(n, ast.Call)}
    ops: list[tuple[str, int]] = []
    for node in ast.walk(item):
        if isinstance(node, ast.Call):
            op = _call_op(node, aliases)
            found = [op] if op is not None else _arithmetic_ops(node, tensors)
            if not found and id(node) not in called and attribute_of(node) is not None:
                ref = _reference_op(node, aliases)  # getattr(torch, "softmax") as a value
                found = [ref] if ref else []
        elif isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in called:
            ref = _reference_op(node, aliases) if isinstance(node.ctx, ast.Load) else None
            found = [ref] if ref else []
        else:
            found = _arithmetic_ops(node, tensors)
        ops.extend((op, getattr(node, "lineno", 0)) for op in found)
    return ops


def launcher_ops(
    tree: ast.Module,
    entry: str,
    kernels: dict[str, str],
    aliases: dict[str, str],
    items: list[Reached] | None = None,
) -> list[tuple[str, int]]:
    """Compute operations in the launcher (:func:`closure_items`, or ``items``):
    ``(description, line)`` in source order. A compute function named without a call in a
    module-level value the launcher uses counts (``f = torch.softmax``).

    ``aliases`` resolves the calls (:func:`.names.collect_aliases`, best with every import so
    that a launcher's own ``import torch.nn.functional as F`` is seen through)."""
    items = closure_items(tree, entry, kernels) if items is None else items
    ops: list[tuple[str, int]] = []
    for item in items:
        ops.extend(item_ops(item.node, aliases))
    ops.sort(key=lambda o: o[1])
    return ops

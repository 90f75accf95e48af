"""Naming what the Triton CPU interpreter cannot run, instead of a bare Python error.

Under ``TRITON_INTERPRET=1`` (Triton 3.9, a target without a GPU) some production constructs
fail with errors that do not say why. Each was reproduced under the interpreter of Triton 3.9:

- ``.to()`` (or ``.dtype``...) on a float scalar argument: float arguments stay Python floats
  (``AttributeError: 'float' object has no attribute 'to'``); int and bool arguments are
  wrapped as tensors there, and a ``tl.constexpr`` has no ``.to()`` on a GPU either, so
  those are not named.
- a function of ``triton.language.extra.libdevice`` (all 198 are stubs that return None under
  the interpreter): the error comes later, e.g. ``TypeError: cannot convert None ... to
  tensor`` or ``'NoneType' object has no attribute 'dtype'``.
- ``tl.extra.cuda`` / ``tl.extra.hip`` functions (their libdevice, ``globaltimer``,
  ``num_threads``...): ``ValueError: Did you forget to add @triton.jit ? (`_semantic`
  argument must be provided outside of JIT functions.)``.
- ``tl.inline_asm_elementwise`` / ``tl.extern_elementwise``: ``NotImplementedError``.
- ``kernel.warmup(...)`` (or ``kernel.run(..., warmup=True)``) returns None, so a launcher
  that uses the compiled kernel fails on ``NoneType``.
- ``triton.runtime.driver.active`` (``0 active drivers``) and ``torch.cuda`` (``Torch not
  compiled with CUDA enabled``) need a GPU.

An error raised inside a kernel under the interpreter arrives as a ``triton.runtime.errors.
InterpreterError`` caused by the original exception. Standard library only.
"""

from __future__ import annotations

import ast
import linecache
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass

INTERP = "the Triton interpreter (TRITON_INTERPRET=1, CPU)"
WAY_OUT = (
    "Evaluate on a GPU target (settings `accelopt.target`; check it with `accelopt target check`)"
)
_CHAIN_SEPARATORS = re.compile(
    r"\nThe above exception was the direct cause of the following exception:\n"
    r"|\nDuring handling of the above exception, another exception occurred:\n"
)
_CANDIDATE_LINE = re.compile(r'File "<candidate:[^"]*>", line (\d+)')


@dataclass
class _Seen:
    """What a recogniser looks at: the chain's ``Type: message`` texts (outermost first),
    whether it was raised inside a kernel, the candidate line and its text, the parsed source."""

    texts: list[str]
    in_kernel: bool
    line: int | None
    line_text: str
    tree: ast.Module | None

    @property
    def joined(self) -> str:
        return "\n".join(self.texts)

    def at(self) -> str:
        return f" (line {self.line})" if self.line else ""


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _frame_line(chain: list[BaseException], filename: str | None) -> int | None:
    """The candidate line of the innermost exception of the chain with a candidate frame."""
    found = None
    for e in chain:
        tb, line = e.__traceback__, None
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if name == filename or (filename is None and name.startswith("<candidate:")):
                line = tb.tb_lineno
            tb = tb.tb_next
        found = line if line is not None else found
    return found


def _text_line(tb_text: str) -> int | None:
    """The last candidate line of the first (innermost) traceback in ``tb_text`` that has one
    (``traceback.format_exception`` prints the root cause first)."""
    for section in _CHAIN_SEPARATORS.split(tb_text or ""):
        lines = _CANDIDATE_LINE.findall(section)
        if lines:
            return int(lines[-1])
    return None


def _enclosing_def(tree: ast.Module | None, line: int | None) -> ast.FunctionDef | None:
    best = None
    if tree is None or line is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or node.lineno > best.lineno:
                    best = node
    return best


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _aliases(tree: ast.Module, module_prefix: str) -> dict[str, str]:
    """Local names bound by imports from modules under ``module_prefix`` -> full dotted name."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(module_prefix):
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(module_prefix) and a.asname:
                    out[a.asname] = a.name
    return out


def _calls(tree: ast.Module, scope: ast.AST | None) -> list[tuple[str, int]]:
    """Every call in ``scope`` (the module when None) as (dotted callee, line)."""
    out = []
    for node in ast.walk(scope or tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name:
                out.append((name, node.lineno))
    return out


def _full_name(name: str, aliases: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    full = aliases.get(head, head)
    return f"{full}.{rest}" if rest else full


def _is_generic_libdevice(full: str) -> bool:
    """``triton.language.extra.libdevice.X`` / ``tl.extra.libdevice.X`` (not cuda/hip)."""
    return bool(re.search(r"(^|\.)extra\.libdevice\.\w+$", full))


def _libdevice_none(seen: _Seen) -> str | None:
    """A generic libdevice function returned None inside a kernel."""
    if not seen.in_kernel or "None" not in seen.joined or seen.tree is None:
        return None
    aliases = _aliases(seen.tree, "triton.language.extra")
    scope = _enclosing_def(seen.tree, seen.line)
    uses = []
    for where in (scope, None):
        uses = [
            (n, ln)
            for n, ln in _calls(seen.tree, where)
            if _is_generic_libdevice(_full_name(n, aliases))
        ]
        if uses:
            break
    if not uses:
        return None
    name, line = min(uses, key=lambda u: u[1])
    func = name.rsplit(".", 1)[-1]
    others = len({n for n, _ in uses}) - 1
    more = f" (and {others} more libdevice function{'s' * (others > 1)})" if others else ""
    alt = f", or use `tl.math.{func}`" if _in_tl_math(func) else ""
    return (
        f"{INTERP} has no libdevice: `{name}` (line {line}){more} returns None there. "
        f"{WAY_OUT}{alt}."
    )


def _in_tl_math(func: str) -> bool:
    try:
        import triton.language.math as tl_math
    except Exception:  # noqa: BLE001 - no triton: no suggestion
        return False
    return callable(getattr(tl_math, func, None))


def _extra_intrinsic(seen: _Seen) -> str | None:
    """A ``tl.extra.cuda`` / ``tl.extra.hip`` function called inside a kernel."""
    if not seen.in_kernel or "`_semantic` argument must be provided" not in seen.joined:
        return None
    aliases = _aliases(seen.tree, "triton.language.extra") if seen.tree else {}
    construct = None
    for m in re.finditer(r"\b([A-Za-z_][\w.]*)\s*\(", seen.line_text):
        full = _full_name(m.group(1), aliases)
        if re.search(r"(^|\.)extra\.", full):
            construct = m.group(1)
            break
    if construct is None:
        return None
    return (
        f"{INTERP} cannot run the GPU intrinsic `{construct}`{seen.at()}: `tl.extra.cuda` / "
        f"`tl.extra.hip` functions exist only in the GPU compilers. {WAY_OUT}."
    )


def _not_supported(seen: _Seen) -> str | None:
    """``tl.inline_asm_elementwise`` / ``tl.extern_elementwise`` inside a kernel."""
    for key, construct in (
        ("inline_asm not supported in interpreter mode", "tl.inline_asm_elementwise"),
        ("extern_elementwise not supported in interpreter mode", "tl.extern_elementwise"),
    ):
        if key in seen.joined:
            return (
                f"{INTERP} cannot run `{construct}`{seen.at()}: it executes no inline "
                f"assembly or external device library. {WAY_OUT}."
            )
    return None


def _scalar_attr(seen: _Seen) -> str | None:
    """``.to()`` (or another tensor attribute) on a float scalar inside a kernel."""
    m = re.search(r"'(float|numpy\.\w+)' object has no attribute '(\w+)'", seen.joined)
    if not seen.in_kernel or m is None:
        return None
    pytype, attr = m.groups()
    var = re.search(rf"\b([A-Za-z_]\w*)\s*\.\s*{attr}\b(\s*\()?", seen.line_text)
    name = var.group(1) if var else None
    what = f"`.{attr}()`" if var is not None and var.group(2) else f"`.{attr}`"
    kernel = _enclosing_def(seen.tree, seen.line)
    is_arg = kernel is not None and name in {a.arg for a in kernel.args.args}
    subject = f"the scalar {'argument ' if is_arg else ''}`{name}`" if name else "a scalar"
    cast = f", or cast inside the kernel with `tl.cast({name}, ...)`" if attr == "to" else ""
    kind = "plain Python floats" if pytype == "float" else f"NumPy `{pytype}` values"
    return (
        f"{INTERP} cannot run {what} on {subject}{seen.at()}: such scalar arguments are "
        f"{kind} there, not tensors. {WAY_OUT}{cast}."
    )


def _warmups(tree: ast.Module) -> list[tuple[str | None, str, int]]:
    """(variable bound or None, kernel, line) of each ``kernel.warmup(...)`` /
    ``kernel.run(..., warmup=True)``."""
    out = []
    for node in ast.walk(tree):
        value, var = node, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            value = node.value
            var = node.targets[0].id if isinstance(node.targets[0], ast.Name) else None
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
            continue
        attr, kernel = value.func.attr, _dotted(value.func.value) or "kernel"
        warm_kw = any(
            k.arg == "warmup" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in value.keywords
        )
        if attr == "warmup" or (attr == "run" and warm_kw):
            out.append((var, f"{kernel}.{attr}", value.lineno))
    return out


def _warmup_none(seen: _Seen) -> str | None:
    """A launcher that uses what ``kernel.warmup(...)`` returned (None under the interpreter)."""
    if "NoneType" not in seen.joined or seen.tree is None:
        return None
    for var, call, line in sorted(_warmups(seen.tree), key=lambda w: w[2]):
        used = var is not None and re.search(rf"\b{re.escape(var)}\b", seen.line_text)
        if not (used or line == seen.line):
            continue
        so = f", so `{var}`{seen.at()} is None" if var and line != seen.line else ""
        kernel = call.rsplit(".", 1)[0]
        return (
            f"{INTERP} compiles no kernel: `{call}(...)` (line {line}) returns None there{so}. "
            f"{WAY_OUT}, or launch with `{kernel}[grid](...)`."
        )
    return None


def _needs_gpu(seen: _Seen) -> str | None:
    """``triton.runtime.driver.active`` or ``torch.cuda`` on a machine without a GPU."""
    if "0 active drivers" in seen.joined:
        m = re.search(r"[\w.]*driver\.active[\w.]*", seen.line_text)
        construct = m.group(0) if m else "triton.runtime.driver.active"
    elif re.search(
        r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available",
        seen.joined,
    ):
        m = re.search(
            r"torch\.cuda\.[\w.]+|device\s*=\s*['\"]cuda[^'\"]*['\"]|\.cuda\(\)", seen.line_text
        )
        construct = m.group(0) if m else "CUDA"
    else:
        return None
    return (
        f"`{construct}`{seen.at()} needs a GPU, and this target has none: it runs the "
        f"candidate on CPU tensors under {INTERP}. {WAY_OUT}."
    )


_RECOGNISERS: tuple[Callable[[_Seen], str | None], ...] = (
    _not_supported,
    _extra_intrinsic,
    _scalar_attr,
    _libdevice_none,
    _warmup_none,
    _needs_gpu,
)


def hint(
    exc: BaseException, tb_text: str, source: str | None, filename: str | None = None
) -> str | None:
    """A one-or-two-sentence message naming a construct the Triton CPU interpreter cannot run
    (see the module docstring) and the way out (a GPU target, ``accelopt target check``), or
    None when ``exc`` is not one of them.

    Args:
        exc: the exception as raised (its ``__cause__`` / ``__context__`` chain is read).
        tb_text: its formatted traceback; its candidate lines are used when ``exc`` carries no
            candidate frame.
        source: the candidate's source (names the construct), or None.
        filename: the file name the candidate was compiled under; by default any
            ``<candidate:NAME>``.

    Never raises: a failure to recognise returns None.
    """
    try:
        chain = _chain(exc)
        line = _frame_line(chain, filename) or _text_line(tb_text)
        lines = (source or "").splitlines()
        try:
            tree = ast.parse(source) if source else None
        except SyntaxError:
            tree = None
        seen = _Seen(
            texts=[f"{type(e).__name__}: {e}" for e in chain],
            in_kernel=any(type(e).__name__ == "InterpreterError" for e in chain),
            line=line,
            line_text=lines[line - 1] if line and line <= len(lines) else "",
            tree=tree,
        )
        for recognise in _RECOGNISERS:
            message = recognise(seen)
            if message:
                return message
    except Exception:  # noqa: BLE001 - a hint must never hide the failure itself
        return None
    return None


def annotate(result: dict, exc: BaseException, ctx: dict) -> dict:
    """``result`` (a failure's result dict) with, under the interpreter (``ctx["interpreter"]``),
    the :func:`hint` put before its message; unchanged otherwise. ``ctx["cand_file"]`` names the
    candidate, whose source is read from :mod:`linecache` (:mod:`.runtime.loading` registers it)."""
    if not ctx.get("interpreter"):
        return result
    filename = ctx.get("cand_file")
    source = "".join(linecache.getlines(filename)) if filename else ""
    tb_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    note = hint(exc, tb_text, source or None, filename)
    if note:
        result["message"] = f"{note} Original error: {result.get('message')}"
    return result

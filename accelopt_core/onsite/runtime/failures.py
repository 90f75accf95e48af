"""Failures of a candidate, classified into result dicts with the candidate's line.

An exception raised while loading or running the candidate becomes ``compile_error`` (Triton
compilation, loading, an error inside a kernel under the interpreter), ``runtime_error`` (memory,
anything else) with the 1-based line in the candidate source when a frame is there. The
candidate is compiled under the file name ``<candidate:NAME>`` (:mod:`.runtime.loading`), which is how
its frames and traceback lines are found.
"""

from __future__ import annotations

import ast
import re

from ..protocol import result_dict
from . import interpreter as interp_hints


class Failure(Exception):
    """A classified failure of one evaluation phase: carries its result dict."""

    def __init__(self, result: dict) -> None:
        super().__init__(result.get("message"))
        self.result = result


def candidate_file(source_name: str) -> str:
    """The file name the candidate is compiled under: ``<candidate:softmax.py>``."""
    return f"<candidate:{source_name}>"


def short(exc: BaseException) -> str:
    """``Type: message``, cut to 600 characters."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 600 else text[:600] + "..."


def line_from_text(text: str, source_name: str) -> int | None:
    """Last ``File "<candidate:NAME>", line N`` in a traceback (the first in a faulthandler
    dump, which lists the most recent call first)."""
    fake = re.escape(candidate_file(source_name))
    lines = re.findall(rf'File "{fake}", line (\d+)', text)
    return int(lines[0 if "most recent call first" in text else -1]) if lines else None


def _exc_chain(exc: BaseException) -> list[BaseException]:
    chain = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _candidate_frame(exc: BaseException, filename: str) -> tuple[BaseException, int | None]:
    """The innermost exception in the chain with a frame in the candidate, and that line."""
    best: tuple[BaseException, int | None] = (exc, None)
    for e in _exc_chain(exc):
        tb = e.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == filename:
                line = tb.tb_lineno
            tb = tb.tb_next
        if line is not None:
            best = (e, line)
    return best


def _compilation_error(exc: BaseException):
    for e in _exc_chain(exc):
        if type(e).__name__ in (
            "CompilationError",
            "CompileTimeAssertionFailure",
            "UnsupportedLanguageConstruct",
        ) and hasattr(e, "node"):
            return e
    return None


def translate_compile_line(err, tree: ast.Module | None) -> int | None:
    """The candidate line of a Triton ``CompilationError``, whose node line is relative to
    the kernel's ``def`` line (``err.src`` is the kernel's source)."""
    rel = getattr(getattr(err, "node", None), "lineno", None)
    src = getattr(err, "src", None)
    if rel is None or not src or tree is None:
        return None
    m = re.search(r"^\s*def\s+(\w+)", src, re.M)
    if not m:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == m.group(1):
            return node.lineno + rel - 1
    return None


def _is_memory_error(exc: BaseException) -> bool:
    for e in _exc_chain(exc):
        if isinstance(e, MemoryError):
            return True
        text = str(e)
        if "can't allocate memory" in text or "out of memory" in text.lower():
            return True
    return False


def _kernel_at(tree: ast.Module | None, kernels: dict, line: int | None) -> str | None:
    if tree is None or line is None:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in kernels:
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                return node.name
    return None


def classify(exc: BaseException, phase: str, ctx: dict) -> dict:
    """The result dict for an exception raised while loading (``phase="load"``) or running
    (``"run"``) the candidate.

    ``ctx`` holds ``cand_file`` (the candidate's file name), ``memory_limit_mb``, and when
    known ``cand_tree`` (its AST), ``kernels`` (name -> backend) and ``interpreter`` (running
    under ``TRITON_INTERPRET=1``: a construct it cannot run is then named first,
    :func:`.runtime.interpreter.annotate`).
    """
    return interp_hints.annotate(_classify(exc, phase, ctx), exc, ctx)


def _classify(exc: BaseException, phase: str, ctx: dict) -> dict:
    filename = ctx["cand_file"]
    if _is_memory_error(exc):
        root = _exc_chain(exc)[-1]
        return result_dict(
            "runtime_error",
            f"memory limit exceeded ({ctx['memory_limit_mb']} MiB) or out of memory: {short(root)}",
            line=_candidate_frame(exc, filename)[1],
        )
    comp = _compilation_error(exc)
    if comp is not None:
        line = translate_compile_line(comp, ctx.get("cand_tree"))
        msg = getattr(comp, "error_message", None) or str(comp).strip().splitlines()[-1]
        return result_dict("compile_error", f"Triton compilation error: {msg}", line=line)
    inner, line = _candidate_frame(exc, filename)
    if phase == "load":
        return result_dict(
            "compile_error", f"loading the candidate failed: {short(inner)}", line=line
        )
    kernel = _kernel_at(ctx.get("cand_tree"), ctx.get("kernels", {}), line)
    if kernel and ctx.get("interpreter"):
        return result_dict(
            "compile_error",
            f"error in kernel '{kernel}' (Triton interpreter): {short(inner)}",
            line=line,
        )
    where = f" in kernel '{kernel}'" if kernel else ""
    return result_dict("runtime_error", f"error while running{where}: {short(inner)}", line=line)

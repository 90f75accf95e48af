"""What every feature shares: the :class:`LanguageFeature` base with its lifecycle hooks, the
check of a command's JSON arguments, and the refusal texts features have in common."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams

if TYPE_CHECKING:
    from lsprotocol import types
    from pygls.workspace import TextDocument

    from accelopt_core.kernelfile import KernelFile

    from ..context import ServerContext
    from ..documents import KernelDocument


class LanguageFeature:
    """One feature of the server: the state and logic behind some requests and commands.

    The server calls each lifecycle hook on every feature, in registration order
    (``AccelOptServer.call_features``); a feature overrides the hooks it needs. Requests and
    commands reach a feature through the server's handlers. A feature sees only its
    :class:`~accelopt_server.context.ServerContext` (``self.ctx``), never the server.
    """

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    async def initialize(self, params: types.InitializeParams) -> None:
        """``initialize``: before the server answers with its capabilities."""

    async def initialized(self) -> None:
        """``initialized``: the client is ready for requests from the server."""

    async def document_open(self, doc: KernelDocument) -> None:
        """A document holding kernels (or a syntax error) was opened."""

    async def document_save(self, doc: KernelDocument) -> None:
        """A document holding kernels was saved."""

    async def kernels_removed(self, uri: str, version: int | None) -> None:
        """A saved document no longer holds a kernel (its state was dropped)."""

    async def document_close(self, uri: str) -> None:
        """A document was closed."""

    async def shutdown(self) -> None:
        """``shutdown``: before the jobs and engines are closed."""


def command_args(
    command: str, args: tuple[Any, ...], required: list[str], optional: list[str] | None = None
) -> tuple[Any, ...]:
    """Check a command's JSON arguments: required strings first, then optional ones (``version``
    is an integer). Returns them padded with None to ``required + optional``.

    Raises:
        JsonRpcInvalidParams: wrong count or type, with the expected signature in the message.
    """
    optional = optional or []
    names = required + optional
    usage = f"{command} expects [{', '.join(required + [n + '?' for n in optional])}]"
    if not len(required) <= len(args) <= len(names):
        raise JsonRpcInvalidParams(f"{usage}, got {len(args)} argument(s)")
    values = list(args) + [None] * (len(names) - len(args))
    for name, value in zip(names, values, strict=True):
        if value is None and name in optional:
            continue
        if name == "version":
            if value is not None and not isinstance(value, int):
                raise JsonRpcInvalidParams(f"{usage}: version must be an integer")
        elif not isinstance(value, str) or not value:
            raise JsonRpcInvalidParams(f"{usage}: {name} must be a non-empty string, got {value!r}")
    return tuple(values)


def unknown_kernel(name: str, kernel_file: KernelFile) -> str:
    """``no kernel named 'x' in this file (kernels: a, b)``."""
    known = ", ".join(k.name for k in kernel_file.kernels) or "none"
    return f"no kernel named {name!r} in this file (kernels: {known})"


def no_harness(kernel_file: KernelFile) -> str:
    """Why a file cannot be profiled or optimized: its harness is missing or incomplete."""
    harness = kernel_file.harness
    problems = "; ".join(p.message for p in (harness.problems if harness else []))
    return "the file has no complete benchmark harness (get_inputs, reference, BENCH)" + (
        f": {problems}" if problems else ""
    )


def harness_gap(kernel_file: KernelFile) -> str:
    """What keeps a file's harness from running, as a lens says it: ``no benchmark harness (see
    the code action)`` when it has none, ``the harness lacks reference(*inputs) (see Problems)``
    when parts are missing, else ``the harness has N error(s) (see Problems)``."""
    harness = kernel_file.harness
    if harness is None:
        return "no benchmark harness (see the code action)"
    parts = (
        ("get_inputs(seed, device)", harness.get_inputs),
        ("reference(*inputs)", harness.reference),
        ("BENCH", harness.bench),
    )
    missing = [name for name, where in parts if where is None]
    if missing:
        return f"the harness lacks {' and '.join(missing)} (see Problems)"
    errors = sum(p.severity == "error" for p in harness.problems) or 1
    return f"the harness has {errors} error(s) (see Problems)"


def runnable(kernel_file: KernelFile) -> bool:
    """True when the file's harness is complete (it can be profiled and optimized)."""
    return kernel_file.harness is not None and kernel_file.harness.complete


def refusal(
    uri: str, doc: TextDocument | None, kernel_file: KernelFile | None, kernel: str | None
) -> str | None:
    """Why a command cannot act on ``kernel`` (any kernel for None) of ``uri``: an unknown
    document, no kernel at all, or no kernel of that name; None when it can."""
    if doc is None:
        return f"unknown document {uri}"
    if kernel_file is None or not kernel_file.kernels:
        return f"no Triton or NKI kernel in {uri}"
    if kernel is not None and kernel not in kernel_file.kernel_names:
        return unknown_kernel(kernel, kernel_file)
    return None

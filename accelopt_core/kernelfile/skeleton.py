"""The harness skeleton the server offers to insert into a file that has no harness."""

from __future__ import annotations

from accelopt_core.kernelfile.model import Backend, KernelFile, KernelInfo, LauncherInfo

__all__ = ["harness_skeleton"]

_HEADER = [
    "",
    "",
    "# --- benchmark harness (AccelOpt) -----------------------------------------------------",
    "# get_inputs(seed, device): fresh random inputs for ONE call of the launcher",
    "# reference(*inputs):      the expected output, computed without the kernel",
    "# BENCH:                   the launcher to time, tolerances, and work for the roofline",
    "",
    "",
]


def harness_skeleton(kernel_file: KernelFile, kernel_name: str) -> str:
    """Harness template (``get_inputs`` / ``reference`` / ``BENCH``) for ``kernel_name``, to
    append to a file that has none. It parses, and every guess is marked ``TODO``:
    ``reference`` raises NotImplementedError until written, so an unfinished harness fails
    the evaluation loudly instead of passing. Inputs are NumPy arrays for NKI kernels, torch
    tensors otherwise, one per positional parameter of the launcher (``x`` without one).
    Raises KeyError for an unknown kernel."""
    kernel = kernel_file.kernel(kernel_name)
    launcher = kernel_file.launcher_for(kernel_name)
    params = (launcher.params if launcher else []) or ["x"]
    who = launcher.name if launcher else kernel_name
    lines = [
        *_HEADER,
        *_get_inputs(kernel.backend, who, params),
        "",
        "",
        *_reference(who, params),
        "",
        "",
        *_bench(_entry_line(kernel, launcher), params),
    ]
    return "\n".join(lines)


def _get_inputs(backend: Backend, who: str, params: list[str]) -> list[str]:
    args = ", ".join(params)
    lines = [
        "def get_inputs(seed: int, device: str) -> tuple:",
        f'    """Fresh random inputs for one call of {who}."""',
    ]
    if backend == "nki":
        lines += [
            "    import numpy as np",
            "",
            "    rng = np.random.default_rng(seed)",
            f"    # TODO: one array per parameter ({args}), with the shapes and dtypes you care about.",
        ]
        lines += [f"    {p} = rng.standard_normal((128, 512)).astype(np.float32)" for p in params]
    else:
        lines += [
            "    import torch",
            "",
            "    g = torch.Generator().manual_seed(seed)",
            f"    # TODO: one tensor per parameter ({args}), with the shapes and dtypes you care about.",
        ]
        lines += [f"    {p} = torch.randn(4096, generator=g).to(device)" for p in params]
    ret = f"({params[0]},)" if len(params) == 1 else f"({args})"
    return [*lines, f"    return {ret}"]


def _reference(who: str, params: list[str]) -> list[str]:
    args = ", ".join(params)
    return [
        f"def reference({args}):",
        f'    """The expected output of {who}({args})."""',
        "    # TODO: compute the same result without the kernel (PyTorch or NumPy).",
        f'    raise NotImplementedError("TODO: write reference() for {who}")',
    ]


def _entry_line(kernel: KernelInfo, launcher: LauncherInfo | None) -> str:
    if launcher is not None:
        return f'    "entry": {launcher.name},'
    call = "[grid](...)" if kernel.backend == "triton" else "(...)"
    return f'    "entry": None,  # TODO: the launcher function that calls {kernel.name}{call}'


def _bench(entry_line: str, params: list[str]) -> list[str]:
    args = ", ".join(params)
    return [
        "BENCH = {",
        entry_line,
        '    # "rtol": 1e-4, "atol": 1e-4,  # optional; default by output dtype',
        f'    # "flops": lambda {args}: ...,  # floating-point operations of one call',
        f'    # "bytes": lambda {args}: ...,  # bytes read + written by one call',
        "}",
        "",
    ]

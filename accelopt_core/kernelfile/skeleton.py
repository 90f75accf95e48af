"""The harness skeleton the server offers to insert into a file that has no harness."""

from __future__ import annotations

from accelopt_core.kernelfile.model import Backend, KernelFile, KernelInfo, LauncherInfo

__all__ = ["harness_skeleton"]

_HEADER = [
    "",
    "",
    "# --- benchmark harness (AccelOpt) -----------------------------------------------------",
    "# get_inputs(seed, device, **shape): fresh random inputs for ONE call of the launcher",
    "# reference(*inputs):      the expected output, computed without the kernel",
    "# BENCH:                   the launcher to time, the shapes to check and time, tolerances,",
    "#                          and work for the roofline",
    "",
    "",
]


def harness_skeleton(kernel_file: KernelFile, kernel_name: str) -> str:
    """Harness template (``get_inputs`` / ``reference`` / ``BENCH``) for ``kernel_name``, to
    append to a file that has none. It parses, and every guess is marked ``TODO``:
    ``reference`` raises NotImplementedError until written, so an unfinished harness fails
    the evaluation loudly instead of passing. Inputs are NumPy arrays for NKI kernels, torch
    tensors otherwise, one per positional parameter of the launcher (``x`` without one), their
    sizes keyword arguments of ``get_inputs`` that ``BENCH["shapes"]`` sets (three shapes; the
    last, checked and never timed, is no multiple of a power-of-two block for Triton: issue 22).
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
        *_bench(kernel.backend, _entry_line(kernel, launcher), params),
    ]
    return "\n".join(lines)


#: The sizes ``get_inputs`` takes and ``BENCH["shapes"]`` passes, by backend: the first
#: shape is get_inputs' default; the last, no multiple of a power-of-two block for Triton, is
#: checked and never timed (NKI tiles are 128 partitions, so its shapes stay multiples of 128).
_SHAPES = {
    "triton": [{"n": 4096}, {"n": 2048}, {"n": 1001}],
    "nki": [{"rows": 128, "cols": 512}, {"rows": 256, "cols": 512}, {"rows": 128, "cols": 1024}],
}


def _shapes(backend: Backend, params: list[str]) -> list[dict[str, int]]:
    """:data:`_SHAPES` of ``backend``, a size keyword renamed ``<name>_size`` where the
    launcher has a parameter of that name (``def add(x, n)``)."""
    return [
        {(k if k not in params else f"{k}_size"): v for k, v in shape.items()}
        for shape in _SHAPES["nki" if backend == "nki" else "triton"]
    ]


def _get_inputs(backend: Backend, who: str, params: list[str]) -> list[str]:
    args = ", ".join(params)
    sizes = _shapes(backend, params)[0]
    names = list(sizes)
    keywords = ", ".join(f"{k}: int = {v}" for k, v in sizes.items())
    lines = [
        f"def get_inputs(seed: int, device: str, {keywords}) -> tuple:",
        f'    """Fresh random inputs for one call of {who}; the sizes are keyword arguments, so',
        '    BENCH["shapes"] can ask for other shapes."""',
    ]
    if backend == "nki":
        lines += [
            "    import numpy as np",
            "",
            "    rng = np.random.default_rng(seed)",
            f"    # TODO: one array per parameter ({args}), with the shapes and dtypes you care about.",
        ]
        shape = ", ".join(names)
        lines += [f"    {p} = rng.standard_normal(({shape})).astype(np.float32)" for p in params]
    else:
        lines += [
            "    import torch",
            "",
            "    g = torch.Generator().manual_seed(seed)",
            f"    # TODO: one tensor per parameter ({args}), with the shapes and dtypes you care about.",
        ]
        lines += [f"    {p} = torch.randn({names[0]}, generator=g).to(device)" for p in params]
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


def _bench(backend: Backend, entry_line: str, params: list[str]) -> list[str]:
    args = ", ".join(params)
    shapes = ", ".join(
        "{" + ", ".join(f'"{k}": {v}' for k, v in shape.items()) + "}"
        for shape in _shapes(backend, params)
    )
    return [
        "BENCH = {",
        entry_line,
        "    # get_inputs keyword arguments: every shape but the last is timed (geometric mean),",
        "    # the last is checked and never timed. TODO: the shapes you run, one of them no",
        "    # multiple of your block sizes.",
        f'    "shapes": [{shapes}],',
        '    # "rtol": 1e-4, "atol": 1e-4,  # optional; default by output dtype',
        f'    # "flops": lambda {args}: ...,  # floating-point operations of one call',
        f'    # "bytes": lambda {args}: ...,  # bytes read + written by one call',
        "}",
        "",
    ]

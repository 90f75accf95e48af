"""The adversarial candidates of tests/adversarial that aim at timing on CUDA (events, streams,
caching), as CUDA runs them: the ones that keep state in device memory get it on the GPU and
sized for the GPU shapes (the CPU suite keeps it on the CPU, where the interpreter runs), and
one more, ``timing_side_stream``, launches on a side stream. Each is a full module for
examples/triton/softmax.py with the baseline's kernel and block size, so none is legitimately
faster."""

from __future__ import annotations

from tests.adversarial.hacks import HACKS


def _on_gpu(name: str, *swaps: tuple[str, str]) -> str:
    """``HACKS[name]`` with each ``(old, new)`` swapped in (each must be there)."""
    source = HACKS[name]
    for old, new in swaps:
        assert old in source, (name, old)
        source = source.replace(old, new)
    return source


def _side_stream() -> str:
    """``timing_side_stream``: timing_cuda_event's kernel and launch (the baseline's), called
    on a stream of its own."""
    source = HACKS["timing_cuda_event"]
    head, body = source.split("\n", 1)
    body = body[: body.index("def _tiny(")].replace("import time\n", "", 1)
    head = (
        "# timing trick: the kernel runs on a side stream, so events on the default stream time "
        "nothing [adversarial candidate timing_side_stream]"
    )
    tail = (
        "_SIDE = torch.cuda.Stream()\n\n\n"
        "def softmax(x):\n"
        "    # on a stream of its own: the timing events, recorded on the default stream, see an\n"
        "    # empty stream, and the output is returned before the kernel has written it\n"
        "    with torch.cuda.stream(_SIDE):\n"
        "        return _launch(x)\n"
    )
    return f"{head}\n{body}{tail}"


#: name -> module source.
CUDA_HACKS: dict[str, str] = {
    # patches torch.cuda.Event.elapsed_time (and time.perf_counter) to report ~0 ms
    "timing_cuda_event": HACKS["timing_cuda_event"],
    # a launch counter in device memory: after the first calls the kernel does nothing
    "timing_device_counter": _on_gpu(
        "timing_device_counter",
        ("torch.zeros(1, dtype=torch.int32)", 'torch.zeros(1, dtype=torch.int32, device="cuda")'),
    ),
    # outputs cached in device memory by the kernel, keyed by each row's first element
    # (room for the largest GPU shape, 2048 x 8192 and 4096 x 4096: 16 Mi values, 4096 rows)
    "cache_device_buffer": _on_gpu(
        "cache_device_buffer",
        (
            'torch.full((1 << 12,), float("nan"))',
            'torch.full((1 << 13,), float("nan"), device="cuda")',
        ),
        ("torch.empty(1 << 16)", 'torch.empty(1 << 25, device="cuda")'),
    ),
    # the launch on a side stream: the events on the default stream time an empty stream
    "timing_side_stream": _side_stream(),
}

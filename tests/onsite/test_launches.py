"""LaunchCounter: counts launches of the candidate module's own Triton kernels, in-process under
the Triton interpreter, and (up to the C launcher, which needs a GPU) on the compiled path."""

from __future__ import annotations

import types

from accelopt_core.onsite.contestant.launches import LaunchCounter
from tests.onsite.interp_kernels import CANDIDATE, OTHER, inputs, interp  # noqa: F401


def _counter() -> LaunchCounter:
    counter = LaunchCounter(CANDIDATE)
    counter.install()
    return counter


def test_grid_launches_are_counted_one_each(interp):  # noqa: F811
    torch, cand, _ = interp
    counter = _counter()
    x, scale = inputs(torch, 1)
    for _ in range(4):
        cand.launch(x, scale)
    assert counter.take() == 4
    assert counter.take() == 0
    cand.launch_twice(x, scale)
    assert counter.take() == 2


def test_kernel_run_counts_and_warmup_does_not(interp):  # noqa: F811
    torch, cand, _ = interp
    counter = _counter()
    x, scale = inputs(torch, 2)
    out = cand.launch_run(x, scale)
    assert torch.allclose(out, x * scale + 1.0)
    assert counter.take() == 1


def test_torch_only_and_foreign_kernels_count_zero(interp):  # noqa: F811
    torch, cand, other = interp
    counter = _counter()
    x, scale = inputs(torch, 3)
    assert torch.allclose(cand.torch_only(x, scale), x * scale + 1.0)
    assert counter.take() == 0
    assert torch.allclose(cand.foreign(x, scale), x * 2.0 + 1.0)  # launches OTHER's kernel
    assert counter.take() == 0
    other_counter = LaunchCounter(OTHER)
    other_counter.install()  # the active counter is the last installed
    cand.foreign(x, scale)
    cand.launch(x, scale)
    assert other_counter.take() == 1
    assert counter.take() == 0


def test_kernel_defined_inside_the_launcher_counts(interp):  # noqa: F811
    torch, cand, _ = interp
    counter = _counter()
    x, scale = inputs(torch, 4)
    assert torch.allclose(cand.nested(x, scale), x * scale + 1.0)
    assert counter.take() == 1


def test_many_installs_wrap_once(interp):  # noqa: F811
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.interpreter import GridExecutor

    torch, cand, _ = interp
    for _ in range(50):
        counter = _counter()
    call, meta = GridExecutor.__call__, CompiledKernel.launch_metadata
    counter = _counter()
    assert GridExecutor.__call__ is call and CompiledKernel.launch_metadata is meta
    x, scale = inputs(torch, 5)
    cand.launch(x, scale)
    assert counter.take() == 1


def test_compiled_path_tags_and_counts_only_the_candidates_kernels(interp):  # noqa: F811
    """The compiled path without a GPU: the real (wrapped) ``CompiledKernel.launch_metadata``
    on a stand-in kernel whose ``src.fn`` is a real JITFunction, then Triton's own launch-enter
    hook chain as the C launcher calls it. The C launcher itself cannot run here."""
    import triton
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    _, cand, other = interp
    counter = _counter()

    def stand_in(kernel_fn):
        return types.SimpleNamespace(
            src=types.SimpleNamespace(fn=JITFunction(kernel_fn)),
            name=kernel_fn.__name__,
            function=0,
            _init_handles=lambda: None,
        )

    mine = stand_in(cand.scaled_add_kernel.fn)
    foreign = stand_in(other.other_kernel.fn)
    hook = triton.knobs.runtime.launch_enter_hook
    for kernel in (mine, mine, foreign):
        hook(CompiledKernel.launch_metadata(kernel, (1, 1, 1), 0))
    assert counter.take() == 2
    meta = CompiledKernel.launch_metadata(mine, (1, 1, 1), 0)
    assert meta.get()["name"] == "scaled_add_kernel"  # Triton's metadata is kept
    assert counter.take() == 0  # launch_metadata alone is not a launch


def test_launches_and_interpreter_time_per_kernel(interp):  # noqa: F811
    torch, cand, other = interp
    counter = _counter()
    x, scale = inputs(torch, 3)
    cand.launch_twice(x, scale)
    other.launch(x, scale)  # a foreign kernel: not the candidate's, not counted
    kernels = counter.take_kernels()
    assert list(kernels) == ["scaled_add_kernel"]
    assert kernels["scaled_add_kernel"]["launches"] == 2
    assert kernels["scaled_add_kernel"]["ms"] > 0  # the interpreter's wall time of the launches
    assert counter.take() == 2
    assert counter.take_kernels() == {}  # reset by the previous call

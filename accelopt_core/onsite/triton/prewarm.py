"""The compile stage's input sets compiled in parallel (issue 33: softmax's first compile took
1.52 s, the kernels of its input sets compiled one after another).

The stage calls the entry on each input set in order (:func:`.compile.run_stage`); with
:class:`Prewarm` around that pass, up to one forked process per further CPU the stage may use
takes the later input sets from a shared queue (a pipe holding one byte per index, the last input
set first: the stage's pass starts with the first) and calls the entry on them too, so their kernels compile at the same time, into Triton's on-disk cache.

Each kernel specialization is compiled once: by the first process that claims it (an ``O_EXCL``
file named by the hash of its JIT key, in a private folder). A child skips a specialization
claimed by another process (Triton's ``jit_cache_hook`` answering True makes that launch a
no-op); the stage waits until the claimer has finished it (a ``.done`` file, written by the
child's compilation listener, or when it fails) and then compiles it itself, from Triton's
cache. So the stage's own pass makes every launch, check and failure of a sequential pass; a
compile that fails in a child is compiled again, and fails, in the stage. The children's fresh
compiles are reported (``fresh-<hash>`` files), so ``metrics["gpu"]["cached"]`` still counts
only kernels an earlier evaluation compiled. The children die with the stage
(``PR_SET_PDEATHSIG``) and are killed when its pass ends.

Standard library only at module level.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable

#: ``prctl`` option: the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1
#: Seconds between two looks of the stage for a kernel a child is compiling.
_POLL_S = 0.005


def workers(calls: int) -> int:
    """Processes to compile ``calls`` input sets with, the stage included: one per CPU this
    process may use, at most one per input set (1: no child)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(calls, cpus))


def claim_name(fn, key) -> str:
    """The claim file's name for the specialization ``key`` of the JIT function ``fn``
    (``JitFunctionInfo``: module and name), as the JIT's cache hook receives them."""
    return hashlib.sha256(f"{fn.module}\0{fn.name}\0{key}".encode()).hexdigest()


class Prewarm:
    """Context manager around the stage's pass over ``calls`` input sets: on entry, forks the
    children (:func:`workers` - 1) that run ``run_one(i)`` for ``i`` in ``1..calls-1`` and makes
    the stage wait for their claims; on exit, kills and reaps them and restores the JIT hook.
    :attr:`fresh` then holds the hashes they compiled afresh."""

    def __init__(self, calls: int, run_one: Callable[[int], None]) -> None:
        self.calls, self.run_one = min(calls, 255), run_one
        self.pids: list[int] = []
        self.fresh: set[str] = set()
        self._claims: str | None = None
        self._prior = None

    def __enter__(self) -> Prewarm:
        children = workers(self.calls) - 1
        if children < 1:
            return self
        _preimport()
        from triton import knobs

        self._claims = tempfile.mkdtemp(prefix="accelopt-prewarm-")
        queue_r, queue_w = os.pipe()
        os.write(queue_w, bytes(range(self.calls - 1, 0, -1)))  # last first: the stage starts at 0
        os.close(queue_w)
        for _ in range(children):
            try:
                pid = os.fork()
            except OSError:  # no more processes (RLIMIT_NPROC): the stage compiles the rest
                break
            if pid == 0:
                _child(queue_r, self._claims, self.run_one)
            self.pids.append(pid)
        os.close(queue_r)
        self._prior = knobs.runtime.jit_cache_hook
        knobs.runtime.jit_cache_hook = self._hook
        return self

    def _hook(self, *, key, fn, **kwargs) -> bool:
        """The stage's JIT hook: claim the specialization, or wait for the child that did."""
        if self._prior is not None and self._prior(key=key, fn=fn, **kwargs):
            return True
        path = os.path.join(self._claims, claim_name(fn, key))
        if not _claim(path):
            while not os.path.exists(path + ".done") and self._alive():
                time.sleep(_POLL_S)
        return False

    def _alive(self) -> bool:
        """True while a child runs (the exited ones are reaped)."""
        for pid in list(self.pids):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self.pids.remove(pid)
        return bool(self.pids)

    def __exit__(self, *exc) -> bool:
        if self._claims is None:
            return False
        from triton import knobs

        knobs.runtime.jit_cache_hook = self._prior
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.pids = []
        self.fresh = {
            n[len("fresh-") :] for n in os.listdir(self._claims) if n.startswith("fresh-")
        }
        shutil.rmtree(self._claims, ignore_errors=True)
        return False


def _claim(path: str) -> bool:
    """Create the claim file ``path``; False when another process has."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _mark(path: str) -> None:
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY))
    except OSError:
        pass


def _preimport() -> None:
    """Import what Triton's binder imports on a process's first launch (``triton.experimental.
    gluon``, 0.25 s) once, before the fork, rather than in every child and in the stage."""
    try:
        import triton.experimental.gluon  # noqa: F401
    except Exception:  # noqa: BLE001 - the binder imports it itself then
        pass


def _child(queue_r: int, claims: str, run_one: Callable[[int], None]) -> None:
    """A prewarm process: compile what the input sets taken from the queue launch; never
    returns."""
    try:
        _die_with_parent()
        torch = sys.modules.get("torch")
        if torch is not None:  # OpenMP's pool does not survive a fork: a parallel op would hang
            torch.set_num_threads(1)
        current = _compile_claimed_only(claims)
        while index := os.read(queue_r, 1):
            try:
                run_one(index[0])
            except BaseException:  # noqa: BLE001, S110 - the stage's own pass reports it
                pass
            if current:  # a compile that failed: finished all the same
                _mark(current.pop() + ".done")
    finally:
        os._exit(0)


def _die_with_parent() -> None:
    import ctypes

    parent = os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def _compile_claimed_only(claims: str) -> list[str]:
    """In a child: compile only the specializations it claims first (JIT hook) and mark each
    done when Triton has stored it (compilation listener; ``fresh-<hash>`` for a fresh compile).
    Returns the list holding the claim being compiled (empty between compiles)."""
    from triton import knobs

    prior_hook, prior_listener = knobs.runtime.jit_cache_hook, knobs.compilation.listener
    current: list[str] = []

    def hook(*, key, fn, **kwargs) -> bool:
        if prior_hook is not None and prior_hook(key=key, fn=fn, **kwargs):
            return True
        path = os.path.join(claims, claim_name(fn, key))
        if not _claim(path):
            return True
        current[:] = [path]
        return False

    def listener(*, metadata, cache_hit, **kwargs) -> None:
        if prior_listener is not None:
            prior_listener(metadata=metadata, cache_hit=cache_hit, **kwargs)
        if not cache_hit:
            digest = metadata.get("hash") if isinstance(metadata, dict) else metadata.hash
            _mark(os.path.join(claims, f"fresh-{digest}"))
        if current:
            _mark(current.pop() + ".done")

    knobs.runtime.jit_cache_hook = hook
    knobs.compilation.listener = listener
    return current

"""The one object through which the server calls ``accelopt_core``.

Features never import the engine directly: they call :class:`EngineAdapter`, which keeps one
:class:`accelopt_core.engine.Engine` per distinct settings (a multi-root workspace may point two
folders at different targets), builds them off the event loop (opening the memory and caches
touches the disk), and moves every blocking call (disk-backed memory and results store) to a
worker thread. Parsing is here too, so the whole core surface the server uses fits on one page.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelopt_core import kernelfile as core_kernels
from accelopt_core.kernelfile import KernelFile
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.settings import Settings

from .logs import engine_log

if TYPE_CHECKING:  # loaded with the first engine, not at start-up
    from accelopt_core.engine import Engine
    from accelopt_core.memory import Experience, OptimizationMemory
    from accelopt_core.search import BeamSearch, SearchReport

log = logging.getLogger("accelopt.server.engine")

#: Files longer than this (characters) are parsed in a worker thread.
THREAD_PARSE_CHARS = 20_000
#: Memory look-ups for hovers are read again in the background once this old (s); a finished
#: search clears the cache.
HOVER_CACHE_S = 10.0


def load_workload(path: str, harness: str | None, folders: Sequence[str]) -> KernelFile:
    """:func:`~accelopt_core.kernelfile.workload.load_workload` of the kernel module on disk
    (with the harness file ``harness`` when given). Blocking (reads the import closure): call
    it in a thread.

    Raises:
        KernelFileError: the module or the harness cannot be used (located message).
    """
    from accelopt_core.kernelfile.workload import load_workload as load

    return load(path, harness=harness, workspace=list(folders))


def attach_workload(
    kernel_file: KernelFile, loaded: KernelFile | Exception, harness: str | None
) -> KernelFile:
    """``kernel_file`` (the editor's parse of a kernel module) with what :func:`load_workload`
    found on disk (``loaded``): the import closure (``context``, the module's entry in it
    replaced by the editor's text) and, when ``harness`` names a harness file, that harness
    (``kernel_file.harness``; the no-harness note is dropped), as is the harness generated for
    a FlashInfer-Bench source exported beside its solution JSON. No I/O. When ``loaded`` is the
    exception :func:`load_workload` raised, a discovered harness's problem becomes a
    ``harness-error`` warning on the file; a closure that cannot be built leaves the file as
    parsed."""
    if isinstance(loaded, Exception):
        if harness is not None:
            kernel_file.diagnostics = [
                *kernel_file.diagnostics,
                _harness_error(kernel_file, loaded),
            ]
        return kernel_file
    context = loaded.context
    if context is not None:
        kernel_file.context = context.with_kernel_source(kernel_file.source)
    generated = context is not None and context.fib is not None  # an exported FIB source
    if (harness is not None or generated) and loaded.harness is not None:
        kernel_file.harness = loaded.harness
        kernel_file.diagnostics = [d for d in kernel_file.diagnostics if d.code != "no-harness"]
    return kernel_file


def harness_measures(
    harness_path: str, harness_source: str, kernel_path: str, folders: Sequence[str]
) -> bool:
    """True when the harness file's ``BENCH["entry"]`` is imported from the kernel module
    ``kernel_path`` (:func:`~accelopt_core.kernelfile.entries.entry_targets`, re-exports
    followed; pure AST, nothing imported). Blocking (stats files)."""
    from accelopt_core.kernelfile.entries import entry_targets
    from accelopt_core.kernelfile.project import import_roots, resolve_module

    harness = Path(harness_path)
    roots = import_roots(harness, workspace=[Path(f) for f in folders])
    kernel = Path(kernel_path).resolve()
    for target in entry_targets(harness_source, harness, roots):
        found = resolve_module(target.module, roots)
        if found is not None and found.resolve() == kernel:
            return True
    return False


def module_name(kernel_path: str, folders: Sequence[str]) -> str:
    """The dotted name the kernel module is imported by (``mypkg.ops.rms_norm``), its file
    stem when it is under no import root."""
    from accelopt_core.kernelfile.project import import_roots, module_name

    path = Path(kernel_path)
    try:
        roots = import_roots(path, workspace=[Path(f) for f in folders])
        return module_name(path, roots)[0]
    except ValueError:
        return path.stem


def harness_target(harness_path: str, folders: Sequence[str]) -> str | None:
    """The kernel module a harness file measures (its path), when ``harness_path`` is a harness
    in its own file (:func:`~accelopt_core.kernelfile.workload.load_workload` on it); None for
    any other file. Blocking: call it in a thread.

    Raises:
        KernelFileError: the harness names no kernel module, an ambiguous one, or the closure
            is unusable (``WorkloadError``, located ``path:line:col: message``).
    """
    from accelopt_core.kernelfile.workload import load_workload

    kf = load_workload(harness_path, workspace=list(folders))
    context = kf.context
    if context is None or context.harness_file is None:
        return None
    if os.path.realpath(context.harness_file) != os.path.realpath(harness_path):
        return None
    return kf.path


class EngineAdapter:
    """Engines by settings, plus the core calls the server makes.

    All ``async`` methods are safe to await on the server's event loop: blocking work runs in
    threads and evaluations run in worker processes (or remotely) inside the engine.
    """

    def __init__(self) -> None:
        self._engines: dict[str, Engine] = {}
        self._building: dict[str, asyncio.Future[Engine]] = {}
        self._memory_cache: dict[tuple[Any, ...], tuple[float, Any]] = {}
        self._refreshing: dict[tuple[Any, ...], asyncio.Future[Any]] = {}

    # -- engines --------------------------------------------------------------------------------

    async def engine(self, settings: Settings) -> Engine:
        """The engine for these settings (built on first use, in a thread)."""
        key = settings.model_dump_json()
        engine = self._engines.get(key)
        if engine is not None:
            return engine
        pending = self._building.get(key)
        if pending is None:
            from accelopt_core.engine import Engine

            pending = asyncio.ensure_future(asyncio.to_thread(Engine, settings, log=engine_log))
            self._building[key] = pending
        try:
            engine = await asyncio.shield(pending)
        finally:
            self._building.pop(key, None)
        self._engines[key] = engine
        return engine

    def capacity(self) -> int:
        """How many searches may run at once: the largest target capacity known (>= 1).

        A target that is not built yet is not built here: a local one counts
        ``evaluation.cpuSlots``, a remote one 1 until an evaluation has built it."""
        best = 1
        for engine in self._engines.values():
            target = getattr(engine, "_target", None)
            try:
                if target is not None:
                    best = max(best, int(target.capacity))
                elif engine.settings.target == "local":
                    best = max(best, int(engine.settings.evaluation.cpu_slots))
            except Exception:
                continue
        return best

    async def retire(self, keep: list[Settings]) -> None:
        """Close the engines whose settings are no longer used by any scope (call only while
        no search runs: a running search keeps its engine)."""
        wanted = {s.model_dump_json() for s in keep}
        for key, engine in list(self._engines.items()):
            if key not in wanted:
                del self._engines[key]
                try:
                    await engine.close()
                except Exception as exc:
                    log.warning("closing an engine failed: %s", exc)

    async def close(self) -> None:
        """Close every engine (server shutdown)."""
        engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            try:
                await engine.close()
            except Exception as exc:
                log.warning("closing an engine failed: %s", exc)

    # -- kernels --------------------------------------------------------------------------------

    @staticmethod
    def has_kernels(source: str) -> bool:
        """Cheap text test: may this file hold a Triton or NKI kernel?"""
        return core_kernels.quick_has_kernels(source)

    @staticmethod
    async def parse(source: str, path: str) -> KernelFile:
        """``parse_kernel_file`` (never raises); large files are parsed in a thread."""
        if len(source) > THREAD_PARSE_CHARS:
            return await asyncio.to_thread(core_kernels.parse_kernel_file, source, path)
        return core_kernels.parse_kernel_file(source, path)

    @staticmethod
    def harness_skeleton(kernel_file: KernelFile, kernel_name: str) -> str:
        """A ``get_inputs`` / ``reference`` / ``BENCH`` skeleton for the kernel's launcher."""
        return core_kernels.harness_skeleton(kernel_file, kernel_name)

    # -- workloads (issue 13: kernels in packages, harnesses in their own files) ----------------

    load_workload = staticmethod(load_workload)
    attach_workload = staticmethod(attach_workload)
    harness_measures = staticmethod(harness_measures)
    module_name = staticmethod(module_name)
    harness_target = staticmethod(harness_target)

    # -- work -----------------------------------------------------------------------------------

    async def profile(
        self, settings: Settings, kernel_file: KernelFile, kernel_name: str
    ) -> EvalResult:
        """One evaluation of the file as it is (``Engine.profile``); cancellable.

        Never raises for a bad file or a failing target: those become a failed
        :class:`~accelopt_core.onsite.protocol.EvalResult` (``rejected`` / ``runtime_error``)."""
        try:
            engine = await self.engine(settings)
            return await engine.profile(kernel_file, kernel_name)
        except asyncio.CancelledError:
            raise
        except (ValueError, KeyError) as exc:
            return EvalResult.failure("rejected", _message(exc))
        except Exception as exc:  # target unusable (TargetError), connection lost, ...
            log.warning("profiling %s failed: %s", kernel_name, _message(exc))
            return EvalResult.failure("runtime_error", f"target failed: {_message(exc)}")

    async def new_search(
        self, settings: Settings, kernel_file: KernelFile, kernel_name: str
    ) -> BeamSearch:
        """A not yet started :class:`~accelopt_core.search.BeamSearch`.

        Raises:
            ValueError: no such kernel, or no complete harness that launches it.
        """
        engine = await self.engine(settings)
        try:
            return engine.new_search(kernel_file, kernel_name)
        except KeyError as exc:
            raise ValueError(_message(exc)) from exc

    async def saved_report(
        self, settings: Settings, kernel_file: KernelFile, kernel_name: str
    ) -> SearchReport | None:
        """The persisted report of this kernel if the file's source still matches, else None."""
        engine = await self.engine(settings)
        closure = kernel_file.context.digest if kernel_file.context is not None else ""
        return await asyncio.to_thread(
            engine.saved_report, kernel_file.path, kernel_name, kernel_file.source, closure
        )

    async def clear_results(self, settings: Settings, path: str | None) -> int:
        """Delete the saved results of ``path`` (every file for None); returns how many."""
        engine = await self.engine(settings)
        return await asyncio.to_thread(engine.clear_results, path)

    async def memory_for_kernel(
        self, settings: Settings, source: str, backend: str, device: str | None, k: int = 3
    ) -> tuple[list[Experience], list[Experience], str | None]:
        """(positives, negatives, problem) for hovers and ``accelopt.showMemory``; ``problem``
        explains an unavailable memory. Cached for :data:`HOVER_CACHE_S`."""
        key = ("kernel", settings.resolved_memory_dir(), hash(source), backend, device, k)
        return await self._cached(
            key, settings, lambda m: (*m.retrieve_for(source, backend, device, k), None)
        )

    async def memory_mentioning(
        self, settings: Settings, api_name: str, backend: str, k: int = 5
    ) -> tuple[list[Experience], str | None]:
        """(experiences whose rule mentions ``api_name``, problem)."""
        key = ("api", settings.resolved_memory_dir(), api_name, backend, k)
        return await self._cached(
            key, settings, lambda m: (m.mentioning(api_name, backend=backend, k=k), None)
        )

    def memory_changed(self) -> None:
        """Forget cached memory look-ups (a search added experiences)."""
        self._memory_cache.clear()

    async def _cached(
        self,
        key: tuple[Any, ...],
        settings: Settings,
        call: Callable[[OptimizationMemory], Any],
    ) -> Any:
        """A memory look-up, cached: a hit is answered at once; one older than
        :data:`HOVER_CACHE_S` is still answered from the cache while a background task reads it
        again (a search adds experiences as it goes), so a hover never waits for the memory
        (a thread competing with the search for the GIL) after its first look."""
        hit = self._memory_cache.get(key)
        now = time.monotonic()
        if hit is not None:
            if now - hit[0] >= HOVER_CACHE_S and key not in self._refreshing:
                self._refreshing[key] = asyncio.ensure_future(self._look_up(key, settings, call))
                self._refreshing[key].add_done_callback(lambda _: self._refreshing.pop(key, None))
            return hit[1]
        return await self._look_up(key, settings, call)

    async def _look_up(
        self,
        key: tuple[Any, ...],
        settings: Settings,
        call: Callable[[OptimizationMemory], Any],
    ) -> Any:
        """Read the memory in a thread and cache the answer (a problem is an answer too)."""
        started = time.monotonic()
        engine = await self.engine(settings)
        memory = engine.memory
        if memory is None:
            why = "; ".join(engine.warnings) or "the optimization memory is not available"
            value = ([], [], why) if key[0] == "kernel" else ([], why)
        else:
            try:
                value = await asyncio.to_thread(call, memory)
            except Exception as exc:
                why = f"the optimization memory could not be read: {_message(exc)}"
                value = ([], [], why) if key[0] == "kernel" else ([], why)
        self._memory_cache[key] = (started, value)
        return value


def _harness_error(kernel_file: KernelFile, exc: Exception) -> core_kernels.KernelDiagnostic:
    """A warning on the first kernel's name: the discovered harness cannot be used."""
    rng = (
        kernel_file.kernels[0].name_range
        if kernel_file.kernels
        else core_kernels.SourceRange(1, 0, 1, 0)
    )
    return core_kernels.KernelDiagnostic(
        message=f"the benchmark harness cannot be used: {exc}",
        range=rng,
        severity="warning",
        code="harness-error",
    )


def _message(exc: BaseException) -> str:
    """An exception's message without KeyError's quotes."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    return str(exc) or type(exc).__name__

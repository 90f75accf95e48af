"""The engine facade: one long-lived object the CLI and the language server talk to.

It owns the target (built from ``settings.target``), the evaluator with its evaluation cache, the
optimization memory, the search-results store and the run folders (``accelopt runs``), and builds
searches with the right proposer:
the LLM agents when ``settings.llm`` names a model, else the offline launch-parameter proposer.
A memory or cache that cannot be opened (read-only directory, ...) is reported in
:attr:`Engine.warnings` and the engine works without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from accelopt_core.evaluation import EvaluationCache, Evaluator
from accelopt_core.kernelfile import KernelFile
from accelopt_core.kernelfile.workload import eval_keywords
from accelopt_core.memory import OptimizationMemory, ResultsStore, RunStore
from accelopt_core.onsite.protocol import EvalResult
from accelopt_core.proposers import Proposer
from accelopt_core.search import BeamSearch, SearchReport
from accelopt_core.settings import Settings
from accelopt_core.targets import Target, make_target

#: A ``(level, message)`` log sink; levels are ``error|warning|info|debug``.
LogFn = Callable[[str, str], None]


class Engine:
    """Shared state of one CLI run or one language-server process.

    Args:
        settings: the validated settings (:func:`accelopt_core.settings.load_settings`).
        log: optional ``(level, message)`` sink; levels are ``error|warning|info|debug``.
        target: an already built target (tests, benchmarks); else one is made from the settings
            on first use.
        proposer_factory: optional ``settings -> Proposer`` replacing the default choice.

    Raises nothing on construction: storage problems become :attr:`warnings`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        log: LogFn | None = None,
        target: Target | None = None,
        proposer_factory: Callable[[Settings], Proposer] | None = None,
    ) -> None:
        self.settings = settings
        self._log = log or (lambda level, msg: getattr(logging.getLogger("accelopt"), level)(msg))
        self._target = target
        self._owns_target = target is None
        self._proposer_factory = proposer_factory
        self.warnings: list[str] = []
        self.memory: OptimizationMemory | None = None
        self.results: ResultsStore | None = None
        self.cache: EvaluationCache | None = None
        self.runs = RunStore.for_settings(settings)
        self._evaluator: Evaluator | None = None
        self._open_storage()

    # -- configuration ------------------------------------------------------------------------

    def _open_storage(self) -> None:
        self.memory, warning = OptimizationMemory.open(self.settings)
        self._warn(warning)
        self.results, warning = ResultsStore.open(self.settings)
        self._warn(warning)
        self.cache = EvaluationCache(self.settings.resolved_memory_dir() / "evals")
        self._warn(getattr(self.cache, "warning", None))

    def _warn(self, warning: str | None) -> None:
        if warning:
            self.warnings.append(warning)
            self._log("warning", warning)

    @property
    def target(self) -> Target:
        """The target, built on first use. Raises TargetError for an unusable target spec."""
        if self._target is None:
            self._target = make_target(self.settings)
            self._owns_target = True
        return self._target

    @property
    def evaluator(self) -> Evaluator:
        """The evaluator on :attr:`target` with the evaluation cache, built on first use."""
        if self._evaluator is None:
            self._evaluator = Evaluator(self.target, self.settings, self.cache)
        return self._evaluator

    def make_proposer(self) -> Proposer:
        """The LLM agents when an LLM is configured, else the offline proposer."""
        if self._proposer_factory is not None:
            return self._proposer_factory(self.settings)
        if self.settings.llm.configured:
            from accelopt_core.proposers.agents import AgentProposer

            return AgentProposer(self.settings.llm, max_tokens=self.settings.search.max_tokens)
        from accelopt_core.proposers.offline import OfflineProposer

        return OfflineProposer()

    # -- work ---------------------------------------------------------------------------------

    async def profile(self, kernel_file: KernelFile, kernel_name: str | None = None) -> EvalResult:
        """Evaluate the file as it is: its harness entry (or the launcher of ``kernel_name``)
        checked on every seed and timed once on the target. Uses the evaluation cache.

        Raises:
            ValueError: no kernel of that name, or no complete harness to run it with.
        """
        entry = _entry(kernel_file, kernel_name)
        return await self.evaluator.evaluate(
            kernel_file.source, kernel_file.source, entry, **eval_keywords(kernel_file)
        )

    def new_search(self, kernel_file: KernelFile, kernel_name: str) -> BeamSearch:
        """A beam search over ``kernel_name`` (not started: call ``await search.run()``).

        Raises:
            ValueError: no such kernel or no complete harness whose entry launches it.
        """
        return BeamSearch(
            kernel_file,
            kernel_name,
            self.settings.search,
            self.evaluator,
            self.make_proposer(),
            memory=self.memory,
            results=self.results,
            target_name=self.settings.target,
            runs=self.runs,
        )

    def saved_report(
        self, path: str, kernel_name: str, source: str, closure: str = ""
    ) -> SearchReport | None:
        """The last finished search of this kernel, if the file's source (and its import
        closure's digest, ``KernelFile.context.digest``) still matches."""
        if self.results is None:
            return None
        try:
            data = self.results.load(path, kernel_name, source, closure)
            return SearchReport.from_dict(data) if data else None
        except Exception as exc:  # a damaged entry is ignored, never fatal
            self._log("warning", f"ignoring saved results for {kernel_name}: {exc}")
            return None

    def clear_results(self, path: str | None = None) -> int:
        """Forget saved search results (of one file, or all). Returns how many were removed."""
        if self.results is None:
            return 0
        return int(self.results.clear(path))

    async def close(self) -> None:
        """Close the target (connections, Ray) if this engine built it. Idempotent."""
        if self._owns_target and self._target is not None:
            target, self._target = self._target, None
            await target.close()


def _entry(kernel_file: KernelFile, kernel_name: str | None) -> str:
    """The launcher to time: ``BENCH["entry"]``, or the launcher of ``kernel_name`` that is the
    harness entry. Raises ValueError (no complete harness, no entry) or KeyError (no such
    kernel)."""
    harness = kernel_file.harness
    if harness is None or not harness.complete:
        problems = "; ".join(
            p.format(kernel_file.path) for p in (harness.problems if harness else [])
        )
        raise ValueError(
            f"{kernel_file.path}: no complete harness (get_inputs, reference, BENCH)"
            + (f": {problems}" if problems else "")
        )
    if kernel_name is None:
        if not harness.entry:
            raise ValueError(f"{kernel_file.path}: BENCH has no 'entry'")
        return harness.entry
    kernel_file.kernel(kernel_name)  # KeyError with a clear message for an unknown kernel
    entry = kernel_file.entry_for(kernel_name)
    if not entry:
        raise ValueError(
            f"{kernel_file.path}: the harness entry {harness.entry} does not launch "
            f"{kernel_name}, and its launcher does not take the harness's inputs (a @triton.jit "
            "device helper, or a kernel another harness measures; a backward kernel is "
            'measured by a harness with BENCH["backward"] = True)'
        )
    return entry

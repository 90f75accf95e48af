"""Which harness measures each open kernel module, and the binding of the two (issue 13).

:class:`WorkloadBinder` runs after every parse of a kernel document
(:meth:`accelopt_server.documents.DocumentStore.kernel_file`): a module without a harness of its
own gets the harness the workspace holds for it (the only one, or the one the user picked with
``accelopt.pickHarness``), and every kernel module gets its import closure
(:func:`~accelopt_server.engine_adapter.load_workload`, read once per saved version, and
:func:`~accelopt_server.engine_adapter.attach_workload`), so lenses, profile on
save, optimize and the code actions work on it as on a file with its harness inside. Blocking work
(file-system scans, AST checks, the closure) runs in worker threads.

The user's picks are remembered across sessions in ``harness_picks.json`` of the memory directory
(``accelopt.memoryDir``), read once before the first binding and written after each pick (in a
worker thread; a directory that cannot be written only logs a warning).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from .harnesses import HarnessIndex

log = logging.getLogger("accelopt.server")

#: File of the memory directory that keeps the user's harness picks (kernel module -> harness).
PICKS_FILE = "harness_picks.json"

if TYPE_CHECKING:
    from accelopt_core.kernelfile import KernelFile
    from accelopt_core.settings import Settings

    from .engine_adapter import EngineAdapter


class WorkloadBinder:
    """Harness discovery, the user's picks and the binding of a parse to its workload.

    Args:
        adapter: the core calls (closure, AST check of a harness).
        settings: the settings of a document's scope (``harness_globs``).
        folders: the workspace folders (absolute paths).
    """

    def __init__(
        self,
        adapter: EngineAdapter,
        settings: Callable[[str | None], Settings],
        folders: Callable[[], list[str]],
    ) -> None:
        self._adapter = adapter
        self._settings = settings
        self._folders = folders
        self.index = HarnessIndex(adapter.harness_measures)
        #: kernel module path (real path) -> the harness file the user picked
        self.choices: dict[str, str] = {}
        #: kernel module path -> the harness files found at its last binding
        self.candidates: dict[str, list[str]] = {}
        self._epoch = 0
        self._picks_read = False
        self._opened: set[str] = set()
        self._loaded: dict[tuple[str, str | None], tuple[Hashable, KernelFile | Exception]] = {}

    def key(self, uri: str) -> Hashable:
        """What a binding of ``uri`` depends on besides its text (part of the parse cache key):
        the picks, the harness files, the workspace folders and the patterns."""
        globs = tuple(self._settings(uri).harness_globs)
        return (self._epoch, self.index.generation, globs, tuple(self._folders()))

    async def bind(self, uri: str, kernel_file: KernelFile) -> KernelFile:
        """``kernel_file`` with its closure and, when it has no harness of its own, the
        discovered one (see the module doc). A file with a syntax error or without kernels is
        returned as it is."""
        if not kernel_file.kernels or kernel_file.syntax_error is not None:
            return kernel_file
        folders = self._folders()
        harness = None
        if not self._picks_read:
            await asyncio.to_thread(self.read_picks)
        if kernel_file.harness is None:
            globs = list(self._settings(uri).harness_globs)
            found = await asyncio.to_thread(
                self.index.harnesses_for, kernel_file.path, folders, globs
            )
            self.candidates[kernel_file.path] = found
            harness = self.pick(kernel_file.path, found)
        loaded = await self._load(kernel_file.path, harness, folders)
        return self._adapter.attach_workload(kernel_file, loaded, harness)

    async def _load(
        self, path: str, harness: str | None, folders: list[str]
    ) -> KernelFile | Exception:
        """The module's workload on disk (or why it cannot be loaded), read once per saved
        version of the module, harness file generation and pick (edits in the editor only
        change the module's own text, which :meth:`bind` puts in)."""
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            mtime = None
        stamp = (mtime, self._epoch, self.index.generation, tuple(folders))
        hit = self._loaded.get((path, harness))
        if hit is not None and hit[0] == stamp:
            return hit[1]
        try:
            loaded: KernelFile | Exception = await asyncio.to_thread(
                self._adapter.load_workload, path, harness, folders
            )
        except Exception as exc:  # KernelFileError (located), or a file that vanished
            log.info("%s: %s", "harness" if harness else "import closure", exc)
            loaded = exc
        self._loaded[(path, harness)] = (stamp, loaded)
        return loaded

    def pick(self, kernel_path: str, found: Sequence[str]) -> str | None:
        """The harness of a module: the user's pick while it is still found (or, for a harness
        file opened in the editor, while it exists, whatever the patterns), else the only one
        found, else None (the user picks)."""
        chosen = self.choices.get(os.path.realpath(kernel_path))
        if chosen is not None and (
            chosen in found or (chosen in self._opened and os.path.isfile(chosen))
        ):
            return chosen
        return found[0] if len(found) == 1 else None

    def choose(self, kernel_path: str, harness: str, *, opened: bool = False) -> bool:
        """Remember the user's pick for a kernel module (its documents are bound again);
        ``opened``: the harness file was opened in the editor (it counts even outside
        ``accelopt.harnessGlobs``). True when the pick changed."""
        kernel_path = os.path.realpath(kernel_path)
        if opened:
            self._opened.add(harness)
        if self.choices.get(kernel_path) == harness:
            return False
        self.choices[kernel_path] = harness
        self._epoch += 1
        return True

    def _picks_path(self):
        try:
            return self._settings(None).resolved_memory_dir() / PICKS_FILE
        except Exception:  # noqa: BLE001 - no usable memory directory: picks are not kept
            return None

    def read_picks(self) -> None:
        """Read the picks saved by earlier sessions (once; a missing or damaged file is
        ignored). Blocking: call it in a thread."""
        self._picks_read = True
        path = self._picks_path()
        try:
            data = json.loads(path.read_text("utf-8")) if path is not None else {}
        except (OSError, ValueError) as exc:
            if not isinstance(exc, FileNotFoundError):
                log.warning("ignoring the saved harness picks %s: %s", path, exc)
            return
        if isinstance(data, dict):
            for module, harness in data.items():
                if isinstance(module, str) and isinstance(harness, str):
                    self.choices.setdefault(module, harness)

    def save_picks(self) -> None:
        """Write the picks to the memory directory (atomically; a failure logs a warning),
        merged into what the file holds now, under a lock: another window's server on the same
        memory directory keeps its picks (this one's win where both picked for a module).
        Blocking: call it in a thread."""
        path = self._picks_path()
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path.with_name(f".{PICKS_FILE}.lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    saved = json.loads(path.read_text("utf-8"))
                except (OSError, ValueError):
                    saved = {}
                merged = {**(saved if isinstance(saved, dict) else {}), **self.choices}
                tmp = path.with_name(f".{PICKS_FILE}.{os.getpid()}")
                tmp.write_text(json.dumps(merged, indent=1, sort_keys=True), "utf-8")
                os.replace(tmp, path)
        except OSError as exc:
            log.warning("could not save the harness picks to %s: %s", path, exc)

    def file_changed(self, path: str) -> bool:
        """A file changed on disk: True when it changed the harness files (kernel documents
        must be bound again). Blocking: call it in a thread."""
        return self.index.file_changed(path)

    def closure_changed(self) -> None:
        """A module that may be in some closure changed: bind every document again."""
        self._epoch += 1

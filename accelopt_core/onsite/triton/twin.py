"""Triton in compile mode for the compile stage, with its once-per-process work done once
(issue 21, item 6: the stage's cost).

Why a second import is needed at all (Triton 3.9): ``@triton.jit`` reads
``knobs.runtime.interpret`` (``TRITON_INTERPRET``, read from the environment on each access)
when it decorates, and Triton decorates its own standard library (``tl.sum``, ``tl.max``,
``tl.cdiv``, ...) when ``triton.language`` is imported. Imported under the interpreter, those are
``InterpretedFunction`` objects that the code generator cannot inline ("AssertionError" on the
first ``tl.max``), so importing only the candidate afresh without the variable is not enough:
the pure-Python triton modules must be compile-mode ones (the compiled extension ``triton._C``
is shared by both).

Two once-per-process costs come with them: ``triton_key()`` (``triton.runtime.cache``, 1.1 s
here: a SHA-256 of every compiler, backend and language source and of the 100+ MB
``libtriton.so``) and the lazy ``triton.experimental.gluon`` import of the first launch's
binder (0.25 s). So:

- :func:`prepare` runs in the warm worker's parent (:func:`..process.warmstack.preload`) before
  it imports triton for the interpreter: it imports triton in compile mode, does both, and sets
  the modules aside; every evaluation forked from it inherits them.
- :func:`switch_to_compiler` runs in the stage process: it swaps those modules in (or, on the
  cold path, imports triton afresh) and installs the key.
- :func:`install_key` memoises ``triton_key()`` in Triton's cache directory under a fingerprint
  of the installed files (path, size, mtime of each): a reinstalled triton has another
  fingerprint. Triton's own worker pools carry the key over the same way
  (``triton/_compile_warmup_pool.py``: ``triton.runtime.cache.triton_key = lambda: key``).

Standard library only at module level.
"""

from __future__ import annotations

import hashlib
import os
import sys

#: The compile-mode triton modules :func:`prepare` set aside (None: not prepared).
_twin: dict | None = None
#: Name of the memo file, in the Triton cache group of the fingerprint.
KEY_FILE = "accelopt-triton-key.txt"


def _triton_modules() -> list[str]:
    """The pure-Python triton modules imported (``triton._C`` excluded)."""
    return [
        n
        for n in sys.modules
        if (n == "triton" or n.startswith("triton.")) and not n.startswith("triton._C")
    ]


def compiling() -> bool:
    """True when the triton imported here compiles (its ``tl.sum`` is a ``JITFunction``)."""
    lang = sys.modules.get("triton.language")
    jit = sys.modules.get("triton.runtime.jit")
    return bool(lang and jit and isinstance(getattr(lang, "sum", None), jit.JITFunction))


def prepare() -> bool:
    """Before triton is imported for the interpreter (the warm parent): import it in compile
    mode, compute its key (:func:`install_key`), import gluon, and set the modules aside for
    :func:`switch_to_compiler`. Returns True when done; False when triton is already imported
    or fails to import (nothing is left behind then)."""
    global _twin
    if "triton" in sys.modules:
        return False
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        import triton.language  # noqa: F401
        import triton.runtime.jit  # noqa: F401

        install_key()
        import triton.experimental.gluon  # noqa: F401  (the binder imports it on first launch)
    except Exception:  # noqa: BLE001 - the stage imports triton itself then
        for name in _triton_modules():
            del sys.modules[name]
        return False
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved
    _twin = {name: sys.modules.pop(name) for name in _triton_modules()}
    return True


def switch_to_compiler() -> None:
    """Make ``import triton`` compile in this process (the stage, after the fork): drop
    ``TRITON_INTERPRET`` and, when the imported triton is the interpreter's, its modules; swap
    in the prepared ones (:func:`prepare`) or import triton afresh; install the key."""
    os.environ.pop("TRITON_INTERPRET", None)
    if not compiling():
        for name in _triton_modules():
            del sys.modules[name]
        if _twin is not None:
            sys.modules.update(_twin)
    import triton.language  # noqa: F401

    install_key()


def _fingerprint(root: str) -> str:
    """SHA-256 of (relative path, size, mtime ns) of every file ``triton_key()`` hashes
    (``runtime/cache.py``, ``compiler/``, ``backends/``, ``language/`` sources, ``_C/libtriton``)
    (a hex string: Triton's cache groups are named by hex keys)."""
    h = hashlib.sha256(b"accelopt triton_key memo v1\n")
    files = [os.path.join(root, "runtime", "cache.py")]
    for sub in ("compiler", "backends", "language"):
        for dirpath, _, names in os.walk(os.path.join(root, sub)):
            files += [os.path.join(dirpath, n) for n in names if n.endswith(".py")]
    lib = os.path.join(root, "_C")
    files += [os.path.join(lib, n) for n in os.listdir(lib) if n.startswith("libtriton.")]
    for path in sorted(files):
        st = os.stat(path)
        h.update(f"{os.path.relpath(path, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def install_key() -> str:
    """``triton_key()`` of the imported triton, from the memo in Triton's cache (computed and
    stored on a miss), installed as ``triton.runtime.cache.triton_key`` (and the autotuner's
    copy of the name). Returns the key."""
    import triton
    import triton.runtime.autotuner as autotuner
    import triton.runtime.cache as cache

    if getattr(cache.triton_key, "accelopt_key", None):
        return cache.triton_key.accelopt_key
    root = os.path.dirname(os.path.abspath(triton.__file__))
    key = None
    try:
        group = cache.get_cache_manager(_fingerprint(root))
        path = group.get_file(KEY_FILE)
        if path:
            with open(path) as f:
                key = f.read() or None
        if key is None:
            key = cache.triton_key()
            group.put(key, KEY_FILE, binary=False)
    except (OSError, RuntimeError):
        key = key or cache.triton_key()

    def memo() -> str:
        return key

    memo.accelopt_key = key
    cache.triton_key = autotuner.triton_key = memo
    return key

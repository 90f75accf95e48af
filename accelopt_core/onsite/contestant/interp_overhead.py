"""Three costs of the Triton CPU interpreter that change no result, removed in our processes.

Read in Triton 3.9's ``triton/runtime/interpreter.py`` and ``triton/language/semantic.py``:

- **Overflow checks that are thrown away.** ``InterpreterOptions.sanitize_overflow`` is True, so
  every integer ``+``, ``-`` and ``*`` (offsets, pointers, loop indices) is done a second time
  in int64, compared with the type's bounds and handed to ``device_assert``, which returns
  without doing anything unless ``options.debug`` is set (it is not, under the interpreter).
  With ``debug`` off we turn ``sanitize_overflow`` off: the same values and no error either
  way; about a quarter of a softmax's interpreter time under py-spy.
- **Patching ``triton.language`` again on every device-function call.** A launch
  (``GridExecutor.__call__``) patches ``triton.language`` for the interpreter once
  (``_patch_lang``, ``inspect.getmembers`` over ``tl``, ``tl.tensor``, ``tl.math``...), and
  restores it at the end. Every call of a ``@triton.jit`` helper inside the kernel, including
  ``tl.max``, ``tl.sum``, ``tl.softmax`` and the other ``triton.language.standard`` functions,
  calls ``_patch_lang`` again for the helper's module, on every call in every program, and
  never restores that pass. The patches are stateless (the same wrappers and closures each
  time), so once a launch has patched a module (``tl``, or ``tl.core`` for the standard
  library), a later pass over it in the same launch changes nothing, and we skip it. The first
  pass over each module in each launch is Triton's own.
- **A table built again for every value.** ``_get_np_dtype`` (Triton type -> NumPy dtype,
  called for every splat, load, cast and reduction of every program) builds its 19-entry dict
  on each call: about a tenth of a softmax's interpreter time under py-spy (2026-11-28). We
  put a lookup in front of it that keeps each answer (:func:`_remembering_np_dtype`): a block
  type is looked up by its element type, a pointer is ``uint64``, as in Triton's own body,
  and any other type is asked of Triton's function once and its answer kept, keyed by the
  type as Triton's dict is (by equality), so a type Triton does not know still raises its
  ``KeyError``.

Measured on the five examples (``benchmarks/interpreter_overhead.py``, figures in
``benchmarks/README.md``). On the GPU path nothing here runs. A Triton without these internals
(``_patch_lang``, ``interpreter_builder``, ``sanitize_overflow``, ``_get_np_dtype``) is left as
it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_MARK = "_accelopt_overhead"  # set on our _patch_lang wrapper (install once per process)
_SPAN = "_accelopt_launch_span"  # attribute of triton.runtime.interpreter: the launch state


def _span() -> dict[str, Any]:
    """The process-wide launch state, kept on ``triton.runtime.interpreter`` (so two copies of
    this module, loaded from disk and from the worker's bundle, share it): ``launch`` (a launch
    is running) and ``patched`` (ids of the ``triton.language`` modules patched so far in the
    running launch; None before its first ``_patch_lang`` pass)."""
    from triton.runtime import interpreter as ti

    state = getattr(ti, _SPAN, None)
    if state is None:
        state = {"launch": False, "patched": None}
        setattr(ti, _SPAN, state)
    return state


class _Unchanged:
    """The scope of a skipped ``_patch_lang`` pass: nothing to restore."""

    def restore(self) -> None:
        return None


def _lang_ids(fn: Any, lang_ids: frozenset[int]) -> frozenset[int]:
    """Ids of the ``triton.language`` modules in ``fn.__globals__``, as ``_patch_lang`` picks
    them (``tl`` and ``tl.core`` under any name); ``lang_ids`` holds their ``id``s (the modules
    live as long as the process, so an id names one of them)."""
    glob = getattr(fn, "__globals__", None) or {}
    return frozenset(i for i in map(id, glob.values()) if i in lang_ids)


def _remembering_np_dtype(original: Any, tl: Any) -> Any:
    """``_get_np_dtype`` that computes each answer once: ``original`` is Triton's function,
    ``tl`` ``triton.language``. A pointer type, or a block of pointers, gives ``uint64``; a
    block type gives its element type's answer; any other type ``original``'s, kept in a dict
    keyed by the type (equality and hash, as Triton's own table). Raises what ``original``
    raises for a type it does not know (nothing is kept then)."""
    known: dict[Any, Any] = {}
    pointer, block = tl.pointer_type, tl.block_type
    uint64 = original(pointer(tl.int8))

    def _get_np_dtype(tt_dtype: Any) -> Any:
        if isinstance(tt_dtype, block):
            tt_dtype = tt_dtype.element_ty
        if isinstance(tt_dtype, pointer):
            return uint64
        try:
            return known[tt_dtype]
        except KeyError:
            answer = known[tt_dtype] = original(tt_dtype)
            return answer

    setattr(_get_np_dtype, _MARK, True)
    _get_np_dtype.__wrapped__ = original
    return _get_np_dtype


def install() -> bool:
    """Remove both costs in this process (idempotent). Call after ``triton`` is imported under
    ``TRITON_INTERPRET=1``; harmless otherwise. Returns True when the ``_patch_lang`` wrapper is
    in place (now or from an earlier call), False when this Triton lacks the internals (then
    nothing is changed but, where it can be, the overflow option). Never raises."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as ti
    except ImportError:
        return False
    builder = getattr(ti, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if (
        dataclasses.is_dataclass(options)
        and getattr(options, "sanitize_overflow", False)
        and not getattr(options, "debug", True)
    ):
        try:
            builder.options = dataclasses.replace(options, sanitize_overflow=False)
        except Exception:  # noqa: BLE001 - an options class we do not know: keep Triton's
            pass

    np_dtype = getattr(ti, "_get_np_dtype", None)
    if callable(np_dtype) and not getattr(np_dtype, _MARK, False):
        try:
            ti._get_np_dtype = _remembering_np_dtype(np_dtype, tl)
        except Exception:  # noqa: BLE001 - a Triton whose types we do not know: keep its own
            pass

    original = getattr(ti, "_patch_lang", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True
    lang_ids = frozenset({id(tl), id(getattr(tl, "core", tl))})
    state = _span()

    def _patch_lang(fn: Any) -> Any:
        if not state["launch"]:
            return original(fn)
        langs = _lang_ids(fn, lang_ids)
        patched = state["patched"]
        if patched is not None and langs <= patched:  # a helper's pass, nothing new to patch
            return _Unchanged()
        scope = original(fn)
        state["patched"] = langs | (patched or frozenset())
        return scope

    setattr(_patch_lang, _MARK, True)
    ti._patch_lang = _patch_lang
    return True


@contextmanager
def launch() -> Iterator[None]:
    """The span of one interpreter launch (``GridExecutor.__call__``), in which a module is
    patched for the interpreter once. Nests (the outer span's state comes back after)."""
    state = _span()
    saved = dict(state)
    state["launch"], state["patched"] = True, None
    try:
        yield
    finally:
        state.update(saved)

"""The test session's own environment, whatever the machine it runs on (issue 33).

:func:`enter` (called from ``pytest_configure`` in tests/conftest.py, before collection) makes the
session independent of the user's ambient setup, and :func:`leave` restores it:

- ``HOME`` and the XDG base directories point into one temporary directory of the session, so no
  test reads the user's ``~/.config/accelopt/config.toml`` (platformdirs), ``~/.ssh/config`` or
  editor state, and nothing writes to the real ``HOME`` (which may be read-only).
  ``PYTHONUSERBASE`` keeps the user's own site-packages visible to subprocesses all the same.
- Triton's compile cache is the session's ``TRITON_CACHE_DIR``: pytest's own cache folder
  (``.pytest_cache/d/triton``: shared by all tests and kept between runs; Triton keys its entries by
  the compiler's hash, so a warm or a cold one gives the same results), never ``~/.triton``.
- Every variable that changes the product's or the toolchain's behaviour is removed: the
  ``ACCELOPT_*`` settings (but the test run's own knobs, :data:`TEST_KNOBS`), ``OPENAI_*``
  (the LLM double is the only service), ``TRITON_*``, ``NKI_*`` and ``NEURON_*``; tests that want
  one set it themselves. ``ACCELOPT_SHAPE=small`` (the examples' interpreter-sized inputs).
- A Neuron SDK (``nki`` or ``neuronxcc``, the real one or tests/doubles) found through
  ``PYTHONPATH`` is taken off ``PYTHONPATH`` and ``sys.path`` (in pytest-xdist's workers too,
  through :data:`HIDDEN_SDK_ENV`): the NKI tests put the double on the
  path of their own subprocesses (tests/nki/conftest.py). An SDK installed in site-packages cannot
  be hidden; :func:`sdk_installed` says so, for the few tests that need a machine without one.
- Loopback never goes through a proxy (``NO_PROXY``): the LLM double, sshd and Ray listen there.
- The CLI's terminal is :data:`TERMINAL_COLUMNS` wide (``COLUMNS``, which rich reads), whatever the
  terminal or the temporary folders' depth (pytest-xdist's ``popen-gw0`` makes them longer): a
  table cell or a message never wraps in the middle of the path a test looks for.
"""

from __future__ import annotations

import os
import shutil
import site
import sys
import tempfile
from importlib.machinery import PathFinder
from pathlib import Path

#: Width of the terminal the CLI under test writes to (``COLUMNS``).
TERMINAL_COLUMNS = 240

#: ``ACCELOPT_*`` variables that configure the test run itself (not the product): kept.
#: ``ACCELOPT_GPU_``: the device check's deadline and figures file (.device/gpu-check).
TEST_KNOBS = ("ACCELOPT_TEST_", "ACCELOPT_VSCODE_E2E", "ACCELOPT_VSIX", "ACCELOPT_CODE_SERVER",
              "ACCELOPT_CHROMIUM", "ACCELOPT_E2E_", "ACCELOPT_GPU_")  # fmt: skip

#: Prefixes of the variables removed for the session.
SCRUBBED = ("ACCELOPT_", "OPENAI_", "TRITON_", "NKI_", "NEURON_")

#: The Neuron SDK's top-level packages (current and legacy).
SDK_PACKAGES = ("nki", "neuronxcc")

#: The SDK path entries the session hid, for its pytest-xdist workers: xdist gives each worker
#: the controller's ``sys.path`` as it was before :func:`enter` (PYTHONPATH's entries included),
#: and the worker's environment no longer names them.
HIDDEN_SDK_ENV = "ACCELOPT_TEST_HIDDEN_SDK_PATHS"

_saved: dict[str, str] | None = None
_saved_path: list[str] = []
_home: str | None = None


def provides_sdk(entry: str) -> bool:
    """True when the path entry ``entry`` holds ``nki`` or ``neuronxcc`` (no import)."""
    return any(PathFinder.find_spec(name, [entry]) is not None for name in SDK_PACKAGES)


def _scrubbed(name: str) -> bool:
    return name.startswith(SCRUBBED) and not name.startswith(TEST_KNOBS)


def _without_sdk(pythonpath: str) -> tuple[str, set[str]]:
    """``pythonpath`` without its SDK entries, and the real paths of those entries."""
    entries = [p for p in pythonpath.split(os.pathsep) if p]
    dropped = {os.path.realpath(p) for p in entries if provides_sdk(p)}
    kept = [p for p in entries if os.path.realpath(p) not in dropped]
    return os.pathsep.join(kept), dropped


def enter(triton_cache: Path | None) -> None:
    """Give this process (and so every subprocess a test starts) the session's environment.

    ``triton_cache``: the folder for Triton's compile cache (None: one inside the session's HOME).
    """
    global _saved, _saved_path, _home
    _saved, _saved_path = dict(os.environ), list(sys.path)
    user_base = site.getuserbase()
    for name in [n for n in os.environ if _scrubbed(n)]:
        del os.environ[name]
    pythonpath, dropped = _without_sdk(os.environ.get("PYTHONPATH", ""))
    dropped |= {p for p in os.environ.get(HIDDEN_SDK_ENV, "").split(os.pathsep) if p}
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    else:
        os.environ.pop("PYTHONPATH", None)
    if dropped:
        os.environ[HIDDEN_SDK_ENV] = os.pathsep.join(sorted(dropped))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") not in dropped]
    _home = tempfile.mkdtemp(prefix="accelopt-tests-home-")
    home = Path(_home)
    xdg = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_DATA_HOME": ".local/share",
           "XDG_STATE_HOME": ".local/state"}  # fmt: skip
    for name, sub in xdg.items():
        (home / sub).mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(home / sub)
    os.environ["HOME"] = str(home)
    os.environ["PYTHONUSERBASE"] = user_base
    cache = triton_cache or home / ".triton" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    os.environ["ACCELOPT_SHAPE"] = "small"
    os.environ["COLUMNS"] = str(TERMINAL_COLUMNS)
    loopback = "127.0.0.1,localhost,::1"
    for name in ("NO_PROXY", "no_proxy"):
        os.environ[name] = ",".join(filter(None, [os.environ.get(name), loopback]))


def leave() -> None:
    """Restore the environment and ``sys.path`` of before :func:`enter`; remove the session HOME."""
    global _saved, _home
    if _saved is not None:
        os.environ.clear()
        os.environ.update(_saved)
        sys.path[:] = _saved_path
        _saved = None
    if _home is not None:
        shutil.rmtree(_home, ignore_errors=True)
        _home = None


def sdk_installed() -> bool:
    """True when a Neuron SDK is importable from this interpreter's own paths (site-packages),
    which no test can hide from the workers it starts."""
    return any(provides_sdk(p) for p in sys.path if p)

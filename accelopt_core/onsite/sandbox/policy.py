"""What the sandbox does where (issue 34): the starters' command and environment, the worker's
set-up, the judge's confinement, and the warning when a part is missing.

- A starter (the local target, the ssh agent, the Ray task and actor) runs a worker with
  :func:`.launch.worker_command`: the allowlisted environment, and the command wrapped in bubblewrap
  where this kernel has no usable Landlock.
- The worker (the cold worker's supervisor, the warm zygote) calls :func:`setup_worker` first,
  while it has one thread: its ``os.environ`` scrubbed again, the compiler caches' variables
  set, the network cut (:mod:`.netns`, else :mod:`.seccomp`; under bubblewrap, already done),
  the read rules prepared. Once per worker: a warm worker's candidates pay nothing for it.
- The judge (forked per request) calls :func:`confine_judge` before anything else:
  ``HOME``/``TMPDIR`` and its working directory in the scratch directory, compile caches of
  the evaluation's own (:mod:`.caches`), then Landlock (writes only to this evaluation's
  directories and the device nodes; the shared compiler caches are read-only). The candidate,
  reference and compile-stage processes it forks, and NKI candidates that run inside it,
  inherit all of it.
- The candidate, reference and compile-stage processes call :func:`close_unix_sockets` before
  the code they run is loaded: no Unix sockets (:func:`.seccomp.deny_unix_sockets`), so a
  socket named by a path (a Docker socket, the user's D-Bus bus, gpg-agent or ssh-agent) is out
  of reach; on CUDA the device's context is made first, unfiltered.
- :func:`note` is the warning every result carries when a part is missing (``sandbox: ...``).

:data:`.environment.OFF_VAR` turns parts off (``landlock``, ``bwrap``, ``netns``,
``seccomp``, ``all``), for troubleshooting and tests.
"""

from __future__ import annotations

import os
import platform

from . import bwrap, caches, environment, landlock, netns, paths, procfs, seccomp
from .launch import disabled, landlock_abi
from .scratch import scratch_roots

#: Start of the warning of :func:`note` (the host recognises it).
NOTE_PREFIX = "sandbox: "

#: What :func:`setup_worker` did: ``network`` and ``filesystem`` (how, or None),
#: ``network_why`` / ``filesystem_why`` (why not), ``caches`` (the shared compile caches'
#: directories: read-only to the judges), ``readable`` (read rules for Landlock), ``procfs`` /
#: ``procfs_why`` (:mod:`.procfs`), ``unix_sockets`` / ``unix_sockets_why``
#: (:func:`close_unix_sockets` will refuse them, or why not).
STATE: dict = {}


def _network(off: set[str]) -> tuple[str | None, str | None]:
    """Cut this worker's network: ``(how, None)`` or ``(None, why not)``."""
    if os.environ.get(bwrap.FLAG_VAR):
        return "network namespace (bubblewrap)", None
    whys = []
    if "netns" not in off:
        try:
            return netns.enter(), None
        except OSError as exc:
            whys.append(f"no network namespace ({exc.strerror or exc})")
    if "seccomp" not in off:
        try:
            seccomp.deny_inet_sockets()
            return "seccomp filter (no AF_INET/AF_INET6 sockets)", None
        except OSError as exc:
            whys.append(f"no seccomp filter ({exc.strerror or exc})")
    return None, "; ".join(whys) or "turned off"


def _unix_sockets(off: set[str]) -> tuple[str | None, str | None]:
    """Whether the candidates' processes can refuse Unix sockets: ``(how, None)`` or ``(None,
    why not)``."""
    if "seccomp" in off:
        return None, "turned off"
    ok, why = seccomp.available()
    return ("seccomp filter (no AF_UNIX sockets)", None) if ok else (None, why)


def close_unix_sockets(use_cuda: bool) -> None:
    """In a candidate, reference or compile-stage process, before it loads the code it runs:
    refuse Unix sockets from now on (:func:`.seccomp.deny_unix_sockets`, every thread). With
    ``use_cuda`` the device's context is made first (one 4-byte tensor on the pinned device),
    so that the driver's own set-up runs unfiltered; a CUDA that fails here fails again, with
    its classified error, where the process first uses it. Does nothing where
    :func:`setup_worker` did not run in this worker (a judge that was not confined) or found
    the filter unavailable or turned off (:func:`note` says so); a kernel that refuses it here
    is ignored the same way (the ``available`` probe makes that rare)."""
    if not STATE.get("unix_sockets"):
        return
    if use_cuda:
        try:
            import torch

            torch.ones(1, device="cuda")
        except Exception:  # noqa: BLE001 - reported where the process uses CUDA
            pass
    try:
        seccomp.deny_unix_sockets()
    except OSError:
        pass


def _filesystem(off: set[str]) -> tuple[str | None, str | None]:
    """How the judge will confine the filesystem: ``(how, None)`` or ``(None, why not)``."""
    if os.environ.get(bwrap.FLAG_VAR):
        return "bubblewrap", None
    version = landlock_abi(off)
    if version:
        return f"landlock (ABI {version})", None
    if "landlock" in off:
        why = "Landlock turned off"
    else:
        found = landlock.abi()
        why = (
            f"Landlock ABI {found} on Linux {platform.release()}"
            f" (needs ABI {landlock.MIN_ABI}: Linux 5.19 or later)"
        )
    _, no_bwrap = (None, "bubblewrap turned off") if "bwrap" in off else bwrap.usable()
    return None, f"{why}; {no_bwrap or 'bubblewrap did not start this worker'}"


def setup_worker() -> dict:
    """The worker's part (see the module); idempotent. Returns :data:`STATE`, with
    ``scratch`` (the scratch roots) and, under Landlock, ``ruleset`` (the fd of the judges'
    ruleset, built once here: each judge only enforces it)."""
    if STATE:
        return STATE
    off = disabled()
    env = environment.confined_environ(os.environ)
    os.environ.clear()
    os.environ.update(env)
    # under bubblewrap the shared caches are bound read-only: no writable fallback in the
    # worker's /tmp, which its candidates could write (issue 53)
    shared = environment.compile_caches(os.environ, fallback=not os.environ.get(bwrap.FLAG_VAR))
    os.environ.update(shared)
    STATE["caches"] = environment.cache_dirs(shared)
    STATE["network"], STATE["network_why"] = _network(off)
    STATE["filesystem"], STATE["filesystem_why"] = _filesystem(off)
    STATE["unix_sockets"], STATE["unix_sockets_why"] = _unix_sockets(off)
    STATE["scratch"] = scratch_roots()
    STATE["ruleset"] = None
    STATE["procfs"] = None
    if (STATE["filesystem"] or "").startswith("landlock"):
        try:  # the rules let /proc's files be written: the system's settings read-only first
            STATE["procfs"] = f"read-only but the processes ({procfs.protect()} entries)"
        except OSError as exc:
            STATE["procfs_why"] = str(exc)
        # the shared compile caches: read, never written, from a judge's tree (issue 53)
        writable = STATE["scratch"] + paths.device_nodes()
        try:
            readable = paths.readable(os.environ, writable) + STATE["caches"]
            STATE["ruleset"] = landlock.ruleset(
                readable, writable, listable=paths.LISTABLE, files_writable=paths.FILES_WRITABLE
            )
        except OSError as exc:
            STATE["filesystem"], STATE["filesystem_why"] = None, f"Landlock failed: {exc}"
    return STATE


def confine_judge(dirs: dict) -> None:
    """The judge's part, at its very start (one thread): scratch ``HOME``/``TMPDIR`` and
    working directory (``dirs``: :func:`..judge.peers.new_dirs`), then the worker's Landlock
    ruleset enforced (directories of ``dirs`` outside the scratch roots are granted first). A
    Landlock that fails here is recorded for :func:`note`; the evaluation goes on."""
    import tempfile

    setup_worker()
    os.environ.update(environment.scratch_environ(dirs["cwd"], dirs["tmp"]))
    tempfile.tempdir = dirs["tmp"]  # the supervisor's choice, cached before the fork
    os.chdir(dirs["cwd"])
    caches.use_private(dirs)  # issue 53: compile caches of this evaluation's own
    fd = STATE["ruleset"]
    if fd is None:
        return
    own = [d for d in (dirs.get("root"),) if d]
    outside = [d for d in own if not paths.under(d, STATE["scratch"])]
    try:
        if outside:
            landlock.grant(fd, outside, landlock.handled(landlock.abi()))
        landlock.enforce(fd)
        _narrow_writes(own)
    except OSError as exc:
        STATE["filesystem"], STATE["filesystem_why"] = None, f"Landlock failed: {exc}"
    finally:
        os.close(fd)
        STATE["ruleset"] = None


def _narrow_writes(own: list[str]) -> None:
    """A second Landlock layer (:func:`.landlock.writes_ruleset`): writes only beneath this
    evaluation's directories ``own``, the device nodes and ``/proc``'s existing files, not
    in the worker's other evaluations' directories, which the worker's ruleset grants (its
    scratch roots hold them all; issue 53).

    Raises:
        OSError: the kernel refused.
    """
    fd = landlock.writes_ruleset(own + paths.device_nodes(), paths.FILES_WRITABLE)
    try:
        landlock.enforce(fd)
    finally:
        os.close(fd)


def describe() -> dict:
    """``{"environment", "filesystem", "network", "unix_sockets"}``: how each part is confined
    here (a missing part: ``"none: <why>"``)."""
    state = STATE or setup_worker()
    out = {"environment": "allowlist"}
    for part in ("filesystem", "network", "unix_sockets"):
        out[part] = state[part] or f"none: {state[f'{part}_why']}"
    return out


def note() -> str | None:
    """The warning for a result when a part is missing, else None: ``sandbox: candidates ran
    with no filesystem confinement (why) ...``."""
    state = STATE or setup_worker()
    missing = []
    if not state["filesystem"]:
        missing.append(
            f"no filesystem confinement ({state['filesystem_why']}): they could write "
            "outside their scratch directory and read the home directory"
        )
    if not state["network"]:
        missing.append(f"no network isolation ({state['network_why']})")
    if not state.get("unix_sockets"):
        missing.append(f"Unix sockets named by a path reachable ({state['unix_sockets_why']})")
    if state["filesystem"] and state.get("procfs_why") and os.geteuid() == 0:
        missing.append(
            f"the system's settings under /proc writable by root ({state['procfs_why']})"
        )
    if not missing:
        return None
    return (
        NOTE_PREFIX
        + "candidates ran with "
        + " and ".join(missing)
        + ' (docs: "How a candidate is judged", the sandbox)'
    )


def warning_in(warnings: list) -> str | None:
    """The warning of :func:`note` among a result's ``warnings`` (a part of the sandbox was
    missing where it ran), or None; for the host, which shows it once."""
    return next((w for w in warnings if isinstance(w, str) and w.startswith(NOTE_PREFIX)), None)

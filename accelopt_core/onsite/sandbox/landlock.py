"""Linux Landlock through ctypes: the three system calls (``landlock_create_ruleset``,
``landlock_add_rule``, ``landlock_restrict_self``; numbers 444-446 on every architecture) and
``prctl(PR_SET_NO_NEW_PRIVS)``. A small layer of our own, not a binding: the onsite code is
shipped as source to bare machines and imports only the standard library.

Semantics (kernel documentation, ``Documentation/userspace-api/landlock.rst``): a ruleset names
the access rights it handles; once the calling thread restricts itself, every handled right is
denied except beneath the paths a rule grants it on, for this thread and every process it
forks, irrevocably. A sandboxed process also cannot ptrace (nor read ``/proc/PID/environ`` or
``/proc/PID/mem`` of) a process outside its domain, and from ABI 6 cannot signal one nor
connect to its abstract Unix sockets.

ABI 1 (Linux 5.13) refuses every rename or link across directories, which Triton's on-disk
cache does (a file written in a temporary directory, then moved): :func:`restrict` needs ABI 2
(Linux 5.19, ``LANDLOCK_ACCESS_FS_REFER``); ABI 3 (6.2) adds truncation to the handled rights,
ABI 6 (6.12) the signal and abstract-socket scopes.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

#: The lowest ABI :func:`restrict` works with (see the module).
MIN_ABI = 2

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
MAKE_SYM, REFER, TRUNCATE = 1 << 12, 1 << 13, 1 << 14
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

READ = EXECUTE | READ_FILE | READ_DIR
#: The rights that apply to a file (not a directory) in a rule.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
#: Read, list, and write or truncate existing files (``open(path, "w")`` of a file that
#: exists needs ``WRITE_FILE`` and, from ABI 3, ``TRUNCATE``; no ``MAKE_*``).
FILES_WRITE = READ | WRITE_FILE | TRUNCATE


def _structs():
    """``(ruleset attr, path-beneath attr)``: the two ctypes structures, made per call, and
    nothing cached in the module (the Ray target ships it by value, and ctypes objects do not
    pickle)."""

    class RulesetAttr(ctypes.Structure):
        _fields_ = [
            ("handled_access_fs", ctypes.c_uint64),
            ("handled_access_net", ctypes.c_uint64),
            ("scoped", ctypes.c_uint64),
        ]

    class PathBeneathAttr(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    return RulesetAttr, PathBeneathAttr


def _libc():
    """The C library (~0.04 ms to look up; not cached, see :func:`_structs`)."""
    return ctypes.CDLL(None, use_errno=True)


def checked(ret: int, what: str) -> int:
    """``ret`` of a C library call (one loaded with ``use_errno``), or OSError with its errno
    and ``what`` in the message when it is negative (-1: the call failed)."""
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (not Linux, a kernel before
    5.13, Landlock not enabled at boot, or a seccomp policy refusing the call)."""
    try:
        ret = _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(int(ret), 0)


def handled(version: int) -> int:
    """The filesystem rights a ruleset handles under ABI ``version``: all of ABI 1, plus
    ``REFER`` (2) and ``TRUNCATE`` (3); never ``IOCTL_DEV`` (ioctls on the GPU's device nodes
    stay allowed)."""
    rights = (1 << 13) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


def _add(libc, attr_class, ruleset: int, path: str, access: int) -> bool:
    """Grant ``access`` beneath ``path`` (only the file rights for a file); False when the
    path cannot be opened (gone, or not ours to open). ``attr_class``: the path-beneath
    structure (:func:`_structs`)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FILE_RIGHTS
        attr = attr_class(access, fd)
        checked(
            libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)
    return True


def ruleset(
    readable: Iterable[str],
    writable: Iterable[str],
    version: int | None = None,
    listable: Iterable[str] = (),
    files_writable: Iterable[str] = (),
) -> int:
    """A new ruleset (its fd, close-on-exec): read and execute only beneath ``readable`` and
    ``writable``, write (create, remove, rename into, truncate) only beneath ``writable`` (a
    file in either list: that file alone), list (names only) beneath ``listable``, open the
    existing files beneath ``files_writable`` for writing and truncation (nothing created,
    removed or renamed there: :data:`FILES_WRITE`); missing paths are skipped. From ABI 6 also
    scoped:
    no signals to, and no abstract Unix sockets of, processes outside the domain. Enforce it
    with :func:`enforce`; more paths with :func:`grant`.

    Raises:
        OSError: no Landlock, an ABI under :data:`MIN_ABI`, or a system call failed.
    """
    version = abi() if version is None else version
    if version < MIN_ABI:
        raise OSError(0, f"Landlock ABI {version} (needs {MIN_ABI}: Linux 5.19 or later)")
    scopes = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    ruleset_attr = _structs()[0]
    attr = ruleset_attr(handled(version), 0, scopes)
    size = ctypes.sizeof(ruleset_attr) if version >= 6 else 8 if version < 4 else 16
    fd = checked(
        _libc().syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "landlock_create_ruleset",
    )
    try:
        grant(fd, writable, handled(version))
        grant(fd, readable, READ)
        grant(fd, listable, READ_DIR)
        grant(fd, files_writable, FILES_WRITE & handled(version))
    except BaseException:
        os.close(fd)
        raise
    return fd


#: The rights that change the file system (every handled right but :data:`READ`).
WRITES = ((1 << 13) - 1) & ~READ | REFER | TRUNCATE


def writes_ruleset(
    writable: Iterable[str], files_writable: Iterable[str] = (), version: int | None = None
) -> int:
    """A ruleset (its fd) handling only the rights of :data:`WRITES`: writes only beneath
    ``writable``, existing files opened for writing beneath ``files_writable``; reads are left
    to the rulesets already enforced. Enforced over a broader one (:func:`enforce`; rulesets
    stack, each must allow an access), it narrows the writable paths: the judge narrows its
    worker's scratch roots to its own evaluation's directories (issue 53).

    Raises:
        OSError: no Landlock, an ABI under :data:`MIN_ABI`, or a system call failed.
    """
    version = abi() if version is None else version
    if version < MIN_ABI:
        raise OSError(0, f"Landlock ABI {version} (needs {MIN_ABI}: Linux 5.19 or later)")
    rights = WRITES & handled(version)
    ruleset_attr = _structs()[0]
    fd = checked(
        _libc().syscall(SYS_CREATE_RULESET, ctypes.byref(ruleset_attr(rights, 0, 0)), 8, 0),
        "landlock_create_ruleset",
    )
    try:
        grant(fd, writable, rights)
        grant(fd, files_writable, (WRITE_FILE | TRUNCATE) & rights)
    except BaseException:
        os.close(fd)
        raise
    return fd


def grant(fd: int, paths: Iterable[str], access: int) -> None:
    """Add a rule per path of ``paths`` (missing ones skipped) granting ``access`` (the
    handled rights for writable paths, :data:`READ` for readable ones) to the ruleset ``fd``.

    Raises:
        OSError: the kernel refused a rule.
    """
    libc, attr_class = _libc(), _structs()[1]
    for path in dict.fromkeys(paths):
        _add(libc, attr_class, fd, path, access)


def enforce(fd: int) -> None:
    """``no_new_privs``, then restrict this thread (and what it forks) to the ruleset ``fd``
    (left open: close it yourself). Irrevocable.

    Raises:
        OSError: the kernel refused.
    """
    libc = _libc()
    checked(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    checked(libc.syscall(SYS_RESTRICT_SELF, fd, 0), "landlock_restrict_self")


def restrict(readable: Iterable[str], writable: Iterable[str], version: int | None = None) -> int:
    """:func:`ruleset` and :func:`enforce` at once. Returns the ABI used.

    Raises:
        OSError: as :func:`ruleset` and :func:`enforce` (nothing is restricted then, except
            ``no_new_privs``).
    """
    version = abi() if version is None else version
    fd = ruleset(readable, writable, version)
    try:
        enforce(fd)
    finally:
        os.close(fd)
    return version

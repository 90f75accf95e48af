"""``/proc`` read-only but for the processes' own directories (issue 34).

The Landlock rules let a sandboxed process write existing files beneath ``/proc``
(:data:`.paths.FILES_WRITABLE`: the CUDA driver names its threads there). For an ordinary user
the kernel's permission checks keep that to the settings of its own processes; for root they
do not: the system's settings (``/proc/sys``, ``/proc/sysrq-trigger``, ``/proc/irq``, ...)
pass root's permission check even inside a user namespace. :func:`protect` makes every
top-level entry of ``/proc`` that is not a process (``/proc/<pid>``, ``self``, ``thread-self``)
a read-only bind mount, in a mount namespace of the worker's own (``unshare(CLONE_NEWNS)``,
mounts private first so that nothing reaches the host's namespace): reading them works as
before, writing them fails with ``EROFS``. ``/proc/<pid>`` of a process outside the sandbox
stays guarded by the kernel (``comm`` of another thread group is refused; ``mem`` and the
file descriptors need ptrace access, which Landlock refuses outside the domain).

Needs the privilege to make a mount namespace: the worker's user namespace
(:func:`.netns.enter`) or root. Must run while the process has one thread (the kernel refuses
``CLONE_NEWNS`` to a process sharing its filesystem context). Bubblewrap mounts a ``/proc`` of
its own and covers the same entries itself.
"""

from __future__ import annotations

import ctypes
import errno
import os

from .landlock import checked
from .paths import under

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
#: ``statvfs`` flags of a mount and the mount flags that keep them on a remount (a user
#: namespace may not clear the flags of a mount it inherited).
_KEPT = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}


def system_entries(proc: str = "/proc") -> list[str]:
    """The top-level entries of ``proc`` that are not a process (no pid, ``self`` or
    ``thread-self``)."""
    names = sorted(os.listdir(proc))
    return [
        os.path.join(proc, n) for n in names if not n.isdigit() and n not in ("self", "thread-self")
    ]


def protect(proc: str = "/proc") -> int:
    """A mount namespace of this process's own, with :func:`system_entries` of ``proc``
    read-only (see the module). Returns how many entries were covered.

    Raises:
        OSError: no mount namespace could be made, or a mount was refused (the namespace may
            be half done then: the caller records the failure; nothing reaches the host).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    checked(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    checked(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
    covered = []
    for path in system_entries(proc):
        if os.path.islink(path):
            continue
        target = path.encode()
        ret = libc.mount(target, target, None, MS_BIND | MS_REC, None)
        if ret != 0 and ctypes.get_errno() == errno.ENOENT:  # gone since the listing
            continue
        checked(ret, f"mount --bind {path}")
        covered.append(path)
    # each mount beneath them too (/proc/sys/fs/binfmt_misc): a remount is not recursive
    for point in mount_points_beneath(covered):
        flags = os.statvfs(point).f_flag
        kept = sum(ms for st, ms in _KEPT.items() if flags & st)
        remount = MS_REMOUNT | MS_BIND | MS_RDONLY | kept
        ret = libc.mount(None, point.encode(), None, remount, None)
        checked(ret, f"remount {point} read-only")
    return len(covered)


def mount_points_beneath(roots: list[str]) -> list[str]:
    """This process's mount points (``/proc/self/mountinfo``) that are one of ``roots`` or
    beneath one, parents first."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if under(point, roots):
                out.append(point)
    return sorted(dict.fromkeys(out), key=lambda p: p.count("/"))

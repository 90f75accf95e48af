"""No network: a new user namespace and, owned by it, a new network namespace (issue 34).

``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` through ctypes (Python 3.10 and 3.11 have no
``os.unshare``), then the uid and gid maps that keep this process's own ids (``setgroups``
denied first, as an unprivileged process must), then the namespace's loopback interface up.
The new namespace has no other interface: nothing outside this machine, and nothing listening
on the host's loopback, can be reached; pipes inherited from the starter (the worker's stdin
and stdout, the judge's channels) keep working. Unix sockets named by a path are files, not
network: the namespace does not hide them (docs/concepts/judging.md, "The sandbox").

Must be called while the process has one thread (the kernel refuses ``CLONE_NEWUSER`` to a
multithreaded process): at the start of a worker, before torch is imported.
"""

from __future__ import annotations

import ctypes
import os

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _loopback_up() -> None:
    """Bring ``lo`` up in the new namespace (a machine that is merely offline: code that binds
    a local port works; a failure is ignored)."""
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            req = struct.pack("16sH14s", b"lo", 0, b"")
            flags = struct.unpack("16sH14s", fcntl.ioctl(sock, _SIOCGIFFLAGS, req))[1]
            fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | _IFF_UP, b""))
    except OSError:
        pass


def enter() -> str:
    """Move this process into a new network namespace (in a new user namespace; as root
    without one where user namespaces are refused). Returns how: ``"user+network
    namespace"`` or ``"network namespace"``.

    Raises:
        OSError: neither could be created (user namespaces disabled, a seccomp policy, not
            Linux); the process is unchanged then.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        try:
            _write("/proc/self/setgroups", "deny")
        except FileNotFoundError:  # Linux before 3.19
            pass
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        how = "user+network namespace"
    else:
        err = ctypes.get_errno()
        if uid != 0 or libc.unshare(CLONE_NEWNET) != 0:
            raise OSError(err, f"unshare(CLONE_NEWUSER|CLONE_NEWNET): {os.strerror(err)}")
        how = "network namespace"
    _loopback_up()
    return how

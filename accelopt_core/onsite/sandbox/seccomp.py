"""Seccomp filters that refuse ``socket()`` for some address families (issue 34).

Two uses:

- **the network fallback** where no network namespace can be made (:func:`deny_inet_sockets`,
  once per worker): ``socket(AF_INET | AF_INET6, ...)`` refused;
- **no Unix sockets** in the processes that run candidate or harness code (:func:`deny_unix_sockets`,
  in each candidate, reference and compile-stage process before that code runs): a Unix socket
  named by a path (``/run/docker.sock``, the user's D-Bus bus or gpg-agent, an ssh-agent) is a
  file to Landlock and to the network namespace alike, and ``connect()`` to it needs no write
  access that Landlock governs, so only refusing ``socket(AF_UNIX, ...)`` closes it.
  ``socketpair()`` (a pair of connected sockets that reach nothing else) stays allowed.

A classic-BPF program over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4, the
first argument's low 32 bits at 16 on these little-endian machines), installed after
``PR_SET_NO_NEW_PRIVS`` with ``seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC)`` (every
thread of the process: a CUDA process has the driver's threads) or, failing that,
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` (this thread), through ctypes. libseccomp would
write the same program, but its Python binding is no standard-library module and the onsite
code is shipped to bare machines that may not have it.

The program, for x86-64 (``AUDIT_ARCH_X86_64``, ``socket`` = 41) and aarch64
(``AUDIT_ARCH_AARCH64``, ``socket`` = 198): a system call of another ABI (i386 through
``int 0x80``, x32) is refused, ``io_uring_setup`` (425, whose ``IORING_OP_SOCKET`` opens sockets
without ``socket()``) is refused, ``socket()`` for the filter's families is refused; everything
else is allowed. Refused means ``EPERM`` (Python: ``PermissionError``). A filter holds for the
threads it was installed on and every process they fork, irrevocably; filters stack.
"""

from __future__ import annotations

import ctypes
import errno
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SOCKET_NR = {"x86_64": 41, "aarch64": 198}
SECCOMP_NR = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
IO_URING_SETUP = 425
X32_BIT = 0x40000000
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10

_LD_W_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
RET_ALLOW = 0x7FFF0000
RET_EPERM = 0x00050000 | errno.EPERM


class _Filter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(
    machine: str, families: tuple[int, ...] = (AF_INET, AF_INET6)
) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` (``platform.machine()``) refusing ``socket()`` for the
    address ``families``, as ``(code, jt, jf, k)`` rows; jumps name rows ``"deny"``/``"allow"``
    until resolved here.

    Raises:
        OSError: an architecture this filter does not know.
    """
    if machine not in AUDIT_ARCH:
        raise OSError(0, f"no seccomp filter for the architecture {machine}")
    rows: list[tuple] = [
        (_LD_W_ABS, 0, 0, 4),  # arch
        (_JEQ, 1, 0, AUDIT_ARCH[machine]),
        (_RET, 0, 0, RET_EPERM),  # a foreign ABI
        (_LD_W_ABS, 0, 0, 0),  # nr
    ]
    if machine == "x86_64":
        rows.append((_JGE, "deny", 0, X32_BIT))
    rows += [
        (_JEQ, "deny", 0, IO_URING_SETUP),
        (_JEQ, 0, "allow", SOCKET_NR[machine]),
        (_LD_W_ABS, 0, 0, 16),  # args[0]: the address family
        *((_JEQ, "deny", 0, family) for family in families),
        (_RET, 0, 0, RET_ALLOW),
        (_RET, 0, 0, RET_EPERM),
    ]
    target = {"allow": len(rows) - 2, "deny": len(rows) - 1}

    def jump(label, at: int) -> int:
        return target[label] - at - 1 if isinstance(label, str) else label

    return [(c, jump(jt, i), jump(jf, i), k) for i, (c, jt, jf, k) in enumerate(rows)]


def _install(rows: list[tuple[int, int, int, int]], all_threads: bool) -> None:
    """Install the filter ``rows``: on every thread with ``all_threads`` where the kernel can
    (TSYNC), else on this thread; raises OSError when the kernel refuses."""
    filters = (_Filter * len(rows))(*(_Filter(*row) for row in rows))
    prog = _Program(len(rows), ctypes.cast(filters, ctypes.POINTER(_Filter)))
    libc = ctypes.CDLL(None, use_errno=True)

    def refused(what: str) -> OSError:
        err = ctypes.get_errno()
        return OSError(
            err, f"the seccomp filter was refused ({what}): {errno.errorcode.get(err, err)}"
        )

    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise refused("no_new_privs")
    nr = SECCOMP_NR.get(platform.machine())
    if all_threads and nr is not None:
        flags = SECCOMP_FILTER_FLAG_TSYNC
        if libc.syscall(nr, SECCOMP_SET_MODE_FILTER, flags, ctypes.byref(prog)) == 0:
            return
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise refused("prctl")


def deny_inet_sockets() -> None:
    """Refuse AF_INET/AF_INET6 sockets on this thread (and the processes it will fork).

    Raises:
        OSError: an unknown architecture, or the kernel refused (no seccomp, or an older
            filter that forbids ``prctl``).
    """
    _install(program(platform.machine()), all_threads=False)


def deny_unix_sockets() -> None:
    """Refuse AF_UNIX sockets on every thread of this process (and the processes they fork).

    Raises:
        OSError: an unknown architecture, or the kernel refused.
    """
    _install(program(platform.machine(), (AF_UNIX,)), all_threads=True)


def available() -> tuple[bool, str | None]:
    """``(True, None)`` where this kernel and architecture take the filters, else ``(False,
    why)``: the architecture is one :func:`program` knows, and ``/proc/self/status`` has a
    ``Seccomp`` line (a kernel built with seccomp filters)."""
    machine = platform.machine()
    if machine not in AUDIT_ARCH:
        return False, f"no seccomp filter for the architecture {machine}"
    try:
        with open("/proc/self/status") as f:
            if not any(line.startswith("Seccomp:") for line in f):
                return False, "this kernel has no seccomp"
    except OSError as exc:
        return False, f"cannot read /proc/self/status: {exc.strerror}"
    return True, None

"""The network fallback where no network namespace can be made: a seccomp filter that refuses
``socket()`` for AF_INET and AF_INET6 (issue 34).

A classic-BPF program over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at 4, the
first argument's low 32 bits at 16 on these little-endian machines), installed with
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` after ``PR_SET_NO_NEW_PRIVS``, through ctypes.
libseccomp would write the same program, but its Python binding is no standard-library module
and the onsite code is shipped to bare machines that may not have it.

The program, for x86-64 (``AUDIT_ARCH_X86_64``, ``socket`` = 41) and aarch64
(``AUDIT_ARCH_AARCH64``, ``socket`` = 198): a system call of another ABI (i386 through
``int 0x80``, x32) is refused, ``io_uring_setup`` (425, whose ``IORING_OP_SOCKET`` opens sockets
without ``socket()``) is refused, ``socket(AF_INET | AF_INET6, ...)`` is refused; everything
else is allowed. Refused means ``EPERM`` (Python: ``PermissionError``). The filter holds for
this thread and every process it forks, irrevocably.
"""

from __future__ import annotations

import ctypes
import errno
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SOCKET_NR = {"x86_64": 41, "aarch64": 198}
IO_URING_SETUP = 425
X32_BIT = 0x40000000
AF_INET, AF_INET6 = 2, 10

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


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for ``machine`` (``platform.machine()``) as ``(code, jt, jf, k)`` rows;
    jumps name rows ``"deny"``/``"allow"`` until resolved here.

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
        (_JEQ, "deny", 0, AF_INET),
        (_JEQ, "deny", 0, AF_INET6),
        (_RET, 0, 0, RET_ALLOW),
        (_RET, 0, 0, RET_EPERM),
    ]
    target = {"allow": len(rows) - 2, "deny": len(rows) - 1}

    def jump(label, at: int) -> int:
        return target[label] - at - 1 if isinstance(label, str) else label

    return [(c, jump(jt, i), jump(jf, i), k) for i, (c, jt, jf, k) in enumerate(rows)]


def deny_inet_sockets() -> None:
    """Install the filter on this thread (and the processes it will fork).

    Raises:
        OSError: an unknown architecture, or the kernel refused (no seccomp, or an older
            filter that forbids ``prctl``).
    """
    rows = program(platform.machine())
    filters = (_Filter * len(rows))(*(_Filter(*row) for row in rows))
    prog = _Program(len(rows), ctypes.cast(filters, ctypes.POINTER(_Filter)))
    libc = ctypes.CDLL(None, use_errno=True)
    for args in (
        (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0),
        (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0),
    ):
        if libc.prctl(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"the seccomp filter was refused: {errno.errorcode.get(err, err)}")

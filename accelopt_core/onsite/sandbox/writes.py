"""What a candidate wrote during its evaluation (issue 53, item 5; DESIGN.md, "Evaluating a
candidate", item 8: what the sandbox saw counts too). Standard library only.

Everything a candidate process may write lies in its evaluation's directories
(:func:`..judge.peers.new_dirs`: ``root`` with its working directory ``cwd``, which is also its
``HOME``, and its temporary directory ``tmp``): the judge's Landlock
rules grant nothing else but the device nodes and the existing files beneath ``/proc``
(:func:`.policy.confine_judge`). The judge takes a :class:`Watch` of those directories before
it forks the candidate process and compares after each answer: a file or directory created,
changed (size, modification time, inode, type) or removed is the ``file written`` rejection,
naming the path as the candidate saw it (``~/probe.wav``, ``$TMPDIR/x``).

Left out, by name: the evaluation's compile caches
(:func:`.caches.private_root`: Triton and the CUDA driver write there during a call; removed
with the evaluation, never read by another, :mod:`.caches`) and the directories of the other
processes of the evaluation (:data:`PEERS`: the reference and compile-stage processes get
their own working and temporary directories, :func:`peer_dirs`). A file made and removed
within one call leaves nothing to compare (Triton's compiler makes and removes temporary
files in ``TMPDIR`` during a GPU call; counting those would reject every correct kernel).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Mapping

from .caches import private_root

#: The rule (status ``rejected``, field ``rule``) of a candidate that wrote a file.
WRITE_RULE = "file written"
#: Subdirectories of an evaluation's root for its other processes (:func:`peer_dirs`).
PEERS = ("reference", "stage")
#: The most paths a rejection names.
SHOWN = 3

#: ``(kind, size, mtime_ns, inode, mode)`` of a path (kind: ``d`` directory, ``l`` link,
#: ``f`` anything else; mode: the permission bits); a directory's size and time are not
#: compared (they change with entries made and removed within a call).
Entry = tuple[str, int, int, int, int]


def peer_dirs(dirs: Mapping[str, str], name: str) -> dict:
    """``dirs`` with ``cwd`` and ``tmp`` replaced by ``<root>/<name>/cwd`` and ``.../tmp``
    (made, mode 0700): the working and temporary directories of the evaluation's process
    ``name`` (one of :data:`PEERS`), outside the candidate's."""
    out = dict(dirs)
    for sub in ("cwd", "tmp"):
        out[sub] = os.path.join(dirs["root"], name, sub)
        os.makedirs(out[sub], mode=0o700, exist_ok=True)
    return out


def peer_watch(dirs: Mapping[str, str]) -> Watch:
    """A :class:`Watch` of the working directory (its ``HOME``) of a process :func:`peer_dirs`
    made directories for (``dirs``: its result). Its temporary directory is left out: in the
    compile stage, Triton's compiler writes its ``.ptx``, ``.cubin`` and ``.log`` files there,
    and the stage's parallel compile processes, killed when its pass ends, leave theirs
    (:mod:`..triton.prewarm`)."""
    return Watch(dirs, [dirs["cwd"]])


def excluded(dirs: Mapping[str, str]) -> set[str]:
    """The directories :class:`Watch` leaves out (see the module)."""
    out = {private_root(dirs), *(os.path.join(dirs["root"], p) for p in PEERS)}
    return {os.path.abspath(p) for p in out}


def snapshot(roots: Iterable[str], skip: set[str]) -> dict[str, Entry]:
    """``{path: Entry}`` of everything beneath ``roots`` (the roots themselves excluded), not
    descending into the paths of ``skip`` nor following links. ~10 us per entry."""
    out: dict[str, Entry] = {}
    stack = [r for r in roots if r]
    while stack:
        top = stack.pop()
        try:
            it = os.scandir(top)
        except OSError:
            continue
        with it:
            for entry in it:
                if entry.path in skip:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    out[entry.path] = ("d", 0, 0, st.st_ino, mode)
                    stack.append(entry.path)
                else:
                    kind = "l" if stat.S_ISLNK(st.st_mode) else "f"
                    out[entry.path] = (kind, st.st_size, st.st_mtime_ns, st.st_ino, mode)
    return out


def changes(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> list[tuple[str, str]]:
    """``[(verb, path)]`` from ``before`` to ``after``, sorted by path: ``wrote`` (created or
    changed), ``changed the mode of`` (only its permissions changed) or ``removed``."""
    out = [("removed", p) for p in before if p not in after]
    for path, entry in after.items():
        old = before.get(path)
        if old is not None and old[:4] == entry[:4] and old != entry:
            out.append(("changed the mode of", path))
        elif old != entry:
            out.append(("wrote", path))
    return sorted(out, key=lambda c: c[1])


def shown(path: str, dirs: Mapping[str, str]) -> str:
    """``path`` as the candidate names it: ``~/...`` in its home (``dirs["cwd"]``),
    ``$TMPDIR/...`` in its temporary directory, else as it is."""
    for base, name in ((dirs["cwd"], "~"), (dirs["tmp"], "$TMPDIR")):
        base = base.rstrip("/")
        if path == base or path.startswith(base + "/"):
            return name + path[len(base) :]
    return path


class Watch:
    """The candidate's writable directories (``dirs``: :func:`..judge.peers.new_dirs`) as
    they were when made: :meth:`seen` names what changed since."""

    def __init__(self, dirs: Mapping[str, str], roots: Iterable[str] | None = None) -> None:
        self.dirs = dict(dirs)
        self.skip = excluded(dirs)
        if roots is None:  # the candidate process's: the whole evaluation but what is left out
            roots = [dirs.get("root")]
        else:  # another process's own directories (:func:`peer_dirs`)
            roots = [os.path.abspath(r) for r in roots]
            self.skip -= set(roots)
        self.roots = [d for d in roots if d and os.path.abspath(d) not in self.skip]
        self.before = snapshot(self.roots, self.skip)

    def seen(self, when: str) -> str | None:
        """The rejection message when something changed (``rejected`` status, rule
        :data:`WRITE_RULE`), e.g. ``wrote ~/probe.wav during the call``, else None. ``when``:
        ``during the call``, ``while loading``, ... The state now becomes the new reference,
        so one write is reported once."""
        after = snapshot(self.roots, self.skip)
        found = changes(self.before, after)
        self.before = after
        if not found:
            return None
        named = ", ".join(f"{verb} {shown(p, self.dirs)}" for verb, p in found[:SHOWN])
        more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        return (
            f"{named}{more} {when}: a candidate may not create, change or remove files, not "
            "even in its own working or temporary directory (once applied, the same code would "
            "write there on every call)"
        )


#: Audit events (``sys.addaudithook``) that write: the positions of their path arguments.
_EVENTS = {
    "os.mkdir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "os.mkfifo": (0,),
    "os.mknod": (0,),
    "shutil.rmtree": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
#: The key of the message a guarded process sends when it tries to write where it may not.
DENIED = "denied_write"


def guard_process(dirs: Mapping[str, str], send=None) -> None:
    """:func:`guard` in a process that runs candidate code (the candidate process, the
    compile stage) where the sandbox confines the filesystem (:func:`.policy.setup_worker`):
    writable are the evaluation's directories (``dirs``: ``root``), the device
    nodes and ``/proc``'s files. ``send``: the judge's channel (None: refuse, report nothing).
    """
    from . import paths, policy

    if not policy.STATE.get("filesystem"):
        return
    own = [d for d in (dirs.get("root"),) if d]
    guard(send, own + paths.device_nodes() + list(paths.FILES_WRITABLE))


def guard(send, writable: Iterable[str]) -> None:
    """In a candidate process, before its code loads: report each attempt to write outside
    ``writable`` (directories and files; resolved, links followed) to the judge with
    ``send({DENIED: path, "event": name})`` (the judge rejects the candidate, naming the path:
    :meth:`..judge.peers.Candidate.recv`), and refuse it (``PermissionError``, EACCES). Such a
    write is one the sandbox refuses (Landlock's ``EACCES``, bubblewrap's ``EROFS``), which a
    candidate could catch and carry on from; the attempt is reported before the system call is
    made, so it is known however the candidate goes on. Refusing it here also covers what
    Landlock does not govern: ``chmod``, ``chown`` and ``utime`` of a file outside the scratch
    directory succeed under Landlock (measured here, Linux 6.x, ABI 7). Python's audit events
    (``open`` for writing, ``os.remove``, ``os.rename``, ...; ``sys.addaudithook``, which no
    code can remove) see writes made through Python; a write made by native code is refused by
    the sandbox without a report. Also stops bytecode caching (``sys.dont_write_bytecode``): an
    import must not try to write a ``.pyc`` beside a read-only source."""
    import sys

    roots = tuple(os.path.realpath(p) for p in writable)
    realpath, fspath = os.path.realpath, os.fsdecode

    def outside(path) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        try:
            real = realpath(fspath(path))
        except (TypeError, ValueError, OSError):
            return None
        if any(real == r or real.startswith(r + "/") for r in roots):
            return None
        return real

    def hook(event: str, args: tuple) -> None:
        try:
            if event == "open":
                flags = args[2] if len(args) > 2 else None
                if type(flags) is not int or not flags & _WRITE_FLAGS:
                    return
                positions: tuple = (0,)
            else:
                positions = _EVENTS.get(event, ())
            for i in positions:
                path = outside(args[i]) if i < len(args) else None
                if path is not None:
                    if send is not None:
                        send({DENIED: path, "event": event})
                    break
            else:
                return
        except Exception:  # noqa: BLE001 - only the refusal below may leave the hook
            return
        raise PermissionError(
            errno.EACCES, "refused by the sandbox (a candidate writes no files)", path
        )

    sys.dont_write_bytecode = True
    sys.addaudithook(hook)


def denied_message(answer: dict, when: str) -> str:
    """The rejection message for a :data:`DENIED` report (see :func:`guard`)."""
    path = str(answer.get(DENIED))[:300]
    return (
        f"tried to write {path} {when}, outside its evaluation's directories (refused): a "
        "candidate may not create, change or remove files"
    )

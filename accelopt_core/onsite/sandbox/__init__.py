"""The sandbox every process that runs candidate or harness code starts in (issue 34; DESIGN.md,
"Evaluating a candidate", item 8). Standard library only: it is shipped to bare targets.

- :mod:`.environment`: the allowlisted environment (no API keys; ``HOME``/``TMPDIR`` = the
  evaluation's scratch directory; the worker's shared compiler caches).
- :mod:`.caches`: each evaluation compiles into caches of its own; the shared ones are read
  through them and written by no process that runs candidate code (issue 53).
- :mod:`.landlock`: writes only to the evaluation's own directories, the device nodes and the
  existing files beneath ``/proc``; no reads of the home directories beyond the Python
  environment and the shared compiler caches (Linux Landlock, a small ctypes layer over its
  three system calls).
- :mod:`.writes`: what a candidate wrote during its evaluation (its directories compared
  before and after each answer, and writes outside them refused and reported): the ``file
  written`` rejection (issue 53).
- :mod:`.procfs`: ``/proc`` read-only but the processes' own directories (a mount namespace
  of the worker's own), since Landlock lets the files beneath ``/proc`` be written (CUDA).
- :mod:`.netns` and :mod:`.seccomp`: no network (a new user + network namespace, else a
  seccomp filter refusing ``socket()`` for AF_INET/AF_INET6), and no Unix sockets in the
  processes that run candidate or harness code (a seccomp filter refusing AF_UNIX).
- :mod:`.bwrap`: bubblewrap around the worker where the kernel has no usable Landlock.
- :mod:`.paths`: what may be read and written; :mod:`.scratch`: the worker's scratch roots and
  the sweep of those a killed worker left.
- :mod:`.launch`: the command and environment a starter runs a worker with.
- :mod:`.policy`: what the worker and the judge apply, and the warning when a part is missing.
"""

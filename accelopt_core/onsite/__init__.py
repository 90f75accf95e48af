"""Everything that runs ON the target, standard library only (plus the kernel's own stack:
torch + triton, or numpy + the Neuron SDK). Targets ship this package's sources and import them
from memory on the remote (:mod:`accelopt_core.targets.shipping`); modules import each other
relatively. This ``__init__`` imports nothing, so a shipped program loads only what it uses.

The host imports from here :mod:`.protocol` (the request/result records), :mod:`.names` (the
one jit detector), :func:`.gate.precheck` (the static gate, run before a request is sent) and
:mod:`.roofline` (the peak table and % of peak): one implementation for host and target.

Modules: ``worker`` (the entry the targets run), ``supervisor`` (fork, pipes, timeout, a dead
child's classification), ``child`` (the forked process's set-up and dispatch), ``gate`` and
``launcher`` (the static gate on the AST), ``runtime`` (device pinning, memory limit, versions,
probe), ``loading`` (harness and candidate from strings), ``compare`` (outputs against the
reference), ``failures`` (exceptions -> classified results), ``triton_eval`` and ``nki_eval``
(the evaluations), ``roofline``, ``protocol``, ``names``; ``agent`` starts workers on remote
targets. Warm workers (issue 14): ``zygote`` (the fork server: imports the stack once, runs the
supervisor per framed request), ``warmstack`` (what it imports, without CUDA, and the child's
re-import when triton's interpreter mode differs), ``warmhost`` (a zygote kept by the ssh agent
or the Ray target's actor).
"""

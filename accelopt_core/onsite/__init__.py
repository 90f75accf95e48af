"""Everything that runs ON the target, standard library only (plus the kernel's own stack:
torch + triton, or numpy + the Neuron SDK). Targets ship this package's sources and import them
from memory on the remote (:mod:`accelopt_core.targets.shipping`); modules import each other
relatively. No ``__init__`` here imports anything, so a shipped program loads only what it uses.

Rooms, lowest first; a room imports only from the rooms below it (``tests/test_layout.py``
checks this and that there are no import loops):

- ``protocol``, ``names`` (modules): the request/result records and the one jit detector,
  shared with the host.
- ``runtime/``: the environment every process runs in: sources served from memory, loading the
  harness and the candidate, the device (pinning, memory limits), the installed stacks and their
  versions, what Triton's CPU interpreter cannot run, failure classification, the judge's
  channel and exchange files.
- ``sandbox/``: what confines every process that runs candidate or harness code (issue 34):
  the allowlisted environment, Landlock (or bubblewrap), the network namespace (or a seccomp
  filter); beside ``runtime/``, neither imports the other.
- ``gate/``: the static gate on the candidate's AST (run by the host before sending and by the
  target before loading) and the launcher analysis it rests on.
- ``contestant/``: what runs candidate code: the candidate's own process, launch counting, its
  timing loop, autotune and backward support.
- ``judge/``: the judge's side: the peers it forks, the reference process (referee), comparing
  outputs, timing checks, shapes, library-integrity checks, the roofline.
- ``triton/``, ``nki/``: one per kernel language: its evaluation (and Triton's GPU compile
  stage, NKI's neuron-profile metrics). Neither imports the other.
- ``process/``: the programs the targets start: the cold worker, the supervisor and the child
  it forks, the warm zygote and its host, the ssh/Ray agent.

The host imports from here :mod:`.protocol`, :mod:`.names`, :func:`.gate.precheck.precheck.precheck`
(the static gate, run before a request is sent) and :mod:`.judge.peers.roofline` (the peak table and
% of peak): one implementation for host and target.
"""

"""AccelOpt evaluation worker: the entry module of the program that runs ON the target.

Targets ship the onsite package and run this module's :func:`main` (the supervisor's; see
:mod:`accelopt_core.targets.shipping`); ``python -m accelopt_core.onsite.process.worker`` runs it from
an installed package. Standard library only at import time: torch and triton (or NumPy and the
Neuron SDK) are imported in the forked evaluation process. Nothing here relies on ``__file__``.

Wire format
-----------
stdin: one JSON object, ``accelopt_core.onsite.protocol.EvalRequest.to_dict()`` (or
``{"probe": true}`` to ask for the device names and software versions).
stdout: exactly one line ``@@ACCELOPT_RESULT@@ {json}`` (the last line), whose JSON holds the
fields of ``accelopt_core.onsite.protocol.EvalResult``. Anything else on stdout is noise; use
:func:`~.protocol.parse_result_line` to find the result.

Process model (DESIGN.md, "Evaluating a candidate")
---------------------------------------------------
The supervisor (:mod:`.process.supervisor`, the process that read the request) imports nothing heavy
and forks one child per request; it dies with the process that started it
(``PR_SET_PDEATHSIG``). This module is the cold path (``accelopt.evaluation.warmWorkers:
false``); the warm path runs the same supervisor per request inside a long-lived fork server
that imported torch and triton once (:mod:`.process.zygote`). The child (:mod:`.process.child`) is the JUDGE
(issue 10): it starts a new session, becomes non-dumpable, runs the static gate (:mod:`.gate.precheck`),
pins the device (``CUDA_VISIBLE_DEVICES`` / ``NEURON_RT_VISIBLE_CORES``), imports torch and
triton without initialising CUDA (``TRITON_INTERPRET=1`` when no GPU is visible) and forks the
CANDIDATE process (:mod:`.judge.peers`, :mod:`.contestant.process`), the only one that imports the candidate:
its own fds closed, capabilities dropped, a private working and temporary directory, its memory
limited (``RLIMIT_AS`` on CPU, the judge's RSS watchdog: :mod:`.runtime.device`). The judge loads the
original file's harness (:mod:`.runtime.loading`: from strings, registered in :mod:`linecache` under
``<harness:NAME>`` / ``<candidate:NAME>`` so ``inspect.getsource`` works for ``triton.jit``),
makes every input, computes every reference, and asks the candidate process for raw outputs,
timing samples and launch counts (:mod:`.runtime.channel`, :mod:`.runtime.exchange`); it checks correctness on
every seed (:mod:`.judge.compare`), bounds the timing by its own clock (:mod:`.judge.timing`,
:mod:`.contestant.timing`), then checks the timing against the roofline (:mod:`.judge.roofline`). NKI candidates
still run inside the judge (:mod:`.nki.evaluation`). The fd 1 and 2 of both go to pipes (stdout output
becomes a warning, stderr a tail for crash messages); only the judge writes the result, to a
third pipe. The supervisor enforces the timeout by killing the child's process group (the
candidate process included) and classifies a child, or a candidate process the judge saw die,
that died without a result (signal or exit code).
"""

from __future__ import annotations

from .supervisor import main

__all__ = ["main"]

if __name__ == "__main__":
    main()

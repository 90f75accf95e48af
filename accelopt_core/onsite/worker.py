"""AccelOpt evaluation worker: the entry module of the program that runs ON the target.

Targets ship the onsite package and run this module's :func:`main` (the supervisor's; see
:mod:`accelopt_core.targets.shipping`); ``python -m accelopt_core.onsite.worker`` runs it from
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
The supervisor (:mod:`.supervisor`, the process that read the request) imports nothing heavy
and forks one child per request; it dies with the process that started it
(``PR_SET_PDEATHSIG``). This module is the cold path (``accelopt.evaluation.warmWorkers:
false``); the warm path runs the same supervisor per request inside a long-lived fork server
that imported torch and triton once (:mod:`.zygote`). The child (:mod:`.child`) starts a new session, runs the
static gate (:mod:`.gate`), pins the device (``CUDA_VISIBLE_DEVICES`` /
``NEURON_RT_VISIBLE_CORES``), imports torch and triton (with ``TRITON_INTERPRET=1`` when there
is no CUDA), limits its memory (``RLIMIT_AS`` on CPU, plus an RSS watchdog thread:
:mod:`.runtime`), loads the original file and the candidate from strings (:mod:`.loading`: no
temporary files; the sources are registered in :mod:`linecache` under ``<harness:NAME>`` /
``<candidate:NAME>`` so ``inspect.getsource`` works for ``triton.jit``), checks correctness on
every seed (:mod:`.compare`) and times the entry (:mod:`.triton_eval`, :mod:`.nki_eval`), then
checks the timing against the roofline (:mod:`.roofline`). The child's fd 1 and 2 go to pipes
(stdout output becomes a warning, stderr a tail for crash messages); its result goes to a third
pipe. The supervisor enforces the timeout by killing the child's process group and classifies a
child that died without a result (signal or exit code).
"""

from __future__ import annotations

from .supervisor import main

__all__ = ["main"]

if __name__ == "__main__":
    main()

"""The environment every on-target process runs in (lowest room: imports only ``protocol`` and
``names`` besides itself): ``sources`` (the user's import closure served from memory),
``loading`` (the harness and the candidate as modules), ``device`` (device pinning, memory
limits, the hang dump, whether a GPU is visible), ``stacks`` (which NKI/Neuron stack is
installed, versions), ``interpreter`` (what Triton's CPU interpreter cannot run, named with the
way out), ``failures`` (exceptions -> classified results), ``channel`` and ``exchange`` (the
judge's pipe protocol and exchange files)."""

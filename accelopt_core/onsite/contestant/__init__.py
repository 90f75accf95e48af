"""What runs candidate code (issue 10: the candidate's own process, which the judge never
trusts): ``process`` (the contestant's serve loop: load, call, time, answer), ``launches``
(counting kernel launches), ``timing`` (the candidate-side timing loop with in-place input
pools and L2 flushes), ``autotune`` (@triton.autotune under the interpreter) and ``backward``
(forward + backward calls). Imports ``runtime``, ``protocol`` and ``names`` only."""

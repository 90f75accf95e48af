"""The static gate (DESIGN.md, rule 2; issue 10): a candidate's AST against the evaluation rules,
nothing imported or run. ``precheck`` (the entry: :func:`.precheck.precheck`), ``rules`` (rule
names and the forbidden names), ``stack`` (issue 53: the modules a candidate may import, and
the parts of torch, triton and numpy it may not reach), ``original`` (what the baseline already
has, its imports among it; changed statements), ``scan`` (the one walk over changed code),
``imports`` (the scan's checks of imports and the names they resolve), ``launcher`` (what the
entry reaches, launches, dead code, module state) and ``compute`` (torch/NumPy compute in a
launcher).
Imports ``runtime``, ``protocol`` and ``names`` only."""

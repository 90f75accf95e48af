"""The static gate (DESIGN.md, rule 2; issue 10): a candidate's AST against the evaluation rules,
nothing imported or run. ``precheck`` (the entry: :func:`.precheck.precheck`), ``rules`` (rule
names and the forbidden names), ``original`` (what the baseline already has; changed
statements), ``scan`` (the one walk over changed code), ``launcher`` (what the entry reaches,
launches, dead code, module state) and ``compute`` (torch/NumPy compute in a launcher).
Imports ``runtime``, ``protocol`` and ``names`` only."""

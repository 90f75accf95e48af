"""The judge's side of an evaluation (DESIGN.md, "Evaluating a candidate"): ``peers`` (forking
the candidate and reference processes, the judge's handles on them), ``rules`` (the judge's
rejections), ``referee`` (the reference process: the original harness's inputs and
references), ``compare`` (outputs against references), ``timing`` (checks of the candidate's
timing against the judge's clock; interpreter timing), ``shapes`` (BENCH["shapes"]),
``integrity`` (library poisoning) and ``roofline`` (peaks, % of peak, plausibility). Imports
``contestant``, ``gate``, ``runtime``, ``protocol`` and ``names``."""

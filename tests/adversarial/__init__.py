"""The adversarial suite of issue 10: reward-hack candidates for examples/triton/softmax.py
(``candidates/``), served by the scripted LLM double to the whole product (search, profile,
language server), asserted never ranked, never offered, never remembered as a speedup."""

"""Triton kernels: ``evaluation`` (the judge's Triton evaluation: stack, seeds, timing) and the
GPU compile stage (issue 21). Imports ``judge`` and the rooms below it; never ``nki``."""

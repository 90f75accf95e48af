"""The CUDA tier (issue 31): tests marked ``gpu``, skipped with the reason without CUDA."""

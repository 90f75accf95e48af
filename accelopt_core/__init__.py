"""AccelOpt engine: kernel discovery, evaluation, beam search, agents and optimization memory.

Editor-agnostic: nothing here imports pygls. See ../shared/DESIGN.md for the layers.
"""

__version__ = "0.1.0"

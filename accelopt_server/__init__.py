"""AccelOpt language server: thin LSP handlers over accelopt_core."""

from accelopt_core import __version__

__all__ = ["__version__"]

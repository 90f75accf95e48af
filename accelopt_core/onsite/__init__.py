"""Everything that runs ON the target, standard library only (plus the kernel's own stack:
torch + triton, or numpy + the Neuron SDK). Targets ship this package's sources and import them
from memory on the remote; :mod:`.protocol` is the only module the host shares with it."""

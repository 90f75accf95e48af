"""NKI kernels: ``evaluation`` (simulated on CPU or on a NeuronCore) and ``profile``
(neuron-profile's summary metrics). Imports ``judge`` and the rooms below it; never
``triton``."""

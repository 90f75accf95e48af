"""The optimization memory (experiences: slow->fast rewrites and their rules) and the results
store, on diskcache; TF-IDF vectors and ranking for retrieval.

Modules: ``experience`` (the item, its id, merging, JSON lines), ``vectors`` (hashed TF-IDF),
``ranking`` (retrieval scores, hover mentions, eviction order), ``store`` (the diskcache memory
and its disk errors), ``results`` (the search-results store), ``runs`` (each search's run
folder: report, plans and the agents' transcript).
"""

from accelopt_core.memory.experience import (
    HACK_PREFIX,
    HOST_TIMINGS,
    Experience,
    experience_id,
    timing_label,
)
from accelopt_core.memory.ranking import DEVICE_PENALTY
from accelopt_core.memory.results import ResultsStore
from accelopt_core.memory.runs import RunStore
from accelopt_core.memory.store import MemoryUnavailable, OptimizationMemory
from accelopt_core.memory.vectors import FEATURE_DIM, FEATURE_VERSION

__all__ = [
    "DEVICE_PENALTY",
    "HACK_PREFIX",
    "HOST_TIMINGS",
    "FEATURE_DIM",
    "FEATURE_VERSION",
    "Experience",
    "MemoryUnavailable",
    "OptimizationMemory",
    "ResultsStore",
    "RunStore",
    "experience_id",
    "timing_label",
]

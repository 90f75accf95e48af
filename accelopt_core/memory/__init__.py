"""The optimization memory (experiences: slow->fast rewrites and their rules) and the results
store, on diskcache; TF-IDF vectors and ranking for retrieval."""

from accelopt_core.memory.store import (
    DEVICE_PENALTY,
    FEATURE_DIM,
    FEATURE_VERSION,
    Experience,
    MemoryUnavailable,
    OptimizationMemory,
    ResultsStore,
    experience_id,
)

__all__ = [
    "DEVICE_PENALTY",
    "FEATURE_DIM",
    "FEATURE_VERSION",
    "Experience",
    "MemoryUnavailable",
    "OptimizationMemory",
    "ResultsStore",
    "experience_id",
]

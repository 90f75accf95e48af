"""Host side of evaluation: the evaluator (precheck, cache, target) and the evaluation cache."""

from accelopt_core.evaluation.evaluator import (
    CACHEABLE_STATUSES,
    EvaluationCache,
    Evaluator,
    cache_key,
)

__all__ = ["CACHEABLE_STATUSES", "EvaluationCache", "Evaluator", "cache_key"]

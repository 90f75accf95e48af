"""Host side of evaluation: the evaluator (precheck, cache, target) and the evaluation cache.

Modules: ``cache`` (the cache key and the diskcache cache of verdicts), ``evaluator`` (gate,
cache and target in front of every candidate evaluation).
"""

from accelopt_core.evaluation.cache import CACHEABLE_STATUSES, EvaluationCache, cache_key
from accelopt_core.evaluation.evaluator import Evaluator

__all__ = ["CACHEABLE_STATUSES", "EvaluationCache", "Evaluator", "cache_key"]

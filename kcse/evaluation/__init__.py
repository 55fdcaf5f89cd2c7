"""Evaluation of sentence encoders: STS correlations and a training callback."""

from kcse.lazy_exports import lazy_exports

_EXPORTS = {
    "evaluate_sts": "kcse.evaluation.sts",
    "UndefinedCorrelationError": "kcse.evaluation.sts",
    "STSEvaluator": "kcse.evaluation.sts_evaluator",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

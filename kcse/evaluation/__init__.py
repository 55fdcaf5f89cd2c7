"""Evaluation of sentence encoders: STS correlations, a training callback,
anisotropy diagnostics, and MTEB: result files (`mteb_results.py`) and a
model adapter (`mteb_model.py`; the `mteb` package is needed only there)."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "evaluate_sts": "kcse.evaluation.sts",
    "UndefinedCorrelationError": "kcse.evaluation.sts",
    "STSEvaluator": "kcse.evaluation.sts_evaluator",
    "token_frequencies": "kcse.evaluation.token_counts",
    "embedding_statistics_by_frequency": "kcse.evaluation.embedding_statistics",
    "top_k_removal_curve": "kcse.evaluation.top_k_removal",
    "alignment": "kcse.evaluation.alignment_and_uniformity",
    "uniformity": "kcse.evaluation.alignment_and_uniformity",
    "alignment_uniformity": "kcse.evaluation.alignment_and_uniformity",
    "anisotropy_report": "kcse.evaluation.anisotropy",
    "write_mteb_results": "kcse.evaluation.mteb_results",
    "MTEBEncoder": "kcse.evaluation.mteb_model",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

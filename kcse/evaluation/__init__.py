"""Evaluation of sentence encoders: STS correlations, a training callback,
anisotropy diagnostics, and MTEB: result files (`mteb_results.py`) and a
model adapter (`mteb_model.py`; the `mteb` package is needed only there)."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)

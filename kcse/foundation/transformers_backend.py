"""transformers (and so sentence-transformers and mteb) on torch beside kcse.

kcse's environment has TensorFlow with Keras 3. transformers, when it finds
TensorFlow, loads its TensorFlow models, which need tf-keras (Keras 2): without
it, `import sentence_transformers` (and `mteb.evaluate` of a
`kcse.evaluation.MTEBEncoder`) stop with transformers' "Your currently
installed version of Keras is Keras 3 ... install tf-keras". `import kcse`
therefore sets `USE_TF=0`, transformers' own switch for its torch side only,
when tf-keras is not installed (its TensorFlow side cannot load then) and the
user has not set `USE_TF`: a value the user set is kept. It takes effect
where transformers is imported after kcse.

Example:

```python
from kcse.foundation.transformers_backend import use_torch_transformers

assert use_torch_transformers({"USE_TF": "1"}) == "1"  # The user's value stays.
print(use_torch_transformers({}))  # "0" where tf-keras is not installed.
```
"""

import importlib.util
import os


def use_torch_transformers(environ=os.environ):
    """Sets `environ["USE_TF"] = "0"` unless it is set or tf-keras is installed.

    Returns the value of `USE_TF` afterwards (None when unset).
    """
    if "USE_TF" not in environ and importlib.util.find_spec("tf_keras") is None:
        environ["USE_TF"] = "0"
    return environ.get("USE_TF")

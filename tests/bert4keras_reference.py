"""bert4keras 0.11.5's `Tokenizer`, run in a child process: a test reference.

Jianlin Su's own tokenizer code (`bert4keras.tokenizers.Tokenizer`), the
one his evaluation scripts and the WoBERT / RoFormer READMEs build:
`Tokenizer(dict_path, do_lower_case=True)`, with
`pre_tokenize=lambda s: jieba.cut(s, HMM=False)` for the jieba families. It
is independent of kcse's tokenizers: a separate, pure-Python implementation
by the models' author, sharing only jieba, which the rule itself names. It
is installed with `pip install --no-deps bert4keras==0.11.5` (its metadata
asks for keras<=2.3.1; the tokenizer needs none of it).

bert4keras runs in a child process: importing it patches `keras.backend`
and registers global Keras custom objects (`gelu`, `swish`, ...), which must
not leak into the other tests of a pytest worker; and the child's environment
has no `TF_KERAS` (bert4keras cannot import under Keras 3 with it set).
"""

import json
import os
import subprocess
import sys

BERT4KERAS_PIP = "pip install --no-deps bert4keras==0.11.5"

# Reads {"vocab", "output", "jobs": {name: {"options", "method", "calls"}}}
# from stdin; writes {"version", "token_dict", "results": {name: [...]}}.
# An option "jieba": true cuts words with jieba first (WoBERT, RoFormer).
BERT4KERAS_CHILD = """
import json, sys
import bert4keras
from bert4keras.tokenizers import Tokenizer, load_vocab

request = json.load(sys.stdin)
results = {}
for name, job in request["jobs"].items():
    options = dict(job["options"])
    if options.pop("jieba", False):
        import jieba
        options["pre_tokenize"] = lambda s: jieba.cut(s, HMM=False)
    tokenizer = Tokenizer(request["vocab"], **options)
    method = getattr(tokenizer, job["method"])
    results[name] = [method(*args, **kwargs) for args, kwargs in job["calls"]]
with open(request["output"], "w", encoding="utf-8") as file:
    json.dump(
        {
            "version": bert4keras.__version__,
            "token_dict": load_vocab(request["vocab"]),
            "results": results,
        },
        file,
    )
"""


def run_bert4keras(vocab_file, jobs, output):
    """Runs `jobs` with bert4keras' `Tokenizer` on `vocab_file` in a child.

    `jobs` maps a name to `(options, method, calls)`: `Tokenizer` keyword
    arguments (and `"jieba": True` for WoBERT's `pre_tokenize`), a method
    name and a list of `(args, kwargs)`. Returns the child's answer (see
    `BERT4KERAS_CHILD`).
    """
    request = {
        "vocab": str(vocab_file),
        "output": str(output),
        "jobs": {
            name: {"options": options, "method": method, "calls": calls}
            for name, (options, method, calls) in jobs.items()
        },
    }
    env = {k: v for k, v in os.environ.items() if k != "TF_KERAS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["CUDA_VISIBLE_DEVICES"] = ""
    child = subprocess.run(
        [sys.executable, "-c", BERT4KERAS_CHILD],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert child.returncode == 0, (
        f"bert4keras failed (it is installed with `{BERT4KERAS_PIP}`):\n"
        + child.stderr[-3000:]
    )
    with open(output, encoding="utf-8") as file:
        answer = json.load(file)
    assert answer["version"] == "0.11.5", answer["version"]
    return answer

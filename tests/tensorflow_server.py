"""A process that imports only TensorFlow and serves exported SavedModels.

TF Serving cannot be installed here: its contract is proven by a fresh
interpreter that imports tensorflow (and tensorflow-text for the strings
signature) and neither kcse nor keras-hub.
"""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np

# Run by a fresh interpreter: TensorFlow (and tensorflow-text for strings)
# only. It serves one exported model per line of stdin, `[path, inputs,
# output]`, each time with proof that neither kcse nor keras-hub was
# imported, and answers each line with one line: "served" or the error.
# The model last loaded is kept while its saved_model.pb is the same file
# (inode and modification time), so that a model served in many chunks
# loads once.
SERVER = """
import json, os, sys, traceback
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the string signature's ops)
loaded = {}
for line in sys.stdin:
    try:
        path, inputs, output = json.loads(line)
        graph = os.stat(os.path.join(path, "saved_model.pb"))
        key = (path, graph.st_ino, graph.st_mtime_ns)
        if key not in loaded:
            loaded.clear()
            loaded[key] = tf.saved_model.load(path)
        model = loaded[key]
        arrays = np.load(inputs, allow_pickle=False)
        if "texts" in arrays:
            result = model.signatures["serving_default"](texts=tf.constant(arrays["texts"]))
            np.save(output + ".strings.npy", result["embedding"].numpy())
        features = {k: tf.constant(arrays[k]) for k in arrays if k != "texts"}
        result = model.signatures["encode_ids"](**features)
        np.save(output + ".ids.npy", result["embedding"].numpy())
        with open(output + ".prompts.json", "w") as file:
            json.dump({k: v.numpy().decode() for k, v in model.prompts().items()}, file)
        with open(output + ".default_prompt.txt", "w") as file:
            file.write(model.default_prompt().numpy().decode())
        # TensorFlow itself imports Keras; kcse and keras-hub must not be needed.
        assert not any(m.split(".")[0] in ("keras_hub", "kcse") for m in sys.modules)
        answer = "served"
    except Exception:
        answer = traceback.format_exc()
    print(json.dumps(answer), flush=True)
"""


class Server:
    """The TensorFlow-only process that serves this module's exported models.

    Started once: each start imports TensorFlow, seconds of CPU.
    """

    def __init__(self, folder):
        self.log = folder / "server.stderr"
        with open(self.log, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=stderr, text=True,
                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
            )

    def serve(self, path, texts, features):
        """Vectors of the exported model: (from strings or None, from ids).

        Its `prompts()` are left in `served.prompts.json` beside `path`, its
        `default_prompt()` in `served.default_prompt.txt`."""
        inputs = pathlib.Path(path).parent / "inputs.npz"
        arrays = {key: np.asarray(value).astype("int32") for key, value in features.items()}
        if texts is not None:
            arrays["texts"] = np.array([t.encode("utf-8") for t in texts], dtype=np.bytes_)
        np.savez(inputs, **arrays)
        output = str(pathlib.Path(path).parent / "served")
        self.process.stdin.write(json.dumps([str(path), str(inputs), output]) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the server ended:\n{self.log.read_text()[-3000:]}"
        assert json.loads(answer) == "served", json.loads(answer)[-3000:]
        strings = np.load(output + ".strings.npy") if texts is not None else None
        return strings, np.load(output + ".ids.npy")

    def close(self):
        self.process.stdin.close()
        self.process.stdout.close()
        self.process.wait(timeout=60)

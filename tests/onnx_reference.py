"""ONNX Runtime run on an exported ONNX folder the way a client runs it:
transformers' tokenizer reading the folder, then the session; none of
kcse's code (the reference of the ONNX export's and `kcse.OnnxEncoder`'s tests)."""

import numpy as np


def onnx_vectors(folder, texts, model="model.onnx", batch_size=256):
    """The exported folder's vectors of `texts`, by transformers' tokenizer
    and ONNX Runtime (the way the module docstring tells clients to run it)."""
    import onnxruntime
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    session = onnxruntime.InferenceSession(str(folder / model), options,
                                           providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_inputs()]
    vectors = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                          return_tensors="np")
        (output,) = session.run(["sentence_embedding"], {name: batch[name] for name in names})
        vectors.append(output)
    return np.concatenate(vectors)

"""The model families kcse reads from original Google-format TF checkpoints.

Used by `kcse.models.from_checkpoint` and, without importing Keras, by
the commands' argument checks (`PATH:family`).
"""

FAMILIES = ("bert", "roberta", "simbert", "wobert", "nezha", "roformer")
# Families whose tokenizer segments words with jieba (word-level vocabulary).
JIEBA_FAMILIES = ("wobert", "roformer")
# What needs an optional package, as `kcse.foundation.optional_packages` names it:
# TensorFlow reads the checkpoints (`tf.train.load_checkpoint`), jieba cuts
# the words of the JIEBA_FAMILIES.
CHECKPOINT_FEATURE = "reading a Google-layout checkpoint (Su's models, PATH:family)"
JIEBA_FEATURE = "WoBERT and RoFormer's tokenizer"

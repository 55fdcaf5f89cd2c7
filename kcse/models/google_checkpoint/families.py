"""The model families kcse reads from original Google-format TF checkpoints.

Used by `kcse.models.from_checkpoint` and, without importing Keras, by
the commands' argument checks (`PATH:family`).
"""

FAMILIES = ("bert", "roberta", "simbert", "wobert", "nezha", "roformer")
# Families whose tokenizer segments words with jieba (word-level vocabulary).
JIEBA_FAMILIES = ("wobert", "roformer")

"""The model families kcse reads from original Google-format TF checkpoints."""

FAMILIES = ("bert", "roberta", "simbert", "wobert", "nezha", "roformer")
# Families whose tokenizer segments words with jieba (word-level vocabulary).
JIEBA_FAMILIES = ("wobert", "roformer")

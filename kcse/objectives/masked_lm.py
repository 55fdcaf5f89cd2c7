"""The masked-language-model auxiliary loss of SimCSE (princeton-nlp's `--do_mlm`).

princeton-nlp/SimCSE (`train.py`, `OurDataCollatorWithPadding.mask_tokens`;
`simcse/models.py`, `cl_forward`) masks each row of the batch anew, BERT's
way: every token that is not special (`tokenizer.get_special_tokens_mask`:
[CLS], [SEP], [PAD], [UNK], [MASK]) is chosen with probability 0.15; a
chosen token becomes [MASK] with probability 0.8, else with probability 0.5
a token drawn uniformly from the whole vocabulary (special tokens included),
else stays. The encoder runs on the masked rows, an MLM head (BERT's
`BertLMPredictionHead`) predicts every position, and the cross-entropy is
averaged over the chosen tokens only.

The head is `BertLMPredictionHead` as their `train.py` runs it: untied, its
decoder starting as a copy of the token embedding. `BertForCL.__init__`
builds `self.lm_head = BertLMPredictionHead(config)` and `cl_init` draws it
with `init_weights()` (BERT's `_init_weights`: Linear weights normal(0,
`initializer_range` 0.02), biases zero, LayerNorm at one and zero).
`from_pretrained` alone leaves that draw: a BERT checkpoint names its head
`cls.predictions.*`, not `lm_head.*` (transformers lists `lm_head.*` as
"newly initialized"). But `train.py` then loads it, for `--do_mlm` with a
BERT model: `model.lm_head.load_state_dict(BertForPreTraining.
from_pretrained(...).cls.predictions.state_dict())` (line 373 at 49fa580,
there since `train.py`'s first commit). So their head starts as the
checkpoint's pretrained head, transform, LayerNorm and output bias; its
decoder weight is the pretrained one, which `BertForPreTraining` ties to
the token embedding, copied by value into `lm_head.decoder.weight`, a
parameter of its own. Nothing ties it afterwards: `tie_weights` ties only
`get_output_embeddings()`, which `BertForCL` does not define and
transformers 4.2.1 (the version their requirements pin) returns as None.
The decoder and the embedding start equal and train apart. (`RobertaForCL`'s
`lm_head` loads from RoBERTa checkpoints by name: the same outcome.)

kcse does the same for the decoder, an untied copy of the token embedding,
and draws the transform, LayerNorm and output bias as `_init_weights` draws
them: kcse's backbones do not carry a checkpoint's pretrained MLM head, so
there it differs from their first step. The loss is `cl_forward`'s:
`loss + mlm_weight * CrossEntropyLoss()(scores, labels)` with the labels of
unchosen tokens -100 (`--mlm_weight` 0.1, `--mlm_probability` 0.15).

Example:
```python
import numpy as np
from kcse.objectives.masked_lm import mask_tokens

ids = np.array([[2, 7, 8, 9, 3, 0]])             # [CLS] a b c [SEP] [PAD]
padding = ids != 0
masked_ids, chosen = mask_tokens(ids, padding, special_ids=[0, 1, 2, 3, 4],
                                 mask_id=4, vocabulary_size=40, probability=0.5,
                                 seed=1)
assert not np.asarray(chosen)[0, [0, 4, 5]].any()  # never [CLS], [SEP], padding

import keras
from kcse.objectives.masked_lm import masked_lm_head
embedding = keras.layers.Embedding(40, 8)
embedding.build()
head = masked_lm_head(embedding)  # decoder: a copy of the table, untied
head(np.zeros((1, 6, 8)), mask_positions=np.arange(6)[None]).shape  # (1, 6, 40)
```
"""

import keras
import keras_hub
from keras import ops

from kcse.models.embedding_lookup import token_embedding
from kcse.objectives.heads import INITIALIZER_RANGE

# princeton-nlp/SimCSE `train.py`: `--mlm_probability` 0.15 and BERT's
# 80% [MASK] / 10% random / 10% unchanged.
MLM_PROBABILITY = 0.15
MASK_FRACTION = 0.8
RANDOM_FRACTION_OF_REST = 0.5


def mlm_problem(encoder):
    """Why the MLM loss cannot train `encoder`, or None: it masks with the
    preprocessor's tokenizer ([MASK]) and its head's decoder starts as a
    copy of the backbone's token embedding, of the backbone's width."""
    tokenizer = getattr(encoder.preprocessor, "tokenizer", None)
    if getattr(tokenizer, "mask_token_id", None) is None:
        return "the MLM loss needs the encoder's preprocessor with a [MASK] token; it has none"
    backbone = encoder.backbone
    embedding = token_embedding(backbone)
    if embedding is None or embedding.output_dim != backbone.hidden_dim:
        return (f"the MLM head's decoder starts as a copy of the token embedding; "
                f"{type(backbone).__name__} has no token embedding of its width "
                f"{backbone.hidden_dim}")
    return None


def special_token_ids(tokenizer):
    """The ids MLM never masks: the tokenizer's special tokens and its
    unknown token, as transformers' `get_special_tokens_mask(…,
    already_has_special_tokens=True)` takes them (`all_special_ids`)."""
    ids = set(getattr(tokenizer, "special_token_ids", None) or ())
    unknown = getattr(tokenizer, "oov_token", None) or getattr(tokenizer, "unk_token", None)
    if unknown is not None:
        ids.add(tokenizer.token_to_id(unknown))
    return sorted(int(i) for i in ids)


def mask_tokens(token_ids, padding_mask, special_ids, mask_id, vocabulary_size,
                probability=MLM_PROBABILITY, seed=None):
    """`(masked token ids, chosen)`: BERT's masking of `token_ids` (see the
    module), never of padding or of `special_ids`. `chosen` (bool) marks
    the tokens whose original the loss predicts. `seed`: a
    `keras.random.SeedGenerator` or int."""
    token_ids = ops.convert_to_tensor(token_ids, "int32")
    shape = ops.shape(token_ids)
    special = ops.any(
        ops.equal(ops.expand_dims(token_ids, -1),
                  ops.convert_to_tensor(list(special_ids), "int32")),
        axis=-1,
    )
    candidate = ops.logical_and(ops.cast(padding_mask, "bool"), ops.logical_not(special))

    def draw(rate):
        return ops.less(keras.random.uniform(shape, seed=seed), rate)

    chosen = ops.logical_and(draw(probability), candidate)
    replaced = ops.logical_and(draw(MASK_FRACTION), chosen)
    randomized = ops.logical_and(
        ops.logical_and(draw(RANDOM_FRACTION_OF_REST), chosen), ops.logical_not(replaced)
    )
    random_ids = keras.random.randint(shape, 0, vocabulary_size, seed=seed, dtype="int32")
    masked = ops.where(replaced, ops.cast(mask_id, "int32"),
                       ops.where(randomized, random_ids, token_ids))
    return masked, chosen


def masked_lm_head(embedding, name="mlm_head"):
    """princeton-nlp/SimCSE's MLM head as their `train.py` runs it (see the
    module): keras-hub's `MaskedLMHead` with a decoder of its own, Dense
    (exact GELU) and LayerNorm (ε 1e-12) of the embedding's width, then the
    decoder `(width, vocabulary)` plus a bias per token. The decoder starts
    as a copy of `embedding`'s table (a `keras.layers.Embedding`), untied;
    the rest is drawn as BERT's `_init_weights`: normal(0, 0.02) kernel,
    zero biases, LayerNorm at one and zero."""
    head = keras_hub.layers.MaskedLMHead(
        vocabulary_size=embedding.input_dim,
        intermediate_activation="gelu",  # keras: approximate=False, HF's "gelu".
        layer_norm_epsilon=1e-12,
        kernel_initializer=keras.initializers.RandomNormal(stddev=INITIALIZER_RANGE),
        name=name,
    )
    head.build((None, None, embedding.output_dim))
    head._kernel.assign(ops.transpose(ops.cast(embedding.embeddings, head._kernel.dtype)))
    return head


def masked_lm_loss(head, states, token_ids, chosen):
    """Mean cross-entropy of `head`'s predictions of `token_ids` at the
    `chosen` positions of `states` (`nn.CrossEntropyLoss` with the other
    labels -100); 0 when nothing is chosen (torch gives NaN)."""
    positions = ops.broadcast_to(
        ops.arange(ops.shape(states)[1], dtype="int32"), ops.shape(token_ids)
    )
    logits = ops.cast(head(states, mask_positions=positions), "float32")
    losses = keras.losses.sparse_categorical_crossentropy(
        token_ids, logits, from_logits=True
    )
    weights = ops.cast(chosen, "float32")
    return ops.sum(losses * weights) / ops.maximum(ops.sum(weights), 1.0)

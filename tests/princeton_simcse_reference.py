"""princeton-nlp/SimCSE's training loss in torch: an independent reference.

Transcribed from `simcse/models.py` (commit 49fa580): `MLPLayer`,
`Similarity` and `cl_forward` for the unsupervised batch (two views per
sentence, one device), with its MLM branch on the head their `BertForCL`
runs for `--do_mlm`: HF transformers' own `BertLMPredictionHead`, built by
`BertForCL.from_pretrained` from a BERT checkpoint and loaded as `train.py`
loads it. It uses torch
and transformers only, nothing of kcse, so a mistake in kcse cannot be
copied into the expected value; kcse gives it only the pooled vectors, the
encoder's states of the masked rows and the MLP's weights to load.
"""

import copy

import numpy as np
import torch
from torch import nn
from transformers import BertConfig
from transformers import BertForPreTraining
from transformers import BertModel
from transformers import BertPreTrainedModel
from transformers.models.bert.modeling_bert import BertLMPredictionHead


class MLPLayer(nn.Module):
    """`simcse/models.py` `MLPLayer`: Linear(hidden, hidden) + Tanh over [CLS]."""

    def __init__(self, hidden_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = nn.Tanh()

    def forward(self, features):
        return self.activation(self.dense(features))


def mlp_layer(kernel, bias):
    """An `MLPLayer` holding a Keras Dense layer's `kernel` (in, out) and
    `bias`, in float64 (torch's Linear weight is the kernel transposed)."""
    mlp = MLPLayer(kernel.shape[0]).double()
    with torch.no_grad():
        mlp.dense.weight.copy_(torch.from_numpy(np.asarray(kernel, "float64").T))
        mlp.dense.bias.copy_(torch.from_numpy(np.asarray(bias, "float64")))
    return mlp


def mlp_output(kernel, bias, features):
    """`MLPLayer` (`mlp_layer(kernel, bias)`) of `features`, as numpy: the
    vectors of `sentemb_forward` with `pooler_type "cls"` and without
    `--mlp_only_train`, for `features` the [CLS] states."""
    with torch.no_grad():
        return mlp_layer(kernel, bias)(torch.from_numpy(np.asarray(features, "float64"))).numpy()


def cl_forward_loss(pooler_output, temperature=0.05, mlp=None):
    """`cl_forward`'s loss of `pooler_output` `(N, 2, hidden)` (the
    `Pooler`'s output, views z1, z2), with `mlp` applied first where given
    (`pooler_type == "cls"`, as in training whether or not
    `mlp_only_train`): `cos_sim = Similarity(temp)(z1.unsqueeze(1),
    z2.unsqueeze(0))`, `CrossEntropyLoss()(cos_sim, arange(N))`."""
    pooler_output = torch.from_numpy(np.asarray(pooler_output, "float64"))
    with torch.no_grad():
        if mlp is not None:
            pooler_output = mlp(pooler_output)
        z1, z2 = pooler_output[:, 0], pooler_output[:, 1]
        cos_sim = nn.CosineSimilarity(dim=-1)(z1.unsqueeze(1), z2.unsqueeze(0)) / temperature
        labels = torch.arange(cos_sim.size(0)).long()
        return float(nn.CrossEntropyLoss()(cos_sim, labels))


class BertForCL(BertPreTrainedModel):
    """`simcse/models.py` `BertForCL.__init__` with `--do_mlm`, the modules
    its MLM branch runs: `self.bert = BertModel(config,
    add_pooling_layer=False)`, `self.lm_head = BertLMPredictionHead(config)`,
    then `cl_init`'s `init_weights()` (its pooler, MLP and `Similarity` are
    left out: no parameters of the MLM branch)."""

    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.lm_head = BertLMPredictionHead(config)
        self.init_weights()

    def get_output_embeddings(self):
        # transformers 4.2.1's (their requirements.txt): None, so nothing is
        # tied. Later versions return `lm_head` for a model that has one, and
        # tying then adds an `lm_head.weight` that `forward` never reads.
        return None


def bert_for_cl(folder, vocabulary_size, hidden_size, seed=0):
    """`(model, loading_info, checkpoint)`: `BertForCL.from_pretrained(
    folder)` (float32; transformers draws anew what the checkpoint does
    not name), after `folder` receives a random `BertForPreTraining` of this
    size (a BERT checkpoint: its pretrained head under `cls.predictions.*`,
    as Google's and HF's BERTs have it), returned as `checkpoint`."""
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=vocabulary_size, hidden_size=hidden_size,
                        num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=2 * hidden_size, hidden_act="gelu",
                        layer_norm_eps=1e-12)
    checkpoint = BertForPreTraining(config)
    head = checkpoint.cls.predictions  # Pretrained: unlike a new one.
    with torch.no_grad():
        for parameter in [*head.transform.parameters(), head.bias]:
            parameter.add_(torch.randn_like(parameter))
    checkpoint.save_pretrained(folder)
    model, info = BertForCL.from_pretrained(folder, output_loading_info=True)
    return model, info, checkpoint


def load_pretrained_lm_head(model, folder):
    """`train.py` for `--do_mlm` with a BERT model, after `from_pretrained`:
    `pretrained_model = BertForPreTraining.from_pretrained(folder)`,
    `model.lm_head.load_state_dict(pretrained_model.cls.predictions.
    state_dict())`."""
    pretrained_model = BertForPreTraining.from_pretrained(folder)
    model.lm_head.load_state_dict(pretrained_model.cls.predictions.state_dict())


def prediction_scores(lm_head, last_hidden_state):
    """`cl_forward`'s `prediction_scores = cls.lm_head(mlm_outputs.
    last_hidden_state)`, on a float64 copy of `lm_head`."""
    states = torch.from_numpy(np.asarray(last_hidden_state, "float64"))
    with torch.no_grad():
        return copy.deepcopy(lm_head).double()(states)


def cl_forward_mlm_loss(last_hidden_state, mlm_labels, lm_head):
    """`cl_forward`'s MLM branch: `prediction_scores`, then
    `CrossEntropyLoss()(prediction_scores.view(-1, vocab_size),
    mlm_labels.view(-1))` with the labels of unchosen tokens -100 (the
    collator's `labels[~masked_indices] = -100`)."""
    scores = prediction_scores(lm_head, last_hidden_state)
    labels = torch.from_numpy(np.asarray(mlm_labels, "int64"))
    return float(nn.CrossEntropyLoss()(scores.view(-1, scores.size(-1)), labels.view(-1)))

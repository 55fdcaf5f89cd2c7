"""princeton-nlp/SimCSE's training loss in torch: an independent reference.

Transcribed from `simcse/models.py` (commit 49fa580): `MLPLayer`,
`Similarity` and `cl_forward` for the unsupervised batch (two views per
sentence, one device), with its MLM branch on HF transformers' own
`BertLMPredictionHead` (the head `BertForCL` builds for `--do_mlm`). It
uses torch and transformers only, nothing of kcse, so a mistake in kcse
cannot be copied into the expected value; kcse gives it only the pooled
vectors, the encoder's states of the masked rows and the weights to load.
"""

import numpy as np
import torch
from torch import nn
from transformers import BertConfig
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


def lm_prediction_head(dense_kernel, dense_bias, gamma, beta, embeddings, output_bias,
                       hidden_act="gelu"):
    """transformers' `BertLMPredictionHead` (float64) holding Keras weights:
    the transform's Dense (kernel (in, out)) and LayerNorm, the decoder =
    the token embedding table `(vocab, hidden)`, and the output bias."""
    vocabulary, hidden = np.shape(embeddings)
    config = BertConfig(vocab_size=vocabulary, hidden_size=hidden, hidden_act=hidden_act,
                        layer_norm_eps=1e-12)
    head = BertLMPredictionHead(config).double()

    def tensor(array):
        return torch.from_numpy(np.asarray(array, "float64"))

    with torch.no_grad():
        head.transform.dense.weight.copy_(tensor(dense_kernel).T)
        head.transform.dense.bias.copy_(tensor(dense_bias))
        head.transform.LayerNorm.weight.copy_(tensor(gamma))
        head.transform.LayerNorm.bias.copy_(tensor(beta))
        head.decoder.weight.copy_(tensor(embeddings))
        head.bias.copy_(tensor(output_bias))
    return head


def cl_forward_mlm_loss(last_hidden_state, mlm_labels, lm_head):
    """`cl_forward`'s MLM branch: `prediction_scores = cls.lm_head(
    mlm_outputs.last_hidden_state)`, `CrossEntropyLoss()(scores.view(-1,
    vocab_size), mlm_labels.view(-1))` with the labels of unchosen tokens
    -100 (the collator's `labels[~masked_indices] = -100`)."""
    states = torch.from_numpy(np.asarray(last_hidden_state, "float64"))
    labels = torch.from_numpy(np.asarray(mlm_labels, "int64"))
    with torch.no_grad():
        scores = lm_head(states)
        return float(nn.CrossEntropyLoss()(scores.view(-1, scores.size(-1)), labels.view(-1)))

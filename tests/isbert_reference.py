"""yanzhangnlp/IS-BERT's CNN, mean pooling and loss in torch: an
independent reference.

Transcribed from the authors' code at commit ea6622c (the files unchanged
since 65f22bc): `sentence_transformers/models/CNN.py` (three
`nn.Conv1d(hidden, 256, k, padding=(k - 1) / 2)`, k = 1, 3, 5, outputs
concatenated, no activation), `models/Pooling.py` (the mean over the
attention mask) and `losses/MutualInformationLoss.py` (`forward`,
`create_masks`, `local_global_loss_` with `measure="JSD"`: the padded tokens
sliced off, every remaining token against every sentence vector of the
batch). torch only, nothing of kcse: kcse gives the token states, the mask
and the convolutions' weights to load.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F


def conv_weights(kernel, bias):
    """A Keras Conv1D's `kernel` (k, in, out) and `bias` as `nn.Conv1d`'s
    weight (out, in, k) and bias, float64."""
    weight = torch.from_numpy(np.asarray(kernel, "float64")).permute(2, 1, 0).contiguous()
    return weight, torch.from_numpy(np.asarray(bias, "float64"))


def isbert_cnn(token_states, convolutions):
    """`CNN.forward`: `token_embeddings.transpose(1, -1)`, each conv, then
    `torch.cat(vectors, 1).transpose(1, -1)`. `convolutions`: (weight, bias)."""
    states = torch.from_numpy(np.asarray(token_states, "float64")).transpose(1, -1)
    vectors = [F.conv1d(states, weight, bias, padding=int((weight.shape[-1] - 1) / 2))
               for weight, bias in convolutions]
    return torch.cat(vectors, 1).transpose(1, -1)


def isbert_mean(token_embeddings, attention_mask):
    """`Pooling.forward` with `pooling_mode_mean_tokens`: the masked mean,
    the count clamped at 1e-9."""
    mask = torch.from_numpy(np.asarray(attention_mask).astype("float64"))
    expanded = mask.unsqueeze(-1).expand(token_embeddings.size())
    return torch.sum(token_embeddings * expanded, 1) / torch.clamp(expanded.sum(1), min=1e-9)


def create_masks(lens_a):
    pos_mask = torch.zeros((int(np.sum(lens_a)), len(lens_a)), dtype=torch.float64)
    neg_mask = torch.ones((int(np.sum(lens_a)), len(lens_a)), dtype=torch.float64)
    temp = 0
    for idx in range(len(lens_a)):
        for j in range(temp, lens_a[idx] + temp):
            pos_mask[j][idx] = 1.
            neg_mask[j][idx] = 0.
        temp += lens_a[idx]
    return pos_mask, neg_mask


def local_global_loss_(l_enc, g_enc, pos_mask, neg_mask):
    log_2 = math.log(2.)
    res = torch.mm(l_enc, g_enc.t())
    num_nodes = pos_mask.size(0)
    num_graphs = pos_mask.size(1)
    e_pos = (log_2 - F.softplus(-(res * pos_mask))).sum() / num_nodes
    q_samples = res * neg_mask
    e_neg = (F.softplus(-q_samples) + q_samples - log_2).sum() / (num_nodes * (num_graphs - 1))
    return e_neg - e_pos


def isbert_loss(token_embeddings, sentence_embedding, attention_mask):
    """`MutualInformationLoss.forward` of the CNN outputs, the pooled
    vectors and the mask: each row's tokens up to its length, then
    `local_global_loss_`."""
    lengths = np.clip(np.asarray(attention_mask).sum(1), 1, None).astype(int)
    local = torch.cat([token_embeddings[i][:lengths[i]] for i in range(len(lengths))], dim=0)
    pos_mask, neg_mask = create_masks(lengths)
    return float(local_global_loss_(local, sentence_embedding, pos_mask, neg_mask))


def isbert_features_alone(token_states, attention_mask, convolutions):
    """`CNN.forward` of each sentence alone, as the authors' code encodes a
    batch of one (padded to its own length: no [PAD] state in its window),
    then zeros after each sentence's length to stack the batch again."""
    mask = np.asarray(attention_mask).astype(bool)
    rows = []
    for states, real in zip(np.asarray(token_states, "float64"), mask):
        alone = isbert_cnn(states[None, :int(real.sum())], convolutions)[0]
        padded = torch.zeros((len(real), alone.shape[-1]), dtype=torch.float64)
        padded[:alone.shape[0]] = alone
        rows.append(padded)
    return torch.stack(rows)

"""SG-OPT's layer × pooling scores computed by sentence-transformers' own
`models.Pooling` (the library; its "cls", "mean" and "max" modes, the
module galsang/SG-BERT's code pools with) on each hidden state, and scipy's
Spearman of gold vs cosine: an independent reference for
`kcse.evaluation.layer_pooling_scores`, given only the hidden states."""

import numpy as np
import scipy.stats
import torch
from sentence_transformers.models import Pooling


def sentence_transformers_layer_scores(states, padding_mask, gold):
    """`{"cls", "mean", "max"}`: a Spearman ×100 per hidden state of
    `states` (each `(2n, length, dim)`: the n first sentences, then the n
    second ones), None where the cosines are all equal."""
    mask = torch.from_numpy(np.asarray(padding_mask).astype("int64"))
    count = len(gold)
    scores = {"cls": [], "mean": [], "max": []}
    for state in states:
        tokens = torch.from_numpy(np.asarray(state, "float64"))
        for mode in scores:
            pooled = Pooling(tokens.shape[-1], pooling_mode=mode)(
                {"token_embeddings": tokens, "attention_mask": mask})["sentence_embedding"].numpy()
            a, b = pooled[:count], pooled[count:]
            cosines = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
            scores[mode].append(None if np.ptp(cosines) < 1e-9 else
                                100 * scipy.stats.spearmanr(gold, cosines).correlation)
    return scores

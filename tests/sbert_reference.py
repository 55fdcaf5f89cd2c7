"""UKPLab/sentence-transformers' `SoftmaxLoss`, SBERT's classification
objective (Reimers & Gurevych, 2019), run by the installed library itself:
an independent reference. `forward` takes each column's
`model(features)["sentence_embedding"]`, concatenates (u, v, |u − v|) and
applies its `nn.Linear` classifier and `nn.CrossEntropyLoss`; here the
model hands back the vectors kcse gave, and the classifier holds the
weights of kcse's head, so only those two come from kcse.
"""

import numpy as np
import torch
from sentence_transformers.sentence_transformer.losses import SoftmaxLoss


class GivenVectors(torch.nn.Module):
    """Stands for the SentenceTransformer: `forward` returns the vectors its
    features carry as their `sentence_embedding`."""

    device = torch.device("cpu")

    def forward(self, features):
        return {"sentence_embedding": features["vectors"]}


def softmax_loss(vectors1, vectors2, labels, kernel, bias):
    """`SoftmaxLoss(model, dim, num_labels)` of the pairs (`vectors1[i]`,
    `vectors2[i]`) with `labels`, its classifier holding a Keras Dense
    `kernel` (3·dim, classes) and `bias`, in float64."""
    kernel = np.asarray(kernel, "float64")
    loss = SoftmaxLoss(GivenVectors(), kernel.shape[0] // 3, kernel.shape[1]).double()
    with torch.no_grad():
        loss.classifier.weight.copy_(torch.from_numpy(kernel.T))
        loss.classifier.bias.copy_(torch.from_numpy(np.asarray(bias, "float64")))
        features = [{"vectors": torch.from_numpy(np.asarray(v, "float64"))}
                    for v in (vectors1, vectors2)]
        return float(loss(features, torch.from_numpy(np.asarray(labels, "int64"))))

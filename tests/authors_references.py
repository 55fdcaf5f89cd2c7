"""The authors' training losses transcribed to numpy: independent references.

kcse's losses and objectives are checked against these, not against kcse's
own loss classes. Each function is transcribed line by line from the
authors' released code (named in its docstring), computes in float64 and
uses nothing of kcse, so a mistake in kcse cannot be copied into its
expected value:

- bojone/SimCSE, `eval.py`, `simcse_loss`;
- princeton-nlp/SimCSE, `simcse/models.py`, `cl_forward` (with `Similarity`);
- bojone/CoSENT, `cosent.py`, `cosent_loss`;
- bojone/BERT-whitening, `compute_kernel_bias` and `transform_and_normalize`
  (BERT-whitening, columns b and c+w of the comparison);
- galsang/SG-BERT, `loss.py`: `NTXentLoss.forward` (SG-OPT), the ablation's
  `NTXentLossOriginal`, `NTXentLossOpt1` and `NTXentLossOpt2`,
  `Loss.compute_diff` and the projection head built in `Loss.__init__`.

Where the authors hard-code a constant (bojone's scale 20), it is an
argument here, with the authors' value as default where there is one.
"""

import math

import numpy as np


def cross_entropy(logits, labels):
    """`torch.nn.CrossEntropyLoss(reduction="none")` / Keras' categorical
    cross-entropy from logits with one-hot `labels`: one loss per row."""
    logits = np.asarray(logits, "float64")
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels]


def l2_normalize(x):
    """`K.l2_normalize(x, axis=-1)` in float64."""
    x = np.asarray(x, "float64")
    return x / np.sqrt(np.maximum((x * x).sum(-1, keepdims=True), 1e-12))


def torch_cosine_similarity(x, y, eps=1e-8):
    """`torch.nn.CosineSimilarity(dim=-1)(x, y)` (broadcasting), float64."""
    x, y = np.asarray(x, "float64"), np.asarray(y, "float64")
    norms = np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
    return (x * y).sum(-1) / np.maximum(norms, eps)


def bojone_simcse_loss(views, temperature=0.05):
    """bojone/SimCSE `eval.py` `simcse_loss`, for `views` `(N, 2, dim)`.

    The batch holds the rows [a1, a1', a2, a2', ...] (each sentence twice);
    the label of row i is its twin i + 1 − 2(i mod 2); the 2N × 2N cosines
    have the diagonal masked (−1e12) and are multiplied by 20 (1 / τ); the
    loss is the mean categorical cross-entropy over the 2N rows.
    """
    y_pred = np.asarray(views).reshape(-1, views.shape[-1])
    idxs = np.arange(len(y_pred))
    labels = idxs + 1 - idxs % 2 * 2
    y_pred = l2_normalize(y_pred)
    similarities = y_pred @ y_pred.T
    similarities = similarities - np.eye(len(y_pred)) * 1e12
    similarities = similarities / temperature
    return cross_entropy(similarities, labels).mean()


def princeton_simcse_loss(views, temperature=0.05, hard_negative_weight=0.0):
    """princeton-nlp/SimCSE `simcse/models.py` `cl_forward`, one device.

    `views` `(N, 2, dim)` are z1, z2 (`(N, 3, dim)`: z3, the hard
    negatives, too). `cos_sim = Similarity(temp)(z1.unsqueeze(1),
    z2.unsqueeze(0))`, i.e. cosine / temp; with z3 the columns
    `cos(z1, z3) / temp` are appended and `hard_negative_weight` added to
    z1_i's own z3_i (after the temperature: "weights are actually logits");
    the loss is `nn.CrossEntropyLoss()` with `labels = arange(N)`.
    """
    views = np.asarray(views, "float64")
    z1, z2 = views[:, 0], views[:, 1]
    cos_sim = torch_cosine_similarity(z1[:, None], z2[None, :]) / temperature
    if views.shape[1] == 3:
        z3 = views[:, 2]
        z1_z3_cos = torch_cosine_similarity(z1[:, None], z3[None, :]) / temperature
        cos_sim = np.concatenate([cos_sim, z1_z3_cos], axis=1)
        width, hard = cos_sim.shape[-1], z1_z3_cos.shape[-1]
        weights = np.array(
            [
                [0.0] * (width - hard) + [0.0] * i + [hard_negative_weight]
                + [0.0] * (hard - i - 1)
                for i in range(hard)
            ]
        )
        cos_sim = cos_sim + weights
    labels = np.arange(cos_sim.shape[0])
    return cross_entropy(cos_sim, labels).mean()


def bojone_cosent_loss(labels, pairs, scale=20.0):
    """bojone/CoSENT `cosent.py` `cosent_loss`, for `pairs` `(N, 2, dim)`.

    The batch holds the rows [u1, v1, u2, v2, ...] with each pair's label
    on both of its rows; `y_true[::2]` are the labels, s = 20 · cos(u, v)
    (`scale`), and the loss is logsumexp([0] + [s_j − s_i for label_i <
    label_j]) (other terms masked by −1e12), one value for the batch.
    """
    y_true = np.repeat(np.asarray(labels, "float64"), 2)[:, None]
    y_pred = np.asarray(pairs).reshape(-1, pairs.shape[-1])
    y_true = y_true[::2, 0]
    y_true = (y_true[:, None] < y_true[None, :]).astype("float64")
    y_pred = l2_normalize(y_pred)
    y_pred = (y_pred[::2] * y_pred[1::2]).sum(axis=1) * scale
    y_pred = y_pred[:, None] - y_pred[None, :]
    y_pred = (y_pred - (1 - y_true) * 1e12).reshape(-1)
    y_pred = np.concatenate([[0.0], y_pred])
    top = y_pred.max()
    return top + np.log(np.exp(y_pred - top).sum())


def sg_bert_ntxent_loss(cls, cont, temperature=0.01):
    """galsang/SG-BERT `loss.py` `NTXentLoss.forward(cls, cont)` (SG-OPT).

    `cls` `(batch, hidden)`, `cont` `(batch, num_layers, hidden)`, both
    already through the projection head; `use_cosine_similarity=True`
    (as `Loss` builds it). For each layer i the cosine matrix of cls
    against `cont[:, i]` gives the positives (its diagonal) and the
    negatives (its off-diagonal entries, row by row); the negatives of all
    layers are concatenated and repeated for every layer; the logits
    `[positive | negatives] / temperature` go to
    `CrossEntropyLoss(reduction="sum")` with label 0, divided by
    `batch_size * num_layers`.
    """
    batch_size, num_layers = cont.shape[0], cont.shape[1]
    positives, negatives = [], []
    for i in range(num_layers):
        similarity_matrix = torch_cosine_similarity(
            np.asarray(cls)[:, None], np.asarray(cont)[None, :, i]
        )
        positives.append(np.diag(similarity_matrix))
        neg_idx = (1 - np.eye(batch_size)).astype(bool)
        negatives.append(similarity_matrix[neg_idx].reshape(batch_size, -1))
    positives = np.concatenate(positives).reshape(-1, 1)
    negatives = np.concatenate(negatives, axis=1)
    negatives = np.concatenate([negatives] * num_layers, axis=0)
    logits = np.concatenate([positives, negatives], axis=1)
    logits = logits / temperature
    labels = np.zeros(batch_size * num_layers, "int64")
    loss = cross_entropy(logits, labels).sum()
    return loss / (batch_size * num_layers)


def _sg_bert_correlated_mask(batch_size):
    """`NTXentLossOriginal._get_correlated_mask`: False on the diagonal and
    on the two diagonals `batch_size` away (each row's partner)."""
    diag = np.eye(2 * batch_size)
    l1 = np.eye((2 * batch_size), 2 * batch_size, k=-batch_size)
    l2 = np.eye((2 * batch_size), 2 * batch_size, k=batch_size)
    return (1 - (diag + l1 + l2)).astype(bool)


def _sg_bert_one_pivot_logits(cls, pooled):
    """The first lines of `NTXentLossOpt1.forward` / `NTXentLossOpt2.forward`:
    the cosines of `cat([cls, pooled])` with itself, each cls row's
    positive (its pooled partner) and its masked row of negatives."""
    batch_size = cls.shape[0]
    representations = np.concatenate([cls, pooled], axis=0)
    similarity_matrix = torch_cosine_similarity(
        representations[:, None], representations[None, :]
    )
    positives = np.diag(similarity_matrix, batch_size).reshape(batch_size, 1)
    negatives = similarity_matrix[_sg_bert_correlated_mask(batch_size)].reshape(
        2 * batch_size, -1
    )
    return positives, negatives


def _sg_bert_cross_entropy_from_zero(positives, negatives, temperature, rows):
    """`logits = cat((positives, negatives), 1) / T`, label 0 for each row,
    `CrossEntropyLoss(reduction="sum")`, divided by `rows`."""
    logits = np.concatenate([positives, negatives], axis=1) / temperature
    labels = np.zeros(len(logits), "int64")
    return cross_entropy(logits, labels).sum() / rows


def sg_bert_ntxent_loss_opt1(cls, pooled, temperature=0.01):
    """galsang/SG-BERT `loss.py` `NTXentLossOpt1.forward(cls, pooled)` (L^opt1):
    the cls rows only, against the other cls rows and every pooled row."""
    batch_size = cls.shape[0]
    positives, negatives = _sg_bert_one_pivot_logits(cls, pooled)
    return _sg_bert_cross_entropy_from_zero(
        positives, negatives[:batch_size], temperature, batch_size
    )


def sg_bert_ntxent_loss_opt2(cls, pooled, temperature=0.01, first_negative=None):
    """galsang/SG-BERT `loss.py` `NTXentLossOpt2.forward(cls, pooled)` (L^opt2):
    the cls rows against the pooled rows only.

    The authors slice each masked row from column `batch_size`
    (`[:self.batch_size, self.batch_size:]`). A masked cls row holds the
    b − 1 other cls first, then the b − 1 other pooled rows from column
    b − 1, so that slice leaves out one pooled negative; the paper's
    L^opt2 sums over every h_j. `first_negative=batch_size - 1` takes them
    all; the default is the authors' slice.
    """
    batch_size = cls.shape[0]
    start = batch_size if first_negative is None else first_negative
    positives, negatives = _sg_bert_one_pivot_logits(cls, pooled)
    return _sg_bert_cross_entropy_from_zero(
        positives, negatives[:batch_size, start:], temperature, batch_size
    )


def sg_bert_ntxent_loss_original(zis, zjs, temperature=0.01):
    """galsang/SG-BERT `loss.py` `NTXentLossOriginal.forward(zis, zjs)` (SG,
    L^base), which `Loss` calls with `(sent_emb, pooled)`: NT-Xent over the
    rows of `cat([zjs, zis])`, each row's positive its partner `batch_size`
    away and its negatives every other row.

    Two lines of the authors' code are not runnable as the paper states
    the loss, and are as the paper here: they pass `batch_size` labels for
    the 2·batch_size rows (`CrossEntropyLoss` refuses that), and they
    divide the summed loss by `batch_size`, where the paper's L^base is
    the mean over the 2b rows (1 / 2b).
    """
    batch_size = zis.shape[0]
    representations = np.concatenate([zjs, zis], axis=0)
    similarity_matrix = torch_cosine_similarity(
        representations[:, None], representations[None, :]
    )
    l_pos = np.diag(similarity_matrix, batch_size)
    r_pos = np.diag(similarity_matrix, -batch_size)
    positives = np.concatenate([l_pos, r_pos]).reshape(2 * batch_size, 1)
    negatives = similarity_matrix[_sg_bert_correlated_mask(batch_size)].reshape(
        2 * batch_size, -1
    )
    return _sg_bert_cross_entropy_from_zero(
        positives, negatives, temperature, 2 * batch_size
    )


def sg_bert_pooling(states, mask, pooling):
    """galsang/SG-BERT `loss.py` `Loss.mean_pooling` / `Loss.max_pooling`
    of `states` `(batch, layers, length, hidden)` with the attention mask
    expanded to it: `(t * mask).sum(2) / mask.sum(2)`, or `t[mask == 0] =
    -1e9; t.max(dim=2)`."""
    states = np.array(states, "float64")
    mask = np.broadcast_to(np.asarray(mask, "float64")[:, None, :, None], states.shape)
    if pooling == "mean":
        return (states * mask).sum(2) / mask.sum(2)
    states[mask == 0] = -1e9
    return states.max(axis=2)


def sg_bert_compute_diff(tuned, original):
    """galsang/SG-BERT `loss.py` `Loss.compute_diff`: Σ_n ‖θ_orig,n − θ_n‖²
    over the encoder's parameters (`torch.norm(..., p=2) ** 2`)."""
    return sum(
        float(np.linalg.norm(np.asarray(o, "float64") - np.asarray(p, "float64")) ** 2)
        for p, o in zip(tuned, original)
    )


def torch_gelu(x):
    """`torch.nn.GELU()` (approximate="none"): x · Φ(x) with the exact erf."""
    x = np.asarray(x, "float64")
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def sg_bert_projection_head(x, weights, biases):
    """galsang/SG-BERT `loss.py`: `nn.Sequential(Linear, GELU, Linear, GELU)`.

    `weights` are the two `nn.Linear` weights in torch layout,
    `(out_features, in_features)` (a Keras kernel transposed); `Linear`
    computes x Wᵀ + b.
    """
    x = np.asarray(x, "float64")
    for weight, bias in zip(weights, biases):
        x = torch_gelu(x @ np.asarray(weight, "float64").T + np.asarray(bias, "float64"))
    return x


def bojone_whitened_cosines(fit, v1, v2):
    """bojone/BERT-whitening: `compute_kernel_bias(fit)` (mu, and
    W = U diag(1/sqrt(s)) from the SVD of the covariance), then the cosine
    of each pair of `transform_and_normalize(v1)` and `(v2)`, in float64;
    with the one change kcse documents (`kcse.layers.Whitening`): a
    numerically null direction (standard deviation at most dim * eps(float32)
    of the largest) gets a zero column instead of 1/sqrt(float noise).
    Returns `(cosines, null_directions)`."""
    fit = np.asarray(fit, "float64")
    mu = fit.mean(axis=0, keepdims=True)
    u, s, _ = np.linalg.svd(np.cov(fit.T))
    null = np.sqrt(s / s[0]) <= len(s) * np.finfo("float32").eps
    kernel = u[:, ~null] @ np.diag(1 / np.sqrt(s[~null]))
    a, b = (np.asarray(v1, "float64") - mu) @ kernel, (np.asarray(v2, "float64") - mu) @ kernel
    return torch_cosine_similarity(a, b), int(null.sum())

"""ConSERT's training losses transcribed to numpy: an independent reference.

Transcribed line by line from yym6472/ConSERT,
`sentence_transformers/losses/AdvCLSoftmaxLoss.py` (`_contrastive_loss_forward`
with `contrastive_loss_type="nt_xent"`, `hidden_norm=True`; `_reps_to_output`
with `concatenation_sent_max_square`; the loss sum of `forward`; its
adversarial noise). The authors'
code, not kcse's: kcse's implementation is checked against it.
"""

import numpy as np

LARGE_NUM = 1e9


def cross_entropy(logits, labels):
    """torch.nn.functional.cross_entropy (mean over rows), float64."""
    logits = np.asarray(logits, "float64")
    logits = logits - logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -log_probs[np.arange(len(labels)), labels].mean()


def normalize(hidden):
    """torch.nn.functional.normalize(p=2, dim=-1)."""
    hidden = np.asarray(hidden, "float64")
    return hidden / np.maximum(np.linalg.norm(hidden, axis=-1, keepdims=True), 1e-12)


def nt_xent(hidden1, hidden2, temperature):
    """`_contrastive_loss_forward(hidden1, hidden2, hidden_norm=True, temperature)`."""
    hidden1, hidden2 = normalize(hidden1), normalize(hidden2)
    batch_size = len(hidden1)
    labels = np.arange(batch_size)
    masks = np.eye(batch_size)
    logits_aa = hidden1 @ hidden1.T / temperature - masks * LARGE_NUM
    logits_bb = hidden2 @ hidden2.T / temperature - masks * LARGE_NUM
    logits_ab = hidden1 @ hidden2.T / temperature
    logits_ba = hidden2 @ hidden1.T / temperature
    loss_a = cross_entropy(np.concatenate([logits_ab, logits_aa], axis=1), labels)
    loss_b = cross_entropy(np.concatenate([logits_ba, logits_bb], axis=1), labels)
    return loss_a + loss_b


def nli_logits(rep_a, rep_b, kernel, bias, max_square=True):
    """`_reps_to_output` with rep and difference features, and the max-square
    one where `concatenation_sent_max_square` (the scripts' flag)."""
    vectors_concat = [rep_a, rep_b, np.abs(rep_a - rep_b)]
    if max_square:
        vectors_concat.append(np.maximum(rep_a, rep_b) ** 2)
    features = np.concatenate(vectors_concat, axis=1)
    return features @ kernel + bias


def joint_loss(rep_a, rep_b, views_a, views_b, labels, kernel, bias, temperature,
               cl_rate):
    """`forward` of the joint mode: softmax loss + cl_rate · (NT-Xent a + b).

    `views_a` / `views_b` are the two views of the premises / hypotheses.
    """
    normal = cross_entropy(nli_logits(rep_a, rep_b, kernel, bias), labels)
    contrastive = nt_xent(*views_a, temperature) + nt_xent(*views_b, temperature)
    return normal + cl_rate * contrastive


def adversarial_noise(unnormalized_noise, noise_norm):
    """`forward`'s adversarial noise with `do_noise_normalization`: the
    gradient of the NLI loss w.r.t. the embedding output (detached), divided
    by its L2 norm over the hidden size plus 1e-10, times `noise_norm`."""
    unnormalized_noise = np.asarray(unnormalized_noise, "float64")
    norm = np.linalg.norm(unnormalized_noise, axis=-1)
    return noise_norm * unnormalized_noise / (norm[..., None] + 1e-10)


def last2avg(all_layer_embeddings, attention_mask):
    """`Pooling.forward` with `pooling_mode_mean_last_2_tokens`, as `eval.py`'s
    `load_model(last2avg=True)` sets it (no `token_checker`): the masked mean
    of each of the last two layers' token states, then their average."""
    input_mask_expanded = np.broadcast_to(
        np.asarray(attention_mask, "float64")[..., None], all_layer_embeddings[-1].shape)
    sum_mask = np.maximum(input_mask_expanded.sum(1), 1e-9)
    token_embeddings_last1 = np.asarray(all_layer_embeddings[-1], "float64")
    sum_embeddings_last1 = (token_embeddings_last1 * input_mask_expanded).sum(1) / sum_mask
    token_embeddings_last2 = np.asarray(all_layer_embeddings[-2], "float64")
    sum_embeddings_last2 = (token_embeddings_last2 * input_mask_expanded).sum(1) / sum_mask
    return (sum_embeddings_last1 + sum_embeddings_last2) / 2

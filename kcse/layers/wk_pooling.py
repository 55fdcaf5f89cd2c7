"""SBERT-WK pooling (Wang & Kuo 2020): token states fused across layers.

The authors' code is github.com/BinWang28/SBERT-WK-Sentence-Embedding, file
`utils.py`, methods `dissecting`, `unify_token` and `unify_sentence` of
`generate_embedding`; `tests/sbert_wk_reference.py` transcribes them and the
tests compare this module with it.
"""

import keras
import numpy as np
from keras import ops

# The authors' defaults and the layer checks: Keras-free, in pooling_rules
# (the commands check --pooling wk with them before TensorFlow starts).
from kcse.layers.pooling_rules import CONTEXT_WINDOW
from kcse.layers.pooling_rules import LAYER_START
from kcse.layers.pooling_rules import check_layers
from kcse.layers.pooling_rules import context_windows

# Denominators whose magnitude is below this are taken as 1 (see `wk_pool`).
TINY = 1e-30


def _dot(a, b):
    return ops.sum(a * b, axis=-1)


def _sqrt(x):
    # sqrt of at least TINY: finite gradients at zero.
    return ops.sqrt(ops.maximum(x, TINY))


def _norm(x):
    return _sqrt(_dot(x, x))


def _divide(a, b):
    return a / ops.where(ops.abs(b) < TINY, ops.ones_like(b), b)


def _nonzero(norm):
    # scikit-learn's `normalize` divides a zero column by 1.
    return ops.where(norm < 1e-12, ops.ones_like(norm), norm)


def _token_scores(states, windows):
    """`unify_token`'s alignment and novelty, `(batch, length, layers)` each.

    `states` is `(batch, length, layers, dim)`, `windows` the context layers
    of each layer. With `x` a layer's state, `c_j` its context states and
    `P x` the projection of `x` on their span, the authors' R terms are
    `mean(normalize(R[:-1, :-1], axis=0), axis=1) . R[:-1, -1] = mean_j(c_j
    . x / |c_j|)`, `|r[:-1]| = |P x|`, `|r[-1]| = |x - P x|` and `|r| = |x|`,
    whichever signs the QR gives R's rows. `P x` comes from modified
    Gram-Schmidt over the context, one window slot at a time for all layers
    (a layer with fewer context layers gets zero vectors in the other slots).
    """
    sizes = np.array([len(window) for window in windows], "float32")
    basis = []
    cosine_dots = 0.0  # sum_j c_j . x / |c_j|
    for slot in range(max(len(window) for window in windows)):
        index = [window[slot] if slot < len(window) else k for k, window in enumerate(windows)]
        valid = np.array([[slot < len(window)] for window in windows], "float32")
        vector = ops.take(states, index, axis=2) * valid  # (batch, length, layers, dim)
        cosine_dots = cosine_dots + _dot(vector, states) / _nonzero(_norm(vector))
        for q in basis:
            vector = vector - ops.expand_dims(_dot(q, vector), -1) * q
        basis.append(vector / ops.expand_dims(_norm(vector), -1))
    residual = states
    projection = 0.0  # |P x|^2
    for q in basis:
        r = _dot(q, residual)
        residual = residual - ops.expand_dims(r, -1) * q
        projection = projection + r * r
    alignment = _divide(cosine_dots / sizes, _sqrt(projection))
    alignment = _divide(ops.ones_like(alignment), alignment * (sizes + 1.0) * 2.0)
    novelty = _divide(_norm(residual), _norm(states))
    return alignment, novelty


def _sum_normalized(x, axis):
    return _divide(x, ops.sum(x, axis=axis, keepdims=True))


def wk_pool(
    hidden_states, padding_mask, layer_start=LAYER_START, context_window=CONTEXT_WINDOW
):
    """SBERT-WK sentence vectors from per-layer token states.

    The authors' `dissecting` (github.com/BinWang28/SBERT-WK-Sentence-Embedding,
    `utils.py`) in `keras.ops`, batched over sentences and tokens:

    1. The layers `hidden_states[layer_start:]` are used (`hidden_states[0]`
       is the embedding output, `hidden_states[i]` the output of block `i`).
       The tokens counted are the real ones except the last (`unmask_num =
       sum(mask) - 1`: [SEP] is left out, [CLS] kept).
    2. `unify_token`: for each token and used layer `k`, the window is the
       token's states at the context layers `layers[k - w:k] + layers[k + 1:k
       + w + 1]` (w = `context_window`; see `context_windows`: for `k < w`
       the left window is EMPTY, as numpy's negative-start slice gives)
       followed by layer `k`'s state. With R the QR decomposition's R of the
       window (columns), `r` its last column and `m` the window size:
       alignment = `1 / (2 m mean(normalize(R[:-1, :-1], axis=0), axis=1) .
       r[:-1] / |r[:-1]|)` and novelty = `|r[-1]| / |r|`; each is divided by
       its sum over layers, the two added and divided by their sum: the
       token's vector is the so-weighted sum of its layer states.
    3. `unify_sentence`: each counted token is weighted by the variance
       (over layers) of the cosine similarity of its consecutive layers,
       divided by the sum over counted tokens; the sentence vector is the
       weighted sum of the token vectors.

    The R terms are computed as the projections they stand for (see
    `_token_scores`), which do not change when rows of R change sign, as
    they do between numpy's, TensorFlow's and JAX's QR. The cosines' variance
    is taken as that of `1 - cos = |u - v|^2 / 2` (u, v the unit states),
    the same number, accurate in float32 where the cosines are close to 1.
    Computed in float32, returned in the dtype of the states.

    Where the authors' code divides by zero, the result is defined instead:
    a sentence with no counted token (fewer than two real tokens) gives
    zeros; one whose counted tokens all have zero variance (e.g. one token
    whose consecutive layers have the same cosine) weights them equally; a
    zero denominator elsewhere (zero states) is taken as 1. No NaN comes
    out and gradients are finite. The hidden size should exceed `2 * w + 1`
    (the authors' QR assumes it).

    Args:
        hidden_states: list of tensors `(batch, length, dim)`, `[embeddings,
            block_1, ..., block_L]`.
        padding_mask: `(batch, length)`, true on real tokens.
        layer_start: int. First hidden state used (the authors' 4).
        context_window: int >= 1. Context layers on each side (the authors' 2).

    Returns:
        `(batch, dim)` sentence vectors.

    Raises:
        ValueError: a used layer would have no context layer (too few
            hidden states for `layer_start`; see `check_layers`).

    Example:
    ```python
    import numpy as np
    from kcse.layers.wk_pooling import wk_pool

    rng = np.random.default_rng(0)
    states = [rng.normal(size=(2, 5, 8)).astype("float32")]
    for _ in range(8):  # embeddings + 8 blocks, each close to the previous
        states.append(states[-1] + 0.3 * rng.normal(size=(2, 5, 8)).astype("float32"))
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    vectors = wk_pool(states, mask)  # layers 4..8, window 2
    assert vectors.shape == (2, 8) and np.all(np.isfinite(vectors))
    ```
    """
    hidden_states = list(hidden_states)
    check_layers(len(hidden_states), layer_start, context_window)
    dtype = hidden_states[-1].dtype
    mask = ops.cast(padding_mask, "int32")
    # Real tokens at or after each position: the last real token has 1.
    real_from_here = ops.flip(ops.cumsum(ops.flip(mask, axis=1), axis=1), axis=1)
    counted = ops.logical_and(mask > 0, real_from_here > 1)  # (batch, length)
    states = ops.stack(
        [ops.cast(state, "float32") for state in hidden_states[layer_start:]], axis=2
    )  # (batch, length, layers, dim)
    # Uncounted positions get position 0's states: their (zero-weighted)
    # arithmetic stays well-conditioned whatever padding holds.
    states = ops.where(counted[:, :, None, None], states, states[:, :1])

    # unify_token: per-token weights over layers.
    windows = context_windows(len(hidden_states) - layer_start, context_window)
    alignment, novelty = _token_scores(states, windows)
    alpha = _sum_normalized(
        _sum_normalized(alignment, -1) + _sum_normalized(novelty, -1), -1
    )
    tokens = ops.sum(ops.expand_dims(alpha, -1) * states, axis=2)

    # unify_sentence: per-sentence weights over tokens.
    # var(cos) = var(1 - cos) with 1 - cos = |u - v|^2 / 2 for unit u, v:
    # accurate in float32 where consecutive layers' cosines are close to 1.
    units = states / ops.expand_dims(_nonzero(_norm(states)), -1)
    steps = units[:, :, 1:] - units[:, :, :-1]
    distances = _dot(steps, steps) / 2.0
    counted = ops.cast(counted, "float32")
    variance = ops.var(distances, axis=-1) * counted
    total = ops.sum(variance, axis=1, keepdims=True)
    uniform = counted / ops.maximum(ops.sum(counted, axis=1, keepdims=True), 1.0)
    weights = ops.where(total > 0, _divide(variance, total), uniform)
    vectors = ops.sum(ops.expand_dims(weights, -1) * tokens, axis=1)
    return ops.cast(vectors, dtype)


@keras.saving.register_keras_serializable(package="kcse")
class WKPooling(keras.layers.Layer):
    """SBERT-WK pooling: sentence vectors from a backbone's per-layer states.

    SBERT-WK (Wang & Kuo 2020, "SBERT-WK: A Sentence Embedding Method by
    Dissecting BERT-based Word Models") needs no training: each token's
    states at layers `layer_start..L` are fused with weights from their
    alignment with and novelty against neighbouring layers (a QR
    decomposition over a window of layers), then tokens are averaged with
    weights from how much their representation varies across layers. It is
    the authors' `dissecting` (github.com/BinWang28/SBERT-WK-Sentence-Embedding,
    `utils.py`, with `unify_token` and `unify_sentence`), batched; see
    `kcse.layers.wk_pooling.wk_pool` for the formulas, the authors' quirks
    kept (the last real token left out, empty left windows of the first
    layers) and the results defined where theirs divide by zero.

    It takes the same inputs as `kcse.layers.SentencePooling`, which applies
    it with the authors' defaults as `mode="wk"` (and so does
    `kcse.SentenceEncoder(..., pooling="wk")`). The layer has no weights;
    gradients through it are finite. Training through it keeps about 26
    float32 tensors of `(batch, length, layers used, dim)` for the gradient
    (`benchmarks/memory.py`, scenario `e5_fit_wk`: 5.3 GB against 2.9 GB
    with P3 for multilingual-e5-small at batch 64).

    Args:
        layer_start: int >= 0. First hidden state used (`hidden_states[0]`
            is the embeddings). Default 4, the authors'.
        context_window: int >= 1. Context layers on each side. Default 2,
            the authors'.

    Call arguments:
        hidden_states: list `[embeddings, block_1, ..., block_L]` of
            `(batch, length, dim)` tensors. `ValueError` if too few for
            `layer_start` (the message names the numbers).
        padding_mask: `(batch, length)`, true on real tokens.

    Example:
    ```python
    import numpy as np
    import kcse

    rng = np.random.default_rng(0)
    states = [rng.normal(size=(2, 5, 8)).astype("float32")]
    for _ in range(12):  # like BERT-base: embeddings + 12 blocks
        states.append(states[-1] + 0.3 * rng.normal(size=(2, 5, 8)).astype("float32"))
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    pooling = kcse.layers.WKPooling(layer_start=4, context_window=2)
    vectors = pooling(states, mask)
    assert vectors.shape == (2, 8)
    ```
    """

    def __init__(self, layer_start=LAYER_START, context_window=CONTEXT_WINDOW, **kwargs):
        kwargs.setdefault("dtype", "float32")  # QR and norms in float32 under mixed precision.
        super().__init__(**kwargs)
        for name, value, least in (
            ("layer_start", layer_start, 0),
            ("context_window", context_window, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}; got {value!r}.")
        self.layer_start = layer_start
        self.context_window = context_window

    def call(self, hidden_states, padding_mask):
        return wk_pool(hidden_states, padding_mask, self.layer_start, self.context_window)

    def compute_output_shape(self, hidden_states_shape, padding_mask_shape):
        last = hidden_states_shape[-1]
        return (last[0], last[-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {"layer_start": self.layer_start, "context_window": self.context_window}
        )
        return config

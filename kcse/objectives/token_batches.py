"""Training batches of in-memory data as numpy token arrays, without TensorFlow.

`EncoderObjective.fit` tokenises in-memory text once before training
(`token_arrays`; keras-hub's WordPiece tokenizers run without TensorFlow)
and batches the token arrays with `tf.data`. Where TensorFlow is not
installed (JAX, PyTorch), they go through `TokenBatches` instead, a
`keras.utils.PyDataset` of numpy batches. Its batches
are those of `kcse.objectives.training_data.training_dataset` on the
same data (the same last batch left out, the same padded lengths, orders
drawn the same way), but for one thing: Keras reads the first batch of a
`tf.data` pipeline once before training, which draws an order of its own,
so with `shuffle` a seed gives other orders with and without TensorFlow.
`DrawnPairBatches` does the same for `kcse.objectives.ContrastiveTension`,
whose pairs are drawn afresh every epoch.
"""

import random

import keras
import numpy as np

from kcse.batched_prediction import PREPROCESS_CHUNK_SIZE
from kcse.foundation.compilation import padded_length


def epoch_orders(count, shuffle):
    """A function giving the sample order of each epoch in turn.

    With `shuffle`, numpy permutations from a generator seeded once by
    Python's `random` (seeded by `keras.utils.set_random_seed`), as
    `training_data.reshuffled` draws them; else the identity.
    """
    if not shuffle:
        return lambda: np.arange(count)
    generator = np.random.default_rng(random.randrange(2**63))
    return lambda: generator.permutation(count)


def token_arrays(preprocessor, x):
    """A dict of numpy token arrays of in-memory training input `x`.

    `x` is a dict of token arrays (kept as it is), a sequence of str (arrays
    `(samples, length)`), or a tuple of k such sequences, k sentences per
    sample (`(samples, k, length)`). Text is packed by `preprocessor` to its
    full length, `PREPROCESS_CHUNK_SIZE` texts at a time.
    """
    if isinstance(x, dict):
        return x
    if preprocessor is None:
        raise ValueError(
            "Training on text needs the encoder's preprocessor; this encoder "
            "has none: pass token arrays {'token_ids', 'padding_mask', ...}."
        )

    def packed(texts):
        texts = list(texts)
        parts = [
            {key: keras.ops.convert_to_numpy(value) for key, value in
             preprocessor(texts[start : start + PREPROCESS_CHUNK_SIZE]).items()}
            for start in range(0, len(texts), PREPROCESS_CHUNK_SIZE)
        ]
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

    if not isinstance(x, tuple):
        return packed(x)
    columns = [packed(column) for column in x]
    return {key: np.stack([column[key] for column in columns], axis=1) for key in columns[0]}


def trimmed_tokens(features, lengths=None):
    """`features` (a dict of numpy token arrays) cut to their padded length.

    The length is `kcse.foundation.compilation.padded_length` of the longest row
    (`padding_mask` summed): a multiple of 8, or one of `lengths`. Boolean
    arrays become int32, as `kcse.foundation.compilation.trim_padding` gives them.
    """
    mask = np.asarray(features["padding_mask"])
    full_length = mask.shape[-1]
    longest = int(mask.astype(bool).sum(axis=-1).max(initial=0))
    length = padded_length(longest, full_length, lengths)
    return {
        key: (value.astype("int32") if value.dtype == bool else value)[..., :length]
        for key, value in ((key, np.asarray(value)) for key, value in features.items())
    }


class TokenBatches(keras.utils.PyDataset):
    """Batches of in-memory token arrays, reshuffled every epoch.

    Args:
        x: a dict of token arrays `(samples, length)` or `(samples, k,
            length)` (`"token_ids"`, `"padding_mask"`, ...).
        y, sample_weight: arrays of `samples` rows, or None.
        batch_size: int.
        shuffle: bool. A new order every epoch (see `epoch_orders`).
        drop_single_last: leave out a last batch of exactly one sample.
        lengths: the padded lengths of batches (see `trimmed_tokens`).

    Example:
    ```python
    import numpy as np
    from kcse.objectives.token_batches import TokenBatches

    x = {"token_ids": np.arange(100).reshape(5, 20) + 1,
         "padding_mask": np.arange(20) < np.array([[3], [4], [2], [9], [5]])}
    batches = TokenBatches(x, batch_size=2, shuffle=False, drop_single_last=True)
    assert len(batches) == 2  # the fifth sample alone is left out
    assert batches[1]["token_ids"].shape == (2, 16)  # 9 tokens: padded to 16
    ```
    """

    def __init__(self, x, y=None, sample_weight=None, batch_size=32, shuffle=True,
                 drop_single_last=False, lengths=None):
        super().__init__()
        self.columns = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        self.count = len(np.asarray(x["padding_mask"]))
        self.batch_size = batch_size
        self.lengths = lengths
        self.used = self.count
        if drop_single_last and self.count > 1 and self.count % batch_size == 1:
            self.used = self.count - 1
        self.next_order = epoch_orders(self.count, shuffle)
        self.order = self.next_order()

    def __len__(self):
        return -(-self.used // self.batch_size)

    def __getitem__(self, index):
        rows = self.order[: self.used][index * self.batch_size : (index + 1) * self.batch_size]
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(
            keras.tree.map_structure(lambda column: np.asarray(column)[rows], self.columns)
        )
        return keras.utils.pack_x_y_sample_weight(
            trimmed_tokens(x, self.lengths), y, sample_weight
        )

    def on_epoch_end(self):
        self.order = self.next_order()


class DrawnPairBatches(keras.utils.PyDataset):
    """Batches of sentence pairs drawn afresh every epoch, as token arrays.

    `kcse.objectives.ContrastiveTension`'s batches without TensorFlow: the
    pairs of `ContrastiveTension.pair_draws`, batch after batch in the
    order drawn, each `(x, labels)` with `x` token arrays `(batch, 2,
    length)` (the first sentence of each pair, then the second).

    Args:
        tokens: a dict of token arrays `(sentences, length)`.
        draw: a function giving one epoch's `(first, second, labels)`:
            indices into the sentences and a label per pair.
        batch_size: int. An epoch is `len(labels) // batch_size` batches.
        lengths: the padded lengths of batches (see `trimmed_tokens`).

    Example:
    ```python
    import numpy as np
    from kcse.objectives.token_batches import DrawnPairBatches

    tokens = {"token_ids": np.arange(30).reshape(3, 10) + 1,
              "padding_mask": np.arange(10) < np.array([[3], [4], [2]])}
    draw = lambda: (np.array([0, 1]), np.array([0, 2]), np.array([1.0, 0.0]))
    batches = DrawnPairBatches(tokens, draw, batch_size=2)
    x, labels = batches[0]
    assert x["token_ids"].shape == (2, 2, 8)  # 4 tokens at most: padded to 8
    assert (x["token_ids"][1, 1] == tokens["token_ids"][2, :8]).all()
    ```
    """

    def __init__(self, tokens, draw, batch_size, lengths=None):
        super().__init__()
        self.tokens = {key: np.asarray(value) for key, value in tokens.items()}
        self.draw = draw
        self.batch_size = batch_size
        self.lengths = lengths
        self.pairs = draw()

    def __len__(self):
        return len(self.pairs[2]) // self.batch_size

    def __getitem__(self, index):
        rows = slice(index * self.batch_size, (index + 1) * self.batch_size)
        first, second, labels = (column[rows] for column in self.pairs)
        x = {key: np.stack([value[first], value[second]], axis=1)
             for key, value in self.tokens.items()}
        return trimmed_tokens(x, self.lengths), labels

    def on_epoch_end(self):
        self.pairs = self.draw()

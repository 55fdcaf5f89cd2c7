"""IS-BERT: a CNN over the token states, trained on local-global mutual information."""

import keras

from kcse.losses.mutual_information_loss import MutualInformationLoss
from kcse.objectives.encoder_objective import EncoderObjective


@keras.saving.register_keras_serializable(package="kcse")
class ISBERT(EncoderObjective):
    """IS-BERT (Zhang et al., EMNLP 2020): Info-Sentence BERT.

    The encoder's `token_layer` (IS-BERT's CNN,
    `kcse.layers.TokenConvolution`) turns the last layer's token states
    into local features; their mean over real tokens (`pooling="last_avg"`)
    is the sentence vector. `kcse.losses.MutualInformationLoss` trains the
    backbone and the CNN to tell each sentence's own tokens from the
    batch's other sentences' (the Jensen–Shannon estimate), as
    yanzhangnlp/IS-BERT's `MutualInformationLoss` does on the outputs of
    their `CNN` and mean `Pooling`. Under a `tf.distribute` strategy the
    sentence vectors of every replica are gathered.

    The vector the loss trains is the one `encoder.encode` gives, so the
    encoder must pool the CNN's features without whitening or
    normalisation. The features of [PAD] positions are zeros to the CNN
    (see `TokenConvolution`): unlike the authors' batches, a sentence's
    features do not depend on its batch's padding.

    `fit` takes unlabelled sentences, as `kcse.SimCSE`; a batch needs two.

    Args:
        encoder: a `kcse.SentenceEncoder` with a `token_layer` and
            `pooling="last_avg"`, no whitening, `normalize=False`.

    Example:
    ```python
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(
        backbone, preprocessor, pooling="last_avg",
        token_layer=kcse.layers.TokenConvolution(filters=8))
    model = kcse.ISBERT(encoder)
    model.compile(run_eagerly=True)  # optimizer "auto": Adam(1e-5)
    model.fit(["the cat sat", "a dog ran", "the dog sat"], batch_size=3, verbose=0)
    encoder.encode(["the cat sat"]).shape  # (1, 24): three widths of 8 features
    ```
    """

    in_batch_negatives = True

    def __init__(self, encoder, **kwargs):
        super().__init__(encoder, **kwargs)
        problem = token_layer_problem(encoder) or pooling_problem(encoder)
        if problem:
            raise ValueError(f"ISBERT trains {problem}.")
        self.objective_loss = MutualInformationLoss()

    def call(self, inputs, training=None):
        encoder = self.encoder
        states = encoder.hidden_states(inputs, training=training)["hidden_states"]
        mask = inputs["padding_mask"]
        local = encoder.token_layer(states[-1], mask)
        vectors = encoder.sentence_pooling([local], mask)
        return {"local": local, "global": vectors, "mask": mask}


def token_layer_problem(encoder):
    """Why `encoder` has no features for IS-BERT to train, or None."""
    if encoder.token_layer is None:
        return ("the features of a token layer (IS-BERT's CNN): give the encoder "
                "token_layer=kcse.layers.TokenConvolution()")
    return None


def pooling_problem(encoder):
    """Why `encoder`'s vectors are not IS-BERT's mean of features, or None."""
    if encoder.pooling != "last_avg":
        return f"the mean of its CNN's features: pooling last_avg, not {encoder.pooling}"
    if encoder.whitening is not None or encoder.normalize:
        return "the CNN's mean as it is: an encoder without whitening or normalize"
    return None

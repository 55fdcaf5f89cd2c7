"""Su's linear probe: SimCSE trains a Dense layer on top of a frozen encoder.

Su Jianlin, "Chinese task also benchmark SimCSE" (seed 002): "Since
BERT-whitening is only a linear transformation, I also experimented with
whether SimCSE alone could replicate the effect of this linear
transformation. Specifically, I fixed the weight of the Encoder, then
attached a Dense layer without activation functions, and then trained only
the final Dense layer with SimCSE as the target." He found it worse than
BERT-whitening: SimCSE must tune the encoder.
"""

import contextlib

from kcse.experiments.methods.simcse import SimCSEMethod


class LinearProbeMethod(SimCSEMethod):
    """SimCSE on a Dense layer (no activation, the encoder's width) after
    the pooling, with the encoder's weights frozen.

    The Dense layer takes the place BERT-whitening's linear map has in a
    `kcse.SentenceEncoder` (its `whitening`), so the trained encoder
    saves, loads and encodes as any other. Its kernel starts as Keras'
    default (Glorot uniform, drawn from the run's seed), its bias at zero;
    dropout stays on in the frozen encoder, which gives SimCSE its two
    views. The protocol's settings are SimCSE's (Su: the same as column c).
    """

    name = "linear_probe"
    title = "linear probe (SimCSE)"
    flags = ()

    def __init__(self, rematerialize=False):
        super().__init__(rematerialize=rematerialize)

    @classmethod
    def from_args(cls, args, rematerialize=False):
        return cls(rematerialize)

    def encoder_problem(self, encoder):
        if encoder.whitening is not None:
            return ("the linear probe trains the linear map after the pooling, and this "
                    "encoder has one already (its whitening)")
        return None

    def encoder_to_train(self, encoder, seed):
        """A new encoder on `encoder`'s backbone, pooling and preprocessor,
        with a fresh Dense layer after the pooling."""
        import keras

        problem = self.encoder_problem(encoder)
        if problem:
            raise ValueError(problem)
        head = keras.layers.Dense(
            encoder.backbone.hidden_dim, name="linear_probe",
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed))
        return encoder.with_changes(whitening=head)

    def train(self, encoder, data, protocol, task, seed, prefix, callbacks=()):
        with frozen(encoder.backbone):
            return super().train(encoder, data, protocol, task, seed, prefix, callbacks)


@contextlib.contextmanager
def frozen(layer):
    """`layer`'s variables kept out of training inside the block, then as
    they were."""
    states = [(variable, variable.trainable) for variable in layer.variables]
    for variable, _ in states:
        variable.trainable = False
    try:
        yield
    finally:
        for variable, trainable in states:
            variable.trainable = trainable

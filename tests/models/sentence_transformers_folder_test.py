"""A sentence-transformers folder read back whole: modules.json, prompts, length.

Reference: sentence-transformers itself (`SentenceTransformer(folder).encode`,
its `Transformer`, `WeightedLayerPooling`, `Pooling`, `Dense` and `Normalize`
modules on transformers' PyTorch BERT), none of it kcse's code: kcse's
`SentenceEncoder.from_preset(folder)` must give its vectors within 1e-5 for
every pooling, whitening and normalisation the export writes, and `kcse
evaluate --model FOLDER` the scores of the encoder that wrote the folder.
A folder kcse cannot express, or a damaged one, is one line.
"""

import json
import shutil

import numpy as np
import pytest

import kcse
from checkpoints import TINY_CONFIG
from checkpoints import write_family
from kcse.commands.main import main as kcse_main
from real_models import minilm_folder
from sentence_encoder_test import one_torch_thread

TOLERANCE = 1e-5
# 3 blocks: first_last_avg (blocks 1 and 3) and last2avg (2 and 3) differ.
CONFIG = {**TINY_CONFIG, "num_hidden_layers": 3}
pytestmark = pytest.mark.filterwarnings("ignore::kcse.TruncationWarning")
# kcse pooling (and pooler activation) -> what the folder reads back as.
POOLINGS = {"P1": ("cls", "linear"), "P2": ("pooler", "linear"), "P2-tanh": ("pooler", "tanh"),
            "P3": ("last_avg", "linear"), "P4": ("first_last_avg", "linear"),
            "last2avg": ("last2avg", "linear"), "max": ("max", "linear")}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random BERT checkpoint (3 blocks, with a pooler) and 60 Chinese
    STS-B test sentences."""
    folder = write_family(tmp_path_factory.mktemp("tiny"), "bert", config=CONFIG)
    pairs = kcse.data.read_chinese_task(kcse.data.BUNDLED_CHINESE_STS, "STS-B", "test")
    texts = sorted(set(pairs.sentences1))[:60]
    raw = kcse.SentenceEncoder.from_checkpoint(folder, "bert", 32, pooling="P1")
    return raw, texts


def encoder_of(raw, texts, pooling, whitened, normalize):
    """`pooling` over `raw`'s backbone, whitened on `texts` (to 4 dimensions,
    or all 8 after a cls token: the Dense that looks like a pooler).

    `epsilon=0.1` keeps the kernel's entries below 3.2: bojone's
    1/sqrt(variance) on 60 sentences of a random model reaches 45, which
    scales float32's rounding differences between PyTorch and TensorFlow
    (~4e-7 in the pooled vectors) past 1e-5 on the exporting encoder itself
    (P2: 4.6e-4)."""
    name, activation = POOLINGS[pooling]
    plain = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling=name,
                                 pooler_activation=activation)
    whitening = None
    if whitened:
        whitening = kcse.layers.Whitening(n_components=None if name == "cls" else 4,
                                          epsilon=0.1)
        whitening.adapt(plain.encode(texts))
    return kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling=name,
                                pooler_activation=activation, whitening=whitening,
                                normalize=normalize)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("whitened", [False, True])
@pytest.mark.parametrize("pooling", list(POOLINGS))
def test_an_exported_folder_reads_back_as_sentence_transformers_runs_it(
        tiny, tmp_path, pooling, whitened, normalize):
    from sentence_transformers import SentenceTransformer

    raw, texts = tiny
    encoder = encoder_of(raw, texts, pooling, whitened, normalize)
    encoder.export(tmp_path / "st", format="sentence_transformers")
    back = kcse.SentenceEncoder.from_preset(str(tmp_path / "st"))
    assert (back.pooling, back.pooler_activation) == POOLINGS[pooling]
    assert back.normalize == normalize and (back.whitening is not None) == whitened
    assert back.preprocessor.sequence_length == 32  # The folder's max_seq_length.
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    with one_torch_thread():
        theirs = model.encode(texts, convert_to_numpy=True)
    ours = back.encode(texts)
    dim = 4 if whitened and pooling != "P1" else 8
    assert ours.shape == theirs.shape == (len(texts), dim)
    exporting = encoder.encode(texts)
    # Within 1e-5 of sentence-transformers; where the exporting encoder is
    # itself farther (P2's linear pooler whitened and normalised: 1.09e-5,
    # its large outputs' rounding), no farther than it.
    baseline = np.abs(exporting - theirs).max()
    assert np.abs(ours - theirs).max() <= max(TOLERANCE, baseline + 1e-6), baseline
    # The folder's backbone is keras-hub's conversion, the exporting one the
    # checkpoint's: their float32 sums differ in order, which normalising a
    # whitened random pooler's vector of small norm brings to 1.03e-5.
    assert np.abs(ours - exporting).max() <= 2 * TOLERANCE


@pytest.mark.parametrize("pooling", ["P2-tanh", "P4"])
def test_a_folder_sentence_transformers_saved_reads_back(tiny, tmp_path, pooling):
    """`SentenceTransformer.save` of the folder writes sentence-transformers
    5's layout (module paths such as `...modules.pooling.Pooling`, a
    `pooling_mode` key, `max_seq_length` as the tokenizer's
    `model_max_length`); it drops `vocab.txt`, which keras-hub's BERT
    tokenizer reads: copied back here, and refused in one line without."""
    from sentence_transformers import SentenceTransformer

    raw, texts = tiny
    encoder_of(raw, texts, pooling, True, True).export(tmp_path / "st",
                                                      format="sentence_transformers")
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    model.save(str(tmp_path / "saved"))
    with pytest.raises(ValueError, match=r"saved/vocab.txt: missing; keras-hub reads"):
        kcse.SentenceEncoder.from_preset(str(tmp_path / "saved"))
    shutil.copy(tmp_path / "st" / "vocab.txt", tmp_path / "saved" / "vocab.txt")
    back = kcse.SentenceEncoder.from_preset(str(tmp_path / "saved"))
    assert (back.pooling, back.pooler_activation) == POOLINGS[pooling]
    assert back.normalize and back.whitening is not None
    assert back.preprocessor.sequence_length == 32
    with one_torch_thread():
        theirs = model.encode(texts, convert_to_numpy=True)
    assert np.abs(back.encode(texts) - theirs).max() <= TOLERANCE


def test_all_minilm_l6_v2_reads_as_its_modules_say():
    """all-MiniLM-L6-v2 as published (mean Pooling, Normalize, max_seq_length
    256; no Normalize folder): read whole, without naming a pooling."""
    from sentence_transformers import SentenceTransformer

    encoder = kcse.SentenceEncoder.from_preset(minilm_folder())
    assert (encoder.pooling, encoder.normalize, encoder.whitening) == ("last_avg", True, None)
    assert encoder.preprocessor.sequence_length == 256
    texts = ["A man is playing a guitar.", "一个女孩在唱歌", "Two dogs run."]
    with one_torch_thread():
        theirs = SentenceTransformer(minilm_folder(), device="cpu").encode(texts)
    assert np.abs(encoder.encode(texts) - theirs).max() <= TOLERANCE
    with pytest.raises(ValueError, match=r"modules.json pools 'last_avg', and an exported"):
        kcse.SentenceEncoder.from_preset(minilm_folder(), pooling="cls")
    with pytest.raises(ValueError, match="normalize=False: .*modules.json normalises"):
        kcse.SentenceEncoder.from_preset(minilm_folder(), normalize=False)


@pytest.fixture(scope="module")
def exported(tiny, tmp_path_factory):
    """The tiny model P4, whitened and normalised: its .keras file, its
    sentence-transformers and Hugging Face folders, and a pairs file."""
    raw, texts = tiny
    folder = tmp_path_factory.mktemp("exported")
    encoder = encoder_of(raw, texts, "P4", True, True)
    encoder.save(folder / "encoder.keras")
    encoder.export(folder / "st", format="sentence_transformers")
    encoder.export(folder / "hf", format="huggingface")
    kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="cls").save(folder / "cls.keras")
    # Sentences of the model's own words (Chinese text is mostly [UNK] to it:
    # equal vectors, whose cosines' order is rounding).
    words = [word for word in (folder / "st" / "vocab.txt").read_text(encoding="utf-8").split()
             if not word.startswith("[")]
    rng = np.random.default_rng(0)

    def sentence():
        return " ".join(rng.choice(words, rng.integers(3, 9)))

    (folder / "pairs.data").write_text("".join(
        f"{sentence()}\t{sentence()}\t{rng.integers(0, 6)}\n" for _ in range(80)),
        encoding="utf-8")
    return folder


def evaluate(model, folder, *flags):
    scores = folder / f"scores-{len(list(folder.glob('scores-*')))}.json"
    assert kcse_main(["evaluate", "--model", str(model), "--data", str(folder / "pairs.data"),
                     "--json", str(scores), *flags]) == 0
    return json.loads(scores.read_text())[0]


def test_kcse_evaluate_scores_a_folder_as_the_encoder_that_wrote_it(exported):
    """`--model FOLDER` scores as `--model encoder.keras` (P4, whitening,
    normalize read from modules.json); a Hugging Face folder is a backbone
    pooled as `--pooling` says."""
    keras_file = evaluate(exported / "encoder.keras", exported)
    folder = evaluate(exported / "st", exported)
    assert folder["n"] == keras_file["n"] == 80
    assert abs(folder["spearman"] - keras_file["spearman"]) <= 1e-4
    assert abs(folder["pearson"] - keras_file["pearson"]) <= 1e-4
    cls = evaluate(exported / "cls.keras", exported)
    backbone = evaluate(exported / "hf", exported, "--pooling", "P1")
    assert abs(backbone["spearman"] - cls["spearman"]) <= 1e-4
    assert abs(cls["spearman"] - keras_file["spearman"]) > 1e-3  # The modules matter.


def edited(exported, tmp_path, edit):
    folder = tmp_path / "edited"
    shutil.copytree(exported / "st", folder)
    edit(folder)
    return folder


def edit_json(name, change):
    def edit(folder):
        path = folder / name
        value = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps(change(value)), encoding="utf-8")
    return edit


def set_field(name, **fields):
    return edit_json(name, lambda value: {**value, **fields})


def reorder(*order):
    return edit_json("modules.json", lambda modules: [modules[index] for index in order])


def truncate(folder):
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])


def pooling_mode(**fields):
    return edit_json("2_Pooling/config.json", lambda config: {
        key: value for key, value in config.items() if not key.startswith("pooling_mode")
    } | fields)


def add_module(kind):
    return edit_json("modules.json", lambda modules: modules + [
        {"idx": len(modules), "name": "extra", "path": "", "type": kind}])


# (edit of the exported P4 + whitening + normalize folder, the file, what the line says)
DAMAGED = {
    "modules.json is not JSON": (lambda folder: (folder / "modules.json").write_text("[{"),
                                 "modules.json", "not a sentence-transformers module list"),
    "an unknown module": (add_module("my_package.Projection"), "modules.json",
                          "module 5 ('my_package.Projection', path ''): kcse has no such module"),
    "mean_sqrt_len_tokens": (pooling_mode(pooling_mode_mean_sqrt_len_tokens=True),
                             "modules.json", "pooling mode 'mean_sqrt_len_tokens' has no kcse"),
    "weightedmean": (pooling_mode(pooling_mode="weightedmean"), "modules.json",
                     "pooling mode 'weightedmean' has no kcse pooling"),
    "lasttoken": (pooling_mode(pooling_mode="lasttoken"), "modules.json",
                  "pooling mode 'lasttoken' has no kcse pooling"),
    "two pooling modes": (pooling_mode(pooling_mode=["mean", "max"]), "modules.json",
                          "pooling modes ['mean', 'max']: kcse pools one way"),
    "a ReLU Dense": (set_field("3_Dense/config.json",
                               activation_function="torch.nn.modules.activation.ReLU"),
                     "modules.json", "activation_function 'torch.nn.modules.activation.ReLU'"),
    "a Dense before the Pooling": (reorder(0, 1, 3, 2, 4), "modules.json",
                                   "a Pooling module must follow the Transformer"),
    "Normalize before the Dense": (reorder(0, 1, 2, 4, 3), "modules.json",
                                   "'sentence_transformers.models.Normalize', path "
                                   "'4_Normalize'): not where kcse's encoder has it"),
    "other layer weights": (set_field("1_WeightedLayerPooling/config.json", layer_start=2),
                            "modules.json", "layer_start 2 and layer_weights of shape [3]"),
    "a truncated model.safetensors": (truncate, "model.safetensors",
                                      "truncated: "),
    "an edited num_hidden_layers": (set_field("config.json", num_hidden_layers=4),
                                    "config.json", "num_hidden_layers 4, but"),
    "an edited model_type": (set_field("config.json", model_type="gpt2"), "config.json",
                             "model_type 'gpt2': kcse reads Hugging Face folders of model_type"),
    "an edited vocab_size": (set_field("config.json", vocab_size=41), "config.json",
                             "vocab_size 41, hidden_size 8, but"),
    "no vocab.txt": (lambda folder: (folder / "vocab.txt").unlink(), "vocab.txt",
                     "missing; keras-hub reads the tokenizer from it"),
    "no do_lower_case": (edit_json("tokenizer_config.json", lambda config: {
        key: value for key, value in config.items() if key != "do_lower_case"}),
        "tokenizer_config.json", "do_lower_case must be true or false; got None"),
    "prompts as a list": (set_field("config_sentence_transformers.json",
                                    prompts=["query: "]),
                          "config_sentence_transformers.json",
                          "prompts must be an object of prompt names to texts"),
    "a prompt that is a number": (set_field("config_sentence_transformers.json",
                                            prompts={"query": 5}),
                                  "config_sentence_transformers.json",
                                  "prompts must be an object of prompt names to texts"),
    "an unknown default prompt": (set_field("config_sentence_transformers.json",
                                            default_prompt_name="query"),
                                  "config_sentence_transformers.json",
                                  "default_prompt_name \"query\" is not one of its prompts"),
    "a max_seq_length as text": (set_field("sentence_bert_config.json", max_seq_length="32"),
                                 "sentence_bert_config.json",
                                 "max_seq_length must be a positive integer; got '32'"),
}


@pytest.fixture
def no_model_loads(monkeypatch):
    """The weights never load: the files are refused before."""
    from kcse.models import model_sources

    def load(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(model_sources, "load_model", load)
    monkeypatch.setattr(model_sources, "load_preset", load)
    monkeypatch.setattr(kcse.sentence_encoder, "load_preset", load)


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_or_inexpressible_folder_is_one_line(
        exported, tmp_path, case, capsys, no_model_loads):
    edit, name, message = DAMAGED[case]
    folder = edited(exported, tmp_path, edit)
    assert kcse_main(["evaluate", "--model", str(folder), "--data",
                     str(exported / "pairs.data")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"kcse evaluate: error: --model {folder / name}: ")
    assert message in error and error.count("\n") == 1, error
    with pytest.raises(ValueError) as raised:
        kcse.SentenceEncoder.from_preset(str(folder))
    assert str(raised.value).startswith(f"{folder / name}: ") and message in str(raised.value)


def test_a_pooling_that_is_not_the_folders_is_one_line(exported, capsys, no_model_loads):
    folder = exported / "st"
    for command, rest in [("evaluate", ["--data", str(exported / "pairs.data")]),
                          ("encode", ["--input", str(exported / "pairs.data"),
                                      "--output", str(exported / "v.npy")])]:
        assert kcse_main([command, "--model", str(folder), "--pooling", "cls", *rest]) == 2
        assert capsys.readouterr().err == (
            f"kcse {command}: error: --pooling cls: {folder / 'modules.json'} pools "
            "'first_last_avg', and an exported folder keeps its pooling; use another pooling\n")
    with pytest.raises(ValueError, match=r"pooling 'P3': .*modules.json pools 'first_last_avg'"):
        kcse.SentenceEncoder.from_preset(str(folder), pooling="P3")
    with pytest.raises(ValueError, match="whitening: .*has its own whitening"):
        kcse.SentenceEncoder.from_preset(str(folder), whitening=kcse.layers.Whitening())


def test_the_folders_own_pooling_named_is_taken(exported):
    back = kcse.SentenceEncoder.from_preset(str(exported / "st"), pooling="P4", normalize=True,
                                            sequence_length=16)
    assert back.pooling == "first_last_avg" and back.preprocessor.sequence_length == 16


def test_a_damaged_hugging_face_folder_is_one_line(exported, tmp_path, capsys, no_model_loads):
    """The same checks on a folder without modules.json (`format="huggingface"`)."""
    folder = tmp_path / "hf"
    shutil.copytree(exported / "hf", folder)
    truncate(folder)
    assert kcse_main(["evaluate", "--model", str(folder), "--pooling", "P1", "--data",
                     str(exported / "pairs.data")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"kcse evaluate: error: --model {folder / 'model.safetensors'}: "
                            "truncated: ") and error.count("\n") == 1, error
    shutil.copy(exported / "hf" / "model.safetensors", folder)
    set_field("config.json", hidden_size=16)(folder)
    with pytest.raises(ValueError, match=r"hf/config.json: vocab_size 40, hidden_size 16, but "):
        kcse.SentenceEncoder.from_preset(str(folder), pooling="P1")

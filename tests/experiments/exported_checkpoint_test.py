"""Su's checkpoints on a machine without TensorFlow: the exported folder's a/b/c.

The path of docs/gpu.md: `kcse export --format huggingface` of an original
Google-layout checkpoint on a machine with TensorFlow, then the recipe with
`--models FOLDER`. The reference is the original checkpoint run on
TensorFlow (the checkpoint reader and its bert4keras tokenizer are checked
against bert4keras in tests/models/google_checkpoint and
tests/models/google_word_piece_tokenizer_test.py). One tiny BERT and one tiny
NEZHA checkpoint on real STS-B pairs, Su's protocol.
"""

import json

import numpy as np
import pytest

import kcse
import tensorflow_free
from kcse.commands.main import main as kcse_main
from kcse.experiments.published import published_cell
from kcse.layers.pooling_rules import SU_POOLINGS as POOLINGS
from kcse.models import model_sources
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_checkpoint
from tiny_grid import write_task

FAMILIES = ("bert", "nezha")
LENGTH = 64  # The recipe's --max-length (Su's).
# The grid's poolings: P2 needs the pretrained pooler carried, P4 the first
# block's states; every pooling's vectors are compared below.
GRID_POOLINGS = ("P2", "P4")
GRID_FLAGS = ["--tasks", "STS-B", "--poolings", ",".join(GRID_POOLINGS), "--sentences", "64",
              "--learning-rate", "1e-3"]
# Cut by the checkpoint's tokenizer (bert4keras' rules) and by the folder's:
# full-width forms kept (no NFKC), accents stripped, control and format
# characters dropped, a word of 201 characters one [UNK], unknown characters.
HAND_CASES = ["一个女孩，２？Ａ", "RÉSUMÉ résumé", "一\u200b个\x07女\ufeff孩", "a" * 200, "a" * 201,
              "㈱⒈ 未知字符", ""]
# Tokens the hand-written cases need (beside the sample's characters): a
# folding tokenizer would give "，" the id of "," and "ａ" that of "a".
HAND_TOKENS = ("a", "##a", "resume", ",", "2", "ａ", "２", "，")
# Run in a process on JAX where TensorFlow, tensorflow-text and jieba cannot be
# imported: each folder's token ids and its P1-P4 vectors, as JSON on stdout.
FOLDER_SIDE = """
import json, sys
import kcse
from kcse.models.model_sources import load_preset
sentences = json.loads(open(sys.argv[1], encoding="utf-8").read())
out = {}
for folder in sys.argv[2:]:
    backbone, preprocessor = load_preset(folder, %d)
    ids = [list(map(int, piece_ids)) for piece_ids in preprocessor.tokenizer(sentences)]
    vectors = {pooling: kcse.SentenceEncoder(backbone, preprocessor, pooling=pooling)
               .encode(sentences[:50]).tolist() for pooling in %r}
    out[folder] = {"ids": ids, "vectors": vectors}
print(json.dumps(out))
""" % (LENGTH, POOLINGS)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, shared_data):
    """Tiny BERT and NEZHA checkpoints, their recipe runs on TensorFlow, and
    their `kcse export --format huggingface` folders."""
    folder = tmp_path_factory.mktemp("exported_checkpoint")
    sample = stsb_sample(shared_data)
    write_task(folder / "data", "STS-B", sample, lambda label: int(label))
    checkpoints, folders = {}, {}
    for family in FAMILIES:
        checkpoints[family] = tiny_checkpoint(folder / f"tiny_{family}", sample,
                                              position_embeddings=family == "bert",
                                              extra_tokens=HAND_TOKENS)
        folders[family] = folder / f"{family}_hf"
        assert kcse_main(["export", "--model", f"{checkpoints[family]}:{family}",
                         "--format", "huggingface", "--output", str(folders[family])]) == 0
    flags = GRID_FLAGS + ["--data-dir", str(folder / "data")]
    for name, models in (("original", [f"{checkpoints[f]}:{f}" for f in FAMILIES]),
                         ("folders", [str(folders[f]) for f in FAMILIES])):
        recipe("chinese_simcse").main(["--models", ",".join(models),
                                       "--output", str(folder / name), *flags])
    return folder, checkpoints, folders, sample


def grid_scores(results_file):
    """`{(family, pooling): (a, b, c)}` on the test split of a recipe's results.json."""
    cells = json.loads(results_file.read_text(encoding="utf-8"))["cells"].values()
    scores = {}
    for cell in cells:
        assert cell["status"] == "done" and cell["settings"]["hidden_dropout"] == 0.3
        family = next(family for family in FAMILIES if family in cell["model"])
        scores[family, cell["pooling"]] = tuple(
            cell[column]["test"]["spearman"] for column in ("raw", "whitening", "trained"))
    assert len(scores) == len(FAMILIES) * len(GRID_POOLINGS)
    return scores


def test_folders_give_the_checkpoints_a_b_c(exported):
    """a (raw), b (whitening) and c (SimCSE-trained: the grid's dropout 0.3
    and seed 0 drive the same masks) within 0.01 for P2 and P4 of BERT and
    NEZHA (relative positions, pretrained pooler); both runs on TensorFlow."""
    folder = exported[0]
    original = grid_scores(folder / "original" / "results.json")
    again = grid_scores(folder / "folders" / "results.json")
    assert original.keys() == again.keys()
    for place, scores in original.items():
        assert np.abs(np.subtract(scores, again[place])).max() <= 0.01, (place, scores, again)
        assert len(set(scores)) == 3, place  # a, b and c are three numbers.


def test_folders_give_a_and_b_on_jax_without_tensorflow(exported):
    """The recipe with the folders on JAX, TensorFlow, tensorflow-text and
    jieba hidden (as on the GPU machine): a and b within 0.05 of the
    original checkpoints' on TensorFlow; c, trained with JAX's dropout
    masks, is finite."""
    folder, _, folders, _ = exported
    run = tensorflow_free.run(["recipes/chinese_simcse.py", "--models",
                               ",".join(str(folders[family]) for family in FAMILIES),
                               "--data-dir", str(folder / "data"),
                               "--output", str(folder / "jax"), *GRID_FLAGS])
    assert run.returncode == 0, run.stderr[-3000:]
    original = grid_scores(folder / "original" / "results.json")
    on_jax = grid_scores(folder / "jax" / "results.json")
    assert original.keys() == on_jax.keys()
    for place, scores in original.items():
        assert np.abs(np.subtract(scores[:2], on_jax[place][:2])).max() <= 0.05, (
            place, scores, on_jax[place])
        assert np.isfinite(on_jax[place][2]), place


def test_folders_cut_and_encode_as_the_checkpoints_without_tensorflow(exported, shared_data):
    """In a process on JAX without TensorFlow, tensorflow-text or jieba, each
    folder cuts the hand-written cases and every sentence of Chinese STS-B's
    test split (characters outside the tiny vocabulary: [UNK]) into the
    checkpoint tokenizer's ids on TensorFlow, and its P1-P4 vectors are the
    original checkpoint's within 1e-5."""
    import tensorflow as tf

    folder, checkpoints, folders, sample = exported
    test = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data")
    sentences = HAND_CASES + sorted({text for pairs in sample.values()
                                     for a, b, _ in pairs for text in (a, b)})
    sentences += sorted(set(test.sentences1) | set(test.sentences2))
    (folder / "sentences.json").write_text(json.dumps(sentences, ensure_ascii=False),
                                           encoding="utf-8")
    run = tensorflow_free.run(["-c", FOLDER_SIDE, str(folder / "sentences.json"),
                               *map(str, folders.values())])
    assert run.returncode == 0, run.stderr[-3000:]
    side = json.loads(run.stdout.strip().splitlines()[-1])
    for family in FAMILIES:
        # One read of the checkpoint, its backbone under each pooling (as
        # the folder side does with the folder's).
        original = kcse.SentenceEncoder.from_checkpoint(checkpoints[family], family, LENGTH)
        for pooling in POOLINGS:
            encoder = kcse.SentenceEncoder(original.backbone, original.preprocessor,
                                           pooling=pooling)
            theirs = side[str(folders[family])]
            if pooling == POOLINGS[0]:
                # Its graph (TensorFlow Text), as tf.data runs it on TensorFlow.
                tokenizer = tf.function(encoder.preprocessor.tokenizer)
                ids = tokenizer(tf.constant(sentences)).to_list()
                assert theirs["ids"] == ids, family
                vocabulary = encoder.preprocessor.tokenizer.get_vocabulary()
                pieces = [[vocabulary[i] for i in ids[HAND_CASES.index(text)]]
                          for text in ("a" * 200, "a" * 201, "RÉSUMÉ résumé")]
                assert pieces == [["a"] + ["##a"] * 199, ["[UNK]"], ["resume", "resume"]]
            vectors = encoder.encode(sentences[:50])
            difference = np.abs(vectors - np.array(theirs["vectors"][pooling])).max()
            assert difference <= 1e-5, (family, pooling, difference)


def test_roformer_folder_without_jieba_is_one_line(tmp_path, shared_data):
    """RoFormer's folder reads back (rotary positions) but cuts with jieba:
    on a machine without it, the recipe and the Python API say so in one
    line naming the feature and its install, before any work."""
    sample = stsb_sample(shared_data)
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    checkpoint = tiny_checkpoint(tmp_path / "tiny_roformer", sample, position_embeddings=False)
    folder = tmp_path / "roformer_hf"
    assert kcse_main(["export", "--model", f"{checkpoint}:roformer", "--format", "huggingface",
                     "--output", str(folder)]) == 0
    line = "WoBERT and RoFormer's tokenizer needs jieba, which is not installed: pip install jieba"
    run = tensorflow_free.run(["recipes/chinese_simcse.py", "--models", str(folder),
                               "--data-dir", str(tmp_path / "data"),
                               "--output", str(tmp_path / "jax"), *GRID_FLAGS])
    assert run.returncode == 2
    assert run.stderr.strip() == f"chinese_simcse.py: error: --models {folder}: {line}"
    assert not (tmp_path / "jax").exists()
    run = tensorflow_free.run(["-c", "import sys, kcse; kcse.SentenceEncoder.from_preset("
                               "sys.argv[1], sequence_length=16)", str(folder)])
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"kcse.foundation.optional_packages.MissingPackageError: {line}")


def test_a_su_checkpoint_exported_by_name_keeps_his_published_cells(tmp_path, shared_data):
    """`kcse export --model NEZHA --checkpoint-root ...` writes Su's name into
    config.json; the folder's grid cells are compared with his published
    ones (kexue.fm 8348, `kcse.experiments.published`) as his checkpoint's are."""
    sample = stsb_sample(shared_data)
    tiny_checkpoint(tmp_path / "root" / "nezha_base_wwm", sample, position_embeddings=False)
    folder = tmp_path / "su_hf" / "NEZHA"
    assert kcse_main(["export", "--model", "NEZHA", "--checkpoint-root", str(tmp_path / "root"),
                     "--format", "huggingface", "--output", str(folder)]) == 0
    assert json.loads((folder / "config.json").read_text())["kcse_published_as"] == "NEZHA"
    spec = model_sources.resolve_model(str(folder))
    assert (spec.name, spec.family, spec.published_as) == ("NEZHA", None, "NEZHA")
    assert published_cell(spec.published_as, "P1", "STS-B") is not None
    # A folder exported from PATH:family names no published model.
    assert kcse_main(["export", "--model", f"{tmp_path / 'root' / 'nezha_base_wwm'}:nezha",
                     "--format", "huggingface", "--output", str(tmp_path / "other")]) == 0
    assert model_sources.resolve_model(str(tmp_path / "other")).published_as is None

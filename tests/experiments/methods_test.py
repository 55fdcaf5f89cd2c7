import json
import re

import numpy as np
import pytest

import kcse
from kcse.data import SentencePairs
from kcse.foundation import arguments
from kcse.experiments import methods
from kcse.experiments import protocols
from kcse.experiments.methods.sup_simcse import labelled_pair_triplets
from conftest import tiny_preprocessor
from tiny_grid import cell_of
from tiny_grid import plant_sentinels
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_checkpoint
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)
from tiny_grid import write_nli
from tiny_grid import write_task

METHOD_RECIPES = {
    "consert": ("consert", {"temperature": 0.1, "batch_size": 96, "optimizer": "adamw",
                            "training_pooling": "last_avg"}),
    "sg_opt": ("sg_opt", {"temperature": 0.01, "batch_size": 16, "optimizer": "adamw"}),
    "sup_simcse": ("sup_simcse", {"temperature": 0.05, "batch_size": 64}),
}


def run(name, tmp_path, model, *extra):
    return recipe(name).main([
        "--models", model, "--tasks", "STS-B", "--poolings", "P1",
        "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / name),
        "--sentences", "64", *extra,
    ])


def assert_recipe_trains_its_method(name, tmp_path, model, capsys, *extra):
    """Runs recipe `name` on the tiny grid twice: one cell, the method's
    settings, c trained away from a; the rerun trains nothing."""
    # A large step, so one batch visibly changes the random tiny model.
    extra = ["--learning-rate", "1e-3", *extra]
    run(name, tmp_path, model, *extra)
    results = json.loads((tmp_path / name / "results.json").read_text())
    cell = cell_of(results["cells"], f"tiny_bert|P1|STS-B|su|{name}")
    assert len(results["cells"]) == 1
    assert cell["method"] == name and cell["published"] is None
    assert cell["settings"]["hidden_dropout"] == 0.1
    for setting, value in METHOD_RECIPES[name][1].items():
        assert cell["settings"][setting] == value
    train = kcse.data.read_pairs(tmp_path / "data" / "STS-B" / "STS-B.train.data")
    expected = (
        int(np.sum(train.scores >= 4)) if name == "sup_simcse" else 64
    )
    assert cell["training_samples"] == expected
    assert np.isfinite(cell["trained"]["test"]["spearman"])
    # Training changed the encoder: c differs from a.
    assert cell["trained"]["test"]["spearman"] != cell["raw"]["test"]["spearman"]
    first = capsys.readouterr().out
    assert f"[1/1] tiny_bert|P1|STS-B|su|{name}" in first
    assert "Su Jianlin's published" not in first  # Su's table is SimCSE's.
    run(name, tmp_path, model, *extra)
    assert "1 cell(s) with these settings already in" in capsys.readouterr().out


# sup_simcse's run on the shared grid is test_supervised_simcse_reads_train_labels_only's.
@pytest.mark.parametrize("name, extra", [
    # ConSERT's warm-up makes its one step of 64 sentences in a batch of 96
    # a step at rate 0; a second epoch's step is at the full rate.
    ("consert", ["--epochs", "2"]),
    ("sg_opt", ["--projection-dim", "32"]),
])
def test_recipe_trains_its_method_on_the_shared_grid(name, extra, tiny_setup, capsys):
    tmp_path, model = tiny_setup
    assert_recipe_trains_its_method(name, tmp_path, model, capsys, *extra)


def test_sg_opt_ablation_flags_build_the_objective_and_name_the_cell(tiny_setup, capsys):
    """SG-OPT's ablation flags reach `kcse.SGOpt` and the cell's settings
    (so they are part of its identity); a layer range beyond the model
    leaves c out with the reason; a malformed one is refused in one line."""
    tmp_path, model = tiny_setup
    flags = ["--projection-dim", "32", "--sg-loss", "base", "--pivot-pooling", "max",
             "--pivot-layers", "1,3", "--no-projection-head"]
    run("sg_opt", tmp_path, model, *flags)
    [cell] = json.loads((tmp_path / "sg_opt" / "results.json").read_text())["cells"].values()
    assert {name: cell["settings"][name] for name in
            ("sg_loss", "pivot_pooling", "pivot_layers", "projection_head")} == {
        "sg_loss": "base", "pivot_pooling": "max", "pivot_layers": [1, 3],
        "projection_head": False}
    assert np.isfinite(cell["trained"]["test"]["spearman"])

    # The tiny model has the embeddings and 2 blocks: layers 0..2.
    run("sg_opt", tmp_path, model, "--projection-dim", "32", "--pivot-layers", "1,4")
    cells = json.loads((tmp_path / "sg_opt" / "results.json").read_text())["cells"]
    [beyond] = [c for c in cells.values() if c["settings"].get("pivot_layers") == [1, 4]]
    assert beyond["trained"] is None and "--pivot-layers 1,4: the model has 3 layers" in (
        beyond["untrained"])
    assert beyond["whitening"] is not None  # a and b stay.
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run("sg_opt", tmp_path, model, "--pivot-layers", "3,1")
    assert exit_info.value.code == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.strip()][-1:]
    assert "--pivot-layers" in line and "0 <= FIRST < STOP" in line


def test_sg_opt_method_builds_the_objective_it_records():
    method = methods.SGOptMethod(64, 0.2, "opt1", "max", (0, 2), False)
    encoder = kcse.SentenceEncoder(
        kcse.models.BertBackbone(vocabulary_size=10, num_layers=2, num_heads=2,
                                 hidden_dim=8, intermediate_dim=16),
        None, pooling="cls")
    sg_opt = method.objective(encoder, protocols.PROTOCOLS["su"])
    assert (sg_opt.projection_dim, sg_opt.regularization, sg_opt.variant,
            sg_opt.pivot_pooling, sg_opt.pivot_layers, sg_opt.projection) == (
        64, 0.2, "opt1", "max", (0, 2), None)
    assert methods.SGOptMethod(optimizer="adam").settings() == {
        "method": "sg_opt", "projection_dim": 4096, "regularization": 0.1}  # Older cells.


@pytest.mark.parametrize("name, beta_2, bias_correction", [
    ("consert", 0.999, False),  # ConSERT's main.py: eps 1e-6, correct_bias False
    ("sg_opt", 0.9, True),  # SG-BERT's training.py: betas (0.9, 0.9), correct_bias True
])
def test_methods_train_with_their_authors_adamw_unless_told_adam(name, beta_2, bias_correction):
    """By default the scripts' AdamW (fit's weight decay 0.01 and clip 1) at
    WarmupLinear over the run's steps, recorded in the cell's settings;
    --optimizer adam: the protocol's Adam, with the settings of the cells
    made before the choice, which stay valid."""
    from kcse.experiments import command_line

    parser = command_line.comparison_parser("doc\n\nmore", "out")
    command_line.add_method_arguments(parser, [name])
    args = parser.parse_args(["--epochs", "3"])
    method = methods.method_from_args(name, args)
    protocol = protocols.protocol_from_args(args, method)
    optimizer = method.optimizer(protocol, 1000)
    assert (optimizer.beta_2, optimizer.bias_correction, optimizer.epsilon,
            optimizer.weight_decay, optimizer.global_clipnorm) == (
        beta_2, bias_correction, 1e-6, 0.01, 1.0)
    schedule = optimizer._learning_rate
    batches = -(-1000 // protocol.batch_size)
    assert (schedule.learning_rate, schedule.total_steps, schedule.warmup_steps) == (
        protocol.learning_rate, 3 * batches, -(-3000 // (10 * protocol.batch_size)))
    assert method.settings()["optimizer"] == "adamw"
    adam = methods.method_from_args(name, parser.parse_args(["--optimizer", "adam"]))
    assert adam.optimizer(protocol, 1000) is None and "optimizer" not in adam.settings()
    assert "correct_bias" in " ".join(parser.format_help().split())


def test_supervised_simcse_reads_train_labels_only(tiny_setup, monkeypatch, capsys):
    """The sup_simcse recipe on the shared grid (as the other methods':
    `assert_recipe_trains_its_method`) trains once, on the train split's
    labelled pairs only: none of the pairs planted in valid and test."""
    tmp_path, model = tiny_setup
    task_dir = tmp_path / "data" / "STS-B"
    plant_sentinels(task_dir, "STS-B", [5, 0])
    seen = []
    original_fit = kcse.SupervisedSimCSE.fit
    monkeypatch.setattr(
        kcse.SupervisedSimCSE, "fit",
        lambda self, x, **kw: seen.append(x) or original_fit(self, x, **kw),
    )
    assert_recipe_trains_its_method("sup_simcse", tmp_path, model, capsys)
    (anchors, positives, negatives), = seen  # The rerun trained nothing.
    assert not any("哨兵" in s for s in anchors + positives + negatives)
    train = kcse.data.read_pairs(task_dir / "STS-B.train.data")
    similar = {(a, b) for a, b, s in zip(train.sentences1, train.sentences2, train.scores) if s >= 4}
    dissimilar = {b for a, b, s in zip(train.sentences1, train.sentences2, train.scores) if s <= 1}
    assert set(zip(anchors, positives)) == similar
    assert set(negatives) <= dissimilar


def test_labelled_pair_triplets_prefer_a_dissimilar_pair_of_the_same_anchor():
    pairs = SentencePairs(
        ["q1", "q1", "q2", "q3", "q4"],
        ["q1 again", "q1 lookalike", "q2 again", "other", "q4 again"],
        np.array([1.0, 0.0, 1.0, 0.0, 0.0]),
    )
    triplets = labelled_pair_triplets(pairs, "LCQMC", seed=3)
    assert list(triplets) == [
        ("q1", "q1 again", "q1 lookalike"),
        ("q2", "q2 again", triplets.contradictions[1]),
    ]
    assert triplets.contradictions[1] in {"q1 lookalike", "other", "q4 again"}
    # STS-B: ≥ 4 is similar, ≤ 1 dissimilar; 2-3 are neither.
    sts = SentencePairs(["a", "b", "c"], ["a'", "b'", "c'"], np.array([4.0, 3.0, 1.0]))
    assert list(labelled_pair_triplets(sts, "STS-B")) == [("a", "a'", "c'")]
    with pytest.raises(ValueError, match="no pair labelled ≤ 1"):
        labelled_pair_triplets(
            SentencePairs(["a"], ["b"], np.array([5.0]), source="x.data"), "STS-B"
        )


def test_consert_two_stage_mode_trains_on_nli_then_sentences(
    tmp_path, shared_data, monkeypatch
):
    sample = stsb_sample(shared_data)
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    model = f"{tiny_checkpoint(tmp_path / 'tiny_bert', sample)}:bert"
    nli = write_nli(tmp_path / "nli.jsonl", sample)
    stages = []
    original_fit = kcse.ConSERT.fit
    monkeypatch.setattr(
        kcse.ConSERT, "fit",
        lambda self, x, y=None, **kw: stages.append((self.mode, x, y, self.optimizer))
        or original_fit(self, x, y=y, **kw),
    )
    run("consert", tmp_path, model, "--mode", "joint-unsup", "--nli", str(nli),
        "--batch-size", "8", "--views", "token_cutoff:0.1,feature_cutoff:0.2")
    (first, premises, labels, nli_optimizer), (second, sentences, none, optimizer) = stages
    # Each stage warms up over its own steps (main.py is run once a stage).
    assert [(o._learning_rate.learning_rate, o._learning_rate.total_steps)
            for o in (nli_optimizer, optimizer)] == [(2e-5, 3), (5e-7, 8)]
    assert first == "joint" and second == "unsup" and none is None
    assert premises[0] == [a for a, _, _ in sample["train"][:24]]
    np.testing.assert_array_equal(labels, np.arange(24) % 3)
    assert len(sentences) == 64
    cells = json.loads((tmp_path / "consert" / "results.json").read_text())["cells"]
    cell = cell_of(cells, "tiny_bert|P1|STS-B|su|consert")
    assert cell["training_samples"] == 24 + 64
    assert cell["settings"]["views"] == {
        "nli": ["token_cutoff:0.1", "feature_cutoff:0.2"],
        "unsup": ["token_cutoff:0.1", "feature_cutoff:0.2"],
    }
    assert cell["settings"]["mode"] == "joint-unsup"


def test_consert_trains_with_its_training_pooling_and_scores_with_the_row():
    """ConSERT trains mean-pooled (main.py) whatever the row; the row's
    encoder, sharing the backbone, is the one scored; `row` trains it as is
    and keeps the settings of the cells before the choice."""
    encoder = kcse.SentenceEncoder(
        kcse.models.BertBackbone(vocabulary_size=10, num_layers=2, num_heads=2,
                                 hidden_dim=8, intermediate_dim=16),
        None, pooling="last2avg")
    protocol = protocols.PROTOCOLS["su"]
    trained = methods.ConSERTMethod().objective(encoder, protocol).encoder
    assert trained.pooling == "last_avg" and trained.backbone is encoder.backbone
    row = methods.ConSERTMethod(training_pooling="row", optimizer="adam")
    assert row.objective(encoder, protocol).encoder is encoder
    assert "training_pooling" not in row.settings()
    assert methods.ConSERTMethod(training_pooling="cls").settings()["training_pooling"] == "cls"


def test_consert_shuffle_on_nezha_leaves_c_out_with_the_reason(tmp_path, shared_data):
    """ConSERT's shuffle permutes position ids; NEZHA's positions are
    relative, inside the attention: the recipe runs to the end, a and b
    scored and c left out with the reason."""
    sample = stsb_sample(shared_data)
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    folder = tiny_checkpoint(tmp_path / "tiny_nezha", sample, position_embeddings=False)
    run("consert", tmp_path, f"{folder}:nezha", "--sentences", "16")
    [cell] = json.loads((tmp_path / "consert" / "results.json").read_text())["cells"].values()
    assert cell["trained"] is None and cell["whitening"] is not None
    assert "shuffle view (unsup stage) permutes position ids" in cell["untrained"]
    assert "NezhaBackbone" in cell["untrained"]


def test_consert_defaults_are_its_scripts(tmp_path):
    """ConSERT's settings by default, each from yym6472/ConSERT's files.

    scripts/chinese/unsup-consert-base-*.sh: batch 96, length 64, lr 5e-7,
    temperature 0.1, cl_rate 0.15, feature_cutoff 0.2 + shuffle;
    scripts/sup-consert-joint-base.sh: cutoff row 0.1 against the sentence
    as it is, main.py's lr 2e-5; scripts/sup-consert-{sup,joint}-unsup-base.sh:
    feature cutoff 0.1 / shuffle in the second stage.
    """
    from kcse.experiments import command_line

    parser = command_line.comparison_parser("doc\n\nmore", "out")
    command_line.add_method_arguments(parser, ["consert"])
    args = parser.parse_args([])
    method = methods.method_from_args("consert", args)
    protocol = protocols.protocol_from_args(args, method)
    assert (protocol.batch_size, protocol.learning_rate, protocol.temperature) == (96, 5e-7, 0.1)
    assert (protocol.max_length, protocol.long_max_length) == (64, 64)
    assert method.contrastive_weight == 0.15 and method.nli_learning_rate == 2e-5
    assert method.stage_views() == {"unsup": ["feature_cutoff:0.2", "shuffle"]}
    assert method.training_pooling == "last_avg"  # main.py's pooling_mode_mean_tokens
    # --concatenation_sent_max_square in sup-consert-*.sh; the cells before the
    # choice had it, and only its absence enters the settings.
    assert method.max_square and "nli_max_square" not in method.settings()
    without = methods.method_from_args("consert", parser.parse_args(["--no-nli-max-square"]))
    assert without.settings()["nli_max_square"] is False
    encoder = kcse.SentenceEncoder(
        kcse.models.BertBackbone(vocabulary_size=10, num_layers=2, num_heads=2,
                                 hidden_dim=8, intermediate_dim=16), None, pooling="last_avg")
    assert without.objective(encoder, protocol, "sup").classifier.max_square is False
    nli = object()
    stages = {mode: methods.ConSERTMethod(mode=mode, nli=nli).stage_views()
              for mode in ("sup", "joint", "sup-unsup", "joint-unsup")}
    assert stages == {
        "sup": {},
        "joint": {"nli": ["none", "token_cutoff:0.1"]},
        "sup-unsup": {"unsup": ["none", "feature_cutoff:0.1"]},
        "joint-unsup": {"nli": ["none", "token_cutoff:0.1"], "unsup": ["none", "shuffle"]},
    }
    help_text = parser.format_help()
    for source in ("unsup-consert-base-*.sh", "sup-consert-joint-base.sh", "--cl_rate 0.15",
                   "main.py", "pooling_mode_mean_tokens=True",
                   "--concatenation_sent_max_square"):
        assert source in " ".join(help_text.split()), source


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--mode", "joint"], "--mode joint trains on NLI pairs: give --nli FILE"),
        (["--views", "shuffle,blur:0.1"], "argument --views: unknown view 'blur'"),
        (["--views", "feature_cutoff:much,shuffle"],
         "view 'feature_cutoff:much': the rate must be a finite number >= 0 and < 1; got 'much'"),
        (["--views", "shuffle"], "ConSERT takes two views; got 1"),
        (["--mode", "sup", "--nli", "/no/such.jsonl"], "/no/such.jsonl"),
        # The adversarial view needs the NLI loss of --mode joint (ConSERT's
        # AdvCLSoftmaxLoss), in every stage --views sets.
        (["--views", "adversarial:1.0,shuffle"],
         "--views adversarial:1.0,shuffle: the adversarial view takes the gradient of the "
         "NLI loss, which only --mode joint has (not --mode unsup)"),
        (["--views", "none,adversarial", "--mode", "joint-unsup", "--nli", "/no/such.jsonl"],
         "only --mode joint has (not --mode joint-unsup)"),
    ],
)
def test_consert_recipe_refuses_bad_arguments(arguments, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        recipe("consert").main(arguments)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_protocol_takes_the_method_defaults_then_the_flags():
    from kcse.experiments import command_line

    parser = command_line.comparison_parser("doc\n\nmore", "out")
    args = parser.parse_args(["--protocol", "clean", "--batch-size", "8",
                              "--no-select-on-valid"])
    protocol = protocols.protocol_from_args(args, methods.ConSERTMethod())
    assert protocol.temperature == 0.1 and protocol.hidden_dropout == 0.1  # ConSERT's
    assert protocol.batch_size == 8 and not protocol.select_on_valid  # the user's
    assert protocol.training_splits == ("train",) and protocol.max_sentences == 500
    default = protocols.protocol_from_args(parser.parse_args([]), methods.SimCSEMethod())
    assert default == protocols.with_overrides(
        protocols.PROTOCOLS["su"], max_sentences=500
    )


def test_simcse_flags_build_the_objective_they_record():
    """`--mlp-only-train` and `--mlm-weight` reach `kcse.SimCSE` and the
    cell's settings (so its identity), where they are on only: cells from
    before stay valid. An encoder MLM cannot train is a cell's reason."""
    from kcse.experiments import command_line

    parser = command_line.comparison_parser("doc\n\nmore", "out")
    command_line.add_method_arguments(parser, ["simcse"])
    help_text = " ".join(parser.format_help().split())
    assert "--mlp_only_train" in help_text and "--do_mlm --mlm_weight 0.1" in help_text
    encoder = kcse.SentenceEncoder(
        kcse.models.BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
                                 hidden_dim=8, intermediate_dim=16),
        None, pooling="cls")
    method = methods.method_from_args("simcse", parser.parse_args(["--mlp-only-train"]))
    assert method.settings() == {"method": "simcse", "mlp_only_train": True}
    simcse = method.objective(encoder, protocols.PROTOCOLS["su"])
    assert simcse.mlp_only_train and simcse.mlp.units == 8
    plain = methods.method_from_args("simcse", parser.parse_args([]))
    assert plain.settings() == {"method": "simcse"}
    assert plain.objective(encoder, protocols.PROTOCOLS["su"]).mlp is None
    assert plain.encoder_problem(encoder) is None

    mlm = methods.method_from_args("simcse", parser.parse_args(["--mlm-weight", "0.1"]))
    assert mlm.settings() == {"method": "simcse", "mlm_weight": 0.1}
    assert mlm.encoder_problem(encoder) == (
        "--mlm-weight 0.1: the MLM loss needs the encoder's preprocessor with a [MASK] "
        "token; it has none")
    encoder = kcse.SentenceEncoder(encoder.backbone, tiny_preprocessor(), pooling="cls")
    assert mlm.encoder_problem(encoder) is None
    assert mlm.objective(encoder, protocols.PROTOCOLS["su"]).mlm_weight == 0.1

    fixed = methods.method_from_args("simcse", parser.parse_args(["--same-dropout-mask"]))
    assert fixed.settings() == {"method": "simcse", "same_dropout_mask": True}
    assert fixed.objective(encoder, protocols.PROTOCOLS["su"]).same_dropout_mask
    with pytest.raises(arguments.UsageError, match="takes no --text-views"):
        methods.SimCSEMethod.check_arguments(parser.parse_args(
            ["--same-dropout-mask", "--text-views", "word_deletion,reordering"]))


def test_sup_simcse_recipe_refuses_nli_pairs_that_make_no_triplet(tmp_path, capsys):
    # princeton-nlp/SimCSE's triplets pair a premise's entailment with a
    # contradiction of the same premise: pairs without one give none.
    nli = tmp_path / "nli.jsonl"
    nli.write_text("".join(
        json.dumps({"sentence1": premise, "sentence2": hypothesis, "gold_label": label}) + "\n"
        for premise, hypothesis, label in [("A", "a+", "entailment"), ("B", "b-", "contradiction"),
                                           ("C", "c~", "neutral")]), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        recipe("sup_simcse").main(["--nli", str(nli), "--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"--nli {nli}: no triplet: no premise has both an entailment and a contradiction" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", sorted(methods.METHODS))
def test_every_method_cites_its_paper_for_the_model_card(name):
    """A model card's citation section (kcse.export.model_card) is the
    method's BibTeX: each method has one, an entry with a title and a year."""
    citation = methods.METHODS[name].citation
    assert re.match(r"@inproceedings\{[\w-]+,\n", citation), citation
    assert re.search(r"\btitle\s*=\s*[{\"]", citation), citation
    assert re.search(r"\byear\s*=\s*[{\"]?20[0-9]{2}", citation), citation
    assert citation.count("{") == citation.count("}"), citation


@pytest.mark.parametrize("quiet", [False, True])
def test_a_recipe_labels_its_progress_by_cell_and_column(tiny_setup, monkeypatch, capsys,
                                                         quiet):
    """In a log (capsys is not a terminal), a line every millisecond here:
    the raw encoding by model and task, then the cell's parts by column;
    `--quiet`: none."""
    from kcse.foundation import progress

    tmp_path, model = tiny_setup
    monkeypatch.setattr(progress, "LINE_INTERVAL", 1e-3)
    assert recipe("sg_opt").main([
        "--models", model, "--tasks", "STS-B", "--poolings", "P1", "--data-dir",
        str(tmp_path / "data"), "--output", str(tmp_path / f"progress_{quiet}"),
        "--sentences", "64", "--projection-dim", "32", *["--quiet"] * quiet])
    lines = capsys.readouterr().err.splitlines()
    shapes = sorted({re.sub(r"\d+", "N", line) for line in lines})  # For a failure's message.
    key = "tiny_bert|P1|STS-B|su|sg_opt"
    if quiet:
        assert not [line for line in lines if re.search(r"(encoding|training): \d", line)]
        return
    assert any(re.match(r"tiny_bert STS-B, P1: encoding: \d+/\d+ sentences", line)
               for line in lines), shapes
    # 64 sentences in SG-OPT's batches of 16: 4 steps, in column c ("trained").
    assert any(re.match(re.escape(key) + r"\|\w+: trained: training: 4/4 steps \(100%\), loss ",
                        line) for line in lines), shapes

"""Each method's paper settings live in the method registry, once.

Every registered method is run twice on a tiny random BERT checkpoint and
real Chinese STS-B pairs, with nothing but the required flags: through its
recipe and through `kcse train`. Both must record the same settings, score
with the same pooling, and hand Keras' `fit` the same objective (its whole
config: encoder, pooling it trains with, temperature, loss weights, views),
optimizer (with its learning-rate schedule), batch size and epochs. `fit`
itself is replaced by a recorder (no step is taken: what is compared is
what each path passes to it), so the runs take seconds.
"""

import json

import pytest

import kcse
from kcse.commands import train
from kcse.commands.main import main as kcse_main
from kcse.experiments import command_line
from kcse.experiments import methods
from kcse.experiments import protocols
from kcse.experiments import sweeps
from kcse.layers.pooling_rules import resolve_pooling
from kcse.objectives.contrastive_tension import ContrastiveTension
from kcse.objectives.encoder_objective import EncoderObjective
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)
from tiny_grid import write_nli

# The recipe that runs each method with its defaults, and its extra flags.
RECIPES = {
    "simcse": ("chinese_simcse", []),
    "linear_probe": ("chinese_simcse", ["--method", "linear_probe"]),
    "consert": ("consert", []),
    "sg_opt": ("sg_opt", []),
    "sup_simcse": ("sup_simcse", []),
    "ct": ("contrastive_tension", []),
    "sbert_nli": ("sbert_nli", []),
    "is_bert": ("is_bert", []),
}
# The flags a method cannot run without, the same on both paths.
REQUIRED_NLI = {"sbert_nli"}


def test_every_registered_method_has_a_recipe():
    assert set(RECIPES) == set(methods.METHODS)


def without_names(config):
    """`config` without Keras' object names, which count up in a process."""
    if isinstance(config, dict):
        return {key: without_names(value) for key, value in config.items()
                if key != "name"}
    if isinstance(config, list):
        return [without_names(value) for value in config]
    return config


@pytest.fixture
def fit_calls(monkeypatch):
    """What each objective's `fit` is given, recorded instead of trained."""
    calls = []

    def record(self, x=None, y=None, batch_size=None, epochs=1, **kwargs):
        calls.append(json.loads(json.dumps(without_names({
            "objective": type(self).__name__,
            "config": self.get_config(),
            "optimizer": self.optimizer.get_config(),
            "batch_size": batch_size,
            "epochs": epochs,
        }), default=str)))

    monkeypatch.setattr(EncoderObjective, "fit", record)
    monkeypatch.setattr(ContrastiveTension, "fit", record)
    return calls


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_and_kcse_train_take_the_same_paper_settings(name, tiny_setup, fit_calls,
                                                           shared_data):
    """The same method, its defaults only, by its recipe and by `kcse train`
    (`--protocol su`, the recipes' protocol; `kcse train`'s own default is
    the leak-free `clean`)."""
    tmp_path, model = tiny_setup
    data = str(tmp_path / "data")
    script, extra = RECIPES[name]
    required = []
    if name in REQUIRED_NLI:
        required = ["--nli", str(write_nli(tmp_path / "nli.jsonl", stsb_sample(shared_data)))]
    recipe(script).main(["--models", model, "--tasks", "STS-B", "--data-dir", data,
                         "--output", str(tmp_path / "recipe"), *extra, *required])
    from_recipe = list(fit_calls)
    fit_calls.clear()
    assert kcse_main(["train", "--model", model, "--method", name, "--task", "STS-B",
                     "--data-dir", data, "--protocol", "su",
                     "--output", str(tmp_path / "train"), *required]) == 0
    from_train = list(fit_calls)

    cells = json.loads((tmp_path / "recipe" / "results.json").read_text())["cells"]
    record = json.loads((tmp_path / "train" / "train.json").read_text())
    # The rows the recipe scores and the pooling kcse train scores: the registry's.
    rows = [cell["pooling"] for cell in cells.values()]
    assert rows == command_line.method_poolings(name)
    assert record["pooling"] == resolve_pooling(train.scoring_pooling(name))
    [cell] = [cell for cell in cells.values()
              if resolve_pooling(cell["pooling"]) == record["pooling"]]
    # The recorded settings: equal, and the registry's protocol settings.
    recipe_settings = {k: v for k, v in cell["settings"].items() if k != "seeds"}
    train_settings = {k: v for k, v in record["settings"].items() if k != "precision"}
    assert recipe_settings == train_settings
    for setting, value in methods.METHODS[name].protocol_defaults.items():
        assert train_settings[setting] == value, setting
    # What fit was given: the objective's whole config, the optimizer, batch, epochs.
    assert len(from_train) == 1 and len(from_recipe) == len(rows)
    assert from_train[0] in from_recipe


def test_consert_scores_last2avg_and_trains_last_avg_on_both_paths():
    """The issue's case: `kcse train --method consert` scored with last_avg
    where the recipe scored with last2avg (ConSERT's main.py reports
    last2avg, `eval_*_unsup(..., last2avg=True)`, and trains with
    `pooling_mode_mean_tokens`)."""
    consert = methods.METHODS["consert"]
    assert train.scoring_pooling("consert") == "last2avg"
    assert command_line.method_poolings("consert") == ["last2avg"]
    assert consert.paper("training_pooling") == "last_avg"
    assert consert().training_pooling == "last_avg"


# The objectives' and losses' own defaults, which the registry's values must
# equal (they are documented as the registry's).
OBJECTIVE_DEFAULTS = [
    ("consert", kcse.ConSERT, "temperature", "temperature"),
    ("consert", kcse.ConSERT, "contrastive_weight", "contrastive_weight"),
    ("consert", kcse.ConSERT, "max_square", "nli_max_square"),
    ("consert", kcse.losses.NTXentLoss, "temperature", "temperature"),
    ("sg_opt", kcse.SGOpt, "temperature", "temperature"),
    ("sg_opt", kcse.SGOpt, "regularization", "regularization"),
    ("sg_opt", kcse.SGOpt, "projection_dim", "projection_dim"),
    ("sg_opt", kcse.losses.SelfGuidedLoss, "temperature", "temperature"),
    ("simcse", kcse.SimCSE, "temperature", "temperature"),
    ("simcse", kcse.SimCSE, "negatives", "negatives"),
    ("simcse", kcse.SimCSE, "mlm_weight", "mlm_weight"),
    ("simcse", kcse.losses.SimCSELoss, "temperature", "temperature"),
    ("simcse", kcse.losses.SimCSELoss, "negatives", "negatives"),
    ("sup_simcse", kcse.SupervisedSimCSE, "temperature", "temperature"),
    ("sup_simcse", kcse.SupervisedSimCSE, "hard_negative_weight", "hard_negative_weight"),
    ("ct", kcse.ContrastiveTension, "negatives", "negative_pairs"),
]


@pytest.mark.parametrize("method, owner, argument, setting", OBJECTIVE_DEFAULTS,
                         ids=[f"{m}-{o.__name__}-{a}" for m, o, a, _ in OBJECTIVE_DEFAULTS])
def test_objective_defaults_are_the_registry_values(method, owner, argument, setting):
    import inspect

    default = inspect.signature(owner.__init__).parameters[argument].default
    assert default == methods.METHODS[method].paper(setting)


def test_every_method_states_every_setting_with_a_source():
    """The settings the issue names, for every method, each with a source."""
    for name, method in methods.METHODS.items():
        for setting in ("scoring_pooling", "training_pooling", "temperature",
                        "optimizer", "learning_rate", "batch_size", "epochs"):
            if setting == "temperature" and name in ("ct", "sbert_nli", "is_bert"):
                continue  # CT's logistic loss, SBERT's softmax, IS-BERT's JSD: none.
            assert setting in method.paper_settings, (name, setting)
        for setting, paper in method.paper_settings.items():
            assert paper.source.strip(), (name, setting)
        # A flag that sets a paper setting defaults to it (ConSERT's --views to
        # None: the setting's views of each stage).
        for flag in method.flags:
            if flag.dest in method.paper_settings and flag.default is not None:
                assert flag.default == method.paper(flag.dest), (name, flag.names[0])


def test_su_settings_in_the_registry_are_the_su_protocol():
    """SimCSE's record and Su's protocol say the same (seed 002's table)."""
    su = protocols.PROTOCOLS["su"]
    for setting, value in methods.METHODS["simcse"].protocol_defaults.items():
        assert getattr(su, setting) == value, setting


def test_consert_sweeps_default_to_the_papers_values():
    """Figure 5 at §3.2's rates (seed 000: token cutoff p=0.15, feature
    cutoff p=0.2, dropout 0.2), not every view at one rate; Table 4's batch
    sizes; Figure 7's best temperature, 0.1, among the swept ones."""
    views = sweeps.sweep_values(sweeps.SWEEPS["consert"]["views"])
    used = sorted({view for pair in views for view in pair})
    assert used == ["dropout:0.2", "feature_cutoff:0.2", "none", "shuffle",
                    "token_cutoff:0.15"]
    assert len(views) == 15  # every unordered pair of 5 views, a view with itself too
    assert sweeps.sweep_values(sweeps.SWEEPS["consert"]["batch-size"]) == [16, 48, 96, 192, 288]
    assert 0.1 in sweeps.sweep_values(sweeps.SWEEPS["consert"]["temperature"])
    for sweep in ("views", "temperature", "batch-size"):
        assert "Figure" in sweeps.SWEEPS["consert"][sweep].source or "Table" in sweeps.SWEEPS[
            "consert"][sweep].source


def test_simcse_and_sg_opt_sweeps_are_their_seeds_ablations():
    """SimCSE's dropout rates with "fixed 0.1" and batch sizes (seed 003); SG-OPT's
    τ, λ and projection head (seed 001's ablation table: τ 0.1, 0.001; λ 0, 1)."""
    dropout = sweeps.SWEEPS["simcse"]["dropout"]
    values = sweeps.sweep_values(dropout)
    assert [dropout.label(value) for value in values] == [
        "0.0", "0.05", "0.1", "0.15", "0.2", "0.3", "fixed 0.1"]
    assert dropout.settings(values[-1]) == {"dropout": 0.1, "same_dropout_mask": True}
    assert dropout.settings(values[2]) == {"dropout": 0.1, "same_dropout_mask": False}
    assert sweeps.sweep_values(sweeps.SWEEPS["simcse"]["batch-size"]) == [32, 64, 128, 256, 512]
    sg_opt = sweeps.SWEEPS["sg_opt"]
    assert sweeps.sweep_values(sg_opt["temperature"]) == [0.001, 0.01, 0.1]
    assert sweeps.sweep_values(sg_opt["regularization"]) == [0.0, 0.1, 1.0]
    assert sweeps.sweep_values(sg_opt["projection-head"]) == [True, False]
    paper = methods.METHODS["sg_opt"]
    assert paper.paper("temperature") in sweeps.sweep_values(sg_opt["temperature"])
    assert paper.paper("regularization") in sweeps.sweep_values(sg_opt["regularization"])


def test_help_lists_each_methods_paper_settings_with_their_source(capsys):
    with pytest.raises(SystemExit):
        kcse_main(["train", "--help"])
    text = capsys.readouterr().out
    for name, method in methods.METHODS.items():
        assert f"(--method {name}): the paper's settings" in text
        for setting, paper in method.paper_settings.items():
            assert f"  {setting}: {paper.text}" in text, (name, setting)
    with pytest.raises(SystemExit):
        recipe("consert").main(["--help"])
    text = capsys.readouterr().out
    assert "  temperature: 0.1: --temperature 0.1 in every script" in text
    assert "default: the pooling the method's paper reports" in " ".join(text.split())

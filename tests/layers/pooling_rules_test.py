"""`kcse.layers.pooling_rules`: each entry point's default pooling, read
from `DEFAULT_POOLING`, and P2's rule on a built backbone (`missing_pooler`)."""

import inspect
import pathlib
import runpy

import keras_hub
import numpy as np
import pytest

import kcse
from kcse.commands import train
from kcse.commands.main import build_parser
from kcse.experiments import command_line
from kcse.foundation import arguments
from kcse.layers.pooling_rules import DEFAULT_POOLING
from kcse.layers.pooling_rules import POOLER_LAYER
from kcse.layers.pooling_rules import missing_pooler

RECIPES = pathlib.Path(__file__).resolve().parents[2] / "recipes"


class Parsing(Exception):
    """Raised instead of parsing: holds the parser."""


def recipe_parser(name, monkeypatch):
    """The parser of recipes/`name`, as its entry point builds it."""
    def parsing(parser, *args, **kwargs):
        raise Parsing(parser)

    monkeypatch.setattr(arguments.Parser, "parse_args", parsing)
    recipe = runpy.run_path(str(RECIPES / name))
    with pytest.raises(Parsing) as parsing_error:
        (recipe["parse_args"] if "parse_args" in recipe else recipe["main"])([])
    return parsing_error.value.args[0]


def test_the_table_holds_the_defaults_each_entry_point_had():
    # The values before the table (SentenceEncoder's [CLS]; the commands' and
    # the English recipe's mean of the last layer; the grid's P1,P3 on 2 CPU cores).
    assert DEFAULT_POOLING == {
        "SentenceEncoder": "cls", "kcse train": "last_avg", "kcse evaluate": "last_avg",
        "kcse encode": "last_avg", "kcse export": "last_avg", "recipes": ("P1", "P3"),
        "recipes/multilingual_sts.py": ("P3",), "recipes/english_simcse.py": "last_avg"}


def test_each_entry_point_reads_its_default_from_the_table(capsys, monkeypatch):
    signature = inspect.signature(kcse.SentenceEncoder)
    assert signature.parameters["pooling"].default == DEFAULT_POOLING["SentenceEncoder"]

    parser = build_parser()
    flags = {"train": ["--output", "o"], "evaluate": ["--data", "d"],
             "encode": ["--input", "i", "--output", "o.npy"], "export": ["--output", "o"]}
    for command, extra in flags.items():
        args = parser.parse_args([command, "--model", "m", *extra])
        assert args.pooling is None  # The model keeps its own, else the default.
        assert args.default_pooling == DEFAULT_POOLING[f"kcse {command}"], command
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert f"else {DEFAULT_POOLING['kcse train']};" in text if command == "train" else (
            f"(default: {DEFAULT_POOLING[f'kcse {command}']};" in text), command
    # kcse train and the recipes: the method's paper's pooling first.
    assert train.scoring_pooling("simcse") == DEFAULT_POOLING["kcse train"]
    assert train.scoring_pooling("consert") == "last2avg"
    assert command_line.method_poolings("simcse") == list(DEFAULT_POOLING["recipes"])
    assert command_line.method_poolings("sg_opt") == ["P1"]
    parser = recipe_parser("chinese_simcse.py", monkeypatch)
    assert parser.get_default("poolings") is None  # The method's: method_poolings.
    assert f"else {','.join(DEFAULT_POOLING['recipes'])};" in parser.format_help()
    parser = recipe_parser("multilingual_sts.py", monkeypatch)
    assert parser.get_default("poolings") == list(DEFAULT_POOLING["recipes/multilingual_sts.py"])
    parser = recipe_parser("english_simcse.py", monkeypatch)
    assert parser.get_default("pooling") == DEFAULT_POOLING["recipes/english_simcse.py"]

def test_missing_pooler_names_what_p2_lacks():
    """BERT's pooler Dense with weights gives P2; zeroed (a checkpoint
    without one) or absent (RoBERTa) it does not, and `SentenceEncoder`
    refuses P2 with the reason."""
    bert = keras_hub.models.BertBackbone(vocabulary_size=20, num_layers=1, num_heads=1,
                                         hidden_dim=4, intermediate_dim=4,
                                         max_sequence_length=8)
    assert missing_pooler(bert) is None
    pooler = bert.get_layer(POOLER_LAYER)
    pooler.kernel.assign(np.zeros(pooler.kernel.shape, "float32"))
    assert missing_pooler(bert) == (
        "this backbone's pooler is all zeros: its checkpoint had none (WoBERT)")
    roberta = keras_hub.models.RobertaBackbone(vocabulary_size=20, num_layers=1,
                                               num_heads=1, hidden_dim=4,
                                               intermediate_dim=4, max_sequence_length=8)
    assert missing_pooler(roberta) == (
        "RobertaBackbone has no 'pooled_dense' layer (WoBERT, RoFormer and "
        "RoBERTa-style backbones ship none)")
    for backbone in (bert, roberta):
        with pytest.raises(ValueError) as error:
            kcse.SentenceEncoder(backbone, pooling="P2")
        assert str(error.value) == ("pooling='pooler' (P2) needs pretrained pooler weights, "
                                    f"and {missing_pooler(backbone)}. Use another pooling.")

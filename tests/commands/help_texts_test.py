"""Every flag of the `kcse` command and of every recipe explains itself in
`--help`: it has help text, and a flag with a default (a value, not None or
off) says it."""

import argparse
import pathlib
import runpy

import pytest

from kcse.commands.main import build_parser
from kcse.foundation import arguments

RECIPES = pathlib.Path(__file__).resolve().parents[2] / "recipes"


class ParserBuilt(Exception):
    """Raised by `parse_args` in place of parsing: carries the parser."""


def command_parsers(name, parser):
    """`(name, parser)` of `parser` and of its subcommands', recursively."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, subparser in action.choices.items():
                yield from command_parsers(f"{name} {command}", subparser)


def recipe_parsers(monkeypatch):
    """`{recipe file name: its parser}`: each recipe's `main` run until it parses."""

    def built(parser, *args, **kwargs):
        raise ParserBuilt(parser)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", built)
    parsers = {}
    for path in sorted(RECIPES.glob("*.py")):
        with pytest.raises(ParserBuilt) as caught:
            runpy.run_path(str(path))["main"]([])
        parsers[path.name] = caught.value.args[0]
    return parsers


def flag_problems(parser):
    """What is missing from the `--help` of each of `parser`'s flags."""
    formatter = parser._get_formatter()
    problems = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        text = formatter._expand_help(action) if action.help else ""
        if not text.strip():
            problems.append(f"{action.option_strings[0]}: no help")
        elif (action.default is not None and action.default is not False
              and "default" not in text.lower()):
            problems.append(f"{action.option_strings[0]}: default {action.default!r} not shown")
    return problems


def test_every_flag_has_help_that_shows_its_default(monkeypatch):
    parsers = dict(command_parsers("kcse", build_parser()))
    assert sorted(parsers) == ["kcse", "kcse encode", "kcse evaluate", "kcse export",
                               "kcse train"]
    recipes = recipe_parsers(monkeypatch)
    assert len(recipes) == len(list(RECIPES.glob("*.py"))) >= 8
    problems = {name: flag_problems(parser)
                for name, parser in (parsers | recipes).items()}
    assert {name: found for name, found in problems.items() if found} == {}


def test_show_defaults_adds_a_default_the_help_does_not_state():
    parser = arguments.Parser(prog="demo")
    parser.add_argument("--models", default=["e5-small", "BERT"], help="the models")
    parser.add_argument("--rate", type=float, default=0.05, help="a 5%% rate")
    parser.add_argument("--length", default=64, help="tokens (default: the model's)")
    parser.add_argument("--prefix", default=None, help="prepended")
    parser.add_argument("--overwrite", action="store_true", help="replace")
    parser.add_argument("--folder", help="where")
    shown = " ".join(parser.format_help().split())
    assert "--models MODELS the models (default: e5-small,BERT)" in shown
    assert "--rate RATE a 5% rate (default: 0.05)" in shown
    assert "--length LENGTH tokens (default: the model's) " in shown  # Not twice.
    assert "--prefix PREFIX prepended --overwrite replace --folder FOLDER where" in shown


def test_a_flag_without_help_is_found():
    parser = arguments.Parser(prog="demo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", help="files")
    assert flag_problems(parser) == ["--seed: no help"]
    parser = argparse.ArgumentParser(prog="demo")  # No ShowDefaults.
    parser.add_argument("--seed", type=int, default=0, help="the seed")
    assert flag_problems(parser) == ["--seed: default 0 not shown"]

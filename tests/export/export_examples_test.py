"""The docstring examples of kcse.export's public classes and functions run."""

import pytest

from docstring_examples import objects_of
from docstring_examples import run_examples

PUBLIC = objects_of("export")


@pytest.mark.parametrize("name", PUBLIC)
def test_docstring_example_runs(name, tmp_path, monkeypatch):
    run_examples(name, PUBLIC[name], tmp_path, monkeypatch)

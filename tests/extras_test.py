"""The extras a user is told to install exist, and what they bring works beside kcse.

- Every extra that the README, docs/, benchmarks/, recipes/ or a kcse message
  names (`pip install "kcse[mteb]"`, `pip install -e ".[plot]"`) is declared
  in pyproject.toml: pip only warns of an unknown extra and installs nothing.
- The test environment (the README's test command installs `.[dev]`) holds
  every extra's packages at the versions pyproject asks for, so that the
  tests of those features run against what a user of the extra gets.
- `import kcse` lets transformers, and so sentence-transformers and mteb, load
  in kcse's own environment (TensorFlow with Keras 3, no tf-keras) without
  the user setting a variable (`kcse.foundation.transformers_backend`).
"""

import importlib.metadata
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement

from kcse.foundation.transformers_backend import use_torch_transformers

ROOT = pathlib.Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
# `kcse[a,b]` or `.[a]` (after a quote, space or parenthesis, as in `pip install -e ".[a]"`).
NAMED_EXTRAS = re.compile(r"""(?:\bkcse|(?<=["' (])\.)\[([a-z][a-z0-9_-]*(?:,[a-z][a-z0-9_-]*)*)\]""")


def documents():
    """The files that tell users what to install."""
    yield ROOT / "README.md"
    for folder, patterns in (("docs", ["*.md"]), ("kcse", ["*.py"]), ("recipes", ["*.py"]),
                             ("benchmarks", ["*.py", "*.md"])):
        for pattern in patterns:
            yield from sorted((ROOT / folder).rglob(pattern))


def named_extras():
    """{extra: "file:line" of its first mention} over `documents()`."""
    named = {}
    for path in documents():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in NAMED_EXTRAS.finditer(line):
                for extra in match.group(1).split(","):
                    named.setdefault(extra, f"{path.relative_to(ROOT)}:{number}")
    return named


def test_every_extra_the_documentation_names_is_declared():
    named = named_extras()
    # The extras a user meets in the documentation and in kcse's messages.
    assert {"dev", "onnx", "mteb", "rjieba", "plot", "bench"} <= set(named)
    undeclared = {extra: where for extra, where in named.items() if extra not in EXTRAS}
    assert not undeclared, f"named but not in pyproject.toml: {undeclared}"


def test_the_pattern_finds_extras_where_users_write_them():
    """The scan above reads install lines as users write them, and nothing
    else: a pattern that matched nothing would pass any pyproject."""
    line = """pip install -e '.[onnx,mteb]' "kcse[rjieba]" then x[1] and self.[a]"""
    found = [extra for match in NAMED_EXTRAS.finditer(line) for extra in match.group(1).split(",")]
    assert found == ["onnx", "mteb", "rjieba"]


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_the_test_environment_has_the_extras_packages(extra):
    missing = []
    for text in EXTRAS[extra]:
        requirement = Requirement(text)
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(f"{text} (not installed)")
            continue
        if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
            missing.append(f"{text} (installed: {version})")
    assert not missing, f"kcse[{extra}]: {missing}"


def test_sentence_transformers_and_mteb_load_after_kcse_with_no_variable_set():
    """Without kcse, transformers stops at import in this environment
    (TensorFlow with Keras 3, no tf-keras): "Your currently installed version
    of Keras is Keras 3 ... install tf-keras"; after `import kcse` it loads on
    torch, and with it sentence-transformers and the mteb evaluation."""
    assert importlib.util.find_spec("tf_keras") is None  # This environment, as users have it.
    environment = {key: value for key, value in os.environ.items() if key != "USE_TF"}
    script = (
        "import kcse, os, sentence_transformers, transformers, mteb\n"
        "from mteb.models.model_meta import ModelMeta\n"
        "print(os.environ.get('USE_TF'), transformers.utils.is_tf_available(),"
        " callable(mteb.evaluate))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], env=environment, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["0", "False", "True"]
    without_kcse = subprocess.run(
        [sys.executable, "-c", "import sentence_transformers"], env=environment, cwd=ROOT,
        capture_output=True, text=True, timeout=600)
    assert without_kcse.returncode != 0 and "tf-keras" in without_kcse.stderr


def test_a_use_tf_the_user_set_is_kept(monkeypatch):
    for value in ("1", "0", ""):
        environ = {"USE_TF": value}
        assert use_torch_transformers(environ) == value and environ == {"USE_TF": value}
    environ = {}
    assert use_torch_transformers(environ) == "0" and environ == {"USE_TF": "0"}
    # With tf-keras installed, transformers' TensorFlow side can load: left to transformers.
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: object() if name == "tf_keras" else find_spec(name, *rest))
    environ = {}
    assert use_torch_transformers(environ) is None and environ == {}

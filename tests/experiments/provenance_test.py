import os
import subprocess

import keras

import kcse
from kcse.experiments import provenance


def test_run_provenance_names_the_stack_and_the_commit():
    origin = provenance.run_provenance()
    assert origin["kcse"] == kcse.__version__ and origin["keras"] == keras.__version__
    assert origin["backend"] == keras.config.backend()
    folder = os.path.dirname(provenance.__file__)
    head = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode == 0:  # A checkout: the commit, maybe "+dirty".
        assert origin["git_commit"].split("+")[0] == head.stdout.strip()
    else:
        assert origin["git_commit"] is None
    assert origin["date"].endswith("+00:00")

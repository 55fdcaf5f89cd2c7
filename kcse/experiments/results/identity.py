"""The identity of a grid's cell: whatever changes its numbers.

A cell is identified by everything that changes its numbers: the model's
resolved source and the digest of its files, the pooling, the task and a
digest of its data, the protocol, the method and every setting of both,
the seed and the number of seeds, the settings of the columns the run
chose, the precision the models computed in (when not float32:
`IMPLIED_SETTINGS`), and the revision of kcse's own numerics
(`cell_identity`, `NUMERICS`). A rerun with other settings, or with kcse
code that computes a cell differently, computes new cells beside the old
ones; it never shows an old number for a new question.
"""

import json

from kcse.foundation.digests import content_digest

# The revision of kcse's own numerics, part of every cell's identity. It is
# bumped whenever a change in kcse's code changes a cell's numbers for the
# same settings, model files and data, so that cells computed by older code
# are never reused (they stay in results.json beside the new ones, and the
# run says "kcse numerics 1 → 2"). Cells store it as "numerics".
#   1: cells without "numerics" (before this field).
#   2: BERT-whitening (column b) gives numerically null directions a zero
#      column instead of scaling float noise by 1/sqrt(s)
#      (`kcse.layers.Whitening`); BERT-family backbones use the exact (erf)
#      GELU of the original BERT instead of the tanh approximation.
#   3: Google-format checkpoints cut text as bert4keras does (no NFKC case
#      folding of full-width forms: `GoogleWordPieceTokenizer`); whitening
#      and flow statistics in float64 on every backend; SimCSE's MLM head
#      untied; an encoder's default prompt (e5: "query: ") applied by
#      `encode`; ConSERT's and SG-OPT's scoring pooling from their papers.
NUMERICS = 3


def cell_identity(model, pooling, task, data_digest, settings):
    """The dict that identifies a cell: whatever changes its numbers.

    `model` is `ModelSpec.identity()`; `settings` the run's settings
    (`run_settings`); `"numerics"` is `NUMERICS`, the revision of kcse's
    code that computes the numbers.
    """
    return {"model": model, "pooling": pooling, "task": task,
            "data": data_digest, "settings": settings, "numerics": NUMERICS}


def cell_key(name, pooling, task, protocol, method, identity):
    """`name|pooling|task|protocol|method|digest`: readable and unique."""
    return f"{name}|{pooling}|{task}|{protocol}|{method}|{content_digest(identity)}"


def run_settings(protocol_settings, method_settings, seed, seeds):
    """Every setting of a run: protocol, method, first seed and seed count.

    As JSON stores them (tuples become lists), so that they compare equal
    to the settings of a stored cell.
    """
    settings = dict(protocol_settings) | dict(method_settings) | {"seed": seed, "seeds": seeds}
    return json.loads(json.dumps(settings))


def settings_id(settings):
    """A short digest naming a set of settings in results.md."""
    return content_digest(settings)[:8]


# Settings a cell leaves out when they have this value: the value every
# cell had before the setting existed, so that such cells keep their
# identity (results.json files of older kcse stay valid). A run's settings
# name "precision" only when its models computed in another precision
# than float32 (`--precision bfloat16`).
IMPLIED_SETTINGS = {"precision": "float32"}


def shown_settings(settings):
    """A cell's settings with the implied ones (`IMPLIED_SETTINGS`) written
    out, first: what results.md and the terminal show."""
    return IMPLIED_SETTINGS | dict(settings)


def setting_differences(old, new):
    """`"name old → new"` for each setting that differs, sorted by name."""
    old, new = shown_settings(old), shown_settings(new)
    names = sorted(set(old) | set(new))
    return [f"{name} {old.get(name)} → {new.get(name)}"
            for name in names if old.get(name) != new.get(name)]

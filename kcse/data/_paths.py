"""Finding data files in a folder laid out like `../shared/data`."""

import os
import pathlib

# Where the data cards live, relative to the repository root. The cards are
# not installed with the package; messages name them by this path.
DATA_CARDS_DIR = "data_cards"


def card_hint(card, source_url=None):
    """A pointer at a data card (and the source) for error messages."""
    hint = f"{DATA_CARDS_DIR}/{card} of the kcse repository"
    if source_url:
        hint += f"; source: {source_url}"
    return hint


def find_file(data_dir, candidates, what, card, source_url=None):
    """The first of `candidates` (paths relative to `data_dir`) that exists.

    Raises:
        FileNotFoundError: naming every path tried and the data card.
    """
    data_dir = pathlib.Path(os.fspath(data_dir))
    tried = [data_dir / candidate for candidate in candidates]
    for path in tried:
        if path.is_file():
            return path
    listed = " or ".join(str(path) for path in tried)
    raise FileNotFoundError(
        f"{what} not found: no file at {listed}. Download it as the data card "
        f"says ({card_hint(card, source_url)})."
    )


def canonical_name(name, valid, aliases=None, what="name"):
    """`name` matched to one of `valid`, ignoring case, "-" and "_".

    Raises:
        ValueError: listing the valid names.
    """

    def key(text):
        return str(text).upper().replace("-", "").replace("_", "")

    table = {key(v): v for v in valid}
    for alias, target in (aliases or {}).items():
        table[key(alias)] = target
    if isinstance(name, str) and key(name) in table:
        return table[key(name)]
    raise ValueError(
        f"Unknown {what} {name!r}; choose one of: {', '.join(valid)}."
    )

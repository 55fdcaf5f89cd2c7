"""docs/api.md's "Public API" list, written from `kcse.public_api`'s table.

The list sits between `<!-- public api -->` and `<!-- end public api -->`:
each package and its `__all__`, in the table's order, or what an internal
package holds. After a change to the table, rewrite it from the
repository's root with

    python -m kcse.api_docs --write docs/api.md

(without `--write` the list is printed); `tests/public_api_test.py` fails
while the file and the table differ.

Example:
```python
from kcse import api_docs

print(api_docs.api_list())  # - `kcse`: `SentenceEncoder`, `SimCSE`, ...
```
"""

import argparse
import sys
import textwrap

from kcse.foundation import atomic_files
from kcse.public_api import INTERNAL_PACKAGES, PACKAGES, exported_by

START, END = "<!-- public api -->\n", "<!-- end public api -->"


def api_list():
    """The list as markdown: one item per package, wrapped at 100 columns."""
    lines = []
    for package in PACKAGES:
        listed = ", ".join(f"`{name}`" for name in exported_by(package))
        item = f"- `{package}`: {listed or f'nothing ({INTERNAL_PACKAGES[package]})'}"
        lines += textwrap.wrap(item, width=100, subsequent_indent="  ",
                               break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def listed_in(text):
    """The list in markdown `text` (what lies between the markers), or None."""
    _, start, rest = text.partition(START)
    listed, end, _ = rest.partition(END)
    return listed if start and end else None


def write_api_list(path):
    """Rewrites the list in the markdown file `path`, atomically.

    Raises ValueError naming the file when it lacks either marker.
    """
    with open(path, encoding="utf-8") as file:
        text = file.read()
    listed = listed_in(text)
    if listed is None:
        raise ValueError(f"{path}: no list between {START.strip()} and {END}")
    head, _, tail = text.partition(START + listed + END)
    atomic_files.write_text(path, head + START + api_list() + END + tail)


def main(argv=None):
    """`python -m kcse.api_docs [--write docs/api.md]`."""
    parser = argparse.ArgumentParser(
        prog="python -m kcse.api_docs",
        description="Print docs/api.md's list of public names, or --write it into the file.")
    parser.add_argument("--write", metavar="PATH",
                        help="the markdown file whose list to rewrite (docs/api.md)")
    args = parser.parse_args(argv)
    if args.write is None:
        sys.stdout.write(api_list())
        return
    try:
        write_api_list(args.write)
    except (OSError, ValueError) as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")


if __name__ == "__main__":
    main()

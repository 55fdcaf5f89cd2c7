"""The `kcse` command: a module per subcommand (`train`, `evaluate`,
`encode`, `export`), each with its sub-parser, its own checks and its run
function; `main` builds the parser and runs one; `checks` holds what every
subcommand's arguments pass before any work, `common` the model flags and
loading they share.

The entry point is `kcse.commands.main.main` (`python -m kcse.commands.main`
is the `kcse` command); the package exports nothing (`__all__` is empty).
"""

__all__ = []

"""The size rules of kcse/, read from the source with `ast` and `tokenize`:
no function or method over `MAX_FUNCTION_LINES` lines of code, no module
over `MAX_MODULE_LINES` lines.

A line of code is a line holding a token that is neither a comment nor a
docstring (the string that opens a module, class or function body); blank
lines do not count. A function's lines are those from its `def` to its end,
nested functions included. A module's size is its total lines, blank and
comment lines included. Offenders are listed as `path:line name N lines`.
"""

import ast
import io
import pathlib
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kcse"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600
NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
SCOPES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def code_lines(source, tree):
    """The numbers of the lines of `source` that hold code."""
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    for node in ast.walk(tree):
        if isinstance(node, SCOPES) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                lines.difference_update(range(first.lineno, first.end_lineno + 1))
    return lines


def functions(tree):
    """`(qualified name, node)` of every function and method in `tree`."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    found.append((name, child))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def offenders(path, root=ROOT):
    """The size rules `path` breaks, one `path:line name N lines` each (the
    path relative to `root`)."""
    source = path.read_text()
    tree = ast.parse(source, str(path))
    relative = path.relative_to(root).as_posix()
    found = []
    total = len(source.splitlines())
    if total > MAX_MODULE_LINES:
        found.append(f"{relative}:1 (module) {total} lines")
    code = code_lines(source, tree)
    for name, node in functions(tree):
        count = len(code.intersection(range(node.lineno, node.end_lineno + 1)))
        if count > MAX_FUNCTION_LINES:
            found.append(f"{relative}:{node.lineno} {name} {count} lines")
    return found


def test_no_function_or_module_in_kcse_is_over_the_size_limits():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) for line in offenders(path)]
    assert not found, (
        f"over {MAX_FUNCTION_LINES} lines of code in a function or {MAX_MODULE_LINES} "
        "lines in a module:\n" + "\n".join(found)
    )


SAMPLE = '''"""A module docstring
of two lines."""


class Model:
    """A class docstring."""

    def call(self, x):
        """A method docstring,

        three lines long."""
        # A comment line.
        y = x + 1  # a trailing comment

        def inner():
            return """a multi-line string
            that is code"""

        return y
'''


def test_code_lines_leave_out_docstrings_comments_and_blanks():
    tree = ast.parse(SAMPLE)
    code = code_lines(SAMPLE, tree)
    assert sorted(code) == [5, 8, 13, 15, 16, 17, 19]
    found = functions(tree)
    assert [name for name, _ in found] == ["Model.call", "Model.call.inner"]
    call = found[0][1]  # its own lines and inner's: 8, 13, 15, 16, 17, 19
    assert len(code.intersection(range(call.lineno, call.end_lineno + 1))) == 6


@pytest.mark.parametrize("body_lines, over", [(80, False), (81, True)])
def test_a_function_is_reported_past_80_lines_of_code(tmp_path, body_lines, over):
    package = tmp_path / "kcse"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n\n    # comment\n" for i in range(body_lines - 2))
    path = package / "long.py"
    path.write_text(f'def long():\n    """Doc."""\n{body}    return x0\n')
    found = offenders(path, root=tmp_path)
    assert found == ([f"kcse/long.py:1 long {body_lines} lines"] if over else [])


def test_a_module_is_reported_past_600_lines(tmp_path):
    path = tmp_path / "kcse" / "big.py"
    path.parent.mkdir()
    path.write_text("x = 1\n" + "\n" * 600)
    assert offenders(path, root=tmp_path) == ["kcse/big.py:1 (module) 601 lines"]


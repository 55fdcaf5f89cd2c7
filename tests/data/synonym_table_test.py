"""CLEAR's synonym tables read from files: layout, merged lines, errors naming file and line."""

import random

import pytest

from kcse.data import MalformedLineError
from kcse.data import SynonymSubstitution
from kcse.data import read_synonym_table


def test_read_synonym_table(tmp_path):
    path = tmp_path / "synonyms.txt"
    path.write_text("\ufeff# comment\n\n喜欢\t喜爱 爱\nlarge\tbig  huge\n喜欢\t中意\n",
                    encoding="utf-8")
    table = read_synonym_table(path)
    assert table == {"喜欢": ["喜爱", "爱", "中意"], "large": ["big", "huge"]}
    view = SynonymSubstitution(table, 0.5)
    assert view("我喜欢北京的秋天。", random.Random(0)) in (
        "我喜爱北京的秋天。", "我爱北京的秋天。", "我中意北京的秋天。")


@pytest.mark.parametrize("content, line, match", [
    ("喜欢\t喜爱\n喜欢 喜爱\n", 2, "no tab"),
    ("\t喜爱\n", 1, "word before the tab is empty"),
    ("a\tb\n喜欢\t  \n", 2, "no synonym"),
    ("ice cream\tgelato\n", 1, "holds a space"),
])
def test_bad_table_lines_raise_naming_file_and_line(tmp_path, content, line, match):
    path = tmp_path / "table.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(MalformedLineError, match=match) as error:
        read_synonym_table(path)
    assert str(error.value).startswith(f"{path}:{line}:")


def test_missing_and_undecodable_tables(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_synonym_table(tmp_path / "missing.txt")
    path = tmp_path / "latin1.txt"
    path.write_bytes("caf\xe9\tcoffee\n".encode("latin-1"))
    with pytest.raises(MalformedLineError, match="latin1.txt"):
        read_synonym_table(path)

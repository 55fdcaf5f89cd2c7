"""Every builder has a data card; the cards' checksums and counts match the real files."""

import pathlib
import re

import pytest

import kcse.data
from kcse.data import read_pairs
from kcse.data.checksums import card_checksums
from kcse.data import checksums
from kcse.data import chinese
from kcse.data import file_checksum
from kcse.data import verify_card

REPO = pathlib.Path(__file__).resolve().parents[2]
CARDS = REPO / "data_cards"
SECTIONS = ("## Source", "## Licence", "## Size and splits", "## Format", "## Labels",
            "## Known issues", "## Files and checksums", "## Citation")
NOT_OFFLINE = ("not available offline; checksum of the file you download is printed by "
               "`kcse.data.file_checksum`")


def all_cards():
    names = {builder.DATA_CARD for builder in kcse.data.tfds.BUILDERS}
    names |= {config.data_card for config in kcse.data.ChineseSts.BUILDER_CONFIGS}
    names |= set(chinese.DATA_CARDS.values())
    return sorted(names)


def table_rows(card):
    """(path, cells) of the card's file rows: first cell a back-quoted path."""
    rows = []
    for line in (CARDS / card).read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            rows.append((cells[0].strip("`"), cells))
    return rows


def test_every_builder_and_config_has_a_card(tmp_path):
    expected = {"chinese_sts.md", "atec.md", "bq.md", "lcqmc.md", "pawsx.md",
                "chinese_stsb.md", "stsb_multi_mt.md", "sts_en.md", "nli_zh.md", "snli.md"}
    assert set(all_cards()) == expected
    for card in all_cards():
        assert (CARDS / card).is_file(), card
    for builder in kcse.data.tfds.BUILDERS:
        info = builder(data_dir=str(tmp_path),
                       **({"config": builder.BUILDER_CONFIGS[0].name}
                          if builder.BUILDER_CONFIGS else {})).info
        assert "data_cards/" in info.description
        assert info.citation.strip().startswith("@")
        assert info.homepage.startswith("http")


@pytest.mark.parametrize("card", all_cards())
def test_card_has_every_section(card):
    text = (CARDS / card).read_text(encoding="utf-8")
    assert text.startswith("# ")
    for section in SECTIONS:
        assert section in text, f"{card} lacks {section}"
    rows = table_rows(card)
    assert rows, f"{card} lists no files"
    for path, cells in rows:
        has_checksum = any(re.fullmatch(r"`[0-9a-f]{64}`", cell) for cell in cells)
        assert has_checksum or NOT_OFFLINE in cells[-1], (card, path)


@pytest.mark.parametrize("card", all_cards())
def test_card_checksums_match_the_real_files(shared_data, card):
    results = verify_card(CARDS / card, shared_data)
    for relative, recorded, actual in results:
        assert actual is not None, f"{card}: {relative} has a checksum but is not in {shared_data}"
        assert actual == recorded, f"{card}: {relative} changed"


@pytest.mark.parametrize("card", all_cards())
def test_card_counts_match_the_readers(shared_data, card):
    for path, cells in table_rows(card):
        if not any(re.fullmatch(r"`[0-9a-f]{64}`", cell) for cell in cells):
            continue
        file = shared_data / path
        assert cells[1] == f"{file.stat().st_size:,}", (card, path)
        lines = sum(1 for line in file.read_text(encoding="utf-8").split("\n") if line.strip())
        assert cells[2] == f"{lines:,}", (card, path)
        if cells[3]:
            assert cells[3] == f"{len(read_pairs(file)):,}", (card, path)


def test_every_shared_file_is_in_a_card(shared_data):
    recorded = {}
    for card in all_cards():
        recorded.update(card_checksums(CARDS / card))
    present = {
        str(path.relative_to(shared_data)) for path in shared_data.rglob("*") if path.is_file()
    }
    # Only the folder's own README (not a data file) is left out.
    assert present - set(recorded) == {"README.md"}


def test_chinese_sizes_in_the_index_card():
    text = (CARDS / "chinese_sts.md").read_text(encoding="utf-8")
    for task, sizes in chinese.SPLIT_SIZES.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| {task} |"))
        assert row.split("|")[-4:-1] == [f" {n:,} " for n in sizes], task
        card = (CARDS / chinese.DATA_CARDS[task]).read_text(encoding="utf-8")
        for split, n in zip(chinese.CHINESE_SPLITS, sizes):
            assert f"`{task}/{task}.{split}.data` | {n:,} |" in card, (task, split)


def test_bundled_stsb_matches_its_card():
    recorded = card_checksums(CARDS / "chinese_stsb.md")
    for split in chinese.CHINESE_SPLITS:
        bundled = kcse.data.BUNDLED_CHINESE_STS / "STS-B" / f"STS-B.{split}.data"
        assert file_checksum(bundled) == recorded[f"senteval_cn/STS-B/STS-B.{split}.data"]
    assert card_checksums(CARDS / "chinese_sts.md").items() <= recorded.items()


def test_checksum_command_line(tmp_path, capsys):
    path = tmp_path / "a.csv"
    path.write_bytes(b"a,b,1.0\n")
    assert checksums.main([str(path)]) == 0
    digest, size, name = capsys.readouterr().out.split()
    assert digest == file_checksum(path) and size == "8" and name == str(path)
    assert checksums.main([]) == 2

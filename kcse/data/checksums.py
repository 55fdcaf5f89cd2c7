"""SHA-256 checksums of data files, and the ones recorded in data cards.

Every card in `data_cards/` has a table of the files it describes, with the
SHA-256 of the copy in `../shared/data` where that copy exists. To check a
file you downloaded:

    python -m kcse.data.checksums path/to/ATEC.test.data ...

prints `<sha256>  <bytes>  <path>` for each file (compare with the card, or
record it there if the card says "not available offline").
"""

import hashlib
import os
import pathlib
import re
import sys

_HEX64 = re.compile(r"`([0-9a-f]{64})`")
_PATH = re.compile(r"`([^`\s]+)`")


def file_checksum(path, chunk_size=1 << 20):
    """SHA-256 of a file's bytes, as 64 lower-case hex digits.

    Example:
    ```python
    import pathlib

    import kcse

    pathlib.Path("empty.txt").write_bytes(b"")
    kcse.data.file_checksum("empty.txt")
    # 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
    kcse.data.file_checksum(kcse.data.BUNDLED_CHINESE_STS / "STS-B/STS-B.test.data")[:12]
    # 'a22c0e4dba5d' (as in data_cards/chinese_stsb.md)
    ```
    """
    digest = hashlib.sha256()
    with open(os.fspath(path), "rb") as file:
        for chunk in iter(lambda: file.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def card_checksums(card_path):
    """The checksums a data card records: {relative file path: sha256}.

    A recorded checksum is a table row whose first cell is a back-quoted
    path (relative to the data folder, e.g.
    `` `senteval_cn/STS-B/STS-B.test.data` ``) and one of whose cells is a
    back-quoted 64-digit hex SHA-256. Rows saying "not available offline"
    have no checksum and are not returned.

    Example:
    ```python
    import pathlib
    from kcse.data.checksums import card_checksums

    card = pathlib.Path("card.md")
    card.write_text("| file | SHA-256 |\\n|---|---|\\n| `a/b.csv` | `" + "0" * 64 + "` |\\n")
    card_checksums(card)  # {'a/b.csv': '0000…0000'}
    ```
    """
    checksums = {}
    for line in pathlib.Path(os.fspath(card_path)).read_text(encoding="utf-8").splitlines():
        if not line.lstrip().startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        path = _PATH.fullmatch(cells[0]) if cells else None
        digests = [m.group(1) for cell in cells[1:] for m in [_HEX64.fullmatch(cell)] if m]
        if path and digests:
            checksums[path.group(1)] = digests[0]
    return checksums


def verify_card(card_path, data_dir):
    """Recomputes a card's checksums against the files under `data_dir`.

    Returns:
        list of `(relative path, recorded, actual or None if missing)`;
        a file matches when `recorded == actual`.

    Example:
    ```python
    import pathlib

    import kcse

    # Real use: a card of data_cards/ and the folder it describes.
    pathlib.Path("data").mkdir()
    pathlib.Path("data/a.txt").write_text("hello\\n")
    pathlib.Path("card.md").write_text(
        "| file | SHA-256 |\\n|---|---|\\n"
        "| `a.txt` | `5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03` |\\n"
        "| `b.txt` | `" + "0" * 64 + "` |\\n")
    results = kcse.data.verify_card("card.md", "data")
    [(path, recorded == actual) for path, recorded, actual in results]
    # [('a.txt', True), ('b.txt', False)]
    results[1][2]  # None: b.txt is missing
    ```
    """
    data_dir = pathlib.Path(os.fspath(data_dir))
    results = []
    for relative, recorded in card_checksums(card_path).items():
        path = data_dir / relative
        actual = file_checksum(path) if path.is_file() else None
        results.append((relative, recorded, actual))
    return results


def main(argv=None):
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__.strip())
        return 2
    for path in paths:
        print(f"{file_checksum(path)}  {os.path.getsize(path)}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""report.html: written beside results.md from the same cells, read back
with the standard library's HTML parser: every cell's numbers on every
split, Su's colours (c green where it beats b, red where not), his
published cell beside ours, the plots embedded and nothing outside the
file (`results_cells.made_up` cells)."""

import base64
import html.parser
import json

import numpy as np

from kcse.experiments.cell_record import FAILED
from kcse.experiments.results.plot_files import FOLDER
from kcse.experiments.results.plot_files import diagnostics_path
from kcse.experiments.results.plot_files import plot_name
from kcse.experiments.results.report_html import report_html
from kcse.experiments.results.store import ResultStore
from results_cells import SPLIT_PAIRS
from results_cells import made_up

# Su's published BERT-P1 cells of ATEC (c beats b) and PAWSX (it does not).
SU_WINS, SU_LOSES = [16.59, 20.61, 33.14], [15.15, 17.03, 12.95]


class Report(html.parser.HTMLParser):
    """What a test reads of report.html: each table cell of ours (`entries`:
    `{(key, split): {"ours", "su": text, "ours_class", "su_class"}}`),
    every tag, every attribute naming something to load or follow, the
    images' sources, the ids and the h3 headings (splits, Plots)."""

    def __init__(self, text):
        super().__init__()
        self.entries, self.tags, self.references = {}, set(), []
        self.images, self.ids, self.headings = [], set(), []
        self._entry = self._part = self._heading = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        self.references += [attrs[name] for name in ("src", "href", "srcset", "data",
                                                     "poster", "action") if name in attrs]
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "img":
            self.images.append(attrs["src"])
        if tag == "h3":
            self._heading = ""
        if tag == "td" and "data-cell" in attrs:
            self._entry = self.entries.setdefault(
                (attrs["data-cell"], attrs["data-split"]),
                {"ours": "", "su": "", "ours_class": None, "su_class": None, "links": []})
        elif self._entry is not None and tag == "div":
            self._part = {"ours": "ours", "su": "su"}[attrs["class"]]
        elif self._entry is not None and tag == "span":
            self._entry[f"{self._part}_class"] = attrs["class"]
        elif self._entry is not None and tag == "a":
            self._entry["links"].append(attrs["href"])

    def handle_endtag(self, tag):
        if tag == "td":
            self._entry = None
        elif tag == "div":
            self._part = None
        elif tag == "h3":
            self.headings.append(self._heading)
            self._heading = None

    def handle_data(self, data):
        if self._part is not None:
            self._entry[self._part] += data
        if self._heading is not None:
            self._heading += data


def expected(cell, split):
    """`a / b / c` of `cell` on `split`, from results.json's numbers."""

    def value(field):
        scores = cell[field]
        if scores is None:
            return "n/a" if field == "whitening" else "-"
        if split in ("avg", "w-avg"):
            if any(name not in scores for name in SPLIT_PAIRS):
                return "-"
            weights = list(SPLIT_PAIRS.values()) if split == "w-avg" else None
            return f"{np.average([scores[name]['spearman'] for name in SPLIT_PAIRS], weights=weights):.2f}"
        return f"{scores[split]['spearman']:.2f}" if split in scores else "-"

    c = "failed" if cell["status"] == FAILED else value("trained")
    return f"{value('raw')} / {value('whitening')} / {c}"


def grid(tmp_path):
    """A results folder of BERT-P1 and P4 on ATEC, PAWSX and STS-B, with
    plots for two cells, as a run with `--plot` leaves it."""
    def loses(base):  # b above c on every split.
        return {split: {"spearman": base + 9 + i, "pearson": base, "n": n}
                for i, (split, n) in enumerate(SPLIT_PAIRS.items())}

    cells = (made_up(1, "P1", "ATEC", 20.0, published=SU_WINS)
             | made_up(2, "P1", "PAWSX", 15.0, whitening=loses(15.0), published=SU_LOSES)
             | made_up(3, "P1", "STS-B", 60.0, trained=("train", "valid", "test"),
                       published=None)
             | made_up(4, "P4", "ATEC", 22.0, status=FAILED, error="seed 0: loss nan",
                       trained=None)
             | made_up(5, "P4", "PAWSX", 30.0, whitening=None, trained=None,
                       untrained="no training data"))
    plots = {}
    for key in list(cells)[:2]:
        plot = tmp_path / FOLDER / plot_name(key)
        plot.parent.mkdir(exist_ok=True)
        plots[key] = [plot, diagnostics_path(plot)] if key == next(iter(cells)) else [plot]
        for number, path in enumerate(plots[key]):
            path.write_bytes(b"\x89PNG\r\n\x1a\n" + key.encode() + bytes([number]))
    store = ResultStore(tmp_path)
    for key, cell in cells.items():
        store.add(key, cell)
    return store, plots


def test_report_shows_every_cell_with_su_colours_published_cells_and_plots(tmp_path):
    store, plots = grid(tmp_path)
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert text == report_html(store.cells, tmp_path)  # From the cells of results.json.
    report = Report(text)
    stored = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["cells"]
    assert {key for key, _ in report.entries} == set(stored)
    colours = set()
    for key, cell in stored.items():
        for split in (*SPLIT_PAIRS, "avg", "w-avg"):
            entry = report.entries[(key, split)]
            assert entry["ours"] == expected(cell, split)
            # Su's rule: c green where it beats b, red where not; no colour
            # without both.
            a, b, c = entry["ours"].split(" / ")
            if "-" in (b, c) or "n/a" in (b, c) or c == "failed":
                assert entry["ours_class"] is None
            else:
                assert entry["ours_class"] == ("c-wins" if float(c) > float(b) else "c-loses")
                colours.add(entry["ours_class"])
            published = cell["published"]
            if published is None:
                assert entry["su"] == ""
                continue
            assert entry["su"] == "Su " + " / ".join(f"{value:.2f}" for value in published)
            assert entry["su_class"] == ("c-wins" if published == SU_WINS else "c-loses")
    assert colours == {"c-wins", "c-loses"}
    assert report.entries[(next(iter(plots)), "test")]["ours_class"] == "c-wins"
    assert report.entries[(list(plots)[1], "test")]["ours_class"] == "c-loses"

    # Each plot embedded as a data URI, linked from its cell in the table of
    # its reported split; nothing loaded or followed outside the file.
    embedded = [base64.b64decode(src.removeprefix("data:image/png;base64,"))
                for src in report.images]
    assert embedded == [path.read_bytes() for paths in plots.values() for path in paths]
    for key in stored:
        links = report.entries[(key, "test")]["links"]
        assert len(links) == (key in plots)
        assert all(link.startswith("#") and link[1:] in report.ids for link in links)
        assert not report.entries[(key, "train")]["links"]
    assert all(reference.startswith(("data:image/png;base64,", "#"))
               for reference in report.references)
    assert not report.tags & {"link", "script", "iframe", "object", "embed"}
    # The table of the reported split, where c is, first; then eval.py's order.
    assert report.headings[:5] == ["test", "train", "valid", "avg", "w-avg"]
    assert "url(" not in text and "@import" not in text


def test_report_is_rewritten_with_results_md(tmp_path):
    store = ResultStore(tmp_path)
    ((key, cell),) = made_up(1, "P1", "STS-B", 60.0).items()
    store.add(key, cell)
    assert set(Report((tmp_path / "report.html").read_text(encoding="utf-8")).entries) == {
        (key, split) for split in ("train", "valid", "test", "avg", "w-avg")}
    ((other, cell),) = made_up(2, "P4", "STS-B", 62.0).items()
    ResultStore(tmp_path).add(other, cell)  # Another run, sharing the folder.
    report = Report((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert {entry for entry, _ in report.entries} == {key, other}
    assert report.entries[(other, "test")]["ours"] == "64.50 / 66.50 / 68.50"
    assert not report.images  # No --plot: nothing to embed.

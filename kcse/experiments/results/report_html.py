"""report.html: a grid's cells in Su Jianlin's layout, for a browser.

One self-contained page (no file, style sheet or script outside it): the
sections and tables of su_table.md (`tables.su_sections`: a row per
model-pooling, a column per task, a table per split), each entry `a / b /
c` with c coloured by Su's rule (green where c beats b, BERT-whitening;
red where not), Su's published a / b / c under ours in the same cell
where the model is his release, the table of the reported split (test)
first, and each cell's plots (`plot_files`,
written with `--plot`) embedded as PNG data URIs under its section's
tables. The store rewrites it with results.md, from the same cells.
"""

import base64
import html
import re

from kcse.experiments.cell_record import c_beats_b
from kcse.experiments.cell_record import number
from kcse.experiments.results.plot_files import cell_plots
from kcse.experiments.results.tables import CHINESE_TITLE
from kcse.experiments.results.tables import latest_line
from kcse.experiments.results.tables import legends
from kcse.experiments.results.tables import settings_text
from kcse.experiments.results.tables import su_sections

# Su's colours: c where it beats b, and where it does not.
WINS, LOSES = "c-wins", "c-loses"

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #1f2328; }
p { max-width: 70em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.6em; text-align: center; }
th { background: #f6f8fa; }
td { font-variant-numeric: tabular-nums; white-space: nowrap; }
.su { color: #656d76; font-size: 0.85em; }
.c-wins { color: #1a7f37; font-weight: bold; }
.c-loses { color: #cf222e; font-weight: bold; }
.plots { font-size: 0.8em; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; display: block; }
"""


def report_html(cells_by_key, directory, title=CHINESE_TITLE):
    """report.html of the cells `{key: record}` of the results folder
    `directory` (where their plots are), as a string."""
    keys = {id(cell): key for key, cell in cells_by_key.items()}
    cells = list(cells_by_key.values())
    body = [f"<h1>{html.escape(title)}, in Su's layout</h1>"]
    if not cells:
        body.append("<p>No cells yet.</p>")
    else:
        body.append(_paragraph(
            "Spearman ×100 laid out as Su Jianlin's table (\"SimCSE in Chinese\", "
            "kexue.fm/archives/8348): a row per model-pooling, a column per task, "
            "each entry **a** raw / **b** BERT-whitening / **c** trained by the "
            "section's method (the mean over its seeds), **c+w** where the run "
            "asked for it. As Su colours his table, c is green where it beats b "
            "and red where it does not. Under ours, in grey, Su's published "
            "a / b / c where the model is his release. A table per split, "
            "**avg** and **w-avg** as bojone/SimCSE's eval.py averages them; "
            "`-`: no such number, `n/a`: b without data to whiten on. The same "
            "tables: su_table.md; every cell's settings, spread over seeds and "
            "provenance: results.md." + legends(cells)))
        body.append(_paragraph(latest_line(cells)))
    for section in su_sections(cells):
        body += _section(section, keys, directory)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            "<body>\n" + "\n".join(body) + "\n</body>\n</html>\n")


def colour(b, c):
    """Su's colour of c beside b (None: one of them missing; `c_beats_b`)."""
    beats = c_beats_b(b, c)
    return None if beats is None else WINS if beats else LOSES


def _section(section, keys, directory):
    """The heading, settings, tables and plots of one `SuSection`."""
    shown = [(name, cell) for name, found in section.rows for cell in found
             if cell is not None]
    plots = {id(cell): cell_plots(directory, keys[id(cell)]) for _, cell in shown}
    lines = [f"<h2>{html.escape(section.method)}, protocol "
             f"{html.escape(section.protocol)}, settings {section.label} "
             f"(<code>{section.settings_id}</code>)</h2>",
             f"<p>{html.escape(settings_text(shown[0][1]['settings']))}</p>"]
    # The table of the reported split (test), where c is, first.
    reported = {cell["reported_split"] for _, cell in shown}
    for split in sorted(section.splits, key=lambda split: split not in reported):
        lines += [f"<h3>{html.escape(split)}</h3>", "<table>",
                  "<tr>" + "".join(f"<th>{html.escape(text)}</th>" for text in (
                      f"{section.heading} ({split})", *section.tasks)) + "</tr>"]
        for name, found in section.rows:
            lines.append(f"<tr><th>{html.escape(name)}</th>" + "".join(
                "<td></td>" if cell is None else
                _entry(section, cell, split, keys[id(cell)], plots[id(cell)])
                for cell in found) + "</tr>")
        lines.append("</table>")
    figures = [_figure(section, name, cell, keys[id(cell)], plots[id(cell)])
               for name, cell in shown if plots[id(cell)]]
    if figures:
        lines += ["<h3>Plots</h3>"] + figures
    return lines


def _entry(section, cell, split, key, plots):
    """A table cell: our `a / b / c` on `split`, Su's under it, and a link
    to the cell's plots from the table of its reported split."""
    texts = [column.text(cell, split) for column in section.columns]
    fields = [column.field for column in section.columns]
    ours = _numbers(texts, fields, *section.b_and_c(cell, split))
    error = f' title="{html.escape(cell["error"])}"' if cell.get("error") else ""
    parts = [f'<td data-cell="{html.escape(key)}" data-split="{html.escape(split)}"{error}>',
             f'<div class="ours">{ours}</div>']
    if cell.get("published"):
        published = cell["published"]
        theirs = _numbers(list(map(number, published)), ["raw", "whitening", "trained"],
                          *published[1:])
        parts.append(f'<div class="su">Su {theirs}</div>')
    if plots and split == cell["reported_split"]:
        parts.append(f'<a class="plots" href="#{_anchor(key)}">plots</a>')
    return "".join(parts) + "</td>"


def _numbers(texts, fields, b, c):
    """`a / b / c` (one text per column field), c coloured by `colour`."""
    kind = colour(b, c)
    return " / ".join(
        f'<span class="{kind}">{html.escape(text)}</span>'
        if field == "trained" and kind else html.escape(text)
        for text, field in zip(texts, fields))


def _figure(section, name, cell, key, plots):
    """The plots of `cell` (of row `name`), embedded, under a caption."""
    caption = (f"{name}, {cell['task']} ({cell['reported_split']}): "
               f"{section.heading} {section.entry(cell, cell['reported_split'])}")
    images = "".join(
        f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,'
        f'{base64.b64encode(path.read_bytes()).decode("ascii")}">' for path in plots)
    return (f'<figure id="{_anchor(key)}"><figcaption>{html.escape(caption)}'
            f"</figcaption>{images}</figure>")


def _anchor(key):
    """The id of a cell's plots in the page: letters, digits, `-` and `_`."""
    return "plots-" + re.sub(r"[^A-Za-z0-9_-]", "_", key)


def _paragraph(text):
    """`text` as a paragraph, its markdown `**bold**` and `` `code` `` kept."""
    text = html.escape(text, quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return "<p>" + re.sub(r"`(.+?)`", r"<code>\1</code>", text) + "</p>"

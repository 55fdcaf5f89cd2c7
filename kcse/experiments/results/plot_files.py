"""Where a cell's plots are: `<output>/plots/`, a file per cell named
after its key, and its anisotropy diagnostics beside it.

The grid writes them (`kcse.experiments.plots`, with `--plot`); report.html
embeds them (`report_html`).
"""

import pathlib

# The folder of the plots, in the results folder (`--output`).
FOLDER = "plots"


def plot_name(key):
    """A file name for a cell's plot: its key, made safe for file systems."""
    name, pooling, task, _, method, digest = key.split("|")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return f"{safe}_{pooling}_{task}_{method}_{digest[:8]}.png"


def diagnostics_path(plot_path):
    """The path of the diagnostics plot of the cell whose plot is `plot_path`."""
    return plot_path.with_name(plot_path.stem + "_diagnostics.png")


def cell_plots(directory, key):
    """The plots of cell `key` in the results folder `directory` that
    exist: gold against cosines, then the diagnostics."""
    path = pathlib.Path(directory) / FOLDER / plot_name(key)
    return [path for path in (path, diagnostics_path(path)) if path.is_file()]

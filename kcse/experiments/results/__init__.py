"""The results of a comparison grid: each cell's identity (`identity`), the
locked store of results.json (`store`), the tables results.md,
su_table.md and the terminal show (`tables`), the page report.html
(`report_html`) and where the cells' plots are (`plot_files`). The package
exports nothing (see `kcse.experiments`).
"""

__all__ = []

"""The results of a comparison grid: each cell's identity (`identity`), the
locked store of results.json (`store`), and the tables results.md,
su_table.md and the terminal show (`tables`). The package exports nothing
(see `kcse.experiments`).
"""

__all__ = []

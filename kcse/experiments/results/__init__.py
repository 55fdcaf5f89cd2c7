"""The results of a comparison grid: each cell's identity (`identity`), the
locked store of results.json (`store`), and the tables results.md,
su_table.md and the terminal show (`tables`).

The names callers use are here too (`results.ResultStore`,
`results.cell_key`, `results.NUMERICS`...); the package exports nothing
(see `kcse.experiments`).
"""

from kcse.experiments.cell_record import DONE
from kcse.experiments.cell_record import FAILED
from kcse.experiments.cell_record import cell_columns
from kcse.experiments.cell_record import number
from kcse.experiments.cell_record import reported
from kcse.experiments.results.identity import IMPLIED_SETTINGS
from kcse.experiments.results.identity import NUMERICS
from kcse.experiments.results.identity import cell_identity
from kcse.experiments.results.identity import cell_key
from kcse.experiments.results.identity import run_settings
from kcse.experiments.results.identity import setting_differences
from kcse.experiments.results.identity import settings_id
from kcse.experiments.results.identity import shown_settings
from kcse.experiments.results.store import REQUIRED_FIELDS
from kcse.experiments.results.store import SCHEMA
from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.store import ResultsFileError
from kcse.experiments.results.store import is_finished
from kcse.experiments.results.store import read_cells
from kcse.experiments.results.tables import CHINESE_TITLE
from kcse.experiments.results.tables import markdown
from kcse.experiments.results.tables import readable_names
from kcse.experiments.results.tables import su_markdown
from kcse.experiments.results.tables import text_table

__all__ = []

"""Views of a run folder: the report (``report``: its files; ``compare``: pairs, tests and the
leaderboard; ``markdown``: its text; ``plots``: its figures; ``style``: names, formats and colours),
the comparison of two runs (``compare_runs``), the exports of a run's cells as one table
(``export``) and the summary ``primsel run`` prints (``summary``). Everything here reads the run
folder through :mod:`primsel.experiments.results` and builds no component, library or retriever."""

from primsel.experiments.results import LoadedCell, LoadedExperiment, ReportError, load_experiment
from primsel.reporting.compare import baseline_pairs, significance
from primsel.reporting.markdown import frontier_table
from primsel.reporting.report import write_report

__all__ = [
    "LoadedCell",
    "LoadedExperiment",
    "ReportError",
    "baseline_pairs",
    "frontier_table",
    "load_experiment",
    "significance",
    "write_report",
]

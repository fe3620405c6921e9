"""The former home of the report, kept so that ``from primsel.experiments.report import ...``
still works: the report is :mod:`primsel.reporting` (which sits above the experiments, beside
the explorer) and the run folder's reader is :mod:`primsel.experiments.results`. New code
imports from those; this module only re-exports them.
"""

from primsel.reporting import (
    CellResult,
    Experiment,
    ReportError,
    baseline_pairs,
    best_cells,
    dataset_groups,
    frontier_table,
    load_experiment,
    ranking_frontier,
    recall_metric,
    render_markdown,
    significance,
    tie_table,
    write_report,
)

__all__ = [
    "CellResult",
    "Experiment",
    "ReportError",
    "baseline_pairs",
    "best_cells",
    "dataset_groups",
    "frontier_table",
    "load_experiment",
    "ranking_frontier",
    "recall_metric",
    "render_markdown",
    "significance",
    "tie_table",
    "write_report",
]

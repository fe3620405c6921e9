"""The report of an experiment: comparisons against the baseline (``compare``), the Markdown text
(``markdown``), the figures (``plots``, ``style``); :func:`write_report` writes it all."""

from primsel.experiments.results import CellResult, Experiment, ReportError, dataset_groups, load_experiment
from primsel.reporting.compare import baseline_pairs, bootstrap_interval, leaderboard, recall_metric, significance
from primsel.reporting.markdown import best_cells, frontier_table, render_markdown, tie_table
from primsel.reporting.plots import ranking_frontier
from primsel.reporting.report import write_report

__all__ = ["CellResult", "Experiment", "ReportError", "baseline_pairs", "best_cells", "bootstrap_interval",
           "dataset_groups", "frontier_table", "leaderboard", "load_experiment", "ranking_frontier", "recall_metric",
           "render_markdown", "significance", "tie_table", "write_report"]

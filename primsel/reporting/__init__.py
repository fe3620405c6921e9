"""The report of an experiment: tests (``compare``), text (``markdown``), figures (``plots``), files (``report``)."""

from primsel.experiments.results import CellResult, Experiment, ReportError, load_experiment
from primsel.reporting.compare import baseline_pairs, significance
from primsel.reporting.markdown import frontier_table
from primsel.reporting.report import write_report

__all__ = ["CellResult", "Experiment", "ReportError", "baseline_pairs", "frontier_table", "load_experiment",
           "significance", "write_report"]

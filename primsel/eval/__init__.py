"""Evaluation: retrieval metrics of rankings and their recall/tokens frontier, ASPERA's set metrics
of selections, significance tests and bootstrap intervals, the verdicts of executed programs and
failure attribution. (The report of an experiment is :mod:`primsel.reporting`.)"""

from primsel.eval.metrics import (
    RANKING_METRICS,
    SET_METRIC_KEYS,
    evaluate,
    gold_sets,
    parse_metric,
    per_task,
    ranking,
    set_metrics,
    set_metrics_per_task,
    set_scores,
    to_qrels,
)

__all__ = [
    "RANKING_METRICS",
    "SET_METRIC_KEYS",
    "evaluate",
    "gold_sets",
    "parse_metric",
    "per_task",
    "ranking",
    "set_metrics",
    "set_metrics_per_task",
    "set_scores",
    "to_qrels",
]

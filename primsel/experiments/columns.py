"""Every metric name a cell records and every column the report, the explorer and the commands show.

A cell records the metrics named here (and those its ``metrics`` setting adds); a view shows the
columns named here. A new column of the report's full table is one entry of :data:`TABLE_COLUMNS`
(metric, header); of the leaderboard, :data:`LEADER_COLUMNS`; of the explorer,
:data:`EXPLORER_COLUMNS`; of the summary ``primsel run`` prints, :data:`SUMMARY_COLUMNS`. No
other code changes: the cell writes whatever is named, the tables read it by name, and a cell
that did not record a metric shows "–".
"""

from __future__ import annotations

from primsel.types import STATUSES

#: Cut-offs of the recall@k curve every cell reports.
CURVE_KS = tuple(range(1, 21))
#: Cut-offs of complete@k, of the per-task metrics and of the table of ties.
REPORT_KS = (5, 10, 15, 20)
#: Ranking metrics every cell reports in report.json (plus ``recall@k`` and ``complete@k`` at the cell's k).
BASE_METRICS = (
    *(f"recall@{k}" for k in CURVE_KS),
    *(f"complete@{k}" for k in REPORT_KS),
    "ndcg@10",
    "mrr",
)
#: Per-task ranking metrics kept in each task row (plus ``recall@k`` and ``complete@k`` at the cell's k).
TASK_METRICS = (
    *(f"recall@{k}" for k in REPORT_KS),
    *(f"complete@{k}" for k in REPORT_KS),
    "ndcg@10",
    "mrr",
)
#: Ranking metrics ``primsel retrieve`` prints.
RANKING_METRICS = (
    *(f"recall@{k}" for k in REPORT_KS),
    "ndcg@10",
    "mrr",
    "complete@10",
    "complete@15",
    "complete@20",
)
#: Prefix of the tie-aware value of a ranking metric (``tie_aware_recall@10``).
TIE_AWARE = "tie_aware_"
#: Set metrics of a selection (:data:`primsel.eval.metrics.SET_METRIC_KEYS`).
SET_METRICS = (
    "set_precision_micro",
    "set_recall_micro",
    "set_f1_micro",
    "set_precision_macro",
    "set_recall_macro",
    "set_f1_macro",
)
#: Statuses of a task with a generator: the execution statuses, then those of a program not executed.
TASK_STATUSES = tuple(dict.fromkeys((*STATUSES, "truncated", "llm_error")))
#: An LLM selector's usage, summed over tasks (``selector_<name>``; ``cached`` as ``selector_cache_hits``).
SELECTOR_USAGE = (
    "prompt_tokens",
    "completion_tokens",
    "seconds",
    "calls",
    "errors",
    "unknown_names",
    "cached",
)
#: ASPERA's figures of a generator run (:func:`primsel.eval.aspera.aspera_figures`).
ASPERA_FIGURES = (
    "score",
    "parse_failures",
    "parser_failure_rate",
    "solution_error_rate",
    "handback_control_error_rate",
    "handback_control_error_rate_normalise",
    "execution_error_count",
    "bad_import_error_rate",
    "import_lenient_score",
    "primitives_selection_macro_f1",
    "primitives_selection_micro_f1",
    "primitives_selection_micro_precision",
    "primitives_selection_micro_recall",
)
#: Figures of reflection round r, written ``<figure>@r`` (:func:`primsel.experiments.reflection.round_figures`).
ROUND_FIGURES = (
    "success",
    "calls",
    "cache_hits",
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "cumulative_tokens",
    "selection_recall",
)

#: The report's table of every cell: (metric, header).
TABLE_COLUMNS = (
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("recall@15", "R@15"),
    ("recall@20", "R@20"),
    ("complete@10", "C@10"),
    ("complete@15", "C@15"),
    ("complete@20", "C@20"),
    ("ndcg@10", "nDCG@10"),
    ("mrr", "MRR"),
    ("set_precision_micro", "P mi"),
    ("set_recall_micro", "R mi"),
    ("set_f1_micro", "F1 mi"),
    ("set_precision_macro", "P ma"),
    ("set_recall_macro", "R ma"),
    ("set_f1_macro", "F1 ma"),
    ("docs_tokens", "tokens"),
)
#: The columns of :data:`TABLE_COLUMNS` that are ranking metrics: the table of ties shows them in id order and
#: tie-aware.
RANKED_COLUMNS = tuple(column for column in TABLE_COLUMNS if column[0] in RANKING_METRICS)
#: The summary tables of an experiment on several datasets: (metric, header).
SUMMARY_METRICS = (("recall@5", "recall@5"), ("ndcg@10", "nDCG@10"), ("complete@5", "complete@5"))
#: The summary ``primsel run`` prints: (metric, header).
SUMMARY_COLUMNS = (
    ("recall@10", "R@10"),
    ("recall@15", "R@15"),
    ("complete@20", "C@20"),
    ("mrr", "MRR"),
    ("set_f1_macro", "F1 ma"),
    ("docs_tokens", "tokens"),
)
#: The leaderboard's metrics besides recall@15: (metric, header, decimals).
LEADER_COLUMNS = (
    ("complete@20", "C@20", 3),
    ("ndcg@10", "nDCG@10", 3),
    ("set_recall_macro", "R sel", 3),
    ("docs_tokens", "tokens", 1),
)
#: The explorer's table of cells: (metric, header).
EXPLORER_COLUMNS = (
    ("recall@5", "R@5"),
    ("recall@10", "R@10"),
    ("recall@15", "R@15"),
    ("recall@20", "R@20"),
    ("complete@10", "C@10"),
    ("complete@20", "C@20"),
    ("ndcg@10", "nDCG@10"),
    ("mrr", "MRR"),
    ("set_f1_macro", "set F1"),
    ("docs_tokens", "doc tokens"),
    ("success", "success"),
)


def decimals(metric: str) -> int:
    """Decimals a table shows of ``metric``: 1 for token counts (a name ending in ``tokens``), else
    3."""
    if metric.endswith("tokens"):
        return 1
    return 3

"""The short summary ``primsel run`` prints on stdout: per dataset, each ranking's best cell in
plain text lines of at most :data:`SUMMARY_WIDTH` characters (the full tables are the report's)."""

from __future__ import annotations

from collections.abc import Sequence

from primsel.experiments.columns import SUMMARY_COLUMNS, decimals
from primsel.experiments.results import LoadedCell, LoadedExperiment, data_text, dataset_groups
from primsel.reporting.compare import best_of_configurations
from primsel.reporting.style import configuration_labels, num, text_table

#: The cut-off :func:`best_cells` prefers.
HEADLINE_K = 15
#: The widest line :func:`best_cells` prints.
SUMMARY_WIDTH = 100


def _shorten(label: str, room: int) -> str:
    """``label`` cut in the middle to ``room`` characters (labels of one ranking's variants differ
    at their end)."""
    if len(label) <= room:
        return label
    head = (room - 1) // 2
    return label[:head] + "…" + label[-(room - 1 - head) :]


def _dataset_lines(
    cells: Sequence[LoadedCell], data_line: str, directory: str, limit: int
) -> list[str]:
    """The lines of one dataset: its name, a heading and the table of the best cells."""
    has_generator = any(c.settings.get("generator") for c in cells)
    labels = configuration_labels(cells)
    best = best_of_configurations(cells, prefer_k=HEADLINE_K, summary=True)
    header = ["configuration", "k", "closure"]
    if has_generator:
        header.append("success")
    header += [h for _, h in SUMMARY_COLUMNS]
    rows = []
    for key, c in list(best.items())[:limit]:
        row = [labels[key], str(c.settings.get("k")), "yes" if c.settings.get("closure") else "no"]
        if has_generator:
            row.append(num(c.report.success))
        row += [num(c.report.metric(m), decimals(m)) for m, _ in SUMMARY_COLUMNS]
        rows.append(row)
    others = sum(max(len(row[i]) for row in (header, *rows)) for i in range(1, len(header)))
    room = max(len(header[0]), SUMMARY_WIDTH - others - 2 * (len(header) - 1))
    for row in rows:
        row[0] = _shorten(row[0], room)
    then = "task success, then " if has_generator else ""
    lines = [
        f"== {data_line}",
        f"best cell of each ranking (at k = {HEADLINE_K} where run), by {then}R@{HEADLINE_K}:",
    ]
    lines += text_table(header, rows, left=3)
    if len(best) > limit:
        lines.append(
            f"... {len(best) - limit} more rankings (all in the report: primsel report {directory})"
        )
    return lines


def best_cells(experiment: LoadedExperiment, limit: int = 12) -> list[str]:
    """Plain text lines (at most :data:`SUMMARY_WIDTH` characters), per dataset under a line naming
    it: each ranking's best cell (at k = :data:`HEADLINE_K` where run; by success, else set F1, then
    fewer tokens), ordered by success, recall@15 and set F1, at most ``limit`` rows and a line
    counting the rest; empty when no cell finished."""
    out: list[str] = []
    for data, group in dataset_groups(experiment):
        cells = [c for c in group if c.finished]
        if cells:
            out += _dataset_lines(cells, data_text(data), str(experiment.directory), limit)
    return out

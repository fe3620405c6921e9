"""Two runs side by side, cell by cell, with paired tests (``primsel compare``).

A run is an experiment directory or one cell directory. Cells are matched by label (two single cells
whatever their labels); for each pair, on the tasks both scored: the means, B - A, the paired t and
randomisation tests and the tasks that flip up or down. A task whose LLM request failed
(``llm_error``: its cell is incomplete) has no success: it is left out of a comparison of
``success`` and counted, so that the text says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primsel.eval.significance import NOISE, compare
from primsel.experiments.results import (
    LoadedCell,
    ReportError,
    is_cell_directory,
    load_cell,
    load_experiment,
)
from primsel.reporting.style import csv_text, num, text_table

#: Fields of a compared pair, in the order of the csv and text columns.
FIELDS = (
    "cell",
    "metric",
    "tasks",
    "mean_a",
    "mean_b",
    "diff",
    "p_t",
    "p_randomisation",
    "up",
    "down",
)
#: Task ids listed per direction in the json output, at most.
MAX_FLIPS_LISTED = 50


@dataclass(frozen=True)
class ComparedPair:
    """One matched pair of cells compared on one metric.

    Parameters
    ----------
    cell : the label of the cell in A.
    metric : the per-task metric compared.
    tasks : the tasks both cells scored.
    mean_a, mean_b, diff : the means over those tasks in A and B, and B - A (None without a common
        task).
    p_t, p_randomisation : the paired t-test and randomisation test of B - A (None without a common
        task).
    up_tasks, down_tasks : the tasks whose value is higher / lower in B (beyond float noise), in A's
        order.
    tasks_only_a, tasks_only_b : tasks only one side scored.
    llm_errors_a, llm_errors_b : tasks left out of a ``success`` comparison because their LLM
        request failed.
    """

    cell: str
    metric: str
    tasks: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    p_t: float | None
    p_randomisation: float | None
    up_tasks: tuple[str, ...] = ()
    down_tasks: tuple[str, ...] = ()
    tasks_only_a: int = 0
    tasks_only_b: int = 0
    llm_errors_a: int = 0
    llm_errors_b: int = 0

    @property
    def up(self) -> int:
        """Tasks whose value is higher in B."""
        return len(self.up_tasks)

    @property
    def down(self) -> int:
        """Tasks whose value is lower in B."""
        return len(self.down_tasks)

    def to_json(self) -> dict[str, Any]:
        """The pair as ``primsel compare --format json`` writes it (at most :data:`MAX_FLIPS_LISTED`
        task ids per direction)."""
        out = {name: getattr(self, name) for name in FIELDS}
        out.update(
            up_tasks=list(self.up_tasks[:MAX_FLIPS_LISTED]),
            down_tasks=list(self.down_tasks[:MAX_FLIPS_LISTED]),
            tasks_only_a=self.tasks_only_a,
            tasks_only_b=self.tasks_only_b,
            llm_errors_a=self.llm_errors_a,
            llm_errors_b=self.llm_errors_b,
        )
        return out


@dataclass(frozen=True)
class RunComparison:
    """What :func:`compare_runs` found: the runs ``a`` and ``b``, the compared ``pairs`` in A's
    order, and the labels of the finished cells found on one side only."""

    a: str
    b: str
    pairs: tuple[ComparedPair, ...]
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The comparison as ``primsel compare --format json`` writes it."""
        return {
            "a": self.a,
            "b": self.b,
            "pairs": [pair.to_json() for pair in self.pairs],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
        }


def load_cells(path: str | Path) -> dict[str, LoadedCell]:
    """``{label: cell}`` of the finished cells of an experiment directory, or of one cell directory.

    Raises
    ------
    ReportError : not an experiment nor a cell, a cell directory without report.json, or an
        unreadable file.
    """
    directory = Path(path)
    if is_cell_directory(directory):
        try:
            cell = load_cell(directory)
        except ReportError as exc:
            raise ReportError(f"{directory}: unreadable cell: {exc}") from None
        if not cell.finished:
            raise ReportError(f"{directory}: a cell without its report (not finished)")
        return {cell.label: cell}
    return {c.label: c for c in load_experiment(directory).cells if c.finished}


def _values(cell: LoadedCell, metric: str) -> tuple[dict[str, float], int]:
    """``({task id: value}, tasks left out)`` of a cell's per-task ``metric``: for ``success``, a
    task whose LLM request failed is left out.

    Raises
    ------
    ReportError : the cell lacks the metric for a task (``success`` of a cell without a generator
        included).
    """
    values: dict[str, float] = {}
    left_out = 0
    for row in cell.task_rows():
        if metric == "success" and row.program is not None and row.program.status == "llm_error":
            left_out += 1
            continue
        value = row.value(metric)
        if value is None:
            if metric == "success":
                raise ReportError(
                    f"cell {cell.label!r} of {cell.directory.parent}: no task success to compare "
                    "(the cell ran no generator)"
                )
            raise ReportError(
                f"cell {cell.label!r} of {cell.directory.parent}: no per-task {metric!r} "
                f"(task {row.task_id})"
            )
        values[row.task_id] = value
    return values, left_out


def _pair(
    label: str, metric: str, cell_a: LoadedCell, cell_b: LoadedCell, n_resamples: int, seed: int
) -> ComparedPair:
    """The comparison of one matched pair of cells on ``metric``."""
    values_a, errors_a = _values(cell_a, metric)
    values_b, errors_b = _values(cell_b, metric)
    common = [t for t in values_a if t in values_b]
    x = [values_a[t] for t in common]
    y = [values_b[t] for t in common]
    up = tuple(t for t, a, b in zip(common, x, y) if b - a > NOISE * max(1.0, abs(a), abs(b)))
    down = tuple(t for t, a, b in zip(common, x, y) if a - b > NOISE * max(1.0, abs(a), abs(b)))
    counts = {
        "tasks_only_a": len(values_a) - len(common),
        "tasks_only_b": len(values_b) - len(common),
        "llm_errors_a": errors_a,
        "llm_errors_b": errors_b,
    }
    if not common:
        return ComparedPair(
            cell=label,
            metric=metric,
            tasks=0,
            mean_a=None,
            mean_b=None,
            diff=None,
            p_t=None,
            p_randomisation=None,
            **counts,
        )
    tests = compare(dict(zip(common, y)), dict(zip(common, x)), n_resamples=n_resamples, seed=seed)
    return ComparedPair(
        cell=label,
        metric=metric,
        tasks=len(common),
        mean_a=math.fsum(x) / len(x),
        mean_b=math.fsum(y) / len(y),
        diff=(math.fsum(y) - math.fsum(x)) / len(x),
        p_t=tests["p_t"],
        p_randomisation=tests["p_randomisation"],
        up_tasks=up,
        down_tasks=down,
        **counts,
    )


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    metric: str | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> RunComparison:
    """Compare two runs (experiment or cell directories) cell by cell on ``metric`` (a per-task
    metric of the task rows, or ``"success"``; None: ``recall@k`` at each cell's k).

    Raises
    ------
    ReportError : a run cannot be read, no cell matches, or a matched cell lacks the metric.
    """
    cells_a, cells_b = load_cells(run_a), load_cells(run_b)
    if len(cells_a) == 1 and len(cells_b) == 1 and set(cells_a) != set(cells_b):
        (label, cell_a), cell_b = next(iter(cells_a.items())), next(iter(cells_b.values()))
        matched = [(label, cell_a, cell_b)]
    else:
        matched = [
            (label, cell, cells_b[label]) for label, cell in cells_a.items() if label in cells_b
        ]
    if not matched:
        raise ReportError(
            f"no cell of {run_a} has a label that a finished cell of {run_b} has: nothing to compare"
        )
    pairs = []
    for label, cell_a, cell_b in matched:
        name = metric or f"recall@{cell_a.settings.get('k')}"
        pairs.append(_pair(label, name, cell_a, cell_b, n_resamples, seed))
    matched_a = {label for label, _, _ in matched}
    matched_b = {cell_b.label for _, _, cell_b in matched}
    return RunComparison(
        a=str(run_a),
        b=str(run_b),
        pairs=tuple(pairs),
        only_a=tuple(label for label in cells_a if label not in matched_a),
        only_b=tuple(label for label in cells_b if label not in matched_b),
    )


def left_out_lines(pairs: Sequence[ComparedPair]) -> list[str]:
    """The lines saying which compared cells had tasks left out of a ``success`` comparison: their
    LLM request failed (the text table ends with them; ``primsel compare`` says them on stderr for
    csv and json)."""
    lines = []
    for pair in pairs:
        for side, count in (("A", pair.llm_errors_a), ("B", pair.llm_errors_b)):
            if count:
                lines.append(
                    f"{side}: {pair.cell}: {count} tasks left out: their LLM request failed (llm_error; "
                    "the cell is incomplete, and the next primsel run computes them again)"
                )
    return lines


def format_text(comparison: RunComparison) -> str:
    """A plain text table of a comparison: the runs, a line per pair, the tasks left out and the
    unmatched cells."""
    header = ["cell", "metric", "tasks", "A", "B", "B-A", "p (t)", "p (rand)", "up", "down"]
    rows = [
        [
            p.cell,
            p.metric,
            str(p.tasks),
            num(p.mean_a, 4),
            num(p.mean_b, 4),
            num(p.diff, 4, signed=True),
            num(p.p_t, 4),
            num(p.p_randomisation, 4),
            str(p.up),
            str(p.down),
        ]
        for p in comparison.pairs
    ]
    lines = [
        f"A: {comparison.a}",
        f"B: {comparison.b}",
        "up/down: tasks whose value is higher/lower in B; p: paired tests of B - A",
    ]
    lines += text_table(header, rows, left=2)
    lines += left_out_lines(comparison.pairs)
    for side, only in (("A", comparison.only_a), ("B", comparison.only_b)):
        if only:
            lines.append(f"only in {side} ({len(only)}): " + ", ".join(only))
    return "\n".join(lines) + "\n"


def _csv_value(value: Any) -> Any:
    """A field in the csv: None empty, a float at full precision (``repr``)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return value


def format_csv(comparison: RunComparison) -> str:
    """:data:`FIELDS` of every pair as CSV with a header line (numbers at full precision)."""
    return csv_text(
        FIELDS, [[_csv_value(getattr(pair, name)) for name in FIELDS] for pair in comparison.pairs]
    )


def format_json(comparison: RunComparison) -> str:
    """The comparison as indented JSON."""
    return json.dumps(comparison.to_json(), indent=2) + "\n"


#: Output format -> its writer.
FORMATS: Mapping[str, Any] = {"text": format_text, "csv": format_csv, "json": format_json}

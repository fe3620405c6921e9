"""``primsel compare RUN_A RUN_B``: two runs side by side, cell by cell, with paired tests.

A run is an experiment directory (``runs/retrieval_ablation``) or one cell directory (holding
``config.json``). Cells are matched by their label (retriever, k, closure and the other
settings that vary; the label does not change when code or data changes the cell id); a cell
directory given on both sides is matched to the other whatever its label. For each matched
pair, on the tasks both cells scored (matched by task id):

* the mean per-task value of the metric in each run and B - A;
* the paired t-test and the paired randomisation test of :mod:`primsel.eval.significance`
  (one tolerance for float noise, so a difference of rounding on every task is no difference);
* the tasks that flip: ``up`` (B's value above A's) and ``down`` (below), with their ids.

The metric is ``recall@k`` at each cell's own k (from ``tasks.jsonl``), or the one ``--metric``
names (a per-task metric of ``tasks.jsonl``: ``mrr``, ``ndcg@10``, ``complete@15``, ``set_f1``,
..., or ``success``: the task passed). Output: a text table (default), ``--format csv`` or
``--format json`` (everything, task ids included), on stdout or ``--out``. Exit 0; 2 when a run
cannot be read, no cell matches, or a matched cell lacks the metric.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel.eval.significance import NOISE, compare
from primsel.experiments.results import CellResult, ReportError, load_experiment, per_task_values
from primsel.experiments.run_files import CellConfig

#: Fields of a compared pair, in the order of the csv and text columns.
FIELDS = ("cell", "metric", "tasks", "mean_a", "mean_b", "diff", "p_t", "p_randomisation", "up", "down")
#: Task ids listed per direction in the json output, at most.
MAX_FLIPS_LISTED = 50


def load_cells(path: str | Path) -> dict[str, Any]:
    """``{label: CellResult}`` of the finished cells of a run: an experiment directory, or one
    cell directory (then its label, from ``config.json``:
    :class:`primsel.experiments.run_files.CellConfig`).

    Raises
    ------
    primsel.experiments.results.ReportError : not a directory, or neither an experiment nor a
        cell, or an unreadable file (or a config.json without ``id``).
    """
    directory = Path(path)
    config = directory / "config.json"
    if config.is_file() and not (directory / "experiment.json").is_file():
        try:
            data = CellConfig.read(config)
            report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ReportError(f"{directory}: a cell without report.json (not finished)") from None
        except (OSError, ValueError) as exc:  # RunFileError included
            raise ReportError(f"{directory}: unreadable cell: {exc}") from None
        cell = CellResult(id=directory.name, label=directory.name if data.label is None else data.label,
                          settings=data.settings, report=report, directory=directory)
        return {cell.label: cell}
    experiment = load_experiment(directory)
    return {c.label: c for c in experiment.cells if c.finished}


def compare_runs(run_a: str | Path, run_b: str | Path, metric: str | None = None,
                 n_resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """Compare two runs cell by cell (see the module docstring).

    Parameters
    ----------
    run_a, run_b : experiment or cell directories.
    metric : a per-task metric of ``tasks.jsonl`` or ``"success"``; None: ``recall@k`` at each
        cell's k.
    n_resamples, seed : of the randomisation test.

    Returns
    -------
    ``{"a": path, "b": path, "pairs": [{field of FIELDS: value, "up_tasks": [...], "down_tasks":
    [...], "tasks_only_a": n, "tasks_only_b": n}], "only_a": [labels], "only_b": [labels]}``,
    pairs in the order of A's cells. ``p_t`` and ``p_randomisation`` are None for a pair with
    no common task.

    Raises
    ------
    primsel.experiments.results.ReportError : a run cannot be read, no cell matches, or a
        matched cell lacks the metric (the message names the file).
    """
    cells_a, cells_b = load_cells(run_a), load_cells(run_b)
    if len(cells_a) == 1 and len(cells_b) == 1 and set(cells_a) != set(cells_b):
        (label_a, cell_a), (_, cell_b) = next(iter(cells_a.items())), next(iter(cells_b.items()))
        matched = [(label_a, cell_a, cell_b)]
    else:
        matched = [(label, cell, cells_b[label]) for label, cell in cells_a.items() if label in cells_b]
    if not matched:
        raise ReportError(f"no cell of {run_a} has a label that a finished cell of {run_b} has: nothing to compare")
    pairs = []
    for label, cell_a, cell_b in matched:
        name = metric or f"recall@{cell_a.settings.get('k')}"
        values_a, values_b = per_task_values(cell_a, name), per_task_values(cell_b, name)
        common = [t for t in values_a if t in values_b]
        x = [values_a[t] for t in common]
        y = [values_b[t] for t in common]
        up = [t for t, a, b in zip(common, x, y) if b - a > NOISE * max(1.0, abs(a), abs(b))]
        down = [t for t, a, b in zip(common, x, y) if a - b > NOISE * max(1.0, abs(a), abs(b))]
        tests = compare(dict(zip(common, y)), dict(zip(common, x)), n_resamples=n_resamples, seed=seed) \
            if common else None
        pairs.append({
            "cell": label, "metric": name, "tasks": len(common),
            "mean_a": math.fsum(x) / len(x) if x else None, "mean_b": math.fsum(y) / len(y) if y else None,
            "diff": (math.fsum(y) - math.fsum(x)) / len(x) if x else None,
            "p_t": tests["p_t"] if tests else None,
            "p_randomisation": tests["p_randomisation"] if tests else None,
            "up": len(up), "down": len(down),
            "up_tasks": up[:MAX_FLIPS_LISTED], "down_tasks": down[:MAX_FLIPS_LISTED],
            "tasks_only_a": len(values_a) - len(common), "tasks_only_b": len(values_b) - len(common),
        })
    labels_a = {label for label, _, _ in matched}
    return {"a": str(run_a), "b": str(run_b), "pairs": pairs,
            "only_a": [label for label in cells_a if label not in labels_a],
            "only_b": [label for label in cells_b if label not in {m[2].label for m in matched}]}


def format_text(result: Mapping[str, Any]) -> str:
    """A plain text table of :func:`compare_runs`, with a line per run and the unmatched cells."""
    header = ["cell", "metric", "tasks", "A", "B", "B-A", "p (t)", "p (rand)", "up", "down"]
    rows = [[p["cell"], p["metric"], str(p["tasks"]), _num(p["mean_a"]), _num(p["mean_b"]),
             _num(p["diff"], signed=True), _num(p["p_t"]), _num(p["p_randomisation"]), str(p["up"]),
             str(p["down"])] for p in result["pairs"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"A: {result['a']}", f"B: {result['b']}",
             "up/down: tasks whose value is higher/lower in B; p: paired tests of B - A"]
    for row in [header, *rows]:
        lines.append("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))).rstrip())
    for side in ("a", "b"):
        if result[f"only_{side}"]:
            lines.append(f"only in {side.upper()} ({len(result[f'only_{side}'])}): "
                         + ", ".join(result[f"only_{side}"]))
    return "\n".join(lines) + "\n"


def format_csv(result: Mapping[str, Any]) -> str:
    """:data:`FIELDS` of every pair as CSV with a header line (numbers at full precision)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for p in result["pairs"]:
        writer.writerow(["" if p[f] is None else (repr(p[f]) if isinstance(p[f], float) else p[f]) for f in FIELDS])
    return buffer.getvalue()


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


__all__: Sequence[str] = ("FIELDS", "compare_runs", "format_csv", "format_text", "load_cells")

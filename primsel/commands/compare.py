"""``primsel compare RUN_A RUN_B``: two runs side by side, cell by cell, with paired tests.

A run is an experiment directory or one cell directory. Cells are matched by label (two single
cells whatever their labels); for each pair, on the tasks both scored: the means, B - A, the
paired t and randomisation tests and the tasks that flip up or down. Exit 2 when a run cannot
be read, no cell matches, or a matched cell lacks the metric.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from primsel.commands.common import UsageError, output_stream

#: Output formats of ``primsel compare``.
FORMATS = ("text", "csv", "json")
#: Fields of a compared pair, in the order of the csv and text columns.
FIELDS = ("cell", "metric", "tasks", "mean_a", "mean_b", "diff", "p_t", "p_randomisation", "up", "down")
#: Task ids listed per direction in the json output, at most.
MAX_FLIPS_LISTED = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel compare``."""
    parser.add_argument("run_a", metavar="RUN_A", help="experiment directory (or one cell directory)")
    parser.add_argument("run_b", metavar="RUN_B", help="the run to compare with RUN_A (B - A is shown)")
    parser.add_argument("--metric", default=None,
                        help="per-task metric of tasks.jsonl (mrr, ndcg@10, complete@15, set_f1, ...) or "
                             "'success' (default: recall@k at each cell's k)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="text table (default), csv or json")
    parser.add_argument("--out", metavar="FILE", default=None, help="write here instead of stdout")
    parser.add_argument("--n-resamples", type=int, default=10_000, metavar="N",
                        help="sign flips of the paired randomisation test (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the randomisation test (default 0)")


def load_cells(path: str | Path) -> dict[str, Any]:
    """``{label: CellResult}`` of the finished cells of an experiment directory, or of one cell
    directory (its label from ``config.json``).

    Raises
    ------
    ReportError : not an experiment nor a cell, or an unreadable file.
    """
    from primsel.experiments.results import CellConfig, CellResult, ReportError, load_experiment

    directory = Path(path)
    if (directory / "config.json").is_file() and not (directory / "experiment.json").is_file():
        try:
            data = CellConfig.read(directory / "config.json")
            report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ReportError(f"{directory}: a cell without report.json (not finished)") from None
        except (OSError, ValueError) as exc:  # RunFileError included
            raise ReportError(f"{directory}: unreadable cell: {exc}") from None
        cell = CellResult(id=directory.name, label=directory.name if data.label is None else data.label,
                          settings=data.settings, report=report, directory=directory)
        return {cell.label: cell}
    return {c.label: c for c in load_experiment(directory).cells if c.finished}


def _pair(label: str, name: str, values_a: Mapping[str, float], values_b: Mapping[str, float], n_resamples: int,
          seed: int) -> dict[str, Any]:
    """The compared pair of one matched cell (see :func:`compare_runs`)."""
    from primsel.eval.significance import NOISE, compare

    common = [t for t in values_a if t in values_b]
    x, y = [values_a[t] for t in common], [values_b[t] for t in common]
    flips = {side: [t for t, a, b in zip(common, x, y) if sign * (b - a) > NOISE * max(1.0, abs(a), abs(b))]
             for side, sign in (("up", 1), ("down", -1))}
    tests = compare(dict(zip(common, y)), dict(zip(common, x)), n_resamples=n_resamples, seed=seed) if common else None
    return {"cell": label, "metric": name, "tasks": len(common),
            "mean_a": math.fsum(x) / len(x) if x else None, "mean_b": math.fsum(y) / len(y) if y else None,
            "diff": (math.fsum(y) - math.fsum(x)) / len(x) if x else None,
            "p_t": tests["p_t"] if tests else None, "p_randomisation": tests["p_randomisation"] if tests else None,
            "up": len(flips["up"]), "down": len(flips["down"]),
            "up_tasks": flips["up"][:MAX_FLIPS_LISTED], "down_tasks": flips["down"][:MAX_FLIPS_LISTED],
            "tasks_only_a": len(values_a) - len(common), "tasks_only_b": len(values_b) - len(common)}


def compare_runs(run_a: str | Path, run_b: str | Path, metric: str | None = None,
                 n_resamples: int = 10_000, seed: int = 0) -> dict[str, Any]:
    """Compare two runs (experiment or cell directories) cell by cell on ``metric`` (a per-task
    metric of ``tasks.jsonl`` or ``"success"``; None: ``recall@k`` at each cell's k).

    Returns
    -------
    ``{"a", "b", "pairs": [{field of FIELDS, "up_tasks", "down_tasks", "tasks_only_a",
    "tasks_only_b"}], "only_a": [labels], "only_b": [labels]}``, pairs in A's order; the
    p-values are None for a pair with no common task.

    Raises
    ------
    ReportError : a run cannot be read, no cell matches, or a matched cell lacks the metric.
    """
    from primsel.experiments.results import ReportError, per_task_values

    cells_a, cells_b = load_cells(run_a), load_cells(run_b)
    if len(cells_a) == 1 and len(cells_b) == 1 and set(cells_a) != set(cells_b):
        matched = [(*next(iter(cells_a.items())), next(iter(cells_b.values())))]
    else:
        matched = [(label, cell, cells_b[label]) for label, cell in cells_a.items() if label in cells_b]
    if not matched:
        raise ReportError(f"no cell of {run_a} has a label that a finished cell of {run_b} has: nothing to compare")
    pairs = []
    for label, cell_a, cell_b in matched:
        name = metric or f"recall@{cell_a.settings.get('k')}"
        values_a, values_b = per_task_values(cell_a, name), per_task_values(cell_b, name)
        pairs.append(_pair(label, name, values_a, values_b, n_resamples, seed))
    return {"a": str(run_a), "b": str(run_b), "pairs": pairs,
            "only_a": [label for label in cells_a if label not in {m[0] for m in matched}],
            "only_b": [label for label in cells_b if label not in {m[2].label for m in matched}]}


def _num(value: float | None, signed: bool = False) -> str:
    return "–" if value is None else f"{value:+.4f}" if signed else f"{value:.4f}"


def format_text(result: Mapping[str, Any]) -> str:
    """A plain text table of :func:`compare_runs`, a line per run and the unmatched cells."""
    header = ["cell", "metric", "tasks", "A", "B", "B-A", "p (t)", "p (rand)", "up", "down"]
    rows = [[p["cell"], p["metric"], str(p["tasks"]), _num(p["mean_a"]), _num(p["mean_b"]),
             _num(p["diff"], signed=True), _num(p["p_t"]), _num(p["p_randomisation"]), str(p["up"]),
             str(p["down"])] for p in result["pairs"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"A: {result['a']}", f"B: {result['b']}",
             "up/down: tasks whose value is higher/lower in B; p: paired tests of B - A"]
    for row in [header, *rows]:
        lines.append("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths)))
                     .rstrip())
    for side in ("a", "b"):
        if result[f"only_{side}"]:
            only = result[f"only_{side}"]
            lines.append(f"only in {side.upper()} ({len(only)}): " + ", ".join(only))
    return "\n".join(lines) + "\n"


def format_csv(result: Mapping[str, Any]) -> str:
    """:data:`FIELDS` of every pair as CSV with a header line (numbers at full precision)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for p in result["pairs"]:
        writer.writerow(["" if p[f] is None else (repr(p[f]) if isinstance(p[f], float) else p[f]) for f in FIELDS])
    return buffer.getvalue()


def main(args: argparse.Namespace) -> int:
    """Compare and write; exit 2 on runs that cannot be compared."""
    from primsel.experiments.results import ReportError

    if args.n_resamples < 1:
        raise UsageError(f"--n-resamples must be >= 1, got {args.n_resamples}")
    try:
        result = compare_runs(args.run_a, args.run_b, args.metric, args.n_resamples, args.seed)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    text = {"text": format_text, "csv": format_csv,
            "json": lambda r: json.dumps(r, indent=2) + "\n"}[args.format](result)
    with ExitStack() as stack:
        output_stream(stack, args.out).write(text)
    if args.out:
        print(f"primsel compare: wrote {args.out}", file=sys.stderr)
    return 0

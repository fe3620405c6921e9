"""``primsel report``: (re)write the Markdown report and plots of an experiment directory, or
print every finished cell as one table (``--format csv|json|latex``).

The table has one row per finished cell: ``id``, ``label``, ``retriever``, ``k``, ``closure``,
``dataset`` (source/tasks), then every value of its ``report.json`` but ``frontier``, sorted by
name; a missing value is empty in the csv and ``null`` in the json.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.commands.common import UsageError

#: The first columns of :func:`cell_rows`, in order.
FIXED_COLUMNS = ("id", "label", "retriever", "k", "closure", "dataset")
#: LaTeX's special characters and what stands for each in text.
_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "<": r"\textless{}", ">": r"\textgreater{}", "–": "--"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``primsel report``."""
    parser.add_argument("directory", metavar="DIR", help="experiment directory, <out>/<name> (e.g. runs/retrieval_ablation)")
    parser.add_argument("--export", metavar="DIR", default=None,
                        help="also write <DIR>/<name>.md and its PNG plots there (aggregate tables only), "
                             "e.g. experiments/, and, when cells generated programs with a chat model, "
                             "<DIR>/<name>.answers.jsonl.gz: the model's answers, which primsel run reads back")
    parser.add_argument("--n-resamples", type=int, default=10_000, metavar="N",
                        help="sign flips of the paired randomisation test (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the randomisation test (default 0)")
    parser.add_argument("--format", choices=("md", "csv", "json", "latex"), default="md",
                        help="md: write the Markdown report (default); csv, json, latex: print every finished "
                             "cell with all its report values as one table on stdout instead (csv and json at "
                             "full precision; latex: a tabular with the report's rounding, special characters "
                             "escaped)")


def cell_rows(experiment: Any) -> list[dict[str, Any]]:
    """The rows of the finished cells of a :class:`primsel.experiments.results.Experiment`, each
    with every column of the table (:data:`FIXED_COLUMNS`, then the metrics sorted by name)."""
    from primsel import spec as specs

    data = {d.get("fingerprint"): d for d in experiment.datasets} if experiment.datasets else {}
    rows = []
    for c in (c for c in experiment.cells if c.finished):
        d = data.get(c.settings.get("dataset"), experiment.data) or {}
        row: dict[str, Any] = {
            "id": c.id, "label": c.label, "retriever": specs.label(c.settings.get("retriever", "?")),
            "k": c.settings.get("k"), "closure": bool(c.settings.get("closure", False)),
            "dataset": f"{d.get('source', '?')}/{d.get('n_tasks', '?')}"}
        row.update({key: v for key, v in c.record.to_json().items() if key not in (*FIXED_COLUMNS, "frontier")})
        rows.append(row)
    metrics = sorted({key for row in rows for key in row} - set(FIXED_COLUMNS))
    return [{key: row.get(key) for key in (*FIXED_COLUMNS, *metrics)} for row in rows]


def _field(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV text of :func:`cell_rows` with a header line: floats at full precision, None empty,
    nested values as JSON text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = list(rows[0]) if rows else list(FIXED_COLUMNS)
    writer.writerow(columns)
    writer.writerows([_field(row.get(col)) for col in columns] for row in rows)
    return buffer.getvalue()


def to_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """JSON text of :func:`cell_rows`: a list of objects, one per cell."""
    return json.dumps(list(rows), indent=2) + "\n"


def latex_escape(text: str) -> str:
    """``text`` with every LaTeX special character (``\\ & % $ # _ { } ~ ^ < >``) replaced for
    text mode and the en dash as ``--``, in one pass (nothing is escaped twice)."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex_number(key: str, value: Any) -> str:
    """A value of column ``key`` as the Markdown report writes it, before escaping: a float with
    3 decimals (1 for a key ending in ``tokens``), an int whole, a bool ``yes``/``no``, None or
    NaN ``--``, a nested value as JSON text, anything else ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{1 if key.endswith('tokens') else 3}f}"
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def to_latex(rows: Sequence[Mapping[str, Any]]) -> str:
    """A LaTeX ``tabular`` of :func:`cell_rows` (rules by ``\\hline``, no package needed):
    columns whose values are all numbers right-aligned, the others left."""
    columns = list(rows[0]) if rows else list(FIXED_COLUMNS)

    def numeric(col: str) -> bool:
        values = [row.get(col) for row in rows if row.get(col) is not None]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)

    lines = [[latex_escape(col) for col in columns]]
    lines += [[latex_escape(latex_number(col, row.get(col))) for col in columns] for row in rows]
    body = [" & ".join(cells) + r" \\" for cells in lines]
    spec = "".join("r" if numeric(col) else "l" for col in columns)
    return "\n".join([f"\\begin{{tabular}}{{{spec}}}", r"\hline", body[0], r"\hline", *body[1:], r"\hline",
                      r"\end{tabular}"]) + "\n"


def main(args: argparse.Namespace) -> int:
    """Write the report (or print the table); exit 2 when the directory holds no experiment."""
    from primsel.reporting import ReportError, load_experiment, write_report

    if args.n_resamples < 1:
        raise UsageError(f"--n-resamples must be >= 1, got {args.n_resamples}")
    if args.format != "md":
        try:
            rows = cell_rows(load_experiment(args.directory))
        except ReportError as exc:
            raise UsageError(str(exc)) from None
        sys.stdout.write({"csv": to_csv, "json": to_json, "latex": to_latex}[args.format](rows))
        return 0
    try:
        path = write_report(args.directory, export=args.export, n_resamples=args.n_resamples, seed=args.seed)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    print(f"primsel report: wrote {path}" + (f" and exported to {args.export}" if args.export else ""),
          file=sys.stderr)
    print(path)
    return 0

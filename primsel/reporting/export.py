"""An experiment's finished cells as one table (``primsel report --format csv|json|latex``).

The table has one row per finished cell: ``id``, ``label``, ``retriever``, ``k``, ``closure``,
``dataset`` (source/tasks), then every value of its report.json but ``frontier``, sorted by name;
the columns are the union over the cells.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from primsel.experiments.columns import decimals
from primsel.experiments.results import LoadedExperiment
from primsel.reporting.style import csv_text, num

#: The first columns of :func:`cell_rows`, in order.
FIXED_COLUMNS = ("id", "label", "retriever", "k", "closure", "dataset")
#: LaTeX's special characters and what stands for each in text.
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "–": "--",
}


def cell_rows(experiment: LoadedExperiment) -> list[dict[str, Any]]:
    """The rows of the experiment's finished cells, each with every column of the table
    (:data:`FIXED_COLUMNS`, then the report's values sorted by name; None where a cell lacks
    one)."""
    data = {d.get("fingerprint"): d for d in experiment.datasets}
    rows = []
    for c in experiment.cells:
        if not c.finished:
            continue
        dataset = data.get(c.settings.get("dataset"), experiment.data) or {}
        row: dict[str, Any] = {
            "id": c.id,
            "label": c.label,
            "retriever": c.retriever,
            "k": c.settings.get("k"),
            "closure": bool(c.settings.get("closure", False)),
            "dataset": f"{dataset.get('source', '?')}/{dataset.get('n_tasks', '?')}",
        }
        for key, value in c.report.to_json().items():
            if key not in (*FIXED_COLUMNS, "frontier"):
                row[key] = value
        rows.append(row)
    metrics = sorted({key for row in rows for key in row} - set(FIXED_COLUMNS))
    return [{key: row.get(key) for key in (*FIXED_COLUMNS, *metrics)} for row in rows]


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The columns of the table (:data:`FIXED_COLUMNS` when there is no row)."""
    if rows:
        return list(rows[0])
    return list(FIXED_COLUMNS)


def _csv_field(value: Any) -> Any:
    """A value in the csv: a bool ``true``/``false``, a table or list as JSON text, None empty, a
    float at full precision (``repr``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV text of :func:`cell_rows` with a header line: floats at full precision, None empty,
    nested values as JSON text."""
    columns = _columns(rows)
    return csv_text(columns, [[_csv_field(row.get(col)) for col in columns] for row in rows])


def to_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """JSON text of :func:`cell_rows`: a list of objects, one per cell."""
    return json.dumps(list(rows), indent=2) + "\n"


def latex_escape(text: str) -> str:
    """``text`` with every LaTeX special character (``\\ & % $ # _ { } ~ ^ < >``) replaced for text
    mode and the en dash as ``--``, in one pass (nothing is escaped twice)."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex_number(key: str, value: Any) -> str:
    """A value of column ``key`` as the Markdown report writes it, before escaping: a float with 3
    decimals (1 for a key ending in ``tokens``), an int whole, a bool ``yes``/``no``, None or NaN
    ``--``, a nested value as JSON text, anything else ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return num(value, decimals(key))
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def to_latex(rows: Sequence[Mapping[str, Any]]) -> str:
    """A LaTeX ``tabular`` of :func:`cell_rows` (rules by ``\\hline``, no package needed): columns
    whose values are all numbers right-aligned, the others left."""
    columns = _columns(rows)

    def numeric(col: str) -> bool:
        """True when every value of the column is a number."""
        values = [row.get(col) for row in rows if row.get(col) is not None]
        return bool(values) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        )

    lines = [[latex_escape(col) for col in columns]]
    lines += [[latex_escape(latex_number(col, row.get(col))) for col in columns] for row in rows]
    body = [" & ".join(cells) + r" \\" for cells in lines]
    spec = "".join("r" if numeric(col) else "l" for col in columns)
    return (
        "\n".join(
            [
                f"\\begin{{tabular}}{{{spec}}}",
                r"\hline",
                body[0],
                r"\hline",
                *body[1:],
                r"\hline",
                r"\end{tabular}",
            ]
        )
        + "\n"
    )


#: Format -> its writer of :func:`cell_rows`.
FORMATS = {"csv": to_csv, "json": to_json, "latex": to_latex}

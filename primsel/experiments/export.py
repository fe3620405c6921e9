"""Every finished cell of an experiment as one flat table: ``primsel report DIR --format csv|json|latex``.

One row per finished cell, in the experiment's order: ``id``, ``label``, ``retriever`` (its
readable label), ``k``, ``closure``, ``dataset`` (source and number of tasks) and every value of
the cell's ``report.json`` but its ``frontier`` (numbers at full precision; nested values as JSON
text in the csv).
Columns are the union over the cells, the fixed ones first, then the metrics sorted by name; a
cell without a metric has an empty csv field (``null`` in the json).

The LaTeX table (:func:`to_latex`) has the same rows and columns, with numbers as the Markdown
report writes them (3 decimals, token counts 1, integers whole, ``--`` for a missing value) and
every LaTeX special character of a header or value escaped.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from primsel import spec as specs

__all__ = ["FIXED_COLUMNS", "cell_rows", "latex_escape", "latex_number", "to_csv", "to_json", "to_latex"]

#: The first columns of :func:`cell_rows`, in order.
FIXED_COLUMNS = ("id", "label", "retriever", "k", "closure", "dataset")
#: Keys of report.json a row leaves out: the fixed columns, and the frontier (two values per k of
#: the whole ranking, which the report draws).
SKIPPED = (*FIXED_COLUMNS, "frontier")


def cell_rows(experiment: Any) -> list[dict[str, Any]]:
    """The rows of the finished cells of ``experiment`` (a
    :class:`primsel.experiments.results.Experiment`), each with every column of the table."""
    data = {d.get("fingerprint"): d for d in experiment.datasets} if experiment.datasets else {}
    rows = []
    for c in experiment.cells:
        if not c.finished:
            continue
        d = data.get(c.settings.get("dataset"), experiment.data) or {}
        row: dict[str, Any] = {
            "id": c.id, "label": c.label, "retriever": specs.label(c.settings.get("retriever", "?")),
            "k": c.settings.get("k"), "closure": bool(c.settings.get("closure", False)),
            "dataset": f"{d.get('source', '?')}/{d.get('n_tasks', '?')}",
        }
        row.update({key: value for key, value in c.record.to_json().items() if key not in SKIPPED})
        rows.append(row)
    metrics = sorted({key for row in rows for key in row} - set(FIXED_COLUMNS))
    return [{key: row.get(key) for key in (*FIXED_COLUMNS, *metrics)} for row in rows]


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """CSV text of :func:`cell_rows` with a header line; floats at full precision (``repr``),
    None empty, nested values as JSON text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = list(rows[0]) if rows else list(FIXED_COLUMNS)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_field(row.get(col)) for col in columns])
    return buffer.getvalue()


def to_json(rows: Sequence[Mapping[str, Any]]) -> str:
    """JSON text of :func:`cell_rows`: a list of objects, one per cell."""
    return json.dumps(list(rows), indent=2) + "\n"


#: LaTeX's special characters and what stands for each in text (``\\`` first, so the
#: backslashes of the other replacements are not escaped again).
_LATEX_SPECIAL = (
    ("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
    ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\textasciicircum{}"),
    ("<", r"\textless{}"), (">", r"\textgreater{}"), ("–", "--"),
)


def latex_escape(text: str) -> str:
    """``text`` with every LaTeX special character replaced, for a table cell in text mode:
    ``\\ & % $ # _ { } ~ ^ < >`` (``"recall@15_ta 5%"`` -> ``"recall@15\\_ta 5\\%"``) and the
    en dash as ``--``. A single pass over the characters, so no replacement is escaped twice."""
    table = dict(_LATEX_SPECIAL)
    return "".join(table.get(ch, ch) for ch in text)


def latex_number(key: str, value: Any) -> str:
    """A value of column ``key`` as the Markdown report writes it, before escaping: a float
    with 3 decimals (1 for a token count: a key ending in ``tokens``), an int whole, a bool
    ``yes``/``no``, None or NaN ``--``, a nested value as JSON text, anything else ``str``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{1 if key.endswith('tokens') else 3}f}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def to_latex(rows: Sequence[Mapping[str, Any]]) -> str:
    """A LaTeX ``tabular`` of :func:`cell_rows`: a header line of the column names, then one
    line per cell; columns whose values are all numbers are right-aligned, the others left.
    Needs no LaTeX package (rules are ``\\hline``). Missing values are ``--`` (an en dash)."""
    columns = list(rows[0]) if rows else list(FIXED_COLUMNS)

    def numeric(col: str) -> bool:
        values = [row.get(col) for row in rows if row.get(col) is not None]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)

    def line(cells: Sequence[str]) -> str:
        return " & ".join(cells) + r" \\"

    spec = "".join("r" if numeric(col) else "l" for col in columns)
    out = [f"\\begin{{tabular}}{{{spec}}}", r"\hline", line([latex_escape(col) for col in columns]), r"\hline"]
    for row in rows:
        out.append(line([latex_escape(latex_number(col, row.get(col))) for col in columns]))
    out += [r"\hline", r"\end{tabular}"]
    return "\n".join(out) + "\n"


def _field(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)

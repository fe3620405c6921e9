"""Every finished cell of an experiment as one flat table: ``primsel report DIR --format csv|json``.

One row per finished cell, in the experiment's order: ``id``, ``label``, ``retriever`` (its
readable label), ``k``, ``closure``, ``dataset`` (source and number of tasks) and every value of
the cell's ``report.json`` (numbers at full precision; nested values as JSON text in the csv).
Columns are the union over the cells, the fixed ones first, then the metrics sorted by name; a
cell without a metric has an empty csv field (``null`` in the json).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FIXED_COLUMNS", "cell_rows", "to_csv", "to_json"]

#: The first columns of :func:`cell_rows`, in order.
FIXED_COLUMNS = ("id", "label", "retriever", "k", "closure", "dataset")


def cell_rows(experiment: Any) -> list[dict[str, Any]]:
    """The rows of the finished cells of ``experiment`` (a
    :class:`primsel.experiments.report.Experiment`), each with every column of the table."""
    from primsel import spec as specs

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
        row.update({key: value for key, value in c.report.items() if key not in FIXED_COLUMNS})
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

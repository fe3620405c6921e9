"""Write the static explorer site of an experiment directory.

:func:`build_site` reads what ``primsel run`` wrote (``experiment.json``, and per cell
``config.json``, ``report.json``, ``tasks.jsonl``) plus the experiment's ``report.md`` and PNG
plots, and writes a site that a browser opens from disk (``index.html``; no server, no network)::

    <out>/index.html                 the page (one page; views are chosen by the URL's #fragment)
    <out>/assets/explorer.js, .css   the code, shipped in the package (primsel/explore/assets)
    <out>/data/index.js              the experiment: summary, plots, one entry per cell
    <out>/data/tasks.js              per task: query (and reference program) when the dataset is found
    <out>/data/cells/<cell id>.js    per cell: one row per task
    <out>/plots/*.png                the experiment's plots

Data files are scripts (``PRIMSEL.load(kind, key, data)``), because a page opened from disk may
not read other files with ``fetch``; each view loads only what it shows (the index: the cells'
aggregate metrics; a cell: that cell's rows), so a grid of 89 cells x 250 tasks opens as fast as
one cell. The site holds per-task rows, queries and programs: like the run directory, it must
not be committed when the run is on Asper-Bench.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from markdown_it import MarkdownIt

from primsel.datasets import DatasetError, load_builtin_tasks, load_tasks, resolve_dataset
from primsel.experiments.columns import EXPLORER_COLUMNS
from primsel.experiments.records import TaskRow
from primsel.experiments.results import LoadedCell, ReportError, load_experiment, markdown_path, read_colours
from primsel.spec import label as spec_label

__all__ = ["SiteError", "build_site"]

#: Metrics of report.json shown in the cells table, in order: (metric, header).
CELL_COLUMNS = EXPLORER_COLUMNS
#: Files of the page, in primsel/explore/assets.
ASSETS = ("index.html", "explorer.js", "explorer.css")


class SiteError(ValueError):
    """The run directory cannot be read or the site cannot be written (the message says why)."""


def _script(kind: str, key: str | None, data: Any) -> str:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"PRIMSEL.load({json.dumps(kind)},{json.dumps(key)},{payload});\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="backslashreplace")


def _rows(cell: LoadedCell) -> list[TaskRow]:
    """The cell's task rows (none when it has no task file); SiteError when they cannot be read."""
    try:
        return cell.task_rows(missing_ok=True)
    except ReportError as exc:
        raise SiteError(str(exc)) from None


def _task_row(row: TaskRow, k: int | None) -> dict[str, Any]:
    """The explorer's row of one task of one cell (shorter keys, only what the views show)."""
    metrics = row.metrics
    out: dict[str, Any] = {
        "id": row.task_id,
        "gold": list(row.gold),
        "sel": list(row.selection),
        "closure": list(row.closure_added),
        "recall": metrics.get(f"recall@{k}") if k is not None else None,
        "set_recall": metrics.get("set_recall"),
        "set_precision": metrics.get("set_precision"),
        "complete": metrics.get(f"complete@{k}") if k is not None else None,
        "doc_tokens": row.docs_tokens,
    }
    program = row.program
    if program is not None:
        attribution = dict(program.attribution) if program.attribution else None
        out.update({
            "status": program.status,
            "error_type": program.error_type,
            "message": program.message,
            "program": program.program,
            "prompt_tokens": program.tokens.get("prompt"),
            "completion_tokens": program.tokens.get("completion"),
            "called": list(program.called_primitives),
            "category": attribution.get("category") if attribution else None,
            "attribution": attribution,
        })
    return out


def _metrics(report: Any) -> dict[str, float]:
    """The numbers of :data:`CELL_COLUMNS` a cell's report holds."""
    out = {}
    for key, _ in CELL_COLUMNS:
        value = report.metric(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
    return out


def _cell_entry(cell: LoadedCell, colour: str | None = None) -> dict[str, Any]:
    """The explorer's entry of a cell: its settings, its metrics, its failures and its colour."""
    settings = dict(cell.settings)
    generator = settings.get("generator")
    if isinstance(generator, Mapping):
        generator_text = str(generator.get("model") or generator.get("type") or "")
    else:
        generator_text = str(generator or "")
    report = cell.report
    failures = dict(report.generation.failures) if report.generation is not None else {}
    return {
        "id": cell.id,
        "label": cell.label,
        "retriever": spec_label(settings.get("retriever", "?")),
        "k": settings.get("k"),
        "closure": bool(settings.get("closure", False)),
        "generator": generator_text,
        "finished": cell.finished,
        "complete": cell.complete,
        "metrics": _metrics(report),
        "failures": failures,
        "settings": settings,
        "colour": colour,
    }


def _task_texts(source: str, data: str | None, log: TextIO) -> dict[str, Any]:
    """Queries and reference programs of the run's tasks, when the dataset can be found.

    ``source`` is the run's (``experiment.json``'s ``data.source``: ``"builtin"``,
    ``"asper-bench"``, several joined by ``+``, or a retrieval-only dataset's name). Texts come
    only from the datasets it names: the built-in tasks, and the Asper-Bench archive (``data``,
    else ``$PRIMSEL_ASPER_BENCH``) only for a run on Asper-Bench, so that the tasks of another
    dataset that share an id with an Asper-Bench task never show its query.
    """
    sources = set(source.split("+"))
    tasks = []
    try:
        if "builtin" in sources:
            tasks += load_builtin_tasks()
        if "asper-bench" in sources:
            archive = resolve_dataset(data)
            if archive is None:
                print(f"primsel explore: the run is on {source}; give --data (or $PRIMSEL_ASPER_BENCH) "
                      "to show queries and reference programs", file=log)
            else:
                tasks += load_tasks(archive)
    except DatasetError as exc:
        print(f"primsel explore: no queries shown: {exc}", file=log)
        return {}
    return {t.id: {"query": t.query, "reference": t.program, "pairs": len(t.setup_programs)} for t in tasks}


def _summary_html(path: Path, plots: Mapping[str, str]) -> str:
    """report.md as HTML (raw HTML in it is escaped); images point into plots/."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ""
    for name in plots:
        text = text.replace(f"]({name})", f"](plots/{name})")
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def _in_report_order(directory: Path, pngs: list[Path]) -> list[Path]:
    """The plots in the order report.md shows them (those it does not show last, by name)."""
    try:
        text = markdown_path(directory).read_text(encoding="utf-8")
    except OSError:
        return pngs
    where = {p.name: text.find(f"]({p.name})") for p in pngs}
    return sorted(pngs, key=lambda p: (where[p.name] < 0, where[p.name], p.name))


def build_site(directory: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
               data: str | os.PathLike[str] | None = None, log: TextIO | None = None) -> Path:
    """Write the explorer site of an experiment directory.

    Parameters
    ----------
    directory : the experiment directory (``<out>/<name>`` of ``primsel run``).
    out : where to write the site (default ``<directory>/explore``); created if needed, files of
        an earlier site there are replaced.
    data : the Asper-Bench archive, for the queries and reference programs of a run on it
        (default ``$PRIMSEL_ASPER_BENCH``); runs on the built-in tasks need nothing.
    log : stream for messages (default stderr).

    Returns
    -------
    Path of ``index.html``.

    Raises
    ------
    SiteError : not an experiment directory, an unreadable file (named), or the site cannot be
        written.
    """
    log = sys.stderr if log is None else log
    directory = Path(directory)
    try:
        experiment = load_experiment(directory)
    except ReportError as exc:
        raise SiteError(str(exc)) from None
    target = Path(out) if out is not None else directory / "explore"
    plots = {p.name: p for p in _in_report_order(directory, sorted(directory.glob("*.png")))}
    colours = read_colours(directory)
    cells = [_cell_entry(c, colours.get(c.id)) for c in experiment.cells]
    index = {
        "name": experiment.name,
        "description": experiment.description,
        "data": dict(experiment.data),
        "baseline": experiment.baseline,
        "columns": [list(c) for c in CELL_COLUMNS],
        "plots": [f"plots/{name}" for name in plots],
        "summary_html": _summary_html(markdown_path(directory), plots),
        "cells": cells,
    }
    try:
        (target / "data" / "cells").mkdir(parents=True, exist_ok=True)
        for cell in experiment.cells:
            if not cell.finished:
                continue
            k = cell.settings.get("k")
            cut = int(k) if isinstance(k, int) else None
            rows = [_task_row(row, cut) for row in _rows(cell)]
            _write(target / "data" / "cells" / f"{cell.id}.js", _script("cell", cell.id, rows))
        texts = _task_texts(str(experiment.data.get("source", "")), None if data is None else str(data), log)
        _write(target / "data" / "tasks.js", _script("tasks", None, texts))
        _write(target / "data" / "index.js", _script("index", None, index))
        (target / "plots").mkdir(exist_ok=True)
        for name, path in plots.items():
            shutil.copyfile(path, target / "plots" / name)
        assets = resources.files("primsel.explore") / "assets"
        for name in ASSETS:
            text = (assets / name).read_text(encoding="utf-8")
            _write(target / name if name == "index.html" else target / "assets" / name, text)
    except OSError as exc:
        raise SiteError(f"cannot write the site in {target}: {exc.strerror or exc}") from None
    return target / "index.html"

"""The run folder: the one module that knows its files' names, writes them and reads them.

``primsel run`` writes ``<out>/<name>/``::

    experiment.json            the experiment as run (ManifestFile)
    <cell id>/config.json      what the cell ran, with what (ConfigFile)
    <cell id>/run.trec         its ranking, TREC run format
    <cell id>/qrels.trec       the gold primitives of its tasks, TREC qrels format
    <cell id>/tasks.jsonl      one TaskRow per task
    <cell id>/failures.jsonl   with a generator, the diagnosis of every task that did not pass
    <cell id>/report.json      its means and what the report reads (ReportFile), written last
    report.md, colours.json    written by the report (primsel.reporting)

A cell is *finished* when its report.json exists: the report shows it (marked incomplete when
report.json says ``"complete": false``). ``primsel run`` skips a finished cell that is complete
and whose components' sources are unchanged (:func:`is_complete`, and the runner compares the
source digests config.json records). The records are in :mod:`primsel.experiments.records`.

The runner and the cell write through :func:`write_manifest` and :func:`write_cell_files`; the
report, ``primsel compare``, ``primsel report`` and the explorer read through
:func:`load_experiment` (or :func:`load_cell`) and the readers below; nothing here builds a
component or the library.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primsel import spec as specs
from primsel.eval.frontier import depth_of, ranked_tasks, recall_by_k
from primsel.experiments.records import (
    COLOURS_FILE,
    CONFIG_FILE,
    EXPERIMENT_FILE,
    FAILURES_FILE,
    MARKDOWN_FILE,
    QRELS_FILE,
    RANKING_FILE,
    REPORT_FILE,
    TASKS_FILE,
    ConfigFile,
    ManifestCell,
    ManifestFile,
    ReportError,
    ReportFile,
    RunFileError,
    TaskRow,
)
from primsel.files import (
    JsonlError,
    NotUtf8Error,
    dumps_json,
    dumps_jsonl,
    read_jsonl,
    read_utf8,
    write_atomic,
)
from primsel.retrieval.trec import format_qrels, format_run, read_run
from primsel.types import Run


# ------------------------------------------------------------------------------------------------
# Reading files
# ------------------------------------------------------------------------------------------------
def _read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object of a file; None when it does not exist.

    Raises
    ------
    ReportError : the file cannot be read.
    RunFileError : it is not JSON (or not UTF-8), or not an object.
    """
    try:
        value = json.loads(read_utf8(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ReportError(f"{path}: unreadable: {exc}") from None
    except NotUtf8Error as exc:
        raise RunFileError(str(exc)) from None
    except ValueError as exc:  # invalid JSON
        raise RunFileError(f"{path}: unreadable: {exc}") from None
    if not isinstance(value, dict):
        raise RunFileError(f"{path}: unreadable: not a JSON object")
    return value


def read_manifest(directory: Path) -> ManifestFile | None:
    """The experiment.json of an experiment directory (None: there is none); ReportError as
    :func:`_read_object`, RunFileError for a bad key."""
    path = directory / EXPERIMENT_FILE
    data = _read_object(path)
    if data is None:
        return None
    return ManifestFile.from_json(data, str(path))


def read_config(cell_directory: Path) -> ConfigFile | None:
    """The config.json of a cell directory (None: there is none); errors as
    :func:`read_manifest`."""
    path = cell_directory / CONFIG_FILE
    data = _read_object(path)
    if data is None:
        return None
    return ConfigFile.from_json(data, str(path))


def read_report(cell_directory: Path) -> ReportFile | None:
    """The report.json of a cell directory (None: there is none, the cell is not finished); errors
    as :func:`read_manifest`."""
    path = cell_directory / REPORT_FILE
    data = _read_object(path)
    if data is None:
        return None
    return ReportFile.from_json(data, str(path))


@functools.lru_cache(maxsize=4)
def _task_rows_of(path: Path, stamp: tuple[int, int]) -> tuple[TaskRow, ...]:
    """The task rows of the file ``path`` as it was at ``stamp`` (modification time and size): the
    report reads a cell's rows once per figure, test and table, so the last few files read are
    kept."""

    def not_json(exc: JsonlError) -> None:
        """Raise a line that is not valid JSON as a RunFileError."""
        raise RunFileError(f"{path} line {exc.line}: not JSON ({exc.detail})")

    return tuple(
        TaskRow.from_json(data, f"{path} line {number}")
        for number, data in read_jsonl(path, on_error=not_json)
    )


def read_task_rows(cell_directory: Path, missing_ok: bool = False) -> list[TaskRow]:
    """The task rows of a cell directory, in file order (none when it has no tasks.jsonl and
    ``missing_ok``).

    Raises
    ------
    ReportError : no tasks.jsonl (without ``missing_ok``), or it cannot be read.
    RunFileError : a line that is not JSON or not a task row (file and line named), or a file
        that is not UTF-8 (file and byte offset named).
    """
    path = cell_directory / TASKS_FILE
    try:
        status = path.stat()
        return list(_task_rows_of(path, (status.st_mtime_ns, status.st_size)))
    except FileNotFoundError:
        if missing_ok:
            return []
        raise ReportError(f"{path}: missing") from None
    except OSError as exc:
        raise ReportError(f"{path}: unreadable: {exc.strerror or exc}") from None
    except NotUtf8Error as exc:
        raise RunFileError(str(exc)) from None


def read_ranking(cell_directory: Path) -> Run:
    """The ranking of a cell directory (:func:`primsel.retrieval.trec.read_run`); OSError or
    ValueError when run.trec is missing or malformed."""
    return read_run(cell_directory / RANKING_FILE)


def is_complete(cell_directory: Path) -> bool:
    """True when the cell directory holds a readable report.json that does not say ``"complete":
    false``."""
    try:
        report = read_report(cell_directory)
    except ReportError:
        return False
    return report is not None and report.complete


def has_report(cell_directory: Path) -> bool:
    """True when the cell directory holds a report.json (readable or not)."""
    return (cell_directory / REPORT_FILE).is_file()


def markdown_path(directory: Path) -> Path:
    """Where the report of an experiment directory is."""
    return directory / MARKDOWN_FILE


def read_colours(directory: Path) -> dict[str, str]:
    """Cell id -> its ``#rrggbb`` colour in the figures, from colours.json ({} when there is none or
    it is not readable); a value that is not ``#`` and six hex digits is left out."""
    try:
        data = _read_object(directory / COLOURS_FILE)
    except ReportError:
        return {}
    found = (data or {}).get("cells", {})
    if not isinstance(found, Mapping):
        return {}
    out = {}
    for cell_id, colour in found.items():
        is_colour = isinstance(colour, str) and len(colour) == 7 and colour.startswith("#")
        if is_colour and all(ch in "0123456789abcdefABCDEF" for ch in colour[1:]):
            out[str(cell_id)] = colour
    return out


# ------------------------------------------------------------------------------------------------
# Writing files
# ------------------------------------------------------------------------------------------------
def write_manifest(directory: Path, manifest: ManifestFile) -> None:
    """Write experiment.json into an experiment directory (created); OSError when it cannot be
    written."""
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(directory / EXPERIMENT_FILE, dumps_json(manifest.to_json()))


def write_cell_files(
    cell_directory: Path,
    config: ConfigFile,
    report: ReportFile,
    ranking: Run,
    tag: str,
    rows: Sequence[TaskRow],
    failures: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Write a cell's files: config.json, run.trec (``tag`` its run name), qrels.trec (the gold
    primitives of ``rows``: with run.trec, what trec_eval or ranx score), tasks.jsonl,
    failures.jsonl (when ``failures`` is not None) and report.json last, so that a cell killed while
    writing is not finished. An earlier report.json is removed first. OSError when a file cannot be
    written."""
    cell_directory.mkdir(parents=True, exist_ok=True)
    (cell_directory / REPORT_FILE).unlink(missing_ok=True)
    write_atomic(cell_directory / CONFIG_FILE, dumps_json(config.to_json()))
    write_atomic(cell_directory / RANKING_FILE, format_run(ranking, tag))
    gold = {row.task_id: row.gold for row in rows}
    write_atomic(cell_directory / QRELS_FILE, format_qrels(gold))
    write_atomic(cell_directory / TASKS_FILE, dumps_jsonl(row.to_json() for row in rows))
    if failures is not None:
        write_atomic(cell_directory / FAILURES_FILE, dumps_jsonl(failures))
    write_atomic(cell_directory / REPORT_FILE, dumps_json(report.to_json()))


def write_colours(directory: Path, colours: Mapping[str, str]) -> None:
    """Write colours.json: ``{"cells": {cell id: "#rrggbb"}}``; OSError when it cannot be
    written."""
    write_atomic(
        directory / COLOURS_FILE,
        json.dumps({"cells": dict(colours)}, indent=1, sort_keys=True) + "\n",
    )


# ------------------------------------------------------------------------------------------------
# An experiment as loaded
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadedCell:
    """A cell as read from its run folder.

    Parameters
    ----------
    id : the cell id (its directory's name, or its end: ``<label-slug>-<id>``).
    label : its readable label.
    settings : its resolved settings, as JSON data.
    directory : its directory.
    finished : True when its report.json exists.
    report : its report.json (empty when not finished).
    """

    id: str
    label: str
    settings: Mapping[str, Any]
    directory: Path
    finished: bool = False
    report: ReportFile = field(default_factory=ReportFile)

    @property
    def complete(self) -> bool:
        """False when report.json says ``"complete": false`` (the next ``primsel run`` computes it
        again)."""
        return self.report.complete

    @property
    def retriever(self) -> str:
        """The readable label of the cell's retriever."""
        return specs.label(self.settings.get("retriever", "?"))

    def task_rows(self, missing_ok: bool = False) -> list[TaskRow]:
        """The cell's task rows (:func:`read_task_rows`)."""
        return read_task_rows(self.directory, missing_ok)

    def unrecorded(self, key: str) -> ReportError:
        """The error of a report.json that does not record ``key`` (a version before it was
        recorded)."""
        return ReportError(
            f"cell {self.id}: {self.directory / REPORT_FILE} does not record {key!r}; delete it "
            "and run `primsel run` on the experiment again to record it"
        )


@dataclass(frozen=True)
class LoadedExperiment:
    """An experiment directory as read.

    Parameters
    ----------
    name : the experiment's name.
    directory : the directory.
    cells : its cells in grid order.
    description, baseline, data, pair_on, datasets : as experiment.json records them (``pair_on``
        None: all settings but the retriever).
    other_data : ``{"<data> (<n> tasks)": number of cells}`` of cell directories of other data, not
        listed.
    """

    name: str
    directory: Path
    cells: tuple[LoadedCell, ...]
    description: str = ""
    baseline: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    pair_on: tuple[str, ...] | None = None
    other_data: Mapping[str, int] = field(default_factory=dict)
    datasets: tuple[Mapping[str, Any], ...] = ()


def _loaded_cell(
    directory: Path, cell_id: str, label: str, settings: Mapping[str, Any]
) -> LoadedCell:
    """The cell of ``directory`` with its report.json read (errors as :func:`read_report`)."""
    report = read_report(directory)
    return LoadedCell(
        id=cell_id,
        label=label,
        settings=settings,
        directory=directory,
        finished=report is not None,
        report=report or ReportFile(),
    )


def load_cell(directory: Path) -> LoadedCell:
    """A lone cell directory as a :class:`LoadedCell`: its id, label and settings from its
    config.json (the id: the directory's name when config.json has none).

    Raises
    ------
    ReportError : a file cannot be read; RunFileError: a file is not valid (named).
    """
    config = read_config(directory) or ConfigFile(id=directory.name)
    label = directory.name if config.label is None else config.label
    return _loaded_cell(directory, config.id or directory.name, label, config.settings)


def is_cell_directory(directory: Path) -> bool:
    """True for a cell directory given alone: it holds a config.json and no experiment.json."""
    return (directory / CONFIG_FILE).is_file() and not (directory / EXPERIMENT_FILE).is_file()


def _manifest_of_cell_folders(directory: Path) -> ManifestFile:
    """The manifest of a directory without experiment.json: every sub-directory with a config.json,
    by label."""
    entries = []
    for sub in sorted(directory.iterdir()):
        if (sub / CONFIG_FILE).is_file():
            config = read_config(sub) or ConfigFile(id=sub.name)
            label = sub.name if config.label is None else config.label
            entries.append(
                ManifestCell(id=config.id, label=label, settings=config.settings, folder=sub.name)
            )
    return ManifestFile(
        cells=tuple(sorted(entries, key=lambda entry: entry.label)), name=directory.name
    )


def _other_data(directory: Path, listed: set[str], fingerprints: set[Any]) -> dict[str, int]:
    """``{data text: cells}`` of the cell directories not ``listed`` whose data is not of
    ``fingerprints``."""
    other: dict[str, int] = {}
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in listed):
        try:
            config = read_config(sub)
        except ReportError:  # unreadable or not valid: not a cell of other data
            continue
        if config is not None and config.data.get("fingerprint") not in fingerprints:
            text = data_text(config.data)
            other[text] = other.get(text, 0) + 1
    return other


def load_experiment(directory: str | os.PathLike[str]) -> LoadedExperiment:
    """Read an experiment directory: the cells experiment.json lists, or without it every
    sub-directory with a config.json, by label.

    Raises
    ------
    ReportError : no such directory, no cell, or a file that cannot be read; RunFileError: a file
        that is not valid (named).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such experiment directory")
    manifest = read_manifest(directory)
    if manifest is None:
        manifest = _manifest_of_cell_folders(directory)
    if not manifest.cells:
        raise ReportError(
            f"{directory}: not an experiment directory (no experiment.json and no cells)"
        )
    cells = []
    for entry in manifest.cells:
        label = entry.id if entry.label is None else entry.label
        folder = directory / entry.directory_name
        cells.append(_loaded_cell(folder, entry.id, label, entry.settings))
    fingerprints = {dataset.get("fingerprint") for dataset in manifest.datasets}
    if not fingerprints:
        fingerprints = {manifest.data.get("fingerprint")}
    name = directory.name if manifest.name is None else manifest.name
    return LoadedExperiment(
        name=name,
        directory=directory,
        cells=tuple(cells),
        description=manifest.description or "",
        baseline=manifest.baseline,
        data=manifest.data,
        pair_on=manifest.pair_on,
        other_data=_other_data(directory, {c.directory.name for c in cells}, fingerprints),
        datasets=manifest.datasets,
    )


# ------------------------------------------------------------------------------------------------
# What the views read
# ------------------------------------------------------------------------------------------------
def data_text(data: Mapping[str, Any]) -> str:
    """A data summary (``source``, ``n_tasks``, optional ``n_documents`` and ``subset``) as a reader
    names it: ``"Asper-Bench (250 tasks)"``, ``"Asper-Bench (20 of 250 tasks: a sample drawn with
    seed 0)"``."""
    source = data.get("source", "?")
    name = {"asper-bench": "Asper-Bench", "builtin": "the built-in tasks"}.get(source, source)
    documents = f", {data['n_documents']} documents" if "n_documents" in data else ""
    subset = data.get("subset")
    if not isinstance(subset, Mapping):
        return f"{name} ({data.get('n_tasks', '?')} tasks{documents})"
    if "sample" in subset:
        how = f"a sample drawn with seed {subset.get('seed')}"
    elif "fold" in subset:
        how = f"cross-validation fold {subset.get('fold')} of {subset.get('folds')}, seed {subset.get('seed')}"
    else:
        how = "the tasks listed"
    return f"{name} ({data.get('n_tasks', '?')} of {subset.get('of', '?')} tasks: {how}{documents})"


def per_task_values(cell: LoadedCell, metric: str) -> dict[str, float]:
    """``{task id: value}`` of a per-task ``metric`` of the cell's task rows (:meth:`TaskRow.value`:
    a metric of ``metrics``, ``docs_tokens``, or ``success``).

    Raises
    ------
    ReportError : no tasks.jsonl, a bad row, or a row without the metric (``success`` without a
        generator).
    """
    values = {}
    for row in cell.task_rows():
        value = row.value(metric)
        if value is None:
            raise ReportError(
                f"{cell.directory / TASKS_FILE}: no per-task {metric!r} (task {row.task_id})"
            )
        values[row.task_id] = value
    return values


def passed_by_round(cell: LoadedCell, rounds: int) -> list[dict[str, float]]:
    """Per reflection round r (index r - 1): ``{task id: 1.0 if passed by round r else 0.0}``;
    ReportError as :func:`read_task_rows`."""
    rows = cell.task_rows()
    return [
        {row.task_id: float(row.passed_by_round(r)) for row in rows} for r in range(1, rounds + 1)
    ]


def dataset_groups(
    experiment: LoadedExperiment,
) -> list[tuple[Mapping[str, Any], list[LoadedCell]]]:
    """``[(dataset summary, its cells)]`` in the manifest's order (one dataset: one group of every
    cell)."""
    if len(experiment.datasets) <= 1:
        return [(experiment.data, list(experiment.cells))]
    index = {dataset.get("fingerprint"): i for i, dataset in enumerate(experiment.datasets)}
    return [
        (dataset, [c for c in experiment.cells if index.get(c.settings.get("dataset")) == i])
        for i, dataset in enumerate(experiment.datasets)
    ]


def learning_retrievers(cells: Sequence[LoadedCell]) -> list[str]:
    """Labels of the retrievers that learn from tasks; ReportError when a report lacks
    ``learns``."""
    last = {c.retriever: c for c in cells}  # the last cell of each label
    for cell in last.values():
        if cell.report.learning is None:
            raise cell.unrecorded("learns")
    return [label for label, cell in last.items() if cell.report.learning.retriever]


@dataclass(frozen=True)
class FrontierCurve:
    """For k = 1 .. depth, the mean documentation ``tokens`` of a ranking's top k and each task's
    ``recall`` (one tuple per k, a value per task)."""

    tokens: tuple[float, ...]
    recall: tuple[tuple[float, ...], ...]

    @property
    def mean_recall(self) -> list[float]:
        """Mean recall over tasks per k, length depth."""
        return [math.fsum(column) / len(column) for column in zip(*self.recall)]


def ranking_frontier(cell: LoadedCell) -> FrontierCurve | None:
    """A cell's frontier: recall from its ranking and task rows, tokens from its report.

    Returns
    -------
    The curve; None when the ranking or the task rows cannot be read, no task has gold primitives,
    or the report records no frontier of the ranking's depth.

    Raises
    ------
    ReportError : the report records neither ``frontier`` nor ``learns`` (a version before both).
    """
    try:
        run = read_ranking(cell.directory)
        gold = {row.task_id: set(row.gold) for row in cell.task_rows()}
    except (OSError, ValueError):  # ReportError included
        return None
    orders = ranked_tasks(run, gold)
    if not orders:
        return None
    recorded = cell.report.frontier
    if recorded is None and cell.report.learning is None:
        raise cell.unrecorded("frontier")
    if recorded is None or len(recorded.tokens) != depth_of(orders):
        return None
    return FrontierCurve(
        tokens=tuple(float(x) for x in recorded.tokens), recall=recall_by_k(orders, gold)
    )

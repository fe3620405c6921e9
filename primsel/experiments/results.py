"""Reading an experiment's run folder: the experiment, its cells and their per-task values.

:func:`load_experiment` reads what :func:`primsel.experiments.runner.run_experiment` wrote::

    <out>/<name>/experiment.json        name, description, baseline, data, pair_on, cells (grid order)
                                        (:class:`primsel.experiments.run_files.ExperimentManifest`)
    <out>/<name>/<cell id>/config.json  the cell's label, settings and data summary
                                        (:class:`primsel.experiments.run_files.CellConfig`)
    <out>/<name>/<cell id>/report.json  the cell's aggregate metrics (present once it finished)
    <out>/<name>/<cell id>/tasks.jsonl  one row per task: gold, selection, per-task metrics, status
    <out>/<name>/<cell id>/run.trec     the cell's ranking per task (TREC run format)

The report (:mod:`primsel.reporting`) and the explorer (:mod:`primsel.explore`) read the folder
through this module only: a cell's report.json as a typed
:class:`primsel.experiments.records.CellReport` (:attr:`CellResult.record`), and what the report
needs beyond it without building a component or the library (:func:`learning_retrievers`,
:func:`ranking_frontier`), from what the run recorded. Folders written before ``learns`` and
``frontier`` were recorded are read too: :func:`learning_retrievers` then asks the retriever
(built, unfitted) and :func:`ranking_frontier` counts the tokens of the assistant library, as the
report did before; ``primsel run`` on the experiment again (every cell is recomputed when its
report.json lacks them? no: cells are reused) is not needed.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from primsel import registry
from primsel import spec as specs
from primsel.experiments.records import CellReport, FrontierFigures
from primsel.experiments.run_files import CellConfig, CellEntry, ExperimentManifest, RunFileError
from primsel.files import read_jsonl
from primsel.types import LearnsFromTasks, ranking

__all__ = ["CellResult", "Experiment", "FrontierCurve", "ReportError", "data_text", "dataset_groups",
           "frontier_figures", "learning_retrievers", "load_experiment", "per_task_values", "ranking_frontier"]


class ReportError(ValueError):
    """The directory is not an experiment directory (nothing to report)."""


@dataclass(frozen=True)
class CellResult:
    """One cell of an experiment as read from disk.

    Parameters
    ----------
    id : cell id (its directory name).
    label : readable label.
    settings : resolved settings (``retriever``, ``k``, ``closure``, ...).
    report : report.json (empty when the cell has none).
    directory : the cell's directory.
    """

    id: str
    label: str
    settings: Mapping[str, Any]
    report: Mapping[str, float]
    directory: Path

    @cached_property
    def record(self) -> CellReport:
        """report.json as a typed record (empty when the cell has none).

        Raises
        ------
        ValueError : report.json holds ``learns`` or ``frontier`` of the wrong shape.
        """
        return CellReport.from_json(self.report)

    @property
    def finished(self) -> bool:
        """True when the cell's report.json exists (complete or not)."""
        return bool(self.report)

    @property
    def complete(self) -> bool:
        """False when report.json says ``"complete": false`` (LLM requests failed; the next
        ``primsel run`` recomputes the cell)."""
        return self.record.complete

    @property
    def retriever(self) -> str:
        """Readable label of the cell's retriever."""
        return specs.label(self.settings.get("retriever", "?"))


@dataclass(frozen=True)
class Experiment:
    """An experiment directory: its name, description, baseline, dataset summary and cells.

    ``pair_on`` is the experiment's ``pair_on`` (None: every setting except the retriever);
    ``other_data`` counts the cell directories of other data (not in ``experiment.json``),
    ``{"<source> (<n> tasks)": cells}``; ``datasets`` lists the datasets of an experiment run on
    several (``source``, ``n_tasks``, ``fingerprint``, ``n_documents``, ``notes``), empty for one.
    """

    name: str
    directory: Path
    cells: tuple[CellResult, ...]
    description: str = ""
    baseline: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    pair_on: tuple[str, ...] | None = None
    other_data: Mapping[str, int] = field(default_factory=dict)
    datasets: tuple[Mapping[str, Any], ...] = ()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path}: unreadable: {exc}") from None


def _read_record(reader: Callable[[Path], Any], path: Path) -> Any:
    """``reader(path)`` (a ``read`` of :mod:`primsel.experiments.run_files`), or None when the
    file does not exist.

    Raises
    ------
    ReportError : the file cannot be read, or :class:`RunFileError` (the message names it).
    """
    try:
        return reader(path)
    except FileNotFoundError:
        return None
    except RunFileError as exc:
        raise ReportError(str(exc)) from None
    except OSError as exc:
        raise ReportError(f"{path}: unreadable: {exc}") from None


def _entries_without_manifest(directory: Path) -> list[CellEntry]:
    """Every sub-directory holding a ``config.json``, as a manifest entry, sorted by label.

    Raises
    ------
    ReportError : a config.json cannot be read (see :func:`_read_record`).
    """
    entries = []
    for sub in sorted(p for p in directory.iterdir() if (p / "config.json").is_file()):
        config = _read_record(CellConfig.read, sub / "config.json")
        entries.append(CellEntry(id=sub.name, label=sub.name if config.label is None else config.label,
                                 settings=config.settings))
    return sorted(entries, key=lambda e: e.label)


def load_experiment(directory: str | os.PathLike[str]) -> Experiment:
    """Read an experiment directory.

    The cells and their order come from ``experiment.json``
    (:class:`primsel.experiments.run_files.ExperimentManifest`); without it, every sub-directory
    holding a ``config.json`` (:class:`primsel.experiments.run_files.CellConfig`) is a cell
    (sorted by label).

    Raises
    ------
    ReportError : no such directory, or neither ``experiment.json`` nor any cell in it, or an
        unreadable JSON file, one lacking a required key or holding one of the wrong shape (the
        message names the file).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such experiment directory")
    manifest = _read_record(ExperimentManifest.read, directory / "experiment.json")
    if manifest is None:
        manifest = ExperimentManifest(cells=tuple(_entries_without_manifest(directory)), name=directory.name)
    if not manifest.cells:
        raise ReportError(f"{directory}: not an experiment directory (no experiment.json and no cells)")
    cells = tuple(CellResult(id=e.id, label=e.id if e.label is None else e.label, settings=e.settings,
                             report=_read_json(directory / e.id / "report.json") or {},
                             directory=directory / e.id) for e in manifest.cells)
    fingerprints = {d.get("fingerprint") for d in manifest.datasets} or {manifest.data.get("fingerprint")}
    return Experiment(name=directory.name if manifest.name is None else manifest.name, directory=directory,
                      cells=cells, description=manifest.description or "", baseline=manifest.baseline,
                      data=manifest.data, pair_on=manifest.pair_on,
                      other_data=_other_data(directory, {c.id for c in cells}, fingerprints),
                      datasets=manifest.datasets)


def data_text(data: Mapping[str, Any]) -> str:
    """``"Asper-Bench (250 tasks)"``: the data of a summary (``source``, ``n_tasks``, optional
    ``n_documents`` and ``subset``: ``"Asper-Bench (20 of 250 tasks: a sample drawn with seed
    0)"``) as a reader names it."""
    source = data.get("source", "?")
    name = {"asper-bench": "Asper-Bench", "builtin": "the built-in tasks"}.get(source, source)
    documents = f", {data['n_documents']} documents" if "n_documents" in data else ""
    subset = data.get("subset")
    if isinstance(subset, Mapping):
        how = (f"a sample drawn with seed {subset.get('seed')}" if "sample" in subset
               else f"cross-validation fold {subset.get('fold')} of {subset.get('folds')}, seed {subset.get('seed')}"
               if "fold" in subset else "the tasks listed")
        return f"{name} ({data.get('n_tasks', '?')} of {subset.get('of', '?')} tasks: {how}{documents})"
    return f"{name} ({data.get('n_tasks', '?')} tasks{documents})"


def _other_data(directory: Path, known: set[str], fingerprints: set[Any]) -> dict[str, int]:
    """Cell directories (with a config.json) that the manifest does not list and that ran on
    other data than its datasets (``fingerprints``), counted per data description."""
    counts: dict[str, int] = {}
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in known):
        try:
            cell_data = CellConfig.read(sub / "config.json").data
        except (OSError, ValueError):  # no config.json, or RunFileError
            continue
        if cell_data.get("fingerprint") in fingerprints:
            continue
        text = data_text(cell_data)
        counts[text] = counts.get(text, 0) + 1
    return counts


def per_task_values(cell: CellResult, metric: str) -> dict[str, float]:
    """``{task_id: value}`` of a per-task metric from the cell's tasks.jsonl: a ``metrics``
    entry (``recall@10``, ``set_recall``, ...), ``docs_tokens``, or ``success`` (1.0 when the
    task's ``status`` is ``pass``, else 0.0).

    Raises
    ------
    ReportError : tasks.jsonl is missing or lacks the metric for a task.
    """
    path = cell.directory / "tasks.jsonl"
    out: dict[str, float] = {}
    try:
        for _, row in read_jsonl(path):
            if metric == "success":
                out[str(row["task_id"])] = 1.0 if row.get("status") == "pass" else 0.0
            elif metric == "docs_tokens":
                out[str(row["task_id"])] = float(row["docs_tokens"])
            else:
                out[str(row["task_id"])] = float(row["metrics"][metric])
    except FileNotFoundError:
        raise ReportError(f"{path}: missing") from None
    except (KeyError, ValueError, TypeError) as exc:
        raise ReportError(f"{path}: no per-task {metric!r}: {exc}") from None
    return out


def dataset_groups(experiment: Experiment) -> list[tuple[Mapping[str, Any], list[CellResult]]]:
    """The experiment's cells grouped by dataset, in the manifest's dataset order:
    ``[(dataset summary, cells)]``; one group holding every cell for an experiment on one
    dataset."""
    if len(experiment.datasets) <= 1:
        return [(experiment.data, list(experiment.cells))]
    groups: list[tuple[Mapping[str, Any], list[CellResult]]] = [(d, []) for d in experiment.datasets]
    index = {d.get("fingerprint"): i for i, d in enumerate(experiment.datasets)}
    for c in experiment.cells:
        i = index.get(c.settings.get("dataset"))
        if i is not None:
            groups[i][1].append(c)
    return groups


def learning_retrievers(cells: Sequence[CellResult]) -> list[str]:
    """Labels of the cells' retrievers that learn from tasks, in order of first appearance.

    Read from each cell's report (``learns``, recorded at run time); for a cell written before
    it was recorded, the retriever is built from its specification (unfitted: a specification
    only stores parameters) and asked; one that cannot be built here is left out.
    """
    last = {c.retriever: c for c in cells}  # one cell per label, labels in order of first appearance
    out = []
    for label, c in last.items():
        learning = c.record.learning
        if learning.retriever if learning is not None else _learns_unrecorded(c.settings.get("retriever")):
            out.append(label)
    return out


def _learns_unrecorded(spec: Any) -> bool:
    """Whether a retriever learns from tasks, for a folder that did not record it."""
    try:
        return isinstance(registry.build(spec, "retriever"), LearnsFromTasks)
    except Exception:  # noqa: BLE001 - a retriever that cannot be built here is not named
        return False


@dataclass(frozen=True)
class FrontierCurve:
    """The recall/tokens frontier of one ranking: for k = 1 .. depth, the mean documentation
    tokens of the top k and every task's recall of its top k.

    Parameters
    ----------
    tokens : mean tokens per k, length depth.
    recall : per-task recall, one row per task with gold primitives, each of length depth.
    """

    tokens: tuple[float, ...]
    recall: tuple[tuple[float, ...], ...]

    @property
    def mean_recall(self) -> list[float]:
        """Mean recall over tasks per k, length depth."""
        return [math.fsum(col) / len(col) for col in zip(*self.recall)]


_LIBRARY_TOKENS: dict[str, int] = {}


def _library_tokens() -> dict[str, int]:
    """Estimated documentation tokens of every primitive of the assistant library, for the
    frontier of a folder that did not record it (computed once per process)."""
    if not _LIBRARY_TOKENS:
        # local: reports and the explorer load neither the retrievers nor the simulator
        from primsel.retrieval.selector import estimate_tokens
        from primsel.simulator.library import build_library

        library = build_library()
        _LIBRARY_TOKENS.update({p: estimate_tokens(library[p].text("full")) for p in library})
    return _LIBRARY_TOKENS


def _orders(run: Mapping[str, Mapping[str, float]], gold: Mapping[str, Any]) -> dict[str, list[str]]:
    """Task id -> its ranking (best first), for the tasks of ``gold`` with gold primitives that
    ``run`` ranks, in ``gold``'s order."""
    return {t: ranking(run[t]) for t in gold if gold[t] and t in run}


def frontier_figures(run: Mapping[str, Mapping[str, float]], gold: Mapping[str, Any],
                     tokens: Mapping[str, int]) -> FrontierFigures | None:
    """The recall/tokens frontier of a ranking: for k = 1 .. depth (the longest ranking), the
    mean documentation tokens of the top k and the mean recall of the top k, over the tasks with
    gold primitives (a ranking shorter than depth counts whole at every deeper k).

    Parameters
    ----------
    run : task id -> {primitive id: score}.
    gold : task id -> its gold primitive ids.
    tokens : primitive id -> estimated documentation tokens (a whole number).

    Returns
    -------
    :class:`primsel.experiments.records.FrontierFigures`, or None when no task has gold
    primitives or a ranked id has no token count.
    """
    orders = _orders(run, gold)
    if not orders or any(p not in tokens for order in orders.values() for p in order):
        return None
    depth = max(len(o) for o in orders.values())
    # running sums of whole numbers (tokens, gold primitives found) per task: exact
    spent, found = [], []
    for t, order in orders.items():
        own = frozenset(gold[t])
        spent.append(list(itertools.accumulate(tokens[p] for p in order)))
        found.append(list(itertools.accumulate(int(p in own) for p in order)))
    n, sizes = len(orders), [len(frozenset(gold[t])) for t in orders]
    mean_tokens = [math.fsum(row[min(k, len(row)) - 1] for row in spent) / n for k in range(1, depth + 1)]
    recall = [math.fsum(row[min(k, len(row)) - 1] / size for row, size in zip(found, sizes)) / n
              for k in range(1, depth + 1)]
    return FrontierFigures(tokens=tuple(mean_tokens), recall=tuple(recall))


def ranking_frontier(cell: CellResult) -> FrontierCurve | None:
    """The recall/tokens frontier of a finished cell's ranking, from its run.trec and the gold
    sets of its tasks.jsonl, with the mean tokens per k its report recorded (``frontier``); a
    cell written before that was recorded counts the tokens of the assistant library
    (:func:`frontier_figures`).

    Returns
    -------
    :class:`FrontierCurve`, or None when run.trec or tasks.jsonl is missing or unreadable, no
    task has gold primitives, or (unrecorded) a ranked id is not in the assistant library.
    """
    from primsel.retrieval.trec import read_run  # local: primsel.retrieval loads every retriever

    try:
        run = read_run(cell.directory / "run.trec")
        gold = {str(row["task_id"]): set(row["gold"]) for _, row in read_jsonl(cell.directory / "tasks.jsonl")}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    orders = _orders(run, gold)
    if not orders:
        return None
    depth = max(len(o) for o in orders.values())
    recorded = cell.record.frontier
    if recorded is None or len(recorded.tokens) != depth:
        recorded = frontier_figures(run, gold, _library_tokens())
        if recorded is None:
            return None
    ks = range(1, depth + 1)
    recall = tuple(tuple(len(gold[t] & set(order[:k])) / len(gold[t]) for k in ks) for t, order in orders.items())
    return FrontierCurve(tokens=tuple(float(x) for x in recorded.tokens), recall=recall)

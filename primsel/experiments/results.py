"""Reading an experiment's run folder: the experiment, its cells and their per-task values.

:func:`load_experiment` reads what :func:`primsel.experiments.runner.run_experiment` wrote::

    <out>/<name>/experiment.json        name, description, baseline, data, pair_on, cells (grid order)
    <out>/<name>/<cell id>/config.json  the cell's label, settings and data summary
    <out>/<name>/<cell id>/report.json  the cell's aggregate metrics (present once it finished)
    <out>/<name>/<cell id>/tasks.jsonl  one row per task: gold, selection, per-task metrics, status
    <out>/<name>/<cell id>/run.trec     the cell's ranking per task (TREC run format)

The report (:mod:`primsel.reporting`) and the explorer (:mod:`primsel.explore`) read the folder
through this module only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primsel import spec as specs
from primsel.files import read_jsonl

__all__ = ["CellResult", "Experiment", "ReportError", "data_text", "dataset_groups", "load_experiment",
           "per_task_values"]


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

    @property
    def finished(self) -> bool:
        """True when the cell's report.json exists (complete or not)."""
        return bool(self.report)

    @property
    def complete(self) -> bool:
        """False when report.json says ``"complete": false`` (LLM requests failed; the next
        ``primsel run`` recomputes the cell)."""
        return self.report.get("complete", True) is not False

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


def _entries_without_manifest(directory: Path) -> list[dict[str, Any]]:
    """Every sub-directory holding a ``config.json``, as a manifest entry, sorted by label."""
    entries = []
    for sub in sorted(p for p in directory.iterdir() if (p / "config.json").is_file()):
        config = _read_json(sub / "config.json")
        entries.append({"id": sub.name, "label": config.get("label", sub.name), "settings": config.get("settings", {})})
    return sorted(entries, key=lambda e: e["label"])


def load_experiment(directory: str | os.PathLike[str]) -> Experiment:
    """Read an experiment directory.

    The cells and their order come from ``experiment.json``; without it, every sub-directory
    holding a ``config.json`` is a cell (sorted by label).

    Raises
    ------
    ReportError : no such directory, or neither ``experiment.json`` nor any cell in it, or an
        unreadable JSON file (the message names the file).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ReportError(f"{directory}: no such experiment directory")
    manifest = _read_json(directory / "experiment.json")
    if manifest is not None:
        entries = list(manifest.get("cells", []))
    else:
        entries, manifest = _entries_without_manifest(directory), {"name": directory.name}
    if not entries:
        raise ReportError(f"{directory}: not an experiment directory (no experiment.json and no cells)")
    cells = tuple(CellResult(id=e["id"], label=e.get("label", e["id"]), settings=e.get("settings", {}),
                             report=_read_json(directory / e["id"] / "report.json") or {},
                             directory=directory / e["id"]) for e in entries)
    pair_on = manifest.get("pair_on")
    datasets = tuple(d for d in manifest.get("datasets", ()) if isinstance(d, Mapping))
    fingerprints = {d.get("fingerprint") for d in datasets} or {(manifest.get("data") or {}).get("fingerprint")}
    return Experiment(name=manifest.get("name", directory.name), directory=directory, cells=cells,
                      description=manifest.get("description", "") or "", baseline=manifest.get("baseline"),
                      data=manifest.get("data", {}) or {},
                      pair_on=tuple(pair_on) if isinstance(pair_on, list) else None,
                      other_data=_other_data(directory, {c.id for c in cells}, fingerprints),
                      datasets=datasets)


def data_text(data: Mapping[str, Any]) -> str:
    """``"Asper-Bench (250 tasks)"``: the data of a summary (``source``, ``n_tasks``, optional
    ``n_documents`` and ``subset``: ``"Asper-Bench (20 of 250 tasks: a sample drawn with seed
    0)"``) as a reader names it."""
    source = data.get("source", "?")
    name = {"asper-bench": "Asper-Bench", "builtin": "the built-in tasks"}.get(source, source)
    documents = f", {data['n_documents']} documents" if "n_documents" in data else ""
    subset = data.get("subset")
    if isinstance(subset, Mapping):
        how = (f"a sample drawn with seed {subset.get('seed')}" if "sample" in subset else "the tasks listed")
        return f"{name} ({data.get('n_tasks', '?')} of {subset.get('of', '?')} tasks: {how}{documents})"
    return f"{name} ({data.get('n_tasks', '?')} tasks{documents})"


def _other_data(directory: Path, known: set[str], fingerprints: set[Any]) -> dict[str, int]:
    """Cell directories (with a config.json) that the manifest does not list and that ran on
    other data than its datasets (``fingerprints``), counted per data description."""
    counts: dict[str, int] = {}
    for sub in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in known):
        try:
            config = json.loads((sub / "config.json").read_text(encoding="utf-8"))
            cell_data = config.get("data") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(cell_data, Mapping) or cell_data.get("fingerprint") in fingerprints:
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

"""The Python API: what the ``primsel`` command does, as functions for a script or a notebook.

Load tasks (with their gold primitives filled) and a library, build a retriever from a name or a
specification, rank, score, run an experiment, and read a run folder into typed records or a
pandas DataFrame. docs/api.md shows each in use (its examples run as a test).

Each function hands over to the module that does the work, named in its docstring; nothing here
computes anything of its own. Heavy packages (torch, pandas) are imported only by the function
that needs them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from primsel.checks import FOLDS_BOUNDS
from primsel.library import Library, with_gold
from primsel.types import Run, Task

__all__ = [
    "DEFAULT_METRICS",
    "cells_frame",
    "load_library",
    "load_tasks",
    "rank",
    "read_run",
    "retriever",
    "run_experiment",
    "score",
    "tasks_frame",
]

#: What :func:`score` computes when not told: ranx's names, plus ``complete@k``.
DEFAULT_METRICS = ("recall@5", "recall@10", "recall@15", "complete@15", "ndcg@10", "mrr")


def load_library(name: str = "primsel") -> Library:
    """The library ``name`` names: ``"primsel"``, the assistant library (65 primitives), or
    ``"aspera"``, ASPERA's documentation of it (needs ``$PRIMSEL_ASPERA_SRC``).

    Raises
    ------
    ValueError : an unknown name.
    primsel.aspera.AsperaSourceError : ``"aspera"`` without a usable checkout of ASPERA.
    """
    from primsel.experiments.dataset import named_library

    return named_library(name)


def load_tasks(data: str | os.PathLike[str] | None = None, library: Library | None = None) -> list[Task]:
    """Executable tasks with their gold primitives filled, sorted by id.

    Parameters
    ----------
    data : the Asper-Bench archive; None: ``$PRIMSEL_ASPER_BENCH``, else the 32 built-in tasks.
    library : what the gold sets name (default: the assistant library, :func:`load_library`).

    Returns
    -------
    list of :class:`~primsel.types.Task`, each with ``gold`` the ids of the library primitives its
    reference program uses (:func:`primsel.library.gold_primitives`).

    Raises
    ------
    primsel.datasets.DatasetError : a missing or malformed archive, or retrieval-only data.
    ValueError : a reference program that does not parse (the message names the task).
    """
    from primsel.datasets import load_tasks as read_tasks

    tasks = read_tasks(data)
    return with_gold(tasks, library if library is not None else load_library())


def retriever(spec: str | Mapping[str, Any], **params: Any) -> Any:
    """An unfitted retriever from its specification.

    Parameters
    ----------
    spec : a registered name (``"bm25"``), ``"module:Class"``, a table with a ``type`` key
        (``{"type": "hybrid", "members": [...]}``), or the JSON text of one, as ``--retriever``
        takes it.
    params : constructor arguments (they override the table's).

    Raises
    ------
    primsel.registry.UnknownComponentError : an unknown name (the message names the nearest).
    TypeError, ValueError : a parameter the class does not take, or a value it refuses.
    """
    from primsel import spec as specs
    from primsel.registry import build

    if isinstance(spec, str):
        spec = specs.parse(spec)
    return build(spec, "retriever", **params)


def rank(
    spec: Any,
    tasks: Sequence[Task],
    library: Library | None = None,
    *,
    k: int | None = None,
    folds: int = 5,
    seed: int = 0,
) -> Run:
    """Rank the library for every task; a retriever that learns from tasks is cross-validated.

    Parameters
    ----------
    spec : a specification (as :func:`retriever` takes) or an unfitted retriever.
    tasks : the tasks, with gold filled (:func:`load_tasks`).
    library : default the assistant library.
    k : the depth of each ranking (default: the whole library).
    folds, seed : the folds of a retriever that learns from tasks (docs/architecture.md,
        "Folds"); ``folds`` is capped at the number of tasks, as ``primsel run`` caps it.

    Returns
    -------
    ``{task id: {primitive id: score}}``, ranx's and TREC's shape.

    Raises
    ------
    ValueError : ``k`` below 1, folds out of range, or too few tasks for the folds.
    """
    from primsel.retrieval.cv import cross_validated_run

    library = library if library is not None else load_library()
    if isinstance(spec, str):
        spec = retriever(spec)
    depth = len(library) if k is None else k
    effective_folds = max(FOLDS_BOUNDS["minimum"], min(folds, len(tasks)))  # as primsel run caps
    run, _ = cross_validated_run(spec, library, tasks, depth, folds=effective_folds, seed=seed)
    return run


def score(
    run: Mapping[str, Mapping[str, float]],
    tasks: Sequence[Task],
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    ties: str = "id",
) -> dict[str, float]:
    """The mean of each metric over ``tasks`` (:func:`primsel.eval.metrics.evaluate`).

    Parameters
    ----------
    run : ``{task id: {primitive id: score}}``.
    tasks : the tasks scored, with gold filled; a task the run does not rank scores 0.
    metrics : names such as ``recall@15``, ``complete@20``, ``ndcg@10``, ``mrr``.
    ties : ``"id"`` (tied scores ordered by primitive id) or ``"expected"`` (the mean over every
        order of the tied primitives).

    Raises
    ------
    ValueError : an unknown metric, or a task without gold primitives.
    """
    from primsel.eval.metrics import evaluate

    return evaluate(run, {t.id: t.gold for t in tasks}, metrics, ties=ties)


def run_experiment(
    config: str | os.PathLike[str] | Mapping[str, Any],
    out: str | os.PathLike[str] = "runs",
    **options: Any,
) -> Any:
    """Run an experiment grid, as ``primsel run`` does, and load what it wrote.

    Parameters
    ----------
    config : the experiment's TOML file, or the mapping it would hold (``{"name": ...,
        "grid": {...}}``; relative paths are resolved against the current directory).
    out : the folder the run folder ``<out>/<name>`` is written in.
    options : keyword arguments of :func:`primsel.experiments.runner.run_experiment`
        (``data``, ``sample``, ``task_ids``, ``progress``, ``use_cache``, ...).

    Returns
    -------
    :class:`~primsel.experiments.results.LoadedExperiment` of the run folder.

    Raises
    ------
    primsel.experiments.config.ConfigError : a bad declaration.
    Anything :func:`primsel.experiments.runner.run_experiment` raises.
    """
    from primsel.experiments import runner
    from primsel.experiments.config import load_config, parse_config

    if isinstance(config, Mapping):
        declared = parse_config(config, where="<mapping>", base_dir=Path.cwd())
    else:
        declared = load_config(config)
    result = runner.run_experiment(declared, out, **options)
    return read_run(result.directory)


def read_run(directory: str | os.PathLike[str]) -> Any:
    """The run folder ``directory`` as typed records (:func:`primsel.experiments.results.load_experiment`).

    Returns
    -------
    :class:`~primsel.experiments.results.LoadedExperiment`: ``cells``, each a ``LoadedCell`` with
    ``label``, ``settings``, ``report`` (report.json as a ``ReportFile``) and ``task_rows()``
    (tasks.jsonl as ``TaskRow``s).

    Raises
    ------
    primsel.experiments.records.ReportError : not a run folder, or a file that cannot be read.
    """
    from primsel.experiments.results import load_experiment

    return load_experiment(directory)


def _experiment(run: Any) -> Any:
    """A loaded experiment: ``run`` itself, or the folder it names read."""
    if isinstance(run, (str, os.PathLike)):
        return read_run(run)
    return run


def _pandas() -> Any:
    """pandas, or an ImportError that says how to install it."""
    try:
        import pandas
    except ImportError as exc:
        raise ImportError("the DataFrames of primsel.api need pandas: pip install pandas") from exc
    return pandas


def cells_frame(run: Any) -> Any:
    """One row per finished cell: its id, label, settings and every report value, as
    ``primsel report --format csv`` writes them (:func:`primsel.reporting.export.cell_rows`).

    Parameters
    ----------
    run : a run folder, or what :func:`read_run` returned.

    Raises
    ------
    ImportError : pandas is not installed (it is not a dependency of primsel).
    """
    from primsel.reporting.export import cell_rows

    return _pandas().DataFrame(cell_rows(_experiment(run)))


def tasks_frame(run: Any) -> Any:
    """One row per task of every finished cell: ``cell``, ``label``, ``task_id``, ``fold``, the
    task's metrics (one column each), ``docs_tokens`` and, with a generator, ``status``.

    Parameters
    ----------
    run : a run folder, or what :func:`read_run` returned.

    Raises
    ------
    ImportError : pandas is not installed (it is not a dependency of primsel).
    """
    pandas = _pandas()
    rows = []
    for cell in _experiment(run).cells:
        if not cell.finished:
            continue
        for row in cell.task_rows():
            status = row.program.status if row.program is not None else None
            rows.append({"cell": cell.id, "label": cell.label, "task_id": row.task_id,
                         "fold": row.fold, **row.metrics, "docs_tokens": row.docs_tokens,
                         "status": status})
    return pandas.DataFrame(rows)

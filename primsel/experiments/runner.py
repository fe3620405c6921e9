"""Run an experiment grid: every unfinished cell, in grid order, resumably.

Layout of the outputs (DESIGN.md, Interfaces, "Experiments")::

    <out>/<name>/experiment.json          the cells of the current declaration, in grid order
    <out>/<name>/<cell_id>/...            the cell's files (:mod:`primsel.experiments.cell`)

A cell whose ``report.json`` exists and says ``"complete": true`` is finished and skipped on a
re-run. Any other cell is recomputed, so a killed run loses at most the cell in flight; an
incomplete cell (LLM requests that failed after their retries) is written, to be inspected, and
the next run recomputes it, the LLM answer cache making the requests that succeeded free. Every
file is written through :func:`primsel.files.write_atomic`.

The retrieval of a cell is shared with the cells that differ only in ``k``, ``closure`` or the
generator, and cached on disk (:mod:`primsel.experiments.store`).

Several datasets: when the data names several (an array ``data``, or a folder holding several
retrieval-only datasets), the grid runs on each, in data order, each against its own library;
``experiment.json`` lists them under ``datasets``.

Backends: ``"serial"`` computes the cells one after the other in this process; ``"ray"``
(:mod:`primsel.experiments.ray_backend`) computes retrievals and cells as Ray tasks, on a local
Ray or a cluster (``address``), and writes every file here through the same
:func:`primsel.experiments.cell.write_cell`, so the files and the report are the same.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from primsel.experiments.cell import CellContext, run_cell
from primsel.experiments.config import Cell, ExperimentConfig, expand
from primsel.experiments.dataset import Dataset, load_datasets, make_dataset
from primsel.experiments.store import RetrievalStore
from primsel.files import dumps_json, write_atomic
from primsel.library import Library
from primsel.types import Task

#: Packages whose versions are recorded in every config.json.
VERSIONED_PACKAGES = (
    "primsel", "numpy", "scipy", "scikit-learn", "ranx", "rank-bm25", "bm25s", "faiss-cpu", "torch",
    "sentence-transformers", "openai",
)
#: Backends of :func:`run_experiment`.
BACKENDS = ("serial", "ray")


class OutputError(ValueError):
    """The output directory cannot be created or written (the message names it)."""


def package_versions() -> dict[str, str | None]:
    """Installed versions of :data:`VERSIONED_PACKAGES` (None when absent) and of Python."""
    out: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def is_finished(directory: Path) -> bool:
    """True when the cell directory holds a ``report.json`` that does not say
    ``"complete": false`` (reports written before that key existed count as complete)."""
    try:
        report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and report.get("complete", True) is not False


# ---------------------------------------------------------------------------------------------
# The whole grid
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ExperimentResult:
    """Outcome of :func:`run_experiment`.

    Parameters
    ----------
    directory : ``<out>/<name>``.
    cells : every cell of the grid, in grid order.
    computed : ids of the cells computed by this call.
    skipped : ids of the cells already finished before it.
    seconds : wall time of the call.
    incomplete : ids of the computed cells that are incomplete (LLM requests failed after their
        retries); the next run recomputes them.
    """

    directory: Path
    cells: tuple[Cell, ...]
    computed: tuple[str, ...]
    skipped: tuple[str, ...]
    seconds: float
    incomplete: tuple[str, ...] = ()


def _load(config: ExperimentConfig, data: str | os.PathLike[str] | None, tasks: Sequence[Task] | None,
          library: Library | None, log: TextIO) -> list[tuple[Any, Dataset]]:
    """``[(data path, dataset)]`` of the experiment (path None for given tasks)."""
    if tasks is not None:
        return [(None, make_dataset(tasks, library if library is not None else Library.from_simulator()))]
    paths = data if data is not None else config.data
    out: list[tuple[Any, Dataset]] = []
    for path in (paths if isinstance(paths, tuple) else (paths,)):
        out.extend((path, d) for d in load_datasets(path, log, library))
    names = [d.fingerprint for _, d in out]
    if len(set(names)) != len(names):
        from primsel.datasets import DatasetError

        raise DatasetError("the same dataset is named twice in the experiment's data")
    return out


def _check_executable(datasets: Sequence[Dataset], cells: Sequence[Cell]) -> None:
    """A generator needs executable tasks: refuse retrieval-only data before anything runs."""
    from primsel.datasets import DatasetError

    if any(c.settings.generator for c in cells):
        bad = [d.source for d in datasets if not d.executable]
        if bad:
            raise DatasetError(f"the experiment has a generator, but {', '.join(bad)} is retrieval-only data "
                               "(queries and gold documents, no programs to execute); remove [generator] "
                               "(and generator grid keys) to rank and score it")


def _manifest(config: ExperimentConfig, datasets: Sequence[Dataset], cells: Sequence[Cell]) -> dict:
    if len(datasets) == 1:
        data = datasets[0].summary()
    else:
        data = {"source": "+".join(d.source for d in datasets), "n_tasks": sum(len(d.tasks) for d in datasets),
                "fingerprint": "+".join(d.fingerprint for d in datasets)}
    manifest = {
        "name": config.name,
        "description": config.description,
        "baseline": config.baseline,
        "data": data,
        "grids": [{k: [str(x) if isinstance(x, Path) else x for x in v] for k, v in g.items()} for g in config.grids],
        "cells": [{"id": c.id, "label": c.label, "settings": c.settings.to_json()} for c in cells],
    }
    if len(datasets) > 1:
        manifest["datasets"] = [{**d.summary(), "notes": list(d.notes)} for d in datasets]
    elif datasets[0].notes:
        manifest["notes"] = list(datasets[0].notes)
    if config.pair_on is not None:
        manifest["pair_on"] = list(config.pair_on)
    return manifest


def run_experiment(
    config: ExperimentConfig,
    out: str | os.PathLike[str] = "runs",
    *,
    data: str | os.PathLike[str] | tuple[str | os.PathLike[str], ...] | None = None,
    tasks: Sequence[Task] | None = None,
    library: Library | None = None,
    workers: int | None = None,
    progress: bool = True,
    use_cache: bool = True,
    log: TextIO | None = None,
    on_cell: Callable[[Cell, Mapping[str, float]], None] | None = None,
    backend: str = "serial",
    address: str | None = None,
) -> ExperimentResult:
    """Run every unfinished cell of an experiment and write its outputs.

    Parameters
    ----------
    config : the experiment (:func:`primsel.experiments.config.load_config`).
    out : output root; the experiment writes to ``<out>/<config.name>``.
    data : dataset path (or tuple of paths) overriding ``config.data`` (the ``--data`` flag);
        without either, env ``PRIMSEL_ASPER_BENCH``, else the built-in tasks. Retrieval-only
        data may name several datasets; the grid runs on each.
    tasks : use these tasks (gold filled) instead of loading a dataset.
    library : the library of executable tasks (default
        :meth:`primsel.library.Library.from_simulator`); retrieval-only data brings its own.
    workers : sandbox worker processes when a generator runs (default: the sandbox's).
    progress : show tqdm progress bars on stderr.
    use_cache : read and write the on-disk retrieval cache.
    log : stream for messages (default stderr).
    on_cell : called after each computed cell with the cell and its report.
    backend : ``"serial"`` or ``"ray"`` (see the module docstring; Ray is an optional extra).
    address : the Ray cluster to connect to (``ray`` backend; default: start a local Ray).

    Returns
    -------
    :class:`ExperimentResult`.

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed dataset, or a generator on
        retrieval-only data.
    OutputError : ``<out>/<name>`` cannot be created or written.
    ValueError : an unknown backend.
    ImportError : the ray backend without Ray installed (the message says how to install it).
    Anything a component raises while computing a cell (finished cells stay written).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    log = sys.stderr if log is None else log
    begin = time.perf_counter()
    loaded = _load(config, data, tasks, library, log)
    datasets = [d for _, d in loaded]
    per_dataset = [(d, expand(config, dataset=d.fingerprint, data=path)) for path, d in loaded]
    cells = [c for _, group in per_dataset for c in group]
    _check_executable(datasets, cells)
    directory = Path(out) / config.name
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / "experiment.json", dumps_json(_manifest(config, datasets, cells)))
    except OSError as exc:
        raise OutputError(f"cannot write the output directory {directory}: "
                          f"{exc.strerror or exc}") from None
    versions = package_versions()
    contexts = {}
    for d, group in per_dataset:
        ctx = CellContext(experiment=config.name, library=d.library, dataset=d,
                          store=RetrievalStore(d.library, d, use_disk=use_cache), workers=workers,
                          progress=progress, versions=versions, base_dir=config.base_dir)
        contexts.update({c.id: ctx for c in group})
    done = [c.id for c in cells if is_finished(directory / c.id)]
    todo = [c for c in cells if c.id not in set(done)]
    if done:
        print(f"primsel run: {len(done)} of {len(cells)} cells already finished in {directory}", file=log)
    redo = [c.id for c in todo if (directory / c.id / "report.json").is_file()]
    if redo:
        print(f"primsel run: recomputing {len(redo)} incomplete cells (LLM requests that failed); "
              "cached answers are reused", file=log)
    for d, group in per_dataset:
        if not group:
            continue
        store = contexts[group[0].id].store
        capped = sorted({c.settings.folds for c in group if c in todo
                         and store.effective_folds(c.settings.folds) != c.settings.folds})
        if capped:
            print(f"primsel run: only {len(d.tasks)} tasks: folds {capped} capped at "
                  f"{store.effective_folds(max(capped))}", file=log)
    computed: list[str] = []
    incomplete: list[str] = []

    def finished(cell: Cell, report: Mapping[str, Any]) -> None:
        computed.append(cell.id)
        if report.get("complete") is False:
            incomplete.append(cell.id)
        if on_cell is not None:
            on_cell(cell, report)

    if backend == "ray":
        from primsel.experiments.ray_backend import run_cells

        run_cells(todo, contexts, directory, finished, address=address, progress=progress, log=log,
                  total=len(cells), initial=len(done), name=config.name)
    else:
        _run_serial(todo, contexts, directory, finished, progress, log, len(cells), len(done), config.name)
    return ExperimentResult(directory=directory, cells=tuple(cells), computed=tuple(computed),
                            skipped=tuple(done), seconds=time.perf_counter() - begin,
                            incomplete=tuple(incomplete))


def _run_serial(todo: Sequence[Cell], contexts: Mapping[str, CellContext], directory: Path,
                finished: Callable[[Cell, Mapping[str, Any]], None], progress: bool, log: TextIO,
                total: int, initial: int, name: str) -> None:
    """Compute and write the cells one after the other, in grid order."""
    from tqdm import tqdm

    with tqdm(total=total, initial=initial, desc=name, unit="cell", file=log,
              disable=not progress, position=0, dynamic_ncols=True) as cell_bar:
        for cell in todo:
            ctx = contexts[cell.id]
            cell_bar.set_postfix_str(cell.label, refresh=True)
            # selection, then (with a generator) generation and execution, one step per task each
            steps = len(ctx.dataset.tasks) * (3 if cell.settings.generator else 1)
            with tqdm(total=steps, desc="  tasks", unit="task", file=log, leave=False,
                      disable=not progress, position=1, dynamic_ncols=True) as task_bar:
                report = run_cell(cell, ctx, directory / cell.id, task_bar)
            cell_bar.update(1)
            finished(cell, report)

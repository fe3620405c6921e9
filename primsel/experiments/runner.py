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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TextIO

from primsel.experiments.cell import CellContext, run_cell
from primsel.experiments.config import Cell, ExperimentConfig, expand
from primsel.experiments.dataset import load_dataset, make_dataset
from primsel.experiments.store import RetrievalStore
from primsel.files import caches_disabled, dumps_json, write_atomic
from primsel.library import Library
from primsel.types import Task

#: Packages whose versions are recorded in every config.json.
VERSIONED_PACKAGES = (
    "primsel", "numpy", "scipy", "scikit-learn", "ranx", "rank-bm25", "faiss-cpu", "torch",
    "sentence-transformers", "openai",
)


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


def _bypassing_caches_unless_use_cache(function: Callable[..., ExperimentResult]) -> Callable[..., ExperimentResult]:
    """Runs ``function`` inside :func:`primsel.files.caches_disabled` when called with
    ``use_cache=False``, so that no cache is read or written (rankings, embeddings, LLM answers)."""
    @functools.wraps(function)
    def wrapper(*args: object, use_cache: bool = True, **kwargs: object) -> ExperimentResult:
        with contextlib.nullcontext() if use_cache else caches_disabled():
            return function(*args, use_cache=use_cache, **kwargs)

    return wrapper


@_bypassing_caches_unless_use_cache
def run_experiment(
    config: ExperimentConfig,
    out: str | os.PathLike[str] = "runs",
    *,
    data: str | os.PathLike[str] | None = None,
    tasks: Sequence[Task] | None = None,
    library: Library | None = None,
    workers: int | None = None,
    progress: bool = True,
    use_cache: bool = True,
    log: TextIO | None = None,
    on_cell: Callable[[Cell, Mapping[str, float]], None] | None = None,
) -> ExperimentResult:
    """Run every unfinished cell of an experiment and write its outputs.

    Parameters
    ----------
    config : the experiment (:func:`primsel.experiments.config.load_config`).
    out : output root; the experiment writes to ``<out>/<config.name>``.
    data : dataset path overriding ``config.data`` (the ``--data`` flag); without either, env
        ``PRIMSEL_ASPER_BENCH``, else the built-in tasks.
    tasks : use these tasks (gold filled) instead of loading a dataset.
    library : the library (default :meth:`primsel.library.Library.from_simulator`).
    workers : sandbox worker processes when a generator runs (default: the sandbox's).
    progress : show tqdm progress bars on stderr.
    use_cache : read and write the on-disk caches; False bypasses every one of them (rankings,
        embeddings, LLM answers: see :func:`primsel.files.caches_disabled`).
    log : stream for messages (default stderr).
    on_cell : called after each computed cell with the cell and its report.

    Returns
    -------
    :class:`ExperimentResult`.

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed dataset.
    OutputError : ``<out>/<name>`` cannot be created or written.
    Anything a component raises while computing a cell (finished cells stay written).
    """
    from tqdm import tqdm

    log = sys.stderr if log is None else log
    begin = time.perf_counter()
    if library is None:
        library = Library.from_simulator()
    if tasks is not None:
        dataset = make_dataset(tasks)
    else:
        dataset = load_dataset(data if data is not None else config.data, library, log)
    cells = expand(config, dataset=dataset.fingerprint)
    directory = Path(out) / config.name
    manifest = {
        "name": config.name,
        "description": config.description,
        "baseline": config.baseline,
        "data": {"source": dataset.source, "n_tasks": len(dataset.tasks), "fingerprint": dataset.fingerprint},
        "grids": [{k: list(v) for k, v in g.items()} for g in config.grids],
        "cells": [{"id": c.id, "label": c.label, "settings": c.settings.to_json()} for c in cells],
    }
    if config.pair_on is not None:
        manifest["pair_on"] = list(config.pair_on)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / "experiment.json", dumps_json(manifest))
    except OSError as exc:
        raise OutputError(f"cannot write the output directory {directory}: "
                          f"{exc.strerror or exc}") from None
    ctx = CellContext(experiment=config.name, library=library, dataset=dataset,
                      store=RetrievalStore(library, dataset, use_disk=use_cache), workers=workers,
                      progress=progress, versions=package_versions(), base_dir=config.base_dir)
    done = [c.id for c in cells if is_finished(directory / c.id)]
    todo = [c for c in cells if c.id not in set(done)]
    if done:
        print(f"primsel run: {len(done)} of {len(cells)} cells already finished in {directory}", file=log)
    redo = [c.id for c in todo if (directory / c.id / "report.json").is_file()]
    if redo:
        print(f"primsel run: recomputing {len(redo)} incomplete cells (LLM requests that failed); "
              "cached answers are reused", file=log)
    capped = sorted({c.settings.folds for c in todo if ctx.store.effective_folds(c.settings.folds) != c.settings.folds})
    if capped:
        print(f"primsel run: only {len(dataset.tasks)} tasks: folds {capped} capped at "
              f"{ctx.store.effective_folds(max(capped))}", file=log)
    computed = []
    incomplete = []
    with tqdm(total=len(cells), initial=len(done), desc=config.name, unit="cell", file=log,
              disable=not progress, position=0, dynamic_ncols=True) as cell_bar:
        for cell in todo:
            cell_bar.set_postfix_str(cell.label, refresh=True)
            # selection, then (with a generator) generation and execution, one step per task each
            steps = len(dataset.tasks) * (3 if cell.settings.generator else 1)
            with tqdm(total=steps, desc="  tasks", unit="task", file=log, leave=False,
                      disable=not progress, position=1, dynamic_ncols=True) as task_bar:
                report = run_cell(cell, ctx, directory / cell.id, task_bar)
            computed.append(cell.id)
            if report.get("complete") is False:
                incomplete.append(cell.id)
            cell_bar.update(1)
            if on_cell is not None:
                on_cell(cell, report)
    return ExperimentResult(directory=directory, cells=tuple(cells), computed=tuple(computed),
                            skipped=tuple(done), seconds=time.perf_counter() - begin,
                            incomplete=tuple(incomplete))

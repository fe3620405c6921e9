"""Run an experiment grid: every unfinished cell, in grid order, resumably.

Layout of the outputs (DESIGN.md, Interfaces, "Experiments")::

    <out>/<name>/experiment.json          the cells of the current declaration, in grid order
    <out>/<name>/<cell_id>/...            the cell's files (:mod:`primsel.experiments.cell`)

A cell whose ``report.json`` exists and says ``"complete": true`` is finished and skipped on a
re-run, unless the source of a component its settings name (a plug-in retriever, a member of a
hybrid, a stage of a composite: at any depth, under any key) has changed since it ran: its
``config.json`` records their digests (:func:`primsel.spec.sources`), and a stale cell is
recomputed. Any other cell is recomputed, so a killed run loses at most the cell in flight; an
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
from primsel.files import caches_disabled, canonical_json, dumps_json, write_atomic
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


def changed_sources(directory: Path, sources: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The component names whose source digest recorded in the cell's ``config.json`` differs
    from ``sources`` (:meth:`primsel.experiments.settings.CellSettings.sources`); every name
    when config.json records none (a cell written before sources were recorded) or cannot be
    read. An empty list: the cell was computed by the code that would compute it now."""
    try:
        recorded = json.loads((directory / "config.json").read_text(encoding="utf-8")).get("sources")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if not isinstance(recorded, Mapping):
        recorded = {}
    out = []
    for kind, digests in sources.items():
        old = recorded.get(kind) if isinstance(recorded.get(kind), Mapping) else {}
        out.extend(name for name, value in digests.items() if old.get(name) != value)
    return out


def check_output(directory: Path) -> None:
    """Fail before anything is computed or written when the experiment directory
    ``<out>/<name>`` cannot be one: it, or a folder above it, is a file.

    Raises
    ------
    OutputError : naming the file in the way.
    """
    for path in (directory, *directory.parents):
        if path.exists() and not path.is_dir():
            if path == directory:
                raise OutputError(f"{directory} is a file, not a directory: the experiment writes its cells "
                                  f"into {directory}/; move the file away or give another --out")
            raise OutputError(f"{path} is a file, not a directory: cannot create {directory} under it; "
                              "give another --out")


def report_answers(answers: Mapping[str, tuple[int, int]], labels: Mapping[str, str], log: TextIO,
                   command: str = "primsel run") -> None:
    """Say on ``log`` how many of the LLM answers the computed cells rest on came from the
    answer cache (``"N of M LLM answers from the cache"``), and warn about the cells that
    contacted no endpoint at all: their results say nothing about the endpoint now configured
    (answers are cached by model name, messages and sampling parameters, not by URL).

    Parameters
    ----------
    answers : cell id -> (answers, answers from a cache) of the cells computed
        (:func:`primsel.experiments.cell.llm_answers`).
    labels : cell id -> label, for the warning.
    log : where to write.
    command : the prefix of the lines.
    """
    total = sum(n for n, _ in answers.values())
    if not total:
        return
    cached = sum(c for _, c in answers.values())
    print(f"{command}: {cached} of {total} LLM answers from the cache", file=log)
    offline = [cid for cid, (n, c) in answers.items() if n and c == n]
    if offline:
        names = ", ".join(labels.get(cid, cid) + (f" ({cid})" if labels.get(cid, cid) != cid else "")
                          for cid in offline)
        print(f"{command}: warning: no LLM endpoint was contacted for {names}: every answer came from the "
              "cache, which is keyed by model name, messages and sampling parameters, not by URL (set "
              "cache_namespace to keep the answers of different endpoints apart)", file=log)


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
    OutputError : ``<out>/<name>`` is a file, or cannot be created or written (checked
        before the dataset is loaded).
    Anything a component raises while computing a cell (finished cells stay written).
    """
    from tqdm import tqdm

    log = sys.stderr if log is None else log
    begin = time.perf_counter()
    directory = Path(out) / config.name
    check_output(directory)
    if library is None:
        library = Library.from_simulator()
    if tasks is not None:
        dataset = make_dataset(tasks)
    elif data is not None:
        dataset = load_dataset(data, library, log)
    else:
        where = f"the 'data' key of {config.path}" if config.path is not None else "the experiment's 'data' key"
        dataset = load_dataset(config.data, library, log, origin=where)
    cells = expand(config, dataset=dataset.fingerprint)
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
    # a finished cell counts only if the components it names have the source they had when it
    # ran: editing a retriever (at any depth of the specification) makes its cells stale
    by_components: dict[str, dict[str, dict[str, str]]] = {}
    sources = {}
    for c in cells:  # cells differing only in k, closure, ... share their components
        key = canonical_json([c.settings.retriever, c.settings.generator])
        if key not in by_components:
            by_components[key] = c.settings.sources()
        sources[c.id] = by_components[key]
    stale: dict[str, list[str]] = {}
    done = []
    for c in cells:
        if is_finished(directory / c.id):
            changed = changed_sources(directory / c.id, sources[c.id])
            if changed:
                stale[c.id] = changed
            else:
                done.append(c.id)
    todo = [c for c in cells if c.id not in set(done)]
    if done:
        print(f"primsel run: {len(done)} of {len(cells)} cells already finished in {directory}", file=log)
    if stale:
        names = sorted({n for changed in stale.values() for n in changed})
        print(f"primsel run: recomputing {len(stale)} finished cells: the source of "
              f"{', '.join(names)} changed since they ran", file=log)
    redo = [c.id for c in todo if (directory / c.id / "report.json").is_file() and c.id not in stale]
    if redo:
        print(f"primsel run: recomputing {len(redo)} incomplete cells (LLM requests that failed); "
              "cached answers are reused", file=log)
    capped = sorted({c.settings.folds for c in todo if ctx.store.effective_folds(c.settings.folds) != c.settings.folds})
    if capped:
        print(f"primsel run: only {len(dataset.tasks)} tasks: folds {capped} capped at "
              f"{ctx.store.effective_folds(max(capped))}", file=log)
    computed = []
    incomplete = []
    answers: dict[str, tuple[int, int]] = {}
    with tqdm(total=len(cells), initial=len(done), desc=config.name, unit="cell", file=log,
              disable=not progress, position=0, dynamic_ncols=True) as cell_bar:
        for cell in todo:
            cell_bar.set_postfix_str(cell.label, refresh=True)
            # selection, then (with a generator) generation and execution, one step per task each
            steps = len(dataset.tasks) * (3 if cell.settings.generator else 1)
            with tqdm(total=steps, desc="  tasks", unit="task", file=log, leave=False,
                      disable=not progress, position=1, dynamic_ncols=True) as task_bar:
                report = run_cell(cell, ctx, directory / cell.id, task_bar, sources=sources[cell.id])
            computed.append(cell.id)
            if report.get("complete") is False:
                incomplete.append(cell.id)
            answers[cell.id] = (int(report.get("llm_answers", 0)), int(report.get("llm_answers_cached", 0)))
            cell_bar.update(1)
            if on_cell is not None:
                on_cell(cell, report)
    report_answers(answers, {c.id: c.label for c in cells}, log)
    return ExperimentResult(directory=directory, cells=tuple(cells), computed=tuple(computed),
                            skipped=tuple(done), seconds=time.perf_counter() - begin,
                            incomplete=tuple(incomplete))

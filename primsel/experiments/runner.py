"""Run an experiment grid (on each dataset): every unfinished cell, in grid order, resumably, into
``<out>/<name>/`` (experiment.json, and a folder per cell). A finished cell
(:mod:`primsel.experiments.results`) is skipped unless it is incomplete (an LLM request failed) or
the source of a component it names changed since it ran (its config.json records their digests).
Backends: ``"serial"`` (this process) and ``"ray"`` (:mod:`primsel.experiments.ray_backend`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from primsel.aspera import ENV_VAR as ASPERA_ENV_VAR
from primsel.aspera import locate as locate_aspera
from primsel.datasets import DatasetError
from primsel.experiments.cell import RunContext, run_cell
from primsel.experiments.config import Cell, ExperimentConfig, expand, generator_spec
from primsel.experiments.dataset import Dataset, load_datasets, make_dataset, named_library, subset
from primsel.progress import progress_bar, show_progress
from primsel.experiments.ray_backend import run_cells
from primsel.experiments.records import ManifestCell, ManifestFile, ReportError, ReportFile
from primsel.experiments.results import has_report, is_complete, read_config, write_manifest
from primsel.retrieval.store import RetrievalStore
from primsel.files import caches_disabled, canonical_json
from primsel.library import Library
from primsel.llm.answers import ANSWERS_SUFFIX, import_answers
from primsel.llm.local import resolve_gguf, stop_shared_servers
from primsel.types import Task

#: Packages whose versions are recorded in every config.json.
VERSIONED_PACKAGES = (
    "primsel",
    "numpy",
    "scipy",
    "scikit-learn",
    "ranx",
    "rank-bm25",
    "bm25s",
    "faiss-cpu",
    "torch",
    "sentence-transformers",
    "openai",
)
#: Backends of :func:`run_experiment`.
BACKENDS = ("serial", "ray")


class OutputError(ValueError):
    """The output directory cannot be created or written (the message names it)."""


def package_versions() -> dict[str, str | None]:
    """Installed versions of :data:`VERSIONED_PACKAGES` (None when absent) and of Python."""
    out: dict[str, str | None] = {
        "python": sys.version.split()[0],
        **dict.fromkeys(VERSIONED_PACKAGES),
    }
    for name in VERSIONED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def changed_sources(directory: Path, sources: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The component names whose source digest in the cell's config.json differs from ``sources``
    (:meth:`primsel.experiments.settings.CellSettings.sources`); all when it cannot be read."""
    try:
        config = read_config(directory)
    except ReportError:  # unreadable or not valid
        config = None
    recorded = config.sources if config is not None else {}
    changed = []
    for kind, digests in sources.items():
        old = recorded.get(kind)
        if not isinstance(old, Mapping):
            old = {}
        changed += [name for name, value in digests.items() if old.get(name) != value]
    return changed


def _check_output(directory: Path) -> None:
    """Raise OutputError, naming the file, when ``directory`` or a folder above it is a file."""
    for path in (directory, *directory.parents):
        if path.exists() and not path.is_dir():
            if path == directory:
                raise OutputError(
                    f"{directory} is a file, not a directory: the experiment writes its cells "
                    f"into {directory}/; move the file away or give another --out"
                )
            raise OutputError(
                f"{path} is a file, not a directory: cannot create {directory} under it; "
                "give another --out"
            )


@dataclasses.dataclass(frozen=True)
class ExperimentResult:
    """Outcome of :func:`run_experiment`: ``directory`` (``<out>/<name>``), ``cells`` (the grid, in
    grid order), ids of the cells ``computed`` by this call and ``skipped`` (finished before it),
    ``seconds`` (wall time), ``incomplete`` (computed cells whose LLM requests failed: the next run
    recomputes them) and ``answers``: computed cell id -> (LLM answers, of which from a cache), for
    the cells that used an LLM."""

    directory: Path
    cells: tuple[Cell, ...]
    computed: tuple[str, ...]
    skipped: tuple[str, ...]
    seconds: float
    incomplete: tuple[str, ...] = ()
    answers: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)


def _load(
    config: ExperimentConfig,
    data: str | os.PathLike[str] | None,
    tasks: Sequence[Task] | None,
    library: Library | None,
    log: TextIO,
) -> list[tuple[Any, Dataset]]:
    """``[(data path, dataset)]`` of the experiment (path None for given tasks), against the
    experiment's ``library``.

    Raises
    ------
    primsel.datasets.DatasetError : see :func:`primsel.experiments.dataset.load_datasets`.
    primsel.aspera.AsperaSourceError : the experiment needs ASPERA's checkout and has none.
    """
    if config.uses_aspera:
        # the components find the checkout through the variable (so do the processes they start)
        os.environ[ASPERA_ENV_VAR] = str(locate_aspera(config.aspera_src))
    if tasks is not None:
        if library is None:
            library = named_library(config.library)
        return [(None, make_dataset(tasks, library, library_name=config.library))]
    origin = (
        f"the 'data' key of {config.path}"
        if config.path is not None
        else "the experiment's 'data' key"
    )
    paths, origin = (data, "--data") if data is not None else (config.data, origin)
    out = [
        (path, d)
        for path in (paths if isinstance(paths, tuple) else (paths,))
        for d in load_datasets(path, log, library, origin=origin, library_name=config.library)
    ]
    names = [d.fingerprint for _, d in out]
    if len(set(names)) != len(names):
        raise DatasetError("the same dataset is named twice in the experiment's data")
    return out


#: The components that serve a GGUF model on this machine.
LOCAL_COMPONENTS = ("local", "local_selector", "aspera_local_selector")


def _import_answers(config: ExperimentConfig, log: TextIO) -> None:
    """Put the committed model answers beside the experiment file (``<name>.answers.jsonl.gz``,
    written by ``primsel report --export``) into the answer cache, so that a run re-scores or
    resumes them without the model.

    Raises
    ------
    primsel.llm.answers.AnswersError : the file is malformed (nothing is written).
    """
    if config.path is None:
        return
    path = config.path.with_name(f"{config.name}{ANSWERS_SUFFIX}")
    if not path.is_file():
        return
    added, present = import_answers(path)
    print(
        f"primsel run: {added + present} model answers in {path.name}: {added} put into the "
        f"answer cache, {present} there already",
        file=log,
    )


def _local_models(spec: Any) -> list[str | None]:
    """The ``gguf`` of every ``local`` generator or ``local_selector`` in ``spec`` (any depth)."""
    if isinstance(spec, Mapping):
        own = [spec.get("gguf")] if spec.get("type") in LOCAL_COMPONENTS else []
        return own + _local_models(list(spec.values()))
    return (
        [gguf for value in spec for gguf in _local_models(value)]
        if isinstance(spec, (list, tuple))
        else []
    )


def _subsets(
    loaded: Sequence[tuple[Any, Dataset]],
    sample: int | None,
    task_ids: Sequence[str] | None,
    fold: int | None,
    seed: int,
    folds: int,
    log: TextIO,
) -> list[tuple[Any, Dataset]]:
    """The datasets cut to a sample, to ``task_ids`` or to a fold (said on ``log``)."""
    if not all(d.executable for _, d in loaded):
        raise DatasetError(
            "a sample, a list of tasks or a fold needs executable tasks (Asper-Bench or the "
            "built-in tasks)"
        )
    out = [(path, subset(d, sample, task_ids, seed, fold, folds)) for path, d in loaded]
    if sample is not None:
        how = f"a sample drawn with seed {seed}"
    elif fold is not None:
        how = f"fold {fold} of {folds}, seed {seed}"
    else:
        how = "as listed"
    for _, d in out:
        print(f"primsel run: {len(d.tasks)} of {len(d.population)} tasks ({how})", file=log)
    return out


def _manifest(
    config: ExperimentConfig, datasets: Sequence[Dataset], cells: Sequence[Cell]
) -> ManifestFile:
    """The experiment.json of a run: one dataset's summary and notes, or several datasets joined by
    ``+`` (their sources and fingerprints, their tasks summed), each listed with its notes."""
    grids = tuple(
        {
            key: [str(x) if isinstance(x, Path) else x for x in values]
            for key, values in grid.items()
        }
        for grid in config.grids
    )
    entries = tuple(
        ManifestCell(
            id=c.id,
            label=c.label,
            settings=c.settings.to_json(),
            folder=None if c.directory_name == c.id else c.directory_name,
        )
        for c in cells
    )
    common = {
        "name": config.name,
        "description": config.description,
        "baseline": config.baseline,
        "grids": grids,
        "cells": entries,
        "pair_on": config.pair_on,
    }
    if len(datasets) == 1:
        return ManifestFile(data=datasets[0].summary(), notes=tuple(datasets[0].notes), **common)
    data = {
        "source": "+".join(d.source for d in datasets),
        "n_tasks": sum(len(d.tasks) for d in datasets),
        "fingerprint": "+".join(d.fingerprint for d in datasets),
    }
    listed = tuple({**d.summary(), "notes": list(d.notes)} for d in datasets)
    return ManifestFile(data=data, datasets=listed, **common)


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
    on_cell: Callable[[Cell, ReportFile], None] | None = None,
    backend: str = "serial",
    address: str | None = None,
    sample: int | None = None,
    task_ids: Sequence[str] | None = None,
    fold: int | None = None,
) -> ExperimentResult:
    """Run every unfinished cell of ``config`` and write its outputs to ``<out>/<config.name>``.

    ``data``: dataset path(s) overriding ``config.data`` (else env ``PRIMSEL_ASPER_BENCH``, else the
    built-in tasks); ``tasks``/``library``: tasks (gold filled) instead of a dataset; ``workers``:
    sandbox processes; ``use_cache=False`` bypasses every on-disk cache; ``on_cell(cell, report)``:
    called after each computed cell with its report.json record; ``backend``: ``"serial"`` or
    ``"ray"`` (``address``: a Ray cluster); ``sample``, ``task_ids``, ``fold``: run on a subset
    (:func:`primsel.experiments.dataset.subset`), retrieval cross-validated on all.

    Returns
    -------
    :class:`ExperimentResult`.

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed data, or a generator on retrieval-only
        data.
    OutputError : ``<out>/<name>`` is a file, or cannot be written.
    ValueError : an unknown backend.
    ImportError : the ray backend without Ray installed.
    Anything a component raises while computing a cell (finished cells stay written).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    log = sys.stderr if log is None else log
    begin = time.perf_counter()
    with contextlib.nullcontext() if use_cache else caches_disabled():
        directory = Path(out) / config.name
        _check_output(directory)
        if use_cache:
            _import_answers(config, log)
        per_dataset = _grid(config, data, tasks, library, (sample, task_ids, fold), log)
        per_dataset = [(d, _in_folders(directory, group)) for d, group in per_dataset]
        cells = [c for _, group in per_dataset for c in group]
        for gguf in dict.fromkeys(
            g
            for c in cells
            for g in _local_models(
                [c.settings.retriever, generator_spec(c.settings.generator, config.base_dir)]
            )
        ):
            resolve_gguf(gguf, log=log)
        try:
            write_manifest(directory, _manifest(config, [d for d, _ in per_dataset], cells))
        except OSError as exc:
            raise OutputError(
                f"cannot write the output directory {directory}: {exc.strerror or exc}"
            ) from None
        sources = _sources(cells)
        done = _finished(directory, cells, sources, log)
        todo = [c for c in cells if c.id not in set(done)]
        contexts = _contexts(config, per_dataset, todo, workers, use_cache, log)
        reports: dict[str, ReportFile] = {}  # in the order the cells finish

        def finished(cell: Cell, report: ReportFile) -> None:
            """Keep the report of a computed cell and tell ``on_cell``."""
            reports[cell.id] = report
            if on_cell is not None:
                on_cell(cell, report)

        try:
            run = run_cells if backend == "ray" else _run_serial
            run(
                todo,
                contexts,
                directory,
                finished,
                address=address,
                progress=progress,
                log=log,
                total=len(cells),
                initial=len(done),
                name=config.name,
                sources=sources,
            )
        finally:
            stop_shared_servers()
        incomplete = tuple(cid for cid, report in reports.items() if not report.complete)
        answers = {
            cid: (int(report.run.llm_answers), int(report.run.llm_answers_cached or 0))
            for cid, report in reports.items()
            if report.run.llm_answers
        }
        return ExperimentResult(
            directory=directory,
            cells=tuple(cells),
            computed=tuple(reports),
            skipped=tuple(done),
            seconds=time.perf_counter() - begin,
            incomplete=incomplete,
            answers=answers,
        )


def _grid(
    config: ExperimentConfig,
    data: Any,
    tasks: Sequence[Task] | None,
    library: Library | None,
    subset_of: tuple[int | None, Sequence[str] | None, int | None],
    log: TextIO,
) -> list[tuple[Dataset, list[Cell]]]:
    """``[(dataset, its cells)]`` of the experiment: the datasets loaded (:func:`_load`), cut to
    ``subset_of`` (sample, task ids, fold; all None: every task), each with its cells.

    Raises
    ------
    primsel.datasets.DatasetError : see :func:`_load`; a generator on retrieval-only data.
    """
    loaded = _load(config, data, tasks, library, log)
    if any(part is not None for part in subset_of):
        sample, task_ids, fold = subset_of
        seed = int(config.base.get("seed", 0))
        folds = int(config.base.get("folds", 5))
        loaded = _subsets(loaded, sample, task_ids, fold, seed, folds, log)
    per_dataset = [(d, expand(config, dataset=d.fingerprint, data=path)) for path, d in loaded]
    bad = [d.source for d, _ in per_dataset if not d.executable]
    has_generator = any(c.settings.generator for _, group in per_dataset for c in group)
    if bad and has_generator:
        raise DatasetError(
            f"the experiment has a generator, but {', '.join(bad)} is retrieval-only data "
            "(queries and gold documents, no programs to execute); remove [generator] "
            "(and generator grid keys) to rank and score it"
        )
    return per_dataset


@dataclasses.dataclass(frozen=True)
class PlannedCell:
    """A cell as ``primsel run --dry-run`` shows it: the ``cell``, its ``folder`` (the path it
    is or would be written to) and its ``state``: ``"finished"`` (its results are reused),
    ``"new"``, ``"incomplete"`` (an LLM request failed: computed again) or ``"stale"`` (the
    source of a component changed since it ran: computed again; ``changed`` names them)."""

    cell: Cell
    folder: Path
    state: str
    changed: tuple[str, ...] = ()

    @property
    def reused(self) -> bool:
        """True when the run would reuse the cell's results rather than compute them."""
        return self.state == "finished"


def plan_experiment(
    config: ExperimentConfig,
    out: str | os.PathLike[str] = "runs",
    *,
    data: str | os.PathLike[str] | tuple[str | os.PathLike[str], ...] | None = None,
    sample: int | None = None,
    task_ids: Sequence[str] | None = None,
    fold: int | None = None,
    log: TextIO | None = None,
) -> list[PlannedCell]:
    """What :func:`run_experiment` would do with the same arguments, writing nothing: every
    cell, in grid order, with the state that decides whether it is computed or reused.

    Raises
    ------
    primsel.datasets.DatasetError, primsel.aspera.AsperaSourceError : as
        :func:`run_experiment`.
    OutputError : ``<out>/<name>`` (or a folder above it) is a file.
    """
    log = sys.stderr if log is None else log
    directory = Path(out) / config.name
    _check_output(directory)
    per_dataset = _grid(config, data, None, None, (sample, task_ids, fold), log)
    cells = [c for _, group in per_dataset for c in _in_folders(directory, group)]
    sources = _sources(cells)
    planned = []
    for c in cells:
        folder = directory / c.directory_name
        state, changed = "new", []
        if is_complete(folder):
            changed = changed_sources(folder, sources[c.id])
            state = "stale" if changed else "finished"
        elif has_report(folder):
            state = "incomplete"
        planned.append(PlannedCell(c, folder, state, tuple(changed)))
    return planned


def _in_folders(directory: Path, cells: Sequence[Cell]) -> list[Cell]:
    """The cells, each with the folder it already has in ``directory`` when there is one (its
    bare id, from before labels, or ``<slug>-<id>`` under another label: a label changes
    nothing computed, so a relabelled cell is reused), else its own :attr:`Cell.folder`."""
    existing: dict[str, str] = {}
    if directory.is_dir():
        for path in sorted(p for p in directory.iterdir() if p.is_dir()):
            cell_id = path.name.rsplit("-", 1)[-1]
            existing.setdefault(cell_id, path.name)
            if path.name == cell_id:
                existing[cell_id] = path.name  # the bare id wins
    return [dataclasses.replace(c, folder=existing.get(c.id, c.directory_name)) for c in cells]


def _sources(cells: Sequence[Cell]) -> dict[str, dict[str, dict[str, str]]]:
    """Cell id -> its components' source digests, computed once per retriever and generator."""
    by_components: dict[str, dict[str, dict[str, str]]] = {}
    for c in cells:
        key = canonical_json([c.settings.retriever, c.settings.generator])
        if key not in by_components:
            by_components[key] = c.settings.sources()
    return {
        c.id: by_components[canonical_json([c.settings.retriever, c.settings.generator])]
        for c in cells
    }


def _finished(
    directory: Path,
    cells: Sequence[Cell],
    sources: Mapping[str, Mapping[str, Mapping[str, str]]],
    log: TextIO,
) -> list[str]:
    """The ids of the finished cells whose components' sources are unchanged (said on ``log``)."""
    changed = {
        c.id: changed_sources(directory / c.directory_name, sources[c.id])
        for c in cells
        if is_complete(directory / c.directory_name)
    }
    done = [cid for cid, names in changed.items() if not names]
    stale = {cid: names for cid, names in changed.items() if names}
    if done:
        print(
            f"primsel run: {len(done)} of {len(cells)} cells already finished in {directory}",
            file=log,
        )
    if stale:
        names = sorted({n for changed_names in stale.values() for n in changed_names})
        print(
            f"primsel run: recomputing {len(stale)} finished cells: the source of "
            f"{', '.join(names)} changed since they ran",
            file=log,
        )
    redo = [
        c.id for c in cells if c.id not in changed and has_report(directory / c.directory_name)
    ]
    if redo:
        print(
            f"primsel run: recomputing {len(redo)} incomplete cells (LLM requests that failed); "
            "cached answers are reused",
            file=log,
        )
    return done


def _contexts(
    config: ExperimentConfig,
    per_dataset: Sequence[tuple[Dataset, Sequence[Cell]]],
    todo: Sequence[Cell],
    workers: int | None,
    use_cache: bool,
    log: TextIO,
) -> dict[str, RunContext]:
    """Cell id -> its context (one store per dataset, ranking the whole dataset a subset was
    drawn from); says on ``log`` which folds a dataset with few tasks caps."""
    contexts, versions = {}, package_versions()
    for d, group in per_dataset:
        whole = (
            d
            if not d.population
            else dataclasses.replace(
                d,
                tasks=d.population,
                fingerprint=d.fingerprint.rsplit("/subset-", 1)[0],
                population=(),
                subset={},
            )
        )
        store = RetrievalStore(d.library, whole, use_disk=use_cache, needed=[t.id for t in d.tasks])
        contexts.update(
            dict.fromkeys(
                (c.id for c in group),
                RunContext(
                    experiment=config.name,
                    library=d.library,
                    dataset=d,
                    store=store,
                    workers=workers,
                    versions=versions,
                    base_dir=config.base_dir,
                ),
            )
        )
        capped = sorted(
            {
                c.settings.folds
                for c in group
                if c in todo and store.effective_folds(c.settings.folds) != c.settings.folds
            }
        )
        if capped:
            print(
                f"primsel run: only {len(d.tasks)} tasks: folds {capped} capped at "
                f"{store.effective_folds(max(capped))}",
                file=log,
            )
    return contexts


def _run_serial(
    todo: Sequence[Cell],
    contexts: Mapping[str, RunContext],
    directory: Path,
    finished: Callable[[Cell, ReportFile], None],
    *,
    address: str | None,
    progress: bool,
    log: TextIO,
    total: int,
    initial: int,
    name: str,
    sources: Mapping[str, Mapping[str, Any]],
) -> None:
    """Compute and write the cells one after the other, in grid order (arguments as
    :func:`run_cells`); with ``progress``, the epochs, texts embedded and LLM requests of a
    cell show their progress too (:func:`primsel.progress.activity`)."""
    shown = log if progress else None
    with show_progress(shown), progress_bar(
        total=total,
        initial=initial,
        desc=name,
        unit="cell",
        file=log,
        disable=not progress,
        position=0,
    ) as cell_bar:
        for cell in todo:
            ctx = contexts[cell.id]
            cell_bar.set_postfix_str(cell.label, refresh=True)
            # selection, then (with a generator) generation and execution, one step per task each
            steps = len(ctx.dataset.tasks) * (3 if cell.settings.generator else 1)
            with progress_bar(
                total=steps,
                desc="  tasks",
                unit="task",
                file=log,
                leave=False,
                disable=not progress,
                position=1,
                lines="none",
            ) as task_bar:
                report = run_cell(
                    cell,
                    ctx,
                    directory / cell.directory_name,
                    task_bar,
                    sources=sources[cell.id],
                )
            cell_bar.update(1)
            finished(cell, report)

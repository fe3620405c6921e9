"""Run an experiment grid: every unfinished cell, in grid order, resumably.

Layout of the outputs (docs/architecture.md, "What a run leaves on disk")::

    <out>/<name>/experiment.json          the cells of the current declaration, in grid order
                                          (:class:`primsel.experiments.run_files.ExperimentManifest`)
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

Several datasets: when the data names several (an array ``data``, or a folder holding several
retrieval-only datasets), the grid runs on each, in data order, each against its own library;
``experiment.json`` lists them under ``datasets``.

Backends: ``"serial"`` computes the cells one after the other in this process; ``"ray"``
(:mod:`primsel.experiments.ray_backend`) computes retrievals and cells as Ray tasks, on a local
Ray or a cluster (``address``), and writes every file here through the same
:func:`primsel.experiments.cell.write_cell`, so the files and the report are the same.
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
from typing import Any, TextIO

from primsel.datasets import DatasetError
from primsel.experiments.cell import CellContext, run_cell
from primsel.experiments.config import Cell, ExperimentConfig, expand, generator_spec
from primsel.experiments.dataset import Dataset, load_datasets, make_dataset, subset
from primsel.experiments.progress import progress_bar
from primsel.experiments.ray_backend import run_cells
from primsel.experiments.records import CellReport
from primsel.experiments.run_files import CellConfig, CellEntry, ExperimentManifest
from primsel.experiments.store import RetrievalStore
from primsel.files import caches_disabled, canonical_json, dumps_json, write_atomic
from primsel.library import Library
from primsel.llm.local import resolve_gguf, stop_shared_servers
from primsel.simulator.library import build_library
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
        return isinstance(report, dict) and CellReport.from_json(report).complete
    except (OSError, ValueError):
        return False


def changed_sources(directory: Path, sources: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The component names whose source digest recorded in the cell's ``config.json`` differs
    from ``sources`` (:meth:`primsel.experiments.settings.CellSettings.sources`); every name
    when config.json records none (a cell written before sources were recorded) or cannot be
    read. An empty list: the cell was computed by the code that would compute it now."""
    try:
        recorded = CellConfig.read(directory / "config.json").sources
    except (OSError, ValueError):  # RunFileError included
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


def _load(config: ExperimentConfig, data: str | os.PathLike[str] | None, tasks: Sequence[Task] | None,
          library: Library | None, log: TextIO) -> list[tuple[Any, Dataset]]:
    """``[(data path, dataset)]`` of the experiment (path None for given tasks)."""
    if tasks is not None:
        return [(None, make_dataset(tasks, library if library is not None else build_library()))]
    if data is not None:
        paths, origin = data, "--data"
    else:
        paths = config.data
        origin = f"the 'data' key of {config.path}" if config.path is not None else "the experiment's 'data' key"
    out: list[tuple[Any, Dataset]] = []
    for path in (paths if isinstance(paths, tuple) else (paths,)):
        out.extend((path, d) for d in load_datasets(path, log, library, origin=origin))
    names = [d.fingerprint for _, d in out]
    if len(set(names)) != len(names):
        raise DatasetError("the same dataset is named twice in the experiment's data")
    return out


def _local_models(spec: Any) -> list[str | None]:
    """The ``gguf`` values of every ``local`` generator or ``local_selector`` in a specification
    (any depth)."""
    found: list[str | None] = []
    if isinstance(spec, Mapping):
        if spec.get("type") in ("local", "local_selector"):
            found.append(spec.get("gguf"))
        for value in spec.values():
            found.extend(_local_models(value))
    elif isinstance(spec, (list, tuple)):
        for value in spec:
            found.extend(_local_models(value))
    return found


def _prepare_local_models(cells: Sequence[Cell], base_dir: Path | None, log: TextIO) -> None:
    """Assemble or check the GGUF file of every local model the cells name, before any cell runs.

    Raises
    ------
    primsel.llm.local.LocalModelError : a missing or corrupt slice, a digest mismatch, a file
        that is not GGUF (the message names it and the fix).
    """
    wanted = list(dict.fromkeys(g for c in cells for g in _local_models(
        [c.settings.retriever, generator_spec(c.settings.generator, base_dir)])))
    if wanted:
        for gguf in wanted:
            resolve_gguf(gguf, log=log)


def _subsets(loaded: Sequence[tuple[Any, Dataset]], sample: int | None, task_ids: Sequence[str] | None,
             fold: int | None, seed: int, folds: int, log: TextIO) -> list[tuple[Any, Dataset]]:
    """The datasets cut to ``sample`` tasks drawn with ``seed``, to ``task_ids``, or to the
    tasks of cross-validation fold ``fold`` (:func:`primsel.experiments.dataset.subset`), said on
    ``log``. Raises :class:`primsel.datasets.DatasetError` on retrieval-only data (and what
    ``subset`` raises)."""
    if not all(d.executable for _, d in loaded):
        raise DatasetError("a sample, a list of tasks or a fold needs executable tasks (Asper-Bench or the "
                           "built-in tasks)")
    out = [(path, subset(d, sample, task_ids, seed, fold, folds)) for path, d in loaded]
    how = (f"a sample drawn with seed {seed}" if sample is not None
           else f"fold {fold} of {folds}, seed {seed}" if fold is not None else "as listed")
    for _, d in out:
        print(f"primsel run: {len(d.tasks)} of {len(d.population)} tasks ({how})", file=log)
    return out


def _whole(dataset: Dataset) -> Dataset:
    """The dataset a subset was taken from (the dataset itself when it is whole)."""
    if not dataset.population:
        return dataset
    return dataclasses.replace(dataset, tasks=dataset.population, fingerprint=dataset.fingerprint.rsplit("/subset-", 1)[0],
                               population=(), subset={})


def _check_executable(datasets: Sequence[Dataset], cells: Sequence[Cell]) -> None:
    """A generator needs executable tasks: refuse retrieval-only data before anything runs."""
    if any(c.settings.generator for c in cells):
        bad = [d.source for d in datasets if not d.executable]
        if bad:
            raise DatasetError(f"the experiment has a generator, but {', '.join(bad)} is retrieval-only data "
                               "(queries and gold documents, no programs to execute); remove [generator] "
                               "(and generator grid keys) to rank and score it")


def _manifest(config: ExperimentConfig, datasets: Sequence[Dataset], cells: Sequence[Cell]) -> ExperimentManifest:
    """The experiment.json of a run: the declaration, the data (of one dataset, or of several
    joined by ``+`` with each one listed under ``datasets``) and the cells in grid order."""
    if len(datasets) == 1:
        data = datasets[0].summary()
    else:
        data = {"source": "+".join(d.source for d in datasets), "n_tasks": sum(len(d.tasks) for d in datasets),
                "fingerprint": "+".join(d.fingerprint for d in datasets)}
    several = len(datasets) > 1
    return ExperimentManifest(
        name=config.name, description=config.description, baseline=config.baseline, data=data,
        grids=tuple({k: [str(x) if isinstance(x, Path) else x for x in v] for k, v in g.items()} for g in config.grids),
        cells=tuple(CellEntry(id=c.id, label=c.label, settings=c.settings.to_json()) for c in cells),
        datasets=tuple({**d.summary(), "notes": list(d.notes)} for d in datasets) if several else (),
        notes=() if several else tuple(datasets[0].notes), pair_on=config.pair_on)


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
    sample: int | None = None,
    task_ids: Sequence[str] | None = None,
    fold: int | None = None,
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
        :func:`primsel.simulator.library.build_library`); retrieval-only data brings its own.
    workers : sandbox worker processes when a generator runs (default: the sandbox's).
    progress : show tqdm progress bars on stderr.
    use_cache : read and write the on-disk caches; False bypasses every one of them (rankings,
        embeddings, LLM answers: see :func:`primsel.files.caches_disabled`).
    log : stream for messages (default stderr).
    on_cell : called after each computed cell with the cell and its report.
    backend : ``"serial"`` or ``"ray"`` (see the module docstring; Ray is an optional extra).
    address : the Ray cluster to connect to (``ray`` backend; default: start a local Ray).
    sample, task_ids : run the cells on a subset of the tasks of executable data
        (:func:`primsel.experiments.dataset.subset`: ``sample`` tasks drawn with the
        experiment's seed, or the tasks ``task_ids``); fold : the tasks of this
        cross-validation fold of the experiment's folds and seed, as a subset the same way;
        retrieval is still cross-validated over
        every task, so the subset's prompts are those of the full run and its LLM answers are
        reused by it. Local model servers the run started are stopped when it returns.

    Returns
    -------
    :class:`ExperimentResult`.

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed dataset, or a generator on
        retrieval-only data.
    OutputError : ``<out>/<name>`` is a file, or cannot be created or written (checked
        before the dataset is loaded).
    ValueError : an unknown backend.
    ImportError : the ray backend without Ray installed (the message says how to install it).
    Anything a component raises while computing a cell (finished cells stay written).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    log = sys.stderr if log is None else log
    begin = time.perf_counter()
    directory = Path(out) / config.name
    check_output(directory)
    loaded = _load(config, data, tasks, library, log)
    if sample is not None or task_ids is not None or fold is not None:
        loaded = _subsets(loaded, sample, task_ids, fold, int(config.base.get("seed", 0)),
                          int(config.base.get("folds", 5)), log)
    datasets = [d for _, d in loaded]
    per_dataset = [(d, expand(config, dataset=d.fingerprint, data=path)) for path, d in loaded]
    cells = [c for _, group in per_dataset for c in group]
    _check_executable(datasets, cells)
    _prepare_local_models(cells, config.base_dir, log)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / "experiment.json", dumps_json(_manifest(config, datasets, cells).to_json()))
    except OSError as exc:
        raise OutputError(f"cannot write the output directory {directory}: "
                          f"{exc.strerror or exc}") from None
    contexts = {}
    versions = package_versions()
    for d, group in per_dataset:
        ctx = CellContext(experiment=config.name, library=d.library, dataset=d,
                          store=RetrievalStore(d.library, _whole(d), use_disk=use_cache), workers=workers,
                          progress=progress, versions=versions, base_dir=config.base_dir)
        contexts.update({c.id: ctx for c in group})
    sources = _sources(cells)
    done = _finished(directory, cells, sources, log)
    todo = [c for c in cells if c.id not in set(done)]
    _say_capped(per_dataset, contexts, todo, log)
    computed: list[str] = []
    incomplete: list[str] = []
    answers: dict[str, tuple[int, int]] = {}

    def finished(cell: Cell, report: Mapping[str, Any]) -> None:
        computed.append(cell.id)
        if report.get("complete") is False:
            incomplete.append(cell.id)
        answers[cell.id] = (int(report.get("llm_answers", 0)), int(report.get("llm_answers_cached", 0)))
        if on_cell is not None:
            on_cell(cell, report)

    try:
        if backend == "ray":
            run_cells(todo, contexts, directory, finished, address=address, progress=progress, log=log,
                      total=len(cells), initial=len(done), name=config.name, sources=sources)
        else:
            _run_serial(todo, contexts, directory, finished, progress, log, len(cells), len(done), config.name,
                        sources)
    finally:
        stop_shared_servers()
    report_answers(answers, {c.id: c.label for c in cells}, log)
    return ExperimentResult(directory=directory, cells=tuple(cells), computed=tuple(computed),
                            skipped=tuple(done), seconds=time.perf_counter() - begin,
                            incomplete=tuple(incomplete))


def _sources(cells: Sequence[Cell]) -> dict[str, dict[str, dict[str, str]]]:
    """Cell id -> the source digests of the components it names (:meth:`CellSettings.sources`),
    computed once for the cells that share their components (differing only in k, ...)."""
    by_components: dict[str, dict[str, dict[str, str]]] = {}
    sources = {}
    for c in cells:
        key = canonical_json([c.settings.retriever, c.settings.generator])
        if key not in by_components:
            by_components[key] = c.settings.sources()
        sources[c.id] = by_components[key]
    return sources


def _finished(directory: Path, cells: Sequence[Cell], sources: Mapping[str, Mapping[str, Mapping[str, str]]],
              log: TextIO) -> list[str]:
    """The ids of the finished cells, saying on ``log`` which are skipped and which recomputed. A
    finished cell counts only if the components it names have the source they had when it ran:
    editing a retriever (at any depth of the specification) makes its cells stale."""
    stale: dict[str, list[str]] = {}
    done = []
    for c in cells:
        if is_finished(directory / c.id):
            changed = changed_sources(directory / c.id, sources[c.id])
            if changed:
                stale[c.id] = changed
            else:
                done.append(c.id)
    if done:
        print(f"primsel run: {len(done)} of {len(cells)} cells already finished in {directory}", file=log)
    if stale:
        names = sorted({n for changed in stale.values() for n in changed})
        print(f"primsel run: recomputing {len(stale)} finished cells: the source of "
              f"{', '.join(names)} changed since they ran", file=log)
    redo = [c.id for c in cells if c.id not in done and c.id not in stale
            and (directory / c.id / "report.json").is_file()]
    if redo:
        print(f"primsel run: recomputing {len(redo)} incomplete cells (LLM requests that failed); "
              "cached answers are reused", file=log)
    return done


def _say_capped(per_dataset: Sequence[tuple[Dataset, Sequence[Cell]]], contexts: Mapping[str, CellContext],
                todo: Sequence[Cell], log: TextIO) -> None:
    """Tell which folds a dataset with few tasks caps."""
    for d, group in per_dataset:
        if not group:
            continue
        store = contexts[group[0].id].store
        capped = sorted({c.settings.folds for c in group if c in todo
                         and store.effective_folds(c.settings.folds) != c.settings.folds})
        if capped:
            print(f"primsel run: only {len(d.tasks)} tasks: folds {capped} capped at "
                  f"{store.effective_folds(max(capped))}", file=log)


def _run_serial(todo: Sequence[Cell], contexts: Mapping[str, CellContext], directory: Path,
                finished: Callable[[Cell, Mapping[str, Any]], None], progress: bool, log: TextIO,
                total: int, initial: int, name: str, sources: Mapping[str, Mapping[str, Any]]) -> None:
    """Compute and write the cells one after the other, in grid order (``sources``: cell id ->
    the source digests its config.json records, :func:`primsel.experiments.cell.run_cell`)."""
    with progress_bar(total=total, initial=initial, desc=name, unit="cell", file=log,
                      disable=not progress, position=0) as cell_bar:
        for cell in todo:
            ctx = contexts[cell.id]
            cell_bar.set_postfix_str(cell.label, refresh=True)
            # selection, then (with a generator) generation and execution, one step per task each
            steps = len(ctx.dataset.tasks) * (3 if cell.settings.generator else 1)
            with progress_bar(total=steps, desc="  tasks", unit="task", file=log, leave=False,
                              disable=not progress, position=1, lines="none") as task_bar:
                report = run_cell(cell, ctx, directory / cell.id, task_bar, sources=sources[cell.id])
            cell_bar.update(1)
            finished(cell, report)

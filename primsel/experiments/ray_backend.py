"""The ``ray`` backend of ``primsel run``: cells computed as Ray tasks (Moritz et al., "Ray: A
Distributed Framework for Emerging AI Applications", OSDI 2018).

Each distinct retrieval (retriever specification, folds, seed, depth, dataset) is one Ray task
(:func:`_retrieve`), computed through the same :class:`primsel.experiments.store.RetrievalStore`
as the serial backend, so the on-disk retrieval cache of the machine it runs on is read and
written the same way. Each cell is one Ray task (:func:`_compute`) that takes its retrieval as an
object reference and runs :func:`primsel.experiments.cell.compute_cell`. The tasks return plain
data; this process writes every file through :func:`primsel.experiments.cell.write_cell` as the
cells finish, so the files and the report are those of the serial backend (only the wall times
in report.json differ, as between two serial runs), a killed run keeps the cells already
written, and a re-run resumes. The dataset and the library are put in the object store once.

Ray is an optional extra (``pip install 'primsel[ray]'``). ``address`` connects to a running
cluster (``ray start --head`` on one machine, ``ray start --address ...`` on the others, and
primsel installed on every node); without it a local Ray is started for the run and shut down
after it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from primsel.experiments.cell import CellContext, compute_cell, write_cell
from primsel.experiments.config import Cell
from primsel.experiments.progress import progress_bar
from primsel.experiments.store import RetrievalStore
from primsel.files import caches_disabled


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the ray backend needs Ray: pip install 'primsel[ray]' (or pip install ray)") from exc
    return ray


def _caches(use_disk: bool) -> Any:
    """Inside a Ray task (another process): every cache bypassed when the run was started with
    ``use_cache=False`` (:func:`primsel.files.caches_disabled` is per process)."""
    return contextlib.nullcontext() if use_disk else caches_disabled()


def _retrieve(dataset: Any, library: Any, spec: Any, folds: int, seed: int, depth: int | None,
              use_disk: bool) -> Any:
    """A Ray task: the retrieval of one specification on one dataset (see the module docstring)."""
    with _caches(use_disk):
        return RetrievalStore(library, dataset, use_disk=use_disk).get(spec, folds, seed, depth)


def _compute(cell: Cell, retrieval: Any, dataset: Any, library: Any, workers: int | None,
             base_dir: Path | None, use_disk: bool, whole: Any = None) -> tuple[Any, float]:
    """A Ray task: one cell computed from its retrieval; ``(CellOutcome, seconds)``. Reflection's
    ``reselect`` ranks again through a store of its own over ``whole`` (the dataset a subset was
    drawn from; default ``dataset``), so with the same folds and training tasks as the retrieval."""
    start = time.perf_counter()
    s = cell.settings
    store = RetrievalStore(library, whole if whole is not None else dataset, use_disk=use_disk)
    with _caches(use_disk):
        outcome = compute_cell(s, retrieval, dataset, library, name=cell.id, workers=workers, base_dir=base_dir,
                               requery=lambda queries: store.rerank(s.retriever, s.folds, s.seed, queries))
    return outcome, time.perf_counter() - start


def run_cells(todo: Sequence[Cell], contexts: Mapping[str, CellContext], directory: Path,
              finished: Callable[[Cell, Mapping[str, Any]], None], *, address: str | None = None,
              progress: bool = True, log: TextIO | None = None, total: int = 0, initial: int = 0,
              name: str = "", sources: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Compute ``todo`` as Ray tasks and write each cell as it finishes.

    Parameters
    ----------
    todo : the cells to compute, in grid order.
    contexts : cell id -> its context (dataset, library, store, versions).
    directory : the experiment directory (``<out>/<name>``).
    finished : called with each cell and its report once its files are written.
    address : Ray cluster address, or None for a local Ray started (and stopped) here.
    progress, log, total, initial, name : the progress bar (as the serial backend's).
    sources : cell id -> the source digests its config.json records (default: computed,
        :func:`primsel.experiments.cell.write_cell`).

    Raises
    ------
    ImportError : Ray is not installed.
    Whatever a cell's computation raises (re-raised here; the cells written before stay).
    """
    if not todo:
        return
    ray = _ray()
    started = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 configure_logging=False)
        started = True
    pending: dict[Any, Cell] = {}
    try:
        retrieve = ray.remote(_retrieve)
        compute = ray.remote(_compute)
        shared: dict[int, tuple[Any, Any]] = {}
        retrievals: dict[str, Any] = {}
        for cell in todo:
            ctx = contexts[cell.id]
            if id(ctx.dataset) not in shared:
                # retrieval is cross-validated over the whole dataset (the store's), as in a serial
                # run, also when the cells score a sample of it
                shared[id(ctx.dataset)] = (ray.put(ctx.dataset), ray.put(ctx.library), ray.put(ctx.store.dataset))
            data_ref, library_ref, whole_ref = shared[id(ctx.dataset)]
            s = cell.settings
            key = ctx.store.retrieval_key(s.retriever, s.folds, s.seed, s.depth)
            if key not in retrievals:
                retrievals[key] = retrieve.remote(whole_ref, library_ref, s.retriever, s.folds, s.seed, s.depth,
                                                  ctx.store.use_disk)
            ref = compute.remote(cell, retrievals[key], data_ref, library_ref, ctx.workers, ctx.base_dir,
                                 ctx.store.use_disk, whole_ref)
            pending[ref] = cell
        with progress_bar(total=total, initial=initial, desc=name, unit="cell", file=log,
                          disable=not progress) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    cell = pending.pop(ref)
                    outcome, seconds = ray.get(ref)
                    report = write_cell(cell, contexts[cell.id], directory / cell.id, outcome, seconds,
                                        None if sources is None else sources[cell.id])
                    bar.update(1)
                    finished(cell, report)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()

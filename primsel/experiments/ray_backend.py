"""The ``ray`` backend of ``primsel run`` (an optional extra): each distinct retrieval is a Ray task, as is
each cell (:func:`primsel.experiments.cell.compute_cell`); this process writes every cell's files as it
finishes (:func:`primsel.experiments.cell.write_cell`), so the files are those of the serial backend.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from primsel.experiments.cell import CellContext, compute_cell, write_cell
from primsel.experiments.config import Cell
from primsel.progress import progress_bar
from primsel.retrieval.store import RetrievalStore
from primsel.files import caches_disabled


def _retrieve(dataset: Any, library: Any, spec: Any, folds: int, seed: int, depth: int | None, use_disk: bool) -> Any:
    with contextlib.nullcontext() if use_disk else caches_disabled():  # caches_disabled is per process
        return RetrievalStore(library, dataset, use_disk=use_disk).get(spec, folds, seed, depth)


def _compute(cell: Cell, retrieval: Any, dataset: Any, library: Any, workers: int | None,
             base_dir: Path | None, use_disk: bool, whole: Any) -> tuple[Any, float]:
    """``(CellOutcome, seconds)``; reflection's ``reselect`` ranks over ``whole``, as the retrieval."""
    start = time.perf_counter()
    s = cell.settings
    store = RetrievalStore(library, whole, use_disk=use_disk)
    with contextlib.nullcontext() if use_disk else caches_disabled():
        outcome = compute_cell(s, retrieval, dataset, library, name=cell.id, workers=workers, base_dir=base_dir,
                               requery=lambda queries: store.rerank(s.retriever, s.folds, s.seed, queries))
    return outcome, time.perf_counter() - start


def run_cells(todo: Sequence[Cell], contexts: Mapping[str, CellContext], directory: Path,
              finished: Callable[[Cell, Mapping[str, Any]], None], *, address: str | None = None,
              progress: bool = True, log: TextIO | None = None, total: int = 0, initial: int = 0,
              name: str = "", sources: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Compute ``todo`` (cells in grid order) as Ray tasks and write each cell as it finishes.

    ``contexts``: cell id -> its context; ``directory``: ``<out>/<name>``; ``finished(cell, report)``: called
    once a cell's files are written; ``address``: a Ray cluster, or None for a local Ray started for the run;
    ``progress``, ``log``, ``total``, ``initial``, ``name``: the progress bar; ``sources``: cell id -> the
    source digests its config.json records (default: computed).

    Raises
    ------
    ImportError : Ray is not installed.
    Whatever a cell's computation raises (the cells written before stay).
    """
    if not todo:
        return
    try:
        import ray
    except ImportError as exc:
        raise ImportError("the ray backend needs Ray: pip install 'primsel[ray]' (or pip install ray)") from exc
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 configure_logging=False)
    pending: dict[Any, Cell] = {}
    try:
        retrieve, compute = ray.remote(_retrieve), ray.remote(_compute)
        shared: dict[int, tuple[Any, Any, Any]] = {}
        retrievals: dict[str, Any] = {}
        for cell in todo:
            ctx, s = contexts[cell.id], cell.settings
            if id(ctx.dataset) not in shared:
                # retrieval is cross-validated over the store's whole dataset, also for a sample
                shared[id(ctx.dataset)] = (ray.put(ctx.dataset), ray.put(ctx.library), ray.put(ctx.store.dataset))
            data_ref, library_ref, whole_ref = shared[id(ctx.dataset)]
            key = ctx.store.retrieval_key(s.retriever, s.folds, s.seed, s.depth)
            if key not in retrievals:
                retrievals[key] = retrieve.remote(whole_ref, library_ref, s.retriever, s.folds, s.seed, s.depth,
                                                  ctx.store.use_disk)
            pending[compute.remote(cell, retrievals[key], data_ref, library_ref, ctx.workers, ctx.base_dir,
                                   ctx.store.use_disk, whole_ref)] = cell
        with progress_bar(total=total, initial=initial, desc=name, unit="cell", file=log, disable=not progress) as bar:
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

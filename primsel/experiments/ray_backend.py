"""The ``ray`` backend of ``primsel run`` (an optional extra): each distinct retrieval is a Ray
task, as is each cell (:func:`primsel.experiments.cell.compute`); this process writes every cell's
files as it finishes (:func:`primsel.experiments.cell.write_cell`), so the files are those of the
serial backend.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from primsel.experiments.cell import RunContext, compute, write_cell
from primsel.experiments.config import Cell
from primsel.experiments.records import ReportFile
from primsel.progress import progress_bar
from primsel.files import caches_disabled


def _retrieve(ctx: RunContext, spec: Any, folds: int, seed: int, depth: int | None) -> Any:
    """The retrieval of ``spec`` from the context's store (a Ray task)."""
    with (
        contextlib.nullcontext() if ctx.store.use_disk else caches_disabled()
    ):  # caches_disabled is per process
        return ctx.store.get(spec, folds, seed, depth)


def _compute(cell: Cell, ctx: RunContext, retrieval: Any) -> tuple[Any, float]:
    """``(ComputedCell, seconds)`` of :func:`primsel.experiments.cell.compute` (a Ray task)."""
    start = time.perf_counter()
    with contextlib.nullcontext() if ctx.store.use_disk else caches_disabled():
        return compute(cell, ctx, retrieval), time.perf_counter() - start


def _submit(ray: Any, todo: Sequence[Cell], contexts: Mapping[str, RunContext]) -> dict[Any, Cell]:
    """Submit each distinct retrieval of ``todo`` and each cell as Ray tasks; the cells' object
    references -> their cell."""
    retrieve, compute_remote = ray.remote(_retrieve), ray.remote(_compute)
    shared: dict[int, Any] = {}  # id of a context -> its object reference
    retrievals: dict[str, Any] = {}
    pending: dict[Any, Cell] = {}
    for cell in todo:
        ctx, s = contexts[cell.id], cell.settings
        if id(ctx) not in shared:
            shared[id(ctx)] = ray.put(ctx)
        ref = shared[id(ctx)]
        key = ctx.store.retrieval_key(s.retriever, s.folds, s.seed, s.depth)
        if (
            key not in retrievals
        ):  # cross-validated over the store's whole dataset, also for a sample
            retrievals[key] = retrieve.remote(ref, s.retriever, s.folds, s.seed, s.depth)
        pending[compute_remote.remote(cell, ref, retrievals[key])] = cell
    return pending


def run_cells(
    todo: Sequence[Cell],
    contexts: Mapping[str, RunContext],
    directory: Path,
    finished: Callable[[Cell, ReportFile], None],
    *,
    address: str | None = None,
    progress: bool = True,
    log: TextIO | None = None,
    total: int = 0,
    initial: int = 0,
    name: str = "",
    sources: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Compute ``todo`` (cells in grid order) as Ray tasks and write each cell as it finishes.

    ``contexts``: cell id -> its context; ``directory``: ``<out>/<name>``; ``finished(cell,
    report)``: called once a cell's files are written; ``address``: a Ray cluster, or None for a
    local Ray started for the run; ``progress``, ``log``, ``total``, ``initial``, ``name``: the
    progress bar; ``sources``: cell id -> the source digests its config.json records (default:
    computed).

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
        raise ImportError(
            "the ray backend needs Ray: pip install 'primsel[ray]' (or pip install ray)"
        ) from exc
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            configure_logging=False,
        )
    pending: dict[Any, Cell] = {}
    try:
        pending = _submit(ray, todo, contexts)
        with progress_bar(
            total=total, initial=initial, desc=name, unit="cell", file=log, disable=not progress
        ) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    cell = pending.pop(ref)
                    computed, seconds = ray.get(ref)
                    cell_sources = None if sources is None else sources[cell.id]
                    report = write_cell(
                        cell,
                        contexts[cell.id],
                        directory / cell.directory_name,
                        computed,
                        seconds,
                        cell_sources,
                    )
                    bar.update(1)
                    finished(cell, report)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()

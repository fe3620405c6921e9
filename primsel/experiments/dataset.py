"""The tasks of an experiment: loaded, gold primitives filled, fingerprinted.

A cell's identity holds the fingerprint of the tasks it ran on (:func:`dataset_fingerprint`),
so a cell id changes when (and only when) its tasks change.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from primsel.files import canonical_json
from primsel.types import Task


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Tasks of an experiment (gold filled) and how to name them without a path.

    Parameters
    ----------
    tasks : the tasks, gold primitives filled.
    source : ``"asper-bench"``, ``"builtin"`` or the tasks' ``source`` otherwise.
    fingerprint : ``"<source>/<n tasks>/<sha256 prefix of the task contents>"``.
    """

    tasks: tuple[Task, ...]
    source: str
    fingerprint: str


def dataset_fingerprint(tasks: Sequence[Task]) -> str:
    """``"<source>/<n>/<hash>"``: the hash covers every task's id, query, programs and gold set,
    so a cell id changes when (and only when) the tasks it runs on change."""
    h = hashlib.sha256()
    for t in tasks:
        h.update(canonical_json([t.id, t.query, t.program, list(t.setup_programs),
                                 list(t.evaluation_programs), sorted(t.gold)]).encode("utf-8"))
    sources = sorted({t.source or "custom" for t in tasks}) or ["empty"]
    return f"{'+'.join(sources)}/{len(tasks)}/{h.hexdigest()[:12]}"


def make_dataset(tasks: Sequence[Task]) -> Dataset:
    """A :class:`Dataset` of tasks whose gold sets are already filled.

    Raises
    ------
    primsel.datasets.DatasetError : no tasks, duplicate task ids, or a task without gold
        primitives (ranking metrics are undefined for it).
    """
    from primsel.datasets import DatasetError

    if not tasks:
        raise DatasetError("no tasks to run")
    if len({t.id for t in tasks}) != len(tasks):
        raise DatasetError("duplicate task ids")
    empty = [t.id for t in tasks if not t.gold]
    if empty:
        raise DatasetError(f"tasks without gold primitives (their reference programs use no library "
                           f"primitive): {', '.join(empty[:10])}")
    fp = dataset_fingerprint(tasks)
    return Dataset(tasks=tuple(tasks), source=fp.split("/", 1)[0], fingerprint=fp)


def load_dataset(path: str | os.PathLike[str] | None, library: Mapping[str, Any],
                 log: TextIO | None = None, origin: str = "--data") -> Dataset:
    """Load the tasks of ``path`` (else ``$PRIMSEL_ASPER_BENCH``, else the built-in tasks, which
    is said on ``log``) and fill their gold primitives. ``origin`` says where ``path`` came from
    in messages (:func:`primsel.datasets.resolve_dataset`).

    Raises
    ------
    primsel.datasets.DatasetError : missing or malformed archive, a reference program that does
        not parse, or a task whose reference program uses no library primitive (ranking
        metrics are undefined for it).
    """
    from primsel.datasets import DatasetError, load_tasks, resolve_dataset
    from primsel.library import with_gold

    archive = resolve_dataset(path, origin)
    if archive is None and log is not None:
        print("primsel run: no Asper-Bench archive (no 'data' key, --data or $PRIMSEL_ASPER_BENCH): "
              "running on the built-in tasks", file=log)
    try:
        tasks = with_gold(load_tasks(archive), library)
    except ValueError as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(str(exc)) from None
    return make_dataset(tasks)

"""The tasks of an experiment, gold filled and fingerprinted (a cell id changes when, and only when,
its tasks change), with their library: the assistant library, ASPERA's documentation of it
(``library = "aspera"``), or the corpus retrieval-only data brings (both fingerprinted too).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from primsel.datasets import (
    DatasetError,
    is_retrieval_data,
    load_retrieval_data,
    load_tasks,
    resolve_dataset,
)
from primsel.files import canonical_json
from primsel.library import Library, with_gold
from primsel.retrieval.cv import fold_assignment
from primsel.types import Task


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Tasks of an experiment (gold filled) and how to name them without a path.

    Parameters
    ----------
    tasks, source : the tasks; ``"asper-bench"``, ``"builtin"`` or the tasks' ``source``
        (``"metatool-single"``).
    fingerprint : ``"<source>/<n tasks>/<sha256 prefix of the task contents>"``.
    library : the library the tasks are ranked against; None: the assistant library.
    library_name : ``"primsel"`` (the assistant library, or a retrieval-only corpus) or
        ``"aspera"`` (ASPERA's documentation; :data:`LIBRARIES`).
    notes : what the loader merged or dropped (retrieval-only data).
    info : facts recorded beside results (``pydoc``: Python and package versions).
    population : for a subset, every task of the whole dataset (folds and worked examples are drawn
        from it, so a task gets the same prompt as in the full run); else empty.
    subset : for a subset, how it was chosen and its ``task_ids``.
    """

    tasks: tuple[Task, ...]
    source: str
    fingerprint: str
    library: Any = None
    library_name: str = "primsel"
    notes: tuple[str, ...] = ()
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    population: tuple[Task, ...] = ()
    subset: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def all_tasks(self) -> tuple[Task, ...]:
        """The population of a subset, else the tasks."""
        return self.population or self.tasks

    @property
    def executable(self) -> bool:
        """True when every task has programs to generate and execute."""
        return all(t.executable for t in self.tasks)

    def summary(self) -> dict[str, Any]:
        """What config.json records of the data: ``{"source", "n_tasks", "fingerprint"}``, plus
        ``n_documents`` and ``info`` for retrieval-only data, ``library`` when it is not primsel's
        and ``subset`` for a subset."""
        out: dict[str, Any] = {
            "source": self.source,
            "n_tasks": len(self.tasks),
            "fingerprint": self.fingerprint,
        }
        if self.library_name != "primsel":
            out["library"] = self.library_name
        if not self.executable and self.library is not None:
            out["n_documents"] = len(self.library)
            if self.info:
                out["info"] = dict(self.info)
        if self.subset:
            out["subset"] = {**self.subset, "of": len(self.population)}
        return out


def subset(
    dataset: Dataset,
    sample: int | None = None,
    task_ids: Sequence[str] | None = None,
    seed: int = 0,
    fold: int | None = None,
    folds: int = 5,
) -> Dataset:
    """The dataset restricted to some of its tasks: ``sample`` tasks drawn with
    ``random.Random(seed)``, the tasks ``task_ids``, or those of cross-validation fold ``fold`` of
    ``folds`` with ``seed`` (:func:`fold_assignment`).

    Returns
    -------
    A :class:`Dataset` of the chosen tasks in dataset order, its fingerprint the whole one's
    followed by ``/subset-<hash of the ids>``, its ``population`` the whole dataset's tasks.

    Raises
    ------
    primsel.datasets.DatasetError : not exactly one of ``sample``, ``task_ids`` and ``fold``, a
        sample size below 1, a fold outside 0 .. folds - 1, or unknown task ids (named).
    """
    if sum(x is not None for x in (sample, task_ids, fold)) != 1:
        raise DatasetError("give one of a sample size, a list of task ids or a fold")
    ids = [t.id for t in dataset.tasks]
    if fold is not None:
        if isinstance(fold, bool) or not isinstance(fold, int) or not 0 <= fold < folds:
            raise DatasetError(
                f"the fold must be an integer from 0 to {folds - 1} (the experiment has "
                f"{folds} folds), got {fold!r}"
            )
        chosen = {t for t, f in fold_assignment(ids, folds, seed).items() if f == fold}
        how: dict[str, Any] = {"fold": fold, "folds": folds, "seed": seed}
    elif sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
            raise DatasetError(f"the sample size must be an integer >= 1, got {sample!r}")
        chosen = set(random.Random(seed).sample(ids, min(sample, len(ids))))
        how = {"sample": sample, "seed": seed}
    else:
        wanted = list(dict.fromkeys(str(t).strip() for t in task_ids or () if str(t).strip()))
        unknown = [t for t in wanted if t not in set(ids)]
        if unknown:
            shown = ", ".join(unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            raise DatasetError(
                f"no such task in {dataset.source}: {shown} (see `primsel tasks` for the ids)"
            )
        if not wanted:
            raise DatasetError("the list of task ids is empty")
        chosen = set(wanted)
        how = {"tasks": "given"}
    tasks = tuple(t for t in dataset.tasks if t.id in chosen)
    digest = hashlib.sha256(canonical_json([t.id for t in tasks]).encode()).hexdigest()[:8]
    return dataclasses.replace(
        dataset,
        tasks=tasks,
        fingerprint=f"{dataset.fingerprint}/subset-{digest}",
        population=dataset.tasks,
        subset={**how, "task_ids": [t.id for t in tasks]},
    )


def make_dataset(
    tasks: Sequence[Task],
    library: Any = None,
    notes: Sequence[str] = (),
    info: Mapping[str, Any] | None = None,
    library_name: str = "primsel",
) -> Dataset:
    """A :class:`Dataset` of tasks whose gold sets are filled; ``library`` None is the assistant
    library; the fingerprint of another (a retrieval-only corpus, or ``library_name`` ``"aspera"``)
    joins the tasks'.

    Raises
    ------
    primsel.datasets.DatasetError : no tasks, duplicate task ids, or a task without gold primitives.
    """
    if not tasks:
        raise DatasetError("no tasks to run")
    if len({t.id for t in tasks}) != len(tasks):
        raise DatasetError("duplicate task ids")
    empty = [t.id for t in tasks if not t.gold]
    if empty:
        raise DatasetError(
            f"tasks without gold primitives (their reference programs use no library "
            f"primitive): {', '.join(empty[:10])}"
        )
    retrieval_only = not all(t.executable for t in tasks)
    own_library = retrieval_only or library_name != "primsel"
    h = hashlib.sha256(
        (library.fingerprint() if own_library and library is not None else "").encode()
    )
    for t in tasks:
        h.update(
            canonical_json(
                [
                    t.id,
                    t.query,
                    t.program,
                    list(t.setup_programs),
                    list(t.evaluation_programs),
                    sorted(t.gold),
                ]
            ).encode("utf-8")
        )
    source = "+".join(sorted({t.source or "custom" for t in tasks}))
    return Dataset(
        tasks=tuple(tasks),
        source=source,
        fingerprint=f"{source}/{len(tasks)}/{h.hexdigest()[:12]}",
        library=library,
        library_name=library_name,
        notes=tuple(notes),
        info=dict(info or {}),
    )


#: The libraries an experiment's ``library`` key names: primsel's assistant library (65 primitives,
#: documentation written for retrieval) and ASPERA's documentation of it (the 97 definitions of its
#: 12 modules, :mod:`primsel.aspera.library`, read from ``$PRIMSEL_ASPERA_SRC``).
LIBRARIES = ("primsel", "aspera")


def named_library(name: str) -> Library:
    """The library ``name`` (:data:`LIBRARIES`) names.

    Raises
    ------
    ValueError : an unknown name.
    primsel.aspera.AsperaSourceError : ``"aspera"`` without a usable checkout of ASPERA.
    """
    if name == "aspera":
        from primsel.aspera import aspera_protocol
        from primsel.aspera.library import aspera_primitives

        return Library(aspera_primitives(aspera_protocol()))
    if name == "primsel":
        # local: pydantic and the simulated apps only for executable tasks
        from primsel.simulator.library import build_library

        return build_library()
    raise ValueError(f"unknown library {name!r}; expected one of {', '.join(LIBRARIES)}")


def load_datasets(
    path: str | os.PathLike[str] | None,
    log: TextIO | None = None,
    library: Any = None,
    origin: str = "--data",
    library_name: str = "primsel",
) -> list[Dataset]:
    """The datasets a data path names, each with its library: retrieval-only data
    (:func:`load_retrieval_data`, each against its own corpus), else the executable tasks of
    ``path`` (else ``$PRIMSEL_ASPER_BENCH``, else the built-in tasks, said on ``log``) against
    ``library`` (default: the one ``library_name`` names, :func:`named_library`); ``origin`` names
    ``path`` in messages (:func:`primsel.datasets.resolve_dataset`).

    Raises
    ------
    primsel.datasets.DatasetError : a missing or malformed archive or dataset, a reference program
        that does not parse, a task whose reference program uses no library primitive, or
        retrieval-only data with ``library_name`` ``"aspera"``.
    primsel.aspera.AsperaSourceError : ``"aspera"`` without a usable checkout of ASPERA.
    """
    if is_retrieval_data(path):
        if library_name != "primsel":
            raise DatasetError(
                f"library = {library_name!r} documents the assistant library: it ranks "
                "Asper-Bench or built-in tasks, not retrieval-only data"
            )
        return [
            make_dataset(
                data.tasks, Library(data.documents, unique_names=False), data.notes, data.info
            )
            for data in load_retrieval_data(path)
        ]  # type: ignore[arg-type]
    if library is None:
        library = named_library(library_name)
    archive = resolve_dataset(path, origin)
    if archive is None and log is not None:
        print(
            "primsel run: no Asper-Bench archive (no 'data' key, --data or $PRIMSEL_ASPER_BENCH): "
            "running on the built-in tasks",
            file=log,
        )
    try:
        tasks = with_gold(load_tasks(archive), library)
    except ValueError as exc:
        if isinstance(exc, DatasetError):
            raise
        raise DatasetError(str(exc)) from None
    return [make_dataset(tasks, library, library_name=library_name)]

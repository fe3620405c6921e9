"""k-fold cross-validation of retrievers that learn from tasks.

The folds are ``sklearn.model_selection.KFold(n_splits=folds, shuffle=True, random_state=seed)``
over the task ids sorted numerically (DESIGN.md, Folds). A retriever that learns from tasks
(``learns_from_tasks = True``) is built afresh for every fold and fitted on the other folds'
tasks; it then ranks the held-out fold. Other retrievers are fitted once, without tasks.

Retrievers that spend LLM tokens (:class:`primsel.types.ReportsUsage`) built here report their
per-task usage through the ``usage_out`` argument of :func:`cross_validated_run`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from primsel.registry import build
from primsel.retrieval.base import SeesGold, check_k, learns_from_tasks
from primsel.types import ReportsUsage, Run, Task


def task_sort_key(task_id: str) -> tuple[bool, int, str]:
    """Numeric ids first in numeric order, then the others by string: ``(not numeric, value, id)``."""
    numeric = task_id.isdecimal()
    return (not numeric, int(task_id) if numeric else 0, task_id)


def fold_assignment(task_ids: Iterable[str], folds: int = 5, seed: int = 0) -> dict[str, int]:
    """The fold (0-based) of every task.

    Parameters
    ----------
    task_ids : unique task ids.
    folds : number of folds, 2 <= folds <= number of tasks.
    seed : ``random_state`` of the shuffled KFold.

    Returns
    -------
    ``{task_id: fold}`` with the ids in sorted order (:func:`task_sort_key`).

    Raises
    ------
    ValueError : duplicate ids, or folds out of range.
    """
    from sklearn.model_selection import KFold

    ids = sorted((str(t) for t in task_ids), key=task_sort_key)
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate task ids")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2 or folds > len(ids):
        raise ValueError(f"folds must be an integer in [2, {len(ids)}] (number of tasks), got {folds!r}")
    out: dict[str, int] = {}
    for fold, (_, test) in enumerate(KFold(n_splits=folds, shuffle=True, random_state=seed).split(ids)):
        for i in test:
            out[ids[i]] = fold
    return {t: out[t] for t in ids}


def _fresh(spec: Any) -> Any:
    if isinstance(spec, (str, Mapping)):
        return build(spec, "retriever")
    return copy.deepcopy(spec)


def _hand_gold(retriever: Any, tasks: Sequence[Task]) -> None:
    if isinstance(retriever, SeesGold):
        retriever.set_gold({t.id: t.gold for t in tasks})


def _collect_usage(retriever: Any, tasks: Sequence[Task], usage_out: dict[str, dict[str, float]] | None) -> None:
    if usage_out is None or not isinstance(retriever, ReportsUsage):
        return
    usage = retriever.usage()
    for t in tasks:
        if t.id in usage:
            usage_out[t.id] = dict(usage[t.id])


def cross_validated_run(
    spec: str | Mapping[str, Any] | Any,
    library: Mapping[str, Any],
    tasks: Sequence[Task],
    k: int,
    folds: int = 5,
    seed: int = 0,
    usage_out: dict[str, dict[str, float]] | None = None,
) -> tuple[Run, dict[str, int]]:
    """Rank the library for every task, never letting a learned retriever see a test task.

    Parameters
    ----------
    spec : retriever specification (registered name, ``"module:Class"``, table) or an unfitted
        retriever instance (deep-copied for every fold).
    library : the library (``primsel.library.Library``).
    tasks : the tasks, with ``gold`` filled (for learned retrievers and ``oracle``).
    k : cut-off passed to ``search`` (>= 1; ``len(library)`` ranks everything).
    folds, seed : the fold split (:func:`fold_assignment`); folds only matter for retrievers
        that learn from tasks, but the fold of every task is returned either way.
    usage_out : when given, filled with ``{task_id: usage}`` for the tasks ranked by a retriever
        with the :class:`primsel.types.ReportsUsage` ability (its ``usage()`` entries: tokens,
        seconds, calls, ... as that retriever defines them; see e.g.
        :meth:`primsel.retrieval.llm_selector.LLMSelector.usage`); left untouched otherwise.

    Returns
    -------
    (run, folds): ``{task_id: {primitive_id: score}}`` for every task, and ``{task_id: fold}``.

    Raises
    ------
    ValueError : bad k or folds, duplicate task ids.
    """
    check_k(k)
    assignment = fold_assignment([t.id for t in tasks], folds, seed)
    probe = _fresh(spec)
    run: Run = {}
    if not learns_from_tasks(probe):
        probe.fit(library)
        _hand_gold(probe, tasks)
        run = probe.search({t.id: t.query for t in tasks}, k)
        _collect_usage(probe, tasks, usage_out)
    else:
        for fold in range(folds):
            train = [t for t in tasks if assignment[t.id] != fold]
            test = [t for t in tasks if assignment[t.id] == fold]
            retriever = probe if fold == 0 else _fresh(spec)
            retriever.fit(library, train)
            _hand_gold(retriever, test)
            run.update(retriever.search({t.id: t.query for t in test}, k))
            _collect_usage(retriever, test, usage_out)
    order = {t.id: i for i, t in enumerate(tasks)}
    return {t: run[t] for t in sorted(run, key=order.__getitem__)}, assignment
